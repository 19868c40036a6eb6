"""The kernel port: the only way the tools reach business data.

mnote's Rust runtime is the real kernel; this module states what any adapter (embedded SQLite, HTTP
relay, mnote-cli relay) must offer, in plain data that crosses a process boundary unchanged. Nothing
here knows about MCP.

Each wire form is declared once, here. What a caller builds (a query, a command, an outcome) is a
frozen dataclass deriving from `Wire`: a field `workspace_id` is `workspaceId` on the wire (another
name is given in `__wire_names__`), and an `Annotated` pydantic marker says where a value is bounded
or `null` means the default. What the kernel answers as JSON (a page view, a history view, search
hits, audit records) is a `TypedDict` whose keys are the wire's. `to_wire`, `from_wire` and the
runtime protocol's JSON Schemas are derived from these declarations: the schemas by pydantic
(`kernel/wireschema.py`, kept as data in `kernel/schemas.py`), `to_wire` and `from_wire` by walking
the fields (held to pydantic's own reading by tests/unit/kernel/test_port.py). So the embedded kernel
pays nothing for the wire: it is handed the dataclasses as they were built, hands back the dicts it
made, and `to_wire` copies no JSON it is given; and no process that serves calls imports pydantic for
it (the MCP SDK does, for its own models; `runtime cli`, a process per call, does not).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import Enum, StrEnum
from types import UnionType
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    ClassVar,
    NotRequired,
    Protocol,
    Self,
    Union,
    cast,
    get_args,
    get_origin,
    get_type_hints,
    runtime_checkable,
)

from typing_extensions import TypedDict  # pydantic needs this one on Python < 3.12

from mnote_mcp.kernel.blocks import Block
from mnote_mcp.kernel.diff import Op
from mnote_mcp.kernel.scopes import Scope

DEFAULT_SEARCH_LIMIT = 10
DEFAULT_HISTORY_LIMIT = 20
DEFAULT_AUDIT_LIMIT = 100
MAX_INT64 = 2**63 - 1  # revisions are stored as 64-bit integers: a larger one is refused, never cut

# The annotations below name pydantic's markers, which this module imports only for type checking:
# kernel/wireschema.py gives them to pydantic, and `_reader` reads them its own way (`_READER_NAMES`).
if TYPE_CHECKING:
    from pydantic import BeforeValidator, Field, JsonValue, SkipValidation, WithJsonSchema

    Revision = int  # a revision: bounded to 64 bits by its schema (kernel/wireschema.py)

JSONObject = dict[str, "JsonValue"]


def null_means(default: object, kind: object) -> BeforeValidator:
    """On the wire, `null` for this field means its default: what older peers send, still accepted."""
    from pydantic import BeforeValidator

    return BeforeValidator(lambda value: default if value is None else value, json_schema_input_type=kind)


def plain_objects() -> WithJsonSchema:
    """On the wire, blocks and diff ops are an array of plain objects: their TypedDicts
    (kernel/blocks.py, kernel/diff.py) type the code, and the block model checks a caller's blocks;
    the protocol's schema does not restate them."""
    from pydantic import WithJsonSchema

    return WithJsonSchema({"items": {"additionalProperties": True, "type": "object"}, "type": "array"})


class CommandName(StrEnum):
    PAGE_BODY_SAVE = "page.body.save"
    PAGE_HEAD_UPDATE_TITLE = "page.head.updateTitle"
    PAGE_LAYOUT_UPDATE_OPTIONS = "page.layout.updateOptions"
    ARTIFACT_SUMMARY_UPSERT = "artifact.summary.upsert"
    ARTIFACT_AI_NOTE_CREATE = "artifact.aiNote.create"
    PAGE_BLOCK_INSERT = "page.block.insert"
    PAGE_BLOCK_UPDATE = "page.block.update"
    PAGE_BLOCK_DELETE = "page.block.delete"
    PAGE_BLOCK_MOVE = "page.block.move"
    PAGE_REVERT = "page.revert"


# -- the wire form of a dataclass ----------------------------------------------------------------


def camel(name: str) -> str:
    """A field's name on the wire: `workspace_id` is `workspaceId`."""
    first, *rest = name.split("_")
    return first + "".join(word.capitalize() for word in rest)


class Wire:
    """A frozen dataclass that crosses a process boundary: its fields in camelCase on the wire.

    `to_wire` is the JSON object the runtime protocol carries, `from_wire` reads one back; both walk
    the declaration's fields, and tests/unit/kernel/test_port.py holds them to pydantic's own dump and
    validation of the same declaration, from which kernel/wireschema.py derives the JSON Schema. A
    field whose wire name is not its name in camelCase says so in `__wire_names__`; pydantic takes
    every wire name from the same function (its alias generator, `__pydantic_config__`).
    """

    __slots__ = ()
    __wire_names__: ClassVar[Mapping[str, str]] = {}
    __pydantic_config__: ClassVar[Mapping[str, Callable[[str], str]]]

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        renamed = cls.__wire_names__
        cls.__pydantic_config__ = {"alias_generator": lambda name: renamed.get(name) or camel(name)}

    def to_wire(self) -> JSONObject:
        kind = type(self)
        names = _NAMES.get(kind) or _NAMES.setdefault(kind, wire_names(kind))
        return {alias: _plain(getattr(self, name)) for name, alias in names}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Self:
        """`data`, which follows this form's schema (the runtime checks a request, a relay a reply,
        before reading it), as this form."""
        read = _READERS.get(cls) or _READERS.setdefault(cls, _reader(cls))
        return cast(Self, read(data))


_NAMES: dict[type[Wire], tuple[tuple[str, str], ...]] = {}


def wire_names(kind: type[Wire]) -> tuple[tuple[str, str], ...]:
    """(field, wire name) of each field of `kind`, in declaration order: the wire's key order."""
    alias = kind.__pydantic_config__["alias_generator"]
    return tuple((item.name, alias(item.name)) for item in fields(cast(Any, kind)))


class _NullMeans:
    """`null_means(default, …)` as the reader sees it: `null` is `default`."""

    def __init__(self, default: object, kind: object = None) -> None:
        self.default = default


class _Inner:
    """`SkipValidation[T]` as the reader sees it: `T`."""

    def __class_getitem__(cls, item: object) -> object:
        return item


# How the reader reads the pydantic markers of the annotations (kernel/wireschema.py has pydantic's).
_READER_NAMES: dict[str, object] = {
    "Field": lambda *args, **kwargs: None,
    "JsonValue": object,
    "Revision": int,
    "SkipValidation": _Inner,
    "null_means": _NullMeans,
    "plain_objects": lambda: None,
}
Reader = Callable[[Mapping[str, Any]], Wire]
_READERS: dict[type[Wire], Reader] = {}


def _reader(kind: type[Wire]) -> Reader:
    """How a JSON object that follows `kind`'s schema becomes a `kind`, from its declaration: each
    field under its wire name, a nested form read as one, a list as a tuple, an enum as its member,
    `null` as the default where the declaration says so, a missing field as the default."""
    names = {**vars(sys.modules[kind.__module__]), **_READER_NAMES}
    hints = get_type_hints(kind, globalns=names, include_extras=True)
    plan = []
    for name, alias in wire_names(kind):
        hint = hints[name]
        null = next((m for m in getattr(hint, "__metadata__", ()) if isinstance(m, _NullMeans)), None)
        plan.append((name, alias, _converter(hint), null))

    def read(data: Mapping[str, Any]) -> Wire:
        values: dict[str, object] = {}
        for name, alias, convert, null in plan:
            if alias not in data:
                continue
            value = data[alias]
            if value is None and null is not None:
                continue
            values[name] = convert(value) if convert is not None and value is not None else value
        return kind(**values)

    return read


def _converter(hint: Any) -> Callable[[Any], object] | None:
    """What reading a value of this type takes beyond taking the JSON as it is, if anything."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is Annotated:
        return _converter(args[0])
    if origin in (Union, UnionType):
        (inner,) = [arg for arg in args if arg is not type(None)]
        return _converter(inner)
    if origin is tuple:
        each = _converter(args[0])
        return tuple if each is None else lambda items: tuple(each(item) for item in items)
    if isinstance(hint, type) and issubclass(hint, Wire):
        return hint.from_wire
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint
    return None


_JSON_SCALARS = (str, int, float, bool, type(None), list, dict)


def _plain(value: object) -> JsonValue:
    if type(value) in _JSON_SCALARS:  # most fields: as they are, never copied
        return cast("JsonValue", value)
    if isinstance(value, Wire):
        return value.to_wire()
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    if isinstance(value, Enum):
        return cast("JsonValue", value.value)
    if isinstance(value, Mapping) and not isinstance(value, dict):
        return dict(value)
    return cast("JsonValue", value)


# -- what the tools ask ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Correlation(Wire):
    """The four ids that join a Hermes run to the kernel command it caused."""

    session_id: str
    run_id: str
    tool_call_id: str
    trace_id: str


@dataclass(frozen=True, slots=True)
class PageQuery(Wire):
    """What `get_page` should return.

    `format` is "blocks" (the block tree) or "markdown" (`markdown`, one rendering with block ids).
    `block_ids` narrows the body to those blocks (each with its children); `max_blocks` and `cursor`
    read a long body in pieces: the view carries `nextCursor` while blocks remain, and a cursor is
    only good for the page revision it was issued at.
    """

    workspace_id: str
    document_id: str
    actor_id: str
    correlation: Correlation
    include_body: bool = True
    include_options: bool = True
    include_blocks: bool = True
    format: Annotated[str, null_means("blocks", str | None)] = "blocks"
    block_ids: tuple[str, ...] | None = None
    max_blocks: int | None = None
    cursor: str | None = None


@dataclass(frozen=True, slots=True)
class HistoryFilter(Wire):
    """Whose writes a history lists: only those with these correlation ids (None: any)."""

    run_id: str | None = None
    session_id: str | None = None
    actor_id: str | None = None


@dataclass(frozen=True, slots=True)
class HistoryQuery(Wire):
    """What `page_history` should list: a page's recorded writes, newest first.

    `filter` keeps only the writes with its correlation ids (its `actor_id` is whose writes; the
    query's `actor_id` names who asks); `since_revision` only those after it; `limit` and `cursor`
    page through the rest.
    """

    workspace_id: str
    document_id: str
    actor_id: str
    correlation: Correlation
    filter: Annotated[HistoryFilter, null_means(HistoryFilter(), HistoryFilter | None)] = HistoryFilter()
    since_revision: Revision | None = None
    limit: Annotated[Revision, null_means(DEFAULT_HISTORY_LIMIT, Revision | None)] = DEFAULT_HISTORY_LIMIT
    cursor: str | None = None

    @property
    def run_id(self) -> str | None:
        return self.filter.run_id

    @property
    def session_id(self) -> str | None:
        return self.filter.session_id

    @property
    def by_actor_id(self) -> str | None:
        return self.filter.actor_id


@dataclass(frozen=True, slots=True)
class SearchQuery(Wire):
    """What `Kernel.search_pages` is asked: the pages `actor_id` may read that match `query`, best
    first (no query: every readable page, most recently changed first).

    `workspace_id` narrows the search to one workspace (the actor must be a member); `workspaces`, when
    set, is the set of workspaces the caller's credentials allow (a bearer token limited to some), so
    nothing outside it is searched. `limit` and `cursor` page through the hits.
    """

    actor_id: str
    correlation: Correlation
    query: str | None = None
    workspace_id: str | None = None
    workspaces: tuple[str, ...] | None = None
    limit: Annotated[int, null_means(DEFAULT_SEARCH_LIMIT, int | None)] = DEFAULT_SEARCH_LIMIT
    cursor: str | None = None


@dataclass(frozen=True, slots=True)
class CommandHead(Wire):
    """What names a command and its call: a `Command`'s fields before its own, a `Refusal`'s."""

    __wire_names__: ClassVar[Mapping[str, str]] = {"name": "command"}

    name: Annotated[str, Field(min_length=1)]
    workspace_id: str
    document_id: str
    actor_id: str
    correlation: Correlation
    idempotency_key: str


@dataclass(frozen=True, slots=True)
class Command(CommandHead):
    """One kernel command: what a write tool asks the runtime to do (or, with dry_run, to plan)."""

    dry_run: bool
    # keyword-only so that it can stand before `payload`, where the wire has it
    base_revision: Revision | None = field(default=None, kw_only=True)
    # What the command is about (`SkipValidation`: JSON checked by the schema, passed to the kernel as
    # it came, which gives it its meaning; likewise an outcome's diff, warnings and data).
    payload: SkipValidation[Mapping[str, Any]]
    # How the person consented to it (`--confirm`, issue 31), kept in its audit record's `detail`; not
    # part of what its idempotency key stands for. None from a caller that does not say (an older one).
    consent: Consent | None = field(default=None, kw_only=True)
    # A dry run's `textDiff` (the page's Markdown before and after, diffed: the costly part of a plan
    # of a long page). Off for a plan that needs only its operations (`--confirm`'s check, issue 31);
    # a runtime older than the field computes it anyway.
    text_diff: bool = field(default=True, kw_only=True)


class Consent(StrEnum):
    """How a write was consented to (`--confirm`, issue 31): its audit record's `detail.consent`."""

    ASKED = "asked"  # the person was asked through the client and accepted
    HANDLE = "handle"  # made with a confirmation handle the agent brought back after asking its person
    FALLBACK = "fallback"  # the client could not be asked and `--confirm-fallback write` wrote it unasked
    NOT_NEEDED = "not_needed"  # the policy asks nothing before this write (`--confirm`, the tool's rule)
    OWN_RUN = "own_run"  # an undo of the caller's own run: never asks


class Refused(StrEnum):
    """How a write that needed the person's consent was not made (`--confirm`, issues 25 and 31)."""

    DECLINED = "declined"  # they said no
    CANCELLED = "cancelled"  # they dismissed the question
    CONFIRM_TIMEOUT = "confirm_timeout"  # no answer within --confirm-timeout
    HELD = "confirmation_required"  # the client cannot be asked: answered with a confirmation handle


@dataclass(frozen=True, slots=True)
class Refusal(CommandHead):
    """A write the person refused when asked: what `record_refusal` audits, without running it.

    The command as the write tool would have sent it, less its payload (nothing of it is applied or
    kept), and how it was refused (`outcome`)."""

    outcome: Refused


@dataclass(frozen=True, slots=True, order=True)
class PageKey(Wire):
    """Which page: what `page_revisions` is asked about and answers for."""

    workspace_id: str
    document_id: str


# The questions of the other port methods, as the runtime protocol carries them.


@dataclass(frozen=True, slots=True)
class AuthorizeQuery(Wire):
    actor_id: str
    workspace_id: str
    document_id: str
    scope: Scope


@dataclass(frozen=True, slots=True)
class PagesQuery(Wire):
    """What `list_pages` lists: the pages `actor_id` may read, by workspace and id.

    `prefix` keeps the pages whose title or id starts with it (both case-folded by the database:
    Python's `str.casefold` on SQLite, `lower()` in the database's locale on PostgreSQL; Chinese has
    no case and matches as typed), `workspace_id` those in that workspace, and `limit` stops after
    that many: all in SQL, so a completion's cost does not grow with the pages (issue 25). A runtime
    older than these fields ignores them and lists every readable page, so a caller that needs them
    filters what comes back again (`surface/prompts/completions.py` does).

    `named` keeps the pages whose id is it, or whose whole title is it, case-folded as `prefix` is:
    how a tool call that names a page by its title finds it (issue 35, `tools/titles.py`). A runtime
    older than the field ignores it, and the tool layer filters again.
    """

    actor_id: str
    prefix: str | None = None
    workspace_id: str | None = None
    limit: Annotated[int | None, Field(ge=0)] = None
    named: str | None = None


@dataclass(frozen=True, slots=True)
class RevisionsQuery(Wire):
    actor_id: str
    pages: tuple[PageKey, ...]


@dataclass(frozen=True, slots=True)
class AuditQuery(Wire):
    """Left out, `limit` is the runtime's default: 100, or fewer where it answers fewer."""

    trace_id: str | None = None
    command_id: str | None = None
    limit: Annotated[int, Field(ge=0)] = DEFAULT_AUDIT_LIMIT


# -- what the kernel answers -------------------------------------------------------------------


class OutcomeData(TypedDict, total=False):
    """What a command reports beyond its diff; each command has its own keys (docs/kernel.md)."""

    blockIds: list[str]  # the blocks it wrote (block commands, a save, a revert)
    revertedRevisions: list[int]  # page.revert
    rebasedFrom: int  # a block command that went ahead on a stale baseRevision
    runId: str  # a real write's: the run it was recorded under (what page.revert's `runId` undoes)
    textDiff: str  # a dry run's unified diff of the Markdown
    artifactId: str  # the artifact commands
    edgeId: str
    kind: str
    sourceRevision: int


@dataclass(frozen=True, slots=True)
class CommandOutcome(Wire):
    """What the kernel did (or would do, on a dry run).

    `diff` is the block-level plan, the same list whether or not it was a dry run. `warnings` are
    `{code, reason, details}` items for the caller (a non-wired option on a dry run, for instance).
    `data` carries command-specific facts such as the artifact id.
    """

    command_name: str
    dry_run: bool
    command_id: str | None
    revision: int
    changed: bool
    diff: SkipValidation[Annotated[list[Op], plain_objects()]] = field(default_factory=list)
    warnings: SkipValidation[list[JSONObject]] = field(default_factory=list)
    replayed: bool = False
    data: SkipValidation[OutcomeData] = field(default_factory=OutcomeData)


@dataclass(frozen=True, slots=True)
class PageRef(Wire):
    """A page an actor may read: enough to list it, nothing of its body."""

    workspace_id: str
    document_id: str
    title: str
    revision: int


class PageView(TypedDict):
    """What `get_page` answers: the page as the query asks to see it (kernel/view.py)."""

    documentId: str
    workspaceId: str
    title: str
    revision: int
    bodySummary: NotRequired[str]  # includeBody
    pageOptions: NotRequired[JSONObject]  # includeOptions
    blocks: NotRequired[Annotated[list[Block], plain_objects()]]  # includeBlocks, format "blocks"
    markdown: NotRequired[str]  # includeBlocks, format "markdown"
    nextCursor: NotRequired[str]  # a paged read with blocks left


class HistoryEntry(TypedDict):
    """One recorded write: its correlation ids and its compact diff (at most 20 ops, `more` the rest)."""

    revision: int
    commandName: str
    commandId: str
    actorId: str
    sessionId: str
    runId: str
    toolCallId: str
    traceId: str
    createdAt: str
    diff: list[JSONObject]
    more: NotRequired[int]


class HistoryView(TypedDict):
    """What `page_history` answers: a page's recorded writes, newest first."""

    workspaceId: str
    documentId: str
    revision: int
    historyFrom: int
    entries: list[HistoryEntry]
    nextCursor: NotRequired[str]


class Snippet(TypedDict):
    blockId: str
    text: str


class SearchHit(TypedDict):
    workspaceId: str
    documentId: str
    title: str
    revision: int
    updatedAt: str
    snippets: NotRequired[list[Snippet]]


class SearchResult(TypedDict):
    """What `search_pages` answers (docs/search.md): hits best first, `nextCursor` while more remain."""

    hits: list[SearchHit]
    nextCursor: NotRequired[str]


class AuditRecord(TypedDict):
    """One command as the audit trail keeps it (a replay is a record of its own: `effect` "replay"; a
    write the person refused too: `effect` "refused", `outcome` how, `Refused`)."""

    seq: int
    commandId: str
    commandName: str
    workspaceId: str
    documentId: str
    actorId: str
    sessionId: str
    runId: str
    toolCallId: str
    traceId: str
    idempotencyKey: str
    revisionBefore: int
    revisionAfter: int
    effect: str
    outcome: str
    detail: JSONObject
    createdAt: str
    replayOf: str | None


class PageRevision(TypedDict):
    """One page's current revision, as `page_revisions` answers it on the wire."""

    workspaceId: str
    documentId: str
    revision: int


def revisions_to_wire(revisions: Mapping[PageKey, int]) -> list[PageRevision]:
    """`page_revisions`' answer as JSON: `[{"workspaceId", "documentId", "revision"}, ...]`, in page order."""
    return [
        PageRevision(workspaceId=key.workspace_id, documentId=key.document_id, revision=revision)
        for key, revision in sorted(revisions.items())
    ]


def revisions_from_wire(items: Iterable[PageRevision]) -> dict[PageKey, int]:
    return {PageKey(item["workspaceId"], item["documentId"]): item["revision"] for item in items}


@runtime_checkable
class Kernel(Protocol):
    """Page queries, command execution (with dry run) and the audit trail.

    Every method raises `MnoteError` for a refusal; an adapter that cannot reach its runtime raises
    `MnoteError(RUNTIME_UNAVAILABLE, ...)`, never a transport exception.
    """

    async def get_page(self, query: PageQuery) -> PageView: ...

    async def execute(self, command: Command) -> CommandOutcome: ...

    async def authorize(self, actor_id: str, workspace_id: str, document_id: str, scope: Scope) -> None:
        """Whether `actor_id` may use `scope` on the page: returns, or raises the refusal the first
        failing checkpoint gives (login, workspace member, page exists, page read, `scope`), exactly
        as `get_page` or `execute` would. Asked by the dispatcher before it reports an invalid
        argument, so that bad arguments never hide a permission refusal."""
        ...

    async def list_pages(self, query: PagesQuery) -> list[PageRef]:
        """The pages `query.actor_id` may read, by workspace and id, narrowed as `PagesQuery` says."""
        ...

    async def page_revisions(self, actor_id: str, pages: Sequence[PageKey]) -> dict[PageKey, int]:
        """The current revision of each page in `pages` that `actor_id` may read.

        A page that is missing or not readable is simply absent from the answer (never an error, so a
        watcher cannot tell the two apart); an empty actor reads nothing. Cheap enough to poll.
        """
        ...

    async def page_history(self, query: HistoryQuery) -> HistoryView:
        """A page's recorded writes, newest first (needs page read)."""
        ...

    async def search_pages(self, query: SearchQuery) -> SearchResult:
        """The pages the actor may read that match `query.query`, best first, or without a query every
        readable page, most recently changed first (docs/search.md). A page the actor may not read is
        never a hit; `workspace_id` naming a workspace it is no member of (or outside `workspaces`) is
        `permission_denied` (`not_member`)."""
        ...

    async def audit_trail(
        self, *, trace_id: str | None = None, command_id: str | None = None, limit: int = 100
    ) -> list[AuditRecord]: ...

    async def record_refusal(self, refusal: Refusal) -> AuditRecord:
        """Audit a write the person refused (`effect` "refused", `outcome` how): nothing else is
        written, not even the idempotency ledger, so the same key may still be written later, once.
        Needs the command's own scope on the page, as `execute` would (an unknown command is
        `invalid_argument`)."""
        ...

    async def aclose(self) -> None: ...


PageChangeListener = Callable[[PageKey, int], None]


@runtime_checkable
class PageChangeFeed(Protocol):
    """A kernel that hears page writes as they commit, whichever process made them (PostgreSQL's
    LISTEN/NOTIFY). Optional: the resource watcher polls `page_revisions` without it, and with it is
    woken at once instead of at its next interval (it still asks `page_revisions`, so a watch never
    learns of a page its actor may not read)."""

    def watch_changes(self, listener: PageChangeListener) -> Callable[[], None]:
        """Call `listener(page, revision)` for every page write committed on the store, from any
        thread, and once with `revision` 0 for every page when notifications may have been missed (a
        reconnect); returns the function that stops calling it."""
        ...
