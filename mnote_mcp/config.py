"""Every setting of every `mnote-mcp` command, each declared once.

A setting is a dataclass field declared with `setting(...)` or `switch(...)`. That one declaration
gives its flag, its `MNOTE_*` environment variable, the function that parses and checks a value, its
default and its help text; the command line (`mnote_mcp.cli`) builds the parser from it, reads the
variable through the *same* function as the flag, and `--help` shows each flag with its default and
its variable. The flag wins over the variable; a variable that does not parse is a usage error
(exit 2) naming the variable, exactly as a bad flag is.

How to add a flag (one declaration). In the command's dataclass below, add a field:

    idle_timeout: float = setting(300.0, positive_number, "seconds before an idle session is closed",
                                  group=HTTP)

This gives `--idle-timeout` (the field name with dashes), `MNOTE_IDLE_TIMEOUT` (the field name upper-
cased), the default, `--help`, and `config.idle_timeout`. The declaration is typed: the field's type,
the default and what the parser returns must agree, or mypy --strict fails (`choice[Literal[...]](...)`
for a field of a few words; `required(parse, help)` for a setting without a default). Name the flag
or the variable yourself with `flag="--x"` / `env="MNOTE_X"`, or leave one out with `flag=""`
(environment only, e.g. secrets that must not show in a process listing) / `env=""`. A flag without a value is `switch(...)`: present, it
sets the opposite of its default; its variable is a boolean (`1/true/yes/on/y`, `0/false/no/off/n`).
Parsers raise `ValueError` with a reason; `mnote_mcp.cli` turns it into a usage error. The docs'
table of flags is `python -m mnote_mcp --help`.

The machinery (`setting`, the parsers every command shares, `options`, `from_sources`) and the
settings of the commands that serve the kernel alone (logging, the store, `runtime serve`, `runtime
cli`) are in `mnote_mcp.settings`, which imports only the base and the kernel: `runtime cli` starts
once per call, and must not load what the MCP server's settings below need for their defaults (the
call path, the tools, the MCP surface). A setting of those commands is declared there, the same way.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

from mnote_mcp.base.allocator import DEFAULT_MALLOC_ARENAS
from mnote_mcp.base.logs import LogLevel
from mnote_mcp.base.net import is_loopback
from mnote_mcp.calls.confirmation import (
    CONFIRM_FALLBACKS,
    CONFIRM_POLICIES,
    DEFAULT_CONFIRM_TIMEOUT,
    Confirmation,
    ConfirmFallback,
    ConfirmPolicy,
)
from mnote_mcp.calls.handles import DEFAULT_HANDLE_TTL, MAX_HANDLE_CHARS, MAX_HANDLE_TTL, MIN_HANDLE_TTL
from mnote_mcp.conformance.options import (
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_SHOWN_CHARS,
    DEFAULT_TOTAL_TIMEOUT,
    ReportFormat,
)
from mnote_mcp.conformance.seed import DEFAULT_TAG, check_tag
from mnote_mcp.kernel.blocks import DEFAULT_MAX_BLOCK_IDS, MAX_BLOCKS
from mnote_mcp.kernel.limits import (
    DEFAULT_MAX_PAGE_BLOCKS,
    DEFAULT_MAX_PAGE_BYTES,
    PageLimits,
)
from mnote_mcp.settings import (
    BODY_TIMEOUT,
    HEADER_TIMEOUT,
    HTTP_PARSER,
    LOGGING,
    MAX_BODY_BYTES,
    MAX_CONNECTIONS,
    SHUTDOWN_GRACE,
    HttpParser,
    LogSettings,
    SettingError,
    StoreSettings,
    choice,
    csv,
    db_setting,
    demo_switch,
    http_limit,
    integer,
    no_demo_switch,
    non_negative_int,
    optional_path,
    optional_text,
    path,
    port_number,
    positive_int,
    positive_number,
    required,
    secret,
    setting,
    store_or_default,
    switch,
    text,
    wants_demo,
)
from mnote_mcp.surface.delivery import REFUSAL_STYLES, RESULT_FORMS, Delivery, RefusalStyle, ResultForm
from mnote_mcp.surface.prompts.catalog import DEFAULT_MAX_COMPLETIONS, MAX_COMPLETIONS
from mnote_mcp.surface.resources.watch import DEFAULT_MAX_SUBSCRIPTIONS
from mnote_mcp.tools.budget import DEFAULT_MAX_RESULT_CHARS, MIN_RESULT_CHARS
from mnote_mcp.tools.cost import (
    DEFAULT_EXPENSIVE_BURST,
    DEFAULT_EXPENSIVE_CALLS,
    DEFAULT_EXPENSIVE_PER_ACTOR,
    DEFAULT_EXPENSIVE_SHARE,
    DEFAULT_EXPENSIVE_WAIT,
    DEFAULT_LIMITS,
    DEFAULT_REQUEST_LIMIT,
    CallLimit,
    Cost,
    call_limit,
)
from mnote_mcp.tools.schemas import SCHEMA_FORMS, SchemaForm
from mnote_mcp.tools.toolsets import Toolset, parse_toolsets
from mnote_mcp.vocabulary.envelope import DEFAULT_MAX_ARGUMENT_DEPTH, DEFAULT_MAX_ID_CHARS
from mnote_mcp.vocabulary.identity import Identity
from mnote_mcp.vocabulary.messages import DEFAULT_LOCALE, Locale, parse_locale
from mnote_mcp.vocabulary.naming import TOOL_NAME_STYLES, ToolNames
from mnote_mcp.vocabulary.scopes import ALL_SCOPES, READ_ONLY_SCOPES, Scope, parse_scopes

if TYPE_CHECKING:  # the tool registry imports the MCP SDK; `runtime cli` starts per call without it
    from mnote_mcp.calls.admission import AdmissionBounds
    from mnote_mcp.tools.selection import ToolSelection

Transport = Literal["stdio", "sse", "http"]
AuthMode = Literal["tokens", "oauth"]
StdioTransport = Literal["mnote", "sdk"]
DEFAULT_ACTOR: str | None = "user_1"
HTTP = "HTTP transports (--transport http|sse)"
STDIO = "the stdio transport (--transport stdio)"
RELAY = "relay to a runtime (--kernel http://… | cli:…)"
OBSERVE = "probes, metrics and traces (docs/deploy.md, 'Watching it run')"
OAUTH = "OAuth resource server (--auth oauth): access tokens from an authorization server"
FAIR = "fair share: what one actor may ask of this replica (docs/security.md, 'Fair share')"
DEFAULT_MAX_LINE_BYTES = 4 * 1024 * 1024
# A provider's key set is a few keys of 1-6 KB each (an RSA key with its certificate chain is the
# largest); 256 KiB holds dozens, and is what one answer of the issuer may cost in memory (issue 30).
DEFAULT_OAUTH_MAX_RESPONSE_BYTES = 256 * 1024
logger = logging.getLogger(__name__)


# -- parsers: text in, a checked value out, or ValueError with the reason ------------------------


def scope_list(value: str) -> frozenset[Scope]:
    return parse_scopes(csv(value))


def toolset_list(value: str) -> frozenset[Toolset]:
    return parse_toolsets(csv(value))


_SESSION_TAG = re.compile(r"[A-Za-z0-9_-]{1,32}")


def replica_tag(value: str) -> str | None:
    """`--session-tag`: letters, digits, `-` and `_` (up to 32), safe in a header, a path and an nginx
    regex; empty means none."""
    if not value:
        return None
    if not _SESSION_TAG.fullmatch(value):
        raise ValueError(f"{value!r} is not a session tag: 1 to 32 letters, digits, '-' or '_'")
    return value


def block_id_count(value: str) -> int:
    number = integer(value)
    if not 1 <= number <= MAX_BLOCKS:
        raise ValueError(f"must be between 1 and {MAX_BLOCKS}, not {value}")
    return number


def completion_count(value: str) -> int:
    """1 to 100: the protocol allows at most 100 values in one completion."""
    number = positive_int(value)
    if number > MAX_COMPLETIONS:
        raise ValueError(f"{number} is more than the {MAX_COMPLETIONS} values a completion may hold")
    return number


def handle_lifetime(value: str) -> float:
    number = positive_number(value)
    if not MIN_HANDLE_TTL <= number <= MAX_HANDLE_TTL:
        raise ValueError(f"must be {MIN_HANDLE_TTL:g} to {MAX_HANDLE_TTL:g} seconds, not {value}")
    return number


def result_budget(value: str) -> int:
    number = integer(value)
    if number < MIN_RESULT_CHARS:
        raise ValueError(f"must be at least {MIN_RESULT_CHARS} characters, not {value}")
    return number


def share_of_time(value: str) -> float:
    """A fraction of the time, more than 0 and at most 1."""
    share = positive_number(value)
    if share > 1:
        raise ValueError(f"{value!r}: a share of the time is at most 1")
    return share


def non_negative_number(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a number") from None
    if not 0 <= number < float("inf"):
        raise ValueError(f"must be a number of at least 0, not {value}")
    return number


def web_url(value: str) -> str:
    """An absolute http(s) URL without query or fragment; https unless the host is this machine's."""
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{value!r} is not an http(s) URL")
    if parts.query or parts.fragment:
        raise ValueError(f"{value!r}: no query or fragment allowed")
    if parts.scheme != "https" and not is_loopback(parts.hostname):
        raise ValueError(f"{value!r}: https is required except on a loopback address")
    return value.strip()


def otlp_url(value: str) -> str | None:
    """An http(s) URL (empty: none); plain http is allowed anywhere, as collectors often sit beside
    the server (a sidecar, a node agent): the operator chooses."""
    if not value.strip():
        return None
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{value!r} is not an http(s) URL")
    return value.strip()


def listen_address(value: str) -> tuple[str, int] | None:
    """`HOST:PORT` (`[::1]:PORT` for IPv6; port 0: the system picks one, the log says which); empty:
    none."""
    if not value.strip():
        return None
    host, sep, port = value.strip().rpartition(":")
    if not sep or not host:
        raise ValueError(f"{value!r} is not HOST:PORT")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, port_number(port)


def web_urls(value: str) -> tuple[str, ...]:
    return tuple(web_url(item) for item in csv(value))


# RFC 6749 §3.3: a scope token is printable ASCII but space, '"' and '\\' (so it cannot break the
# quoted `scope="…"` of a WWW-Authenticate challenge).
_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")


def oauth_scope(value: str) -> str:
    if not _SCOPE_TOKEN.fullmatch(value):
        raise ValueError(f"{value!r} is not an OAuth scope (printable ASCII, no space, quote or backslash)")
    return value


def oauth_scope_list(value: str) -> tuple[str, ...]:
    return tuple(oauth_scope(item) for item in csv(value))


ScopeMap = tuple[tuple[str, Scope], ...]
DEFAULT_SCOPE_MAP: ScopeMap = (
    ("mnote:read", Scope.PAGE_READ),
    ("mnote:write", Scope.PAGE_WRITE),
    ("mnote:artifacts", Scope.ARTIFACT_WRITE),
)


def scope_map(value: str) -> ScopeMap:
    """`OAUTH=CAPABILITY,...`: which capability scope each OAuth scope grants (an OAuth scope may be
    named twice to grant two)."""
    pairs: list[tuple[str, Scope]] = []
    for item in csv(value):
        name, sep, capability = item.partition("=")
        if not sep:
            raise ValueError(f"{item!r} is not OAUTH_SCOPE=CAPABILITY")
        granted = list(parse_scopes([capability]))
        if len(granted) != 1:
            raise ValueError(f"{item!r} names no capability scope")
        pairs.append((oauth_scope(name.strip()), granted[0]))
    if not pairs:
        raise ValueError("at least one OAUTH_SCOPE=CAPABILITY is needed")
    return tuple(pairs)


def claim_name(value: str) -> str:
    if not _SCOPE_TOKEN.fullmatch(value):
        raise ValueError(f"{value!r} is not a claim name (printable ASCII, no space, quote or backslash)")
    return value


# Signature algorithms of a key pair: the issuer's public key verifies, so no HMAC (HS*: the key would
# be the issuer's public one, which anyone has) and never `none`.
ASYMMETRIC_ALGORITHMS = (
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA",
)  # fmt: skip


def signing_algorithms(value: str) -> tuple[str, ...]:
    names = csv(value)
    for name in names:
        if name.lower() == "none" or name.upper().startswith("HS"):
            raise ValueError(f"{name} is never accepted: tokens must be signed with the issuer's key pair")
        if name not in ASYMMETRIC_ALGORITHMS:
            raise ValueError(f"{name!r} is not one of {', '.join(ASYMMETRIC_ALGORITHMS)}")
    if not names:
        raise ValueError("at least one algorithm is needed")
    return names


def _default_tools_words() -> str:
    """`--toolsets`' default in words: the tools it leaves out, as their declarations say
    (`ToolSpec.by_default`), so that a tool declared out of the default is named here by itself."""
    from mnote_mcp.tools.catalog import ALL_TOOLS

    left_out = ", ".join(spec.name for spec in ALL_TOOLS if not spec.by_default)
    return f"the default tools: every tool but {left_out}" if left_out else "every tool"


def rate_limit(default: CallLimit | None, help: str) -> CallLimit | None:
    """One actor's rate of one kind of call (`--*-limit`): read, written and grouped alike, so that
    what differs between them, the default and the words, is all each one says."""
    return setting(default, call_limit, help, metavar="RATE", group=FAIR)


@dataclass(frozen=True)
class ServerConfig(StoreSettings, LogSettings):
    """`mnote-mcp serve`: the MCP server."""

    transport: Transport = setting("stdio", choice[Transport]("stdio", "sse", "http"), "how clients connect")
    db: Path | str | None = db_setting()
    kernel: str = setting(
        "local",
        text,
        "where reads and writes go: local (the store in --db), http://HOST:PORT or 'cli:PATH [ARGS...]'",
        metavar="KERNEL",
    )
    actor: str | None = setting(
        DEFAULT_ACTOR, optional_text, "the identity of a stdio connection ('' for none)"
    )
    scopes: frozenset[Scope] = setting(
        ALL_SCOPES,
        scope_list,
        "the scopes connections are granted at most",
        flag="--scope",
        env="MNOTE_SCOPE",
    )
    read_only: bool = switch(
        "grant page.read alone, hide every write tool, and open an existing store read-only (never"
        " created nor migrated: a SQLite snapshot on a read-only mount or a backup can be served; a"
        " PostgreSQL store over READ ONLY connections)"
    )
    toolsets: frozenset[Toolset] = setting(
        frozenset(),
        toolset_list,
        f"expose these toolsets ({','.join(Toolset)}, or all: every tool)",
        shown=_default_tools_words,
    )
    tools: tuple[str, ...] = setting((), csv, "also expose tools matching these globs (either spelling)")
    exclude_tools: tuple[str, ...] = setting((), csv, "hide tools matching these globs")
    tool_names: ToolNames = setting(
        "dotted",
        choice(*TOOL_NAME_STYLES),
        "how tool names are spelled everywhere (underscore: mnote_page_get, for OpenAI-style function names)",
    )
    schema_form: SchemaForm = setting(
        "contract",
        choice(*SCHEMA_FORMS),
        "contract: the contract's input schemas; strict: every field required, optional ones nullable,"
        " objects closed (strict function calling: OpenAI Agents SDK, pydantic-ai, strict providers)",
    )
    strict_contract: bool = switch("require the correlation ids, as the contract's schemas do")
    seed: Path | None = setting(
        None, optional_path, "load this workspace fixture before serving", metavar="FILE"
    )
    demo: bool = demo_switch()
    no_demo: bool = no_demo_switch()

    @property
    def seeds_demo(self) -> bool:
        return wants_demo(self.db, demo=self.demo, no_demo=self.no_demo)

    locale: Locale = setting(
        DEFAULT_LOCALE, parse_locale, "language of error messages: zh-CN or en (zh_CN, en_US.UTF-8, ...)"
    )
    watch_interval: float = setting(
        1.0, positive_number, "seconds between revision polls of resource subscriptions"
    )
    call_timeout: float = setting(60.0, positive_number, "seconds a tool call may take")
    refusals: RefusalStyle = setting(
        "result",
        choice(*REFUSAL_STYLES),
        "result: refusals the call caused are ok:false envelopes without isError, real failures keep"
        " isError (every host we test); error: every refusal is an isError result",
    )
    result_form: ResultForm = setting(
        "auto",
        choice(*RESULT_FORMS),
        "auto: both to a client of the 2026-07-28 protocol (Hermes >= 0.20 sends one copy), text to one"
        " of the handshake era (Hermes 0.19 would send two); text: the envelope as one text block, no"
        " outputSchema; both: also as structuredContent (clients that read it); structured: that only",
    )
    confirm: ConfirmPolicy = setting(
        "destructive",
        choice(*CONFIRM_POLICIES),
        "which writes ask the person first (form elicitation, where the client offers it): destructive"
        " ones (a save that removes blocks, a delete of a subtree or of more than 3 blocks, a revert, a"
        " rename of a page others write to), always every write, or never",
    )
    confirm_fallback: ConfirmFallback = setting(
        "handle",
        choice(*CONFIRM_FALLBACKS),
        "a write that needs the person's consent, from a client that cannot be asked: handle answers the"
        " confirmation result (nothing written; the agent asks its person and sends the call again with"
        " the handle as its idempotencyKey), write writes it unasked, refuse refuses it"
        " (confirm_unavailable)",
    )
    confirm_timeout: float = setting(
        DEFAULT_CONFIRM_TIMEOUT,
        positive_number,
        "seconds the person has to answer; then the write is refused (confirm_timeout), nothing written",
    )
    confirm_key_file: Path | None = setting(
        None,
        optional_path,
        "keys sealing a 2026-07-28 question's state and signing confirmation handles (mode 0600, one per"
        " line, each at least 32 bytes; the first seals, all open): give replicas the same file, so a"
        " retry may reach any of them",
        metavar="FILE",
        shown="a key of this process",
    )
    max_subscriptions: int = setting(
        DEFAULT_MAX_SUBSCRIPTIONS,
        positive_int,
        "most pages one connection may subscribe to, and one subscriptions/listen stream may name (each"
        " a watch polled while it lasts; a listen stream's ack names the first this many it honours)",
        metavar="N",
    )
    confirm_handle_ttl: float = setting(
        DEFAULT_HANDLE_TTL,
        handle_lifetime,
        f"seconds a confirmation handle stays good ({MIN_HANDLE_TTL:g} to {MAX_HANDLE_TTL:g}): the time an"
        " agent has to ask its person and send the write back",
        metavar="SECONDS",
    )
    max_completions: int = setting(
        DEFAULT_MAX_COMPLETIONS,
        completion_count,
        "most values one completion/complete answers (workspaces, pages by title or id, runs; at most 100)",
        metavar="N",
    )
    max_result_chars: int = setting(
        DEFAULT_MAX_RESULT_CHARS,
        result_budget,
        f"largest answer, in characters of JSON (a tool's envelope; at least {MIN_RESULT_CHARS}): a longer"
        " page read answers a piece with nextCursor, a longer list its first entries",
        metavar="N",
    )
    max_id_chars: int = setting(
        DEFAULT_MAX_ID_CHARS,
        positive_int,
        "longest idempotencyKey or correlation id (sessionId, runId, toolCallId, traceId) a call may send",
        metavar="N",
    )
    max_block_ids: int = setting(
        DEFAULT_MAX_BLOCK_IDS,
        block_id_count,
        f"most block ids one call may name (mnote.block.delete, mnote.page.get blockIds; at most"
        f" {MAX_BLOCKS}, the kernel's own bound)",
        metavar="N",
    )
    max_argument_depth: int = setting(
        DEFAULT_MAX_ARGUMENT_DEPTH,
        positive_int,
        "deepest nesting of arrays and objects in a tool's arguments (block content has its own limit)",
        metavar="N",
    )
    session_id: str | None = setting(None, optional_text, "bind this sessionId to the connection")
    run_id: str | None = setting(None, optional_text, "bind this runId to the connection")
    trace_id: str | None = setting(None, optional_text, "bind this traceId to the connection")
    # stdio
    max_line_bytes: int = setting(
        DEFAULT_MAX_LINE_BYTES,
        positive_int,
        "longest stdin line (one JSON-RPC message); a longer one is skipped and answered -32600",
        group=STDIO,
    )
    stdio_transport: StdioTransport = setting(
        "mnote",
        choice[StdioTransport]("mnote", "sdk"),
        "mnote: the project's own (on the event loop, every bad line answered); sdk: the MCP SDK's"
        " stdio_server() (a fallback: threads, bad lines dropped)",
        group=STDIO,
    )
    uvloop: bool = switch(
        "run on the standard asyncio event loop, not uvloop (a dependency where the platform has it:"
        " not Windows), for stdio and HTTP; the start-up line says which (loop=…)",
        default=True,
        flag="--no-uvloop",
        env="MNOTE_NO_UVLOOP",
    )
    malloc_arenas: int = setting(
        DEFAULT_MALLOC_ARENAS,
        non_negative_int,
        "most glibc malloc arenas (0: glibc's default, eight per core); worker threads that come and go"
        " otherwise grow resident memory that is free but kept (MALLOC_ARENA_MAX, when set, wins)",
        metavar="N",
    )
    # relay adapters
    runtime_timeout: float = setting(10.0, positive_number, "seconds per runtime request", group=RELAY)
    runtime_retries: int = setting(
        2, non_negative_int, "retries of a failed runtime request where safe", group=RELAY
    )
    runtime_token: str | None = secret("the runtime's service token", group=RELAY)
    runtime_token_file: Path | None = setting(
        None,
        optional_path,
        "read the runtime's service token from this file (mode 0600) instead of MNOTE_RUNTIME_TOKEN",
        metavar="FILE",
        group=RELAY,
    )
    # HTTP transports
    host: str = setting("127.0.0.1", text, "address to listen on", group=HTTP)
    port: int = setting(8765, port_number, "TCP port to listen on", group=HTTP)
    stateless: bool = switch("keep no session state (replicas behind a load balancer)", group=HTTP)
    http_parser: HttpParser = http_limit(HTTP_PARSER, HTTP)
    sse_responses: bool = switch(
        "answer each POST to /mcp with an SSE stream rather than one JSON body (the SDK's default; mnote's"
        " tools send nothing but their answer)",
        group=HTTP,
    )
    sse: bool = switch(
        "turn the legacy HTTP+SSE endpoint /sse off",
        default=True,
        flag="--no-sse",
        env="MNOTE_NO_SSE",
        group=HTTP,
    )
    streamable_http: bool = switch(
        "turn streamable HTTP /mcp off",
        default=True,
        flag="--no-streamable-http",
        env="MNOTE_NO_STREAMABLE_HTTP",
        group=HTTP,
    )
    auth_file: Path | None = setting(
        None, optional_path, "bearer tokens file (mode 0600)", metavar="FILE", group=HTTP
    )
    token: str | None = secret("one bearer token, acting as --actor", group=HTTP)
    token_file: Path | None = setting(
        None,
        optional_path,
        "where a generated token is kept",
        metavar="FILE",
        shown="beside the default store",
        group=HTTP,
    )
    unsafe_no_auth: bool = switch("serve without tokens (loopback only)", group=HTTP)
    allowed_hosts: tuple[str, ...] = setting(
        (), csv, "Host header values to accept", shown="loopback names", group=HTTP
    )
    allowed_origins: tuple[str, ...] = setting(
        (), csv, "Origin header values to accept", shown="the allowed hosts", group=HTTP
    )
    max_body_bytes: int = http_limit(MAX_BODY_BYTES, HTTP)
    max_connections: int = http_limit(MAX_CONNECTIONS, HTTP)
    header_timeout: float = http_limit(HEADER_TIMEOUT, HTTP)
    body_timeout: float = http_limit(BODY_TIMEOUT, HTTP)
    max_sessions: int = setting(
        1000, positive_int, "open sessions (streamable HTTP and SSE) at most; one more is 503", group=HTTP
    )
    max_sessions_per_token: int = setting(
        50, positive_int, "open sessions one token may hold; one more is 429", group=HTTP
    )
    max_listen_streams_per_token: int = setting(
        50,
        positive_int,
        "open 2026-era subscriptions/listen streams one token may hold; one more is 429",
        group=HTTP,
    )
    session_idle_timeout: float = setting(
        600.0,
        positive_number,
        "seconds a streamable-HTTP session may sit idle (no request, no open stream) before it is closed",
        group=HTTP,
    )
    session_tag: str | None = setting(
        None,
        replica_tag,
        "start this replica's session ids (streamable HTTP) and message paths (/sse) with TAG, so a"
        " proxy can send a session's requests to the replica that holds it (docs/deploy.md)",
        metavar="TAG",
        shown="none",
        group=HTTP,
    )
    auth_reload_interval: float = setting(
        2.0,
        positive_number,
        "seconds between checks of --auth-file for changes (a removed token is refused after that)",
        group=HTTP,
    )
    shutdown_grace: float = http_limit(SHUTDOWN_GRACE, HTTP)
    # fair share (issue 32): per-actor rates, on every transport, and the admission of expensive calls
    read_limit: CallLimit | None = rate_limit(
        DEFAULT_LIMITS[Cost.READ],
        "page reads (mnote.page.get, resources/read, prompts/get) one actor may make: N/min or N/s with"
        " 'burst N', or off; one more is answered mnote_tool_rate_limited with the seconds to wait",
    )
    write_limit: CallLimit | None = rate_limit(
        DEFAULT_LIMITS[Cost.WRITE],
        "writes (every write tool) one actor may make",
    )
    search_limit: CallLimit | None = rate_limit(
        DEFAULT_LIMITS[Cost.SEARCH],
        "searches and listings (mnote.page.search, resources/list) one actor may make",
    )
    heavy_limit: CallLimit | None = rate_limit(
        DEFAULT_LIMITS[Cost.HEAVY],
        "heavy reads (mnote.page.history) one actor may make; a call with thousands of argument items"
        " (block ids) counts here too, one call per 2,000 items",
    )
    completion_limit: CallLimit | None = rate_limit(
        DEFAULT_LIMITS[Cost.COMPLETION],
        "completion/complete requests one actor may make",
    )
    request_limit: CallLimit | None = rate_limit(
        DEFAULT_REQUEST_LIMIT,
        "HTTP requests one actor may send (/mcp, /sse, /messages/), counted from the headers: one more is"
        " answered 429 with Retry-After before its body is read",
    )
    call_limits: bool = switch(
        "turn every rate above off (a single trusted client, benchmarks); the admission stays",
        default=True,
        flag="--no-call-limits",
        env="MNOTE_NO_CALL_LIMITS",
        group=FAIR,
    )
    expensive_calls: int = setting(
        DEFAULT_EXPENSIVE_CALLS,
        positive_int,
        "expensive calls (searches, listings, history, completions) running at once on this replica, any"
        " actor's (on PostgreSQL at most --db-pool-size - 1: other calls keep a connection); others wait",
        group=FAIR,
    )
    expensive_calls_per_actor: int = setting(
        DEFAULT_EXPENSIVE_PER_ACTOR,
        positive_int,
        "expensive calls one actor may have in flight (they run one at a time, the others wait); one more"
        " is refused at once (mnote_tool_rate_limited, in_flight)",
        group=FAIR,
    )
    expensive_wait: float = setting(
        DEFAULT_EXPENSIVE_WAIT,
        positive_number,
        "seconds an expensive call may wait for its turn and a place; then it is refused"
        " (mnote_tool_rate_limited, busy, with the seconds to wait)",
        group=FAIR,
    )
    expensive_share: float = setting(
        DEFAULT_EXPENSIVE_SHARE,
        share_of_time,
        "most of the time one actor's expensive calls may keep a place (0 to 1): once its burst is"
        " spent, after a call that took t seconds its next one starts no sooner than t x (1/share - 1)"
        " later",
        group=FAIR,
    )
    expensive_burst: float = setting(
        DEFAULT_EXPENSIVE_BURST,
        non_negative_number,
        "seconds of a place one actor's expensive calls may use at once before --expensive-share"
        " applies (refilled at the share; 0: the share from the first call)",
        group=FAIR,
    )
    ready_timeout: float = setting(
        2.0,
        positive_number,
        "seconds /readyz waits for the store's round trip before it answers 503 (timeout)",
        group=OBSERVE,
    )
    ready_cache: float = setting(
        1.0,
        non_negative_number,
        "seconds a /readyz answer is reused: however many probes, one store round trip per this at most",
        group=OBSERVE,
    )
    metrics_listen: tuple[str, int] | None = setting(
        None,
        listen_address,
        "serve Prometheus metrics at http://HOST:PORT/metrics, a listener of its own (HTTP transports);"
        " a non-loopback HOST needs --metrics-token-file",
        metavar="HOST:PORT",
        group=OBSERVE,
    )
    metrics_token_file: Path | None = setting(
        None,
        optional_path,
        "the bearer token (a file, mode 0600) a scraper must send to --metrics-listen",
        metavar="FILE",
        group=OBSERVE,
    )
    otlp_endpoint: str | None = setting(
        None,
        otlp_url,
        "export OpenTelemetry traces over OTLP/HTTP to this URL (a collector's /v1/traces; the [otel]"
        " extra); OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT do too",
        metavar="URL",
        group=OBSERVE,
    )
    auth: AuthMode = setting(
        "tokens",
        choice[AuthMode]("tokens", "oauth"),
        "how HTTP callers sign in: tokens (--auth-file, MNOTE_TOKEN or a generated token) or oauth"
        " (access tokens of an OAuth 2.1 authorization server, --oauth-*; docs/deploy.md)",
        group=HTTP,
    )
    # --auth oauth (docs/deploy.md, "Signing in through an OAuth provider")
    oauth_issuers: tuple[str, ...] = setting(
        (),
        web_urls,
        "the authorization server(s) whose access tokens are accepted: issuer URLs, comma-separated",
        flag="--oauth-issuer",
        env="MNOTE_OAUTH_ISSUER",
        metavar="URL",
        group=OAUTH,
    )
    oauth_resource: str | None = setting(
        None,
        web_url,
        "this server's canonical URL as clients reach it (RFC 8707: a token's aud must name it),"
        " e.g. https://mnote.example.org/mcp, or the bare origin to serve /mcp and /sse alike",
        metavar="URL",
        group=OAUTH,
    )
    oauth_scopes: ScopeMap = setting(
        DEFAULT_SCOPE_MAP,
        scope_map,
        "which capability scope each OAuth scope grants (OAUTH_SCOPE=CAPABILITY, comma-separated)",
        metavar="MAP",
        shown=",".join(f"{name}={granted.value}" for name, granted in DEFAULT_SCOPE_MAP),
        group=OAUTH,
    )
    oauth_required_scopes: tuple[str, ...] = setting(
        ("mnote:read",),
        oauth_scope_list,
        "OAuth scopes every request needs; a token without one is answered 403 insufficient_scope naming it",
        metavar="SCOPES",
        group=OAUTH,
    )
    oauth_actor_claim: str = setting(
        "sub", claim_name, "the access token's claim that names the actor", metavar="CLAIM", group=OAUTH
    )
    oauth_algorithms: tuple[str, ...] = setting(
        ASYMMETRIC_ALGORITHMS,
        signing_algorithms,
        "JWT signature algorithms accepted (never none, never HS*)",
        metavar="ALGS",
        group=OAUTH,
    )
    oauth_leeway: float = setting(
        30.0, non_negative_number, "seconds of clock skew allowed on a token's exp and nbf", group=OAUTH
    )
    oauth_timeout: float = setting(
        5.0,
        positive_number,
        "seconds to wait for the issuer's metadata, keys or introspection answer; past it the token is"
        " refused (401) and tokens signed with keys already fetched keep working",
        group=OAUTH,
    )
    oauth_keys_max_age: float = setting(
        300.0,
        positive_number,
        "seconds the issuer's signing keys are used before they are fetched again (a failed fetch keeps them)",
        group=OAUTH,
    )
    oauth_refetch_interval: float = setting(
        10.0,
        positive_number,
        "a token signed with a key not fetched yet fetches the issuer's keys at most once per this many seconds",
        group=OAUTH,
    )
    oauth_max_token_bytes: int = setting(
        8192, positive_int, "longest access token accepted (401 before it is parsed)", group=OAUTH
    )
    oauth_max_response_bytes: int = setting(
        DEFAULT_OAUTH_MAX_RESPONSE_BYTES,
        positive_int,
        "largest answer read from the issuer (its metadata, its keys, an introspection); a larger one"
        " is dropped unread past the bound, as an issuer that did not answer",
        group=OAUTH,
    )
    oauth_introspection: bool = switch(
        "check tokens by RFC 7662 introspection at the (one) issuer, for opaque tokens, instead of as JWTs",
        group=OAUTH,
    )
    oauth_client_id: str | None = setting(
        None, optional_text, "this server's client id at the issuer (introspection)", group=OAUTH
    )
    oauth_inactive_cache_seconds: float = setting(
        30.0,
        non_negative_number,
        "seconds a token the issuer called inactive is refused without asking again (introspection;"
        " 0: ask every time); a token it calls active is asked about at every use",
        group=OAUTH,
    )
    oauth_inactive_cache_size: int = setting(
        10_000,
        positive_int,
        "most inactive tokens remembered (by SHA-256 digest, about 100 bytes each); past it the oldest"
        " answer is forgotten first",
        group=OAUTH,
    )
    oauth_max_introspections: int = setting(
        8,
        positive_int,
        "introspection requests in flight to the issuer at most; more wait their turn within"
        " --oauth-timeout, then are refused (401)",
        group=OAUTH,
    )
    oauth_client_secret: str | None = secret(
        "this server's client secret at the issuer (introspection)", group=OAUTH
    )
    oauth_client_secret_file: Path | None = setting(
        None,
        optional_path,
        "read the introspection client secret from this file (mode 0600) instead of MNOTE_OAUTH_CLIENT_SECRET",
        metavar="FILE",
        group=OAUTH,
    )

    @property
    def store(self) -> Path | str:
        """Where the embedded kernel's data lives: `--db`, or the per-user data path."""
        return store_or_default(self.db)

    @property
    def granted_scopes(self) -> frozenset[Scope]:
        """Read-only mode wins over everything: it grants page.read alone, whatever --scope says."""
        return self.scopes & READ_ONLY_SCOPES if self.read_only else self.scopes

    @property
    def bindings(self) -> dict[str, str]:
        """Correlation ids fixed for every call of a connection (below arguments and `_meta`)."""
        ids = {"sessionId": self.session_id, "runId": self.run_id, "traceId": self.trace_id}
        return {name: value for name, value in ids.items() if value}

    @property
    def tool_selection(self) -> ToolSelection:
        from mnote_mcp.tools.selection import ToolSelection

        return ToolSelection(toolsets=self.toolsets, tools=self.tools, exclude=self.exclude_tools)

    def stdio_identity(self) -> Identity:
        return Identity(actor_id=self.actor or None, scopes=self.granted_scopes, bindings=self.bindings)

    @property
    def delivery(self) -> Delivery:
        return Delivery(refusals=self.refusals, form=self.result_form)

    @property
    def confirmation(self) -> Confirmation:
        """The confirmation settings; `SettingError` if a handle could not pass as an idempotency key."""
        if self.confirm_fallback == "handle" and self.max_id_chars < MAX_HANDLE_CHARS:
            raise SettingError(
                f"--max-id-chars {self.max_id_chars} is shorter than a confirmation handle ({MAX_HANDLE_CHARS}"
                " characters, --confirm-fallback handle): raise it, or choose another --confirm-fallback"
            )
        return Confirmation(
            policy=self.confirm,
            fallback=self.confirm_fallback,
            timeout=self.confirm_timeout,
            handle_ttl=self.confirm_handle_ttl,
        )

    @property
    def call_limit_of(self) -> dict[Cost, CallLimit | None]:
        """Each class's rate (`--<class>-limit`), all None with `--no-call-limits`."""
        limits = {
            Cost.READ: self.read_limit,
            Cost.WRITE: self.write_limit,
            Cost.SEARCH: self.search_limit,
            Cost.HEAVY: self.heavy_limit,
            Cost.COMPLETION: self.completion_limit,
        }
        return {cost: limit if self.call_limits else None for cost, limit in limits.items()}

    @property
    def requests_limit(self) -> CallLimit | None:
        return self.request_limit if self.call_limits else None

    @property
    def admission_bounds(self) -> AdmissionBounds:
        """`--expensive-*`; on PostgreSQL at most one less than the pool, so other calls keep a connection."""
        from mnote_mcp.calls.admission import AdmissionBounds

        running = self.expensive_calls
        if isinstance(self.store, str):  # a PostgreSQL URL
            running = max(1, min(running, self.db_pool_size - 1))
        return AdmissionBounds(
            running,
            self.expensive_calls_per_actor,
            self.expensive_wait,
            self.expensive_share,
            self.expensive_burst,
        )


@dataclass(frozen=True)
class SeedConfig(LogSettings):
    """`mnote-mcp seed`: load a workspace fixture into a store."""

    fixture: Path = required(path, "the workspace fixture (JSON)", positional=True, env="", metavar="FILE")
    db: Path | str | None = db_setting()
    replace: tuple[str, ...] = setting(
        (),
        csv,
        "overwrite these pages with the fixture's version (each a new revision, revertible); without it,"
        " pages that exist are kept",
        metavar="WS/DOC,...",
        env="",
    )


@dataclass(frozen=True)
class MigrateConfig(LogSettings):
    """`mnote-mcp migrate`: bring a store's schema to this release's version (every start does it too)."""

    db: Path | str | None = db_setting()


@dataclass(frozen=True)
class BackupConfig(LogSettings):
    """`mnote-mcp backup`: a consistent copy of a SQLite store, taken while it is served."""

    dest: Path = required(
        path, "where the copy goes (a new file, never overwritten)", positional=True, env="", metavar="DEST"
    )
    db: Path | str | None = db_setting()


@dataclass(frozen=True)
class AuditConfig(LogSettings):
    """`mnote-mcp audit`: read the audit trail of a store."""

    db: Path | str | None = db_setting()
    trace: str | None = setting(None, optional_text, "only records of this traceId", env="")
    command_id: str | None = setting(None, optional_text, "only the record of this commandId", env="")
    limit: int = setting(100, positive_int, "at most this many records (the latest)", env="")


@dataclass(frozen=True)
class TokenConfig(LogSettings):
    """`mnote-mcp token`: mint a bearer token into a tokens file (printed once)."""

    auth_file: Path = required(path, "tokens file, created 0600 if new", metavar="FILE")
    actor: str = required(text, "the actor the token acts as", env="")
    scopes: frozenset[Scope] = setting(ALL_SCOPES, scope_list, "the token's scopes", flag="--scope", env="")
    workspaces: tuple[str, ...] = setting(
        (), csv, "limit the token to these workspace ids", shown="all", env=""
    )
    name: str | None = setting(None, optional_text, "a label for the token", env="")


@dataclass(frozen=True)
class TokenListConfig(LogSettings):
    """`mnote-mcp token list`: the tokens of a tokens file (JSON lines; never a token or its digest)."""

    auth_file: Path = required(path, "the tokens file", metavar="FILE")


@dataclass(frozen=True)
class TokenRevokeConfig(LogSettings):
    """`mnote-mcp token revoke ID`: remove a token from a tokens file (a server reading the file
    refuses it within --auth-reload-interval)."""

    token_id: str = required(
        text, "the token's id, as `token list` shows it", positional=True, env="", metavar="ID"
    )
    auth_file: Path = required(path, "the tokens file", metavar="FILE")


@dataclass(frozen=True)
class DemoConfig(LogSettings):
    """`mnote-mcp demo`: a scripted tour of every tool over a real stdio MCP session."""

    locale: Locale = setting(DEFAULT_LOCALE, parse_locale, "language of error messages: zh-CN or en")


CHECK_RUN = "the run (runtime check)"


@dataclass(frozen=True)
class RuntimeCheckConfig(LogSettings):
    """`mnote-mcp runtime check`: the conformance kit, run against a runtime (docs/runtime-protocol.md,
    "The conformance kit"). The page limits are the runtime's (the same variables as `runtime serve`
    reads, so one environment sets both); the kit writes a page at them and one past."""

    log_level: LogLevel = setting(
        "warning",
        choice[LogLevel]("debug", "info", "warning", "error"),
        "how much to log on stderr",
        group=LOGGING,
    )
    target: str | None = setting(
        None,
        optional_text,
        "the runtime to check: http://HOST:PORT, https://HOST[:PORT]/PREFIX or cli:PATH [ARGS...], as"
        " --kernel names it (its seed loaded first: --write-seed)",
        positional=True,
        env="",
        metavar="RUNTIME",
    )
    write_seed: Path | None = setting(
        None,
        optional_path,
        "write the scratch workspace's seed (a fixture: mnote-mcp seed's format) to FILE ('-': stdout) and"
        " exit; load it into the runtime, then run the check",
        metavar="FILE",
        env="",
    )
    tag: str = setting(
        DEFAULT_TAG,
        check_tag,
        "the scratch workspace's tag: its ids are kit_TAG, kit_TAG_other and actors kit_TAG_*; a seed"
        " serves one run",
        env="MNOTE_CHECK_TAG",
    )
    report_format: ReportFormat = setting(
        "text",
        choice[ReportFormat]("text", "json"),
        "the report on stdout: one line per check, or one JSON document",
        flag="--format",
        env="MNOTE_CHECK_FORMAT",
        group=CHECK_RUN,
    )
    junit: Path | None = setting(
        None,
        optional_path,
        "also write the report as JUnit XML to FILE",
        metavar="FILE",
        env="MNOTE_CHECK_JUNIT",
        group=CHECK_RUN,
    )
    request_timeout: float = setting(
        DEFAULT_REQUEST_TIMEOUT,
        positive_number,
        "seconds the runtime may take to answer one request (a page at the byte limit is one request)",
        env="MNOTE_CHECK_REQUEST_TIMEOUT",
        group=CHECK_RUN,
    )
    total_timeout: float = setting(
        DEFAULT_TOTAL_TIMEOUT,
        positive_number,
        "seconds the whole run may take: the check running then fails, the rest are skipped",
        env="MNOTE_CHECK_TOTAL_TIMEOUT",
        group=CHECK_RUN,
    )
    max_shown_chars: int = setting(
        DEFAULT_SHOWN_CHARS,
        positive_int,
        "most characters shown of a failure's request, expected and actual answer (each)",
        env="MNOTE_CHECK_MAX_SHOWN_CHARS",
        group=CHECK_RUN,
    )
    skip: tuple[str, ...] = setting(
        (),
        csv,
        "checks not to run: names or globs, comma-separated (limits.*); reported as skipped",
        metavar="GLOB,...",
        env="MNOTE_CHECK_SKIP",
        group=CHECK_RUN,
    )
    max_page_blocks: int = setting(
        DEFAULT_MAX_PAGE_BLOCKS,
        positive_int,
        "the runtime's --max-page-blocks: the kit writes a page of exactly this many blocks, then one more",
    )
    max_page_bytes: int = setting(
        DEFAULT_MAX_PAGE_BYTES,
        positive_int,
        "the runtime's --max-page-bytes: the kit writes a page of exactly this many bytes, then one more",
    )
    runtime_token: str | None = secret("the runtime's service token")
    runtime_token_file: Path | None = setting(
        None,
        optional_path,
        "read the runtime's service token from this file (mode 0600) instead of MNOTE_RUNTIME_TOKEN",
        metavar="FILE",
    )

    @property
    def page_limits(self) -> PageLimits:
        return PageLimits(self.max_page_blocks, self.max_page_bytes)
