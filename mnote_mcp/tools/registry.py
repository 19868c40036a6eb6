"""The generic tool inventory: a tool is one `ToolSpec`; the registry advertises and finds them.

A spec is the tool, whole: what the model reads (name, title, description, annotations, schemas),
what runs (a read handler, or the kernel command a write issues), and what the tool promises, stated
apart from the code that keeps it: who may call it (`permissions`), what can go wrong (`errors`), at
least one example call (`examples`) and how large its definition may be (`budget`). The README's
table, docs/contract.md's tool list, docs/errors.md's per-tool errors and every per-tool test table are
made from these (docs/architecture.md, "Adding a tool").

A spec carries the contract's input schema verbatim (`contract_schema`) and only *adds* to it
(`extensions`: descriptions, item schemas, optional properties such as `baseRevision`); an extension
that would change a keyword the contract already sets is refused at import time, so the advertised
schema can never drift from the contract. A write tool names its kernel command (the command's one
declaration, `kernel/store/commands`), and everything else follows from it: its scope (the
command's), its handler, `readOnlyHint`, and the write extensions every write tool takes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import mcp.types as types
import orjson

from mnote_mcp.kernel.blocks import DEFAULT_MAX_BLOCK_IDS
from mnote_mcp.kernel.port import JSONObject
from mnote_mcp.kernel.store.commands.spec import CommandSpec
from mnote_mcp.tools.consent import Destructive, never
from mnote_mcp.tools.cost import Cost
from mnote_mcp.tools.examples import Call, Example, Target, Value
from mnote_mcp.tools.failures import ErrorCase
from mnote_mcp.tools.icons import TOOLSET_ICONS
from mnote_mcp.tools.permissions import Permissions
from mnote_mcp.tools.results import Fit, Handler, PayloadMap, command_handler
from mnote_mcp.tools.schemas import (
    PAGE_NAMING,
    WRITE_EXTENSIONS,
    SchemaForm,
    strict_form,
    without_null_branches,
)
from mnote_mcp.tools.sizes import SizeBudget, definition_bytes, function_definition
from mnote_mcp.tools.toolsets import Toolset
from mnote_mcp.tools.typeschemas import declared_schema
from mnote_mcp.vocabulary.envelope import CORRELATION_FIELDS, DEFAULT_MAX_ID_CHARS, ID_FIELDS, OUTPUT_SCHEMA
from mnote_mcp.vocabulary.naming import ToolNames, respell, respell_all, spell
from mnote_mcp.vocabulary.scopes import Scope

if TYPE_CHECKING:
    from jsonschema_rs import Validator

__all__ = ["Annotations", "Registry", "SchemaForm", "ToolNames", "ToolSpec"]

# Empty placeholders a strict host fills in for an optional field, meaning "not given" on every tool:
# no correlation id is empty, and an empty scope list would only ever be refused.
EMPTY_MEANS_ABSENT: frozenset[str] = frozenset({*CORRELATION_FIELDS, "capabilityScope"})

_CORRELATION_PROPERTY: dict[str, Any] = {"type": "string"}
# What an extension may add to a property the contract declares: words and item schemas, never a
# constraint (type, enum, minLength, default, ...) the contract does not state.
_ANNOTATING_KEYWORDS = frozenset({"description", "items", "examples"})
# Arrays of block ids a caller names (a delete's targets, a read's subset): bounded by `maxItems`.
ID_ARRAYS: tuple[str, ...] = ("blockIds",)
_SCOPE_PROPERTY: dict[str, Any] = {
    "type": "array",
    "items": {"type": "string", "enum": [scope.value for scope in Scope]},
    "description": "Narrow this call to these scopes (never widens the connection's).",
}


@dataclass(frozen=True, slots=True)
class Annotations:
    """The hints a tool sets besides `readOnlyHint`, which follows from whether it runs a command."""

    destructive: bool
    idempotent: bool
    open_world: bool = False


@dataclass(frozen=True, kw_only=True)
class ToolSpec:
    """One tool, whole: a read tool gives its `read` handler, a write tool its `command` and `payload`."""

    name: str
    title: str
    description: str  # what the model reads: what the tool does and when to use it
    summary: str  # one line for the README's tool table: what it does
    returns: str  # one line for docs/contract.md's tool list: what the result holds
    toolset: Toolset
    annotations: Annotations
    contract_schema: Mapping[str, Any]
    # Who may call it and what everyone else hears (every `Caller`, checked at import).
    permissions: Permissions
    # What can go wrong for a caller who may call it (at least one), besides `failures.EVERY_TOOL`.
    errors: tuple[ErrorCase, ...]
    # At least one call, aimed at no page in particular (`examples.Ref`), each with the calls that make
    # the page what it needs (`setup`); the first is the one every per-tool test makes.
    examples: tuple[Example, ...]
    budget: SizeBudget
    # The arguments' type (`tools/inputs.py`): what its handler reads them as (`inputs.arguments_of`),
    # held to the schema calls are checked against (tests/unit/tools/test_inputs.py).
    arguments: object
    # The result's type (`tools/outputs.py`): `outputSchema.result` in `tools/list` is derived from it,
    # and every result of the test suite is checked against that (`tools/resultcheck.py`).
    output: object
    command: CommandSpec[Any] | None = None
    payload: PayloadMap | None = None
    read: Handler | None = None
    extensions: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # Properties whose items the kernel validates in depth (the block model): the advertised `items`
    # schema documents them, and checking it twice would cost more than the write (1 ms per 50 blocks).
    kernel_validated: frozenset[str] = frozenset()
    fit: Fit | None = None
    # Optional properties whose empty value ("" or []) can only mean "not given" (a strict host must
    # fill every field): an empty cursor, no block ids meaning the whole page, an empty anchor id.
    # Where empty is a value (a block's text ""), it is not listed.
    empty_means_absent: frozenset[str] = frozenset()
    # False for a tool that names no page (search): admitted without `documentId`, `workspaceId` optional.
    page_bound: bool = True
    # When a planned write of this tool is destructive, so that `--confirm destructive` asks the person
    # first (`tools/consent.py`): read from the plan of a dry run of the same call.
    consent: Destructive = never
    # What a call costs (`tools/cost.py`): its per-actor rate and, for an expensive class, its fair
    # admission. A write tool is `write` (None: derived); a read tool is `read` unless it says more.
    cost: Cost | None = None
    # Payload keys the tool's arguments call otherwise (payload key -> argument, as `payload` maps
    # them): the kernel's refusals of the command are told in the argument's name, which the model gave.
    renamed: Mapping[str, str] = field(default_factory=dict)
    # Calls that amplify what this tool does beyond what the hostile-input sweep derives from its
    # schema and examples (tests/support/sweep.py runs them on a long and a wide page; issue 30):
    # replace-all doubling, broad searches, the longest history.
    hostile: tuple[Example, ...] = ()
    # Its worst cases for the result budget: calls on a `Stage` of large data (a 2,000-block page, a
    # long history, 60 matching pages) whose every answer must fit a small `--max-result-chars`, and,
    # unless an example `fits` whatever the budget, be larger than it unbounded (so that the data is
    # large enough to matter). tests/unit/tools/test_budget_everywhere.py runs them; a tool without
    # one fails it.
    oversized: tuple[Example, ...] = ()
    # Everyday requests a person makes that mean this tool, each in English and in Chinese: a tool
    # search over the definitions (name and first sentence) must rank it first for each
    # (tests/unit/tools/test_catalog_search.py; a tool with none fails it).
    asked: tuple[tuple[str, str], ...] = ()
    # Accepted properties the advertised schema leaves out: what a model rarely needs for this tool
    # (every byte goes with every model request). Still accepted and enforced. `baseRevision` is
    # advertised only where a write overwrites what the model read (a whole body, a block's text).
    quiet: frozenset[str] = frozenset({"baseRevision"})
    # Properties said shorter where another tool's definition spells them out, in the contract form:
    # (that tool, property -> its shorter schema). `mnote.page.save`'s blocks are
    # `mnote.block.insert`'s with ids and children, so a listing that has both spells the block model
    # once (docs/decisions.md, "Definitions no larger than the filesystem server's"). The strict form
    # (whose hosts close every object) and a listing without that tool keep the full schema.
    said_in: tuple[str, Mapping[str, Mapping[str, Any]]] | None = None
    # In the tools a server exposes when no `--toolsets` or `--tools` is given. A host sends every
    # listed definition with every model request, so the default is the contract's tools and what
    # everyday tasks need; the others are one flag away (`--toolsets all`).
    by_default: bool = True

    def __post_init__(self) -> None:
        if (self.command is None) == (self.read is None) or (self.command is None) != (self.payload is None):
            raise ValueError(f"{self.name}: give either read, or command and payload")
        if self.cost is not None and (self.cost is Cost.WRITE) != (self.command is not None):
            raise ValueError(f"{self.name}: a write tool costs as a write, a read tool never does")
        if self.consent is not never and self.command is None:
            raise ValueError(f"{self.name}: only a write asks for consent")
        if not self.examples or not self.errors:
            raise ValueError(f"{self.name}: declare at least one example call and the errors it can answer")
        contract_props = self.contract_schema.get("properties", {})
        for prop, extra in self.all_extensions.items():
            if prop in contract_props and not set(extra) <= _ANNOTATING_KEYWORDS - set(contract_props[prop]):
                raise ValueError(
                    f"{self.name}: extension of {prop!r} may only add {sorted(_ANNOTATING_KEYWORDS)}"
                )

    @property
    def writes(self) -> bool:
        return self.command is not None

    @property
    def cost_class(self) -> Cost:
        """The class its calls are limited and admitted by (declared, else derived)."""
        if self.cost is not None:
            return self.cost
        return Cost.WRITE if self.writes else Cost.READ

    @property
    def scope(self) -> Scope:
        return self.command.scope if self.command is not None else Scope.PAGE_READ

    @cached_property
    def handler(self) -> Handler:
        if self.read is not None:
            return self.read
        assert self.command is not None and self.payload is not None  # checked in __post_init__
        return command_handler(self.command.name, self.payload, self.renamed)

    @property
    def all_extensions(self) -> Mapping[str, Mapping[str, Any]]:
        named = PAGE_NAMING if self.page_bound else {}
        writes = WRITE_EXTENSIONS if self.writes else {}
        return {**named, **self.extensions, **writes}

    @property
    def example(self) -> Example:
        """The example every per-tool test makes."""
        return self.examples[0]

    def arguments_for(self, target: Target, example: Example | Call | None = None) -> dict[str, Value]:
        """`example` (the first by default, or a setup call of this tool) aimed at `target`: the page's
        ids where the tool names a page, then the example's own arguments (which may name another
        page)."""
        page: dict[str, Value] = (
            {"workspaceId": target.workspace_id, "documentId": target.document_id} if self.page_bound else {}
        )
        return {**page, **(example or self.example).resolved(target)}

    @property
    def underscore_name(self) -> str:
        return spell(self.name, "underscore")

    @property
    def absent_when_empty(self) -> frozenset[str]:
        return self.empty_means_absent | EMPTY_MEANS_ABSENT

    def accepted_schema(
        self,
        *,
        strict: bool,
        max_id_chars: int = DEFAULT_MAX_ID_CHARS,
        max_block_ids: int = DEFAULT_MAX_BLOCK_IDS,
    ) -> dict[str, Any]:
        """The schema calls are checked against: the contract's, plus extensions, plus what every tool
        takes without advertising it (the correlation ids, required only under `--strict-contract`,
        and `capabilityScope`).

        The constraints added to the contract's own properties bound what a client controls:
        `maxLength` on the client's ids (correlation ids, `idempotencyKey`: they are echoed, logged and
        stored) and `maxItems` on arrays of block ids (each is looked up in the page).
        """
        contract = copy.deepcopy(dict(self.contract_schema))
        extensions = self.all_extensions
        properties: dict[str, Any] = {}
        for prop, declared in contract.get("properties", {}).items():
            properties[prop] = {**declared, **extensions.get(prop, {})}
        for prop, extension in extensions.items():
            properties.setdefault(prop, dict(extension))
        for prop in CORRELATION_FIELDS:
            properties.setdefault(prop, dict(_CORRELATION_PROPERTY))
        for prop in ID_FIELDS:
            if properties.get(prop, {}).get("type") == "string":
                properties[prop]["maxLength"] = max_id_chars
        for prop in ID_ARRAYS:
            if properties.get(prop, {}).get("type") == "array":
                properties[prop]["maxItems"] = max_block_ids
        properties.setdefault("capabilityScope", copy.deepcopy(_SCOPE_PROPERTY))
        required = [name for name in contract.get("required", []) if strict or name not in CORRELATION_FIELDS]
        accepted: dict[str, Any] = {"type": "object", "required": required, "properties": properties}
        for keyword, value in contract.items():
            if keyword not in ("type", "required", "properties"):
                accepted[keyword] = value
        return accepted

    def input_schema(
        self,
        *,
        strict: bool,
        max_id_chars: int = DEFAULT_MAX_ID_CHARS,
        max_block_ids: int = DEFAULT_MAX_BLOCK_IDS,
        beside: Collection[str] | None = None,
    ) -> dict[str, Any]:
        """The advertised schema: the accepted one without what a model never needs in order to make
        the call, since every byte of it is sent with every model request (docs/decisions.md, "Lean
        tool definitions"): the correlation ids unless `strict` (`--strict-contract` advertises the
        contract's list exactly), `capabilityScope`, the ids' `maxLength` and the `null` branch of a
        nullable value (null is "not given" everywhere; where it means more, the description says
        so; the strict form states it again), the tool's `quiet` properties, and, where `beside` (the
        tools listed with it; None: every tool) holds the tool named by `said_in`, its properties
        said there. All of them are still accepted and enforced."""
        accepted = self.accepted_schema(strict=strict, max_id_chars=max_id_chars, max_block_ids=max_block_ids)
        hidden = {"capabilityScope", *self.quiet, *(() if strict else CORRELATION_FIELDS)}
        properties = accepted["properties"]
        if self.said_in is not None and (beside is None or self.said_in[0] in beside):
            properties.update({prop: dict(said) for prop, said in self.said_in[1].items()})
        for prop in ID_FIELDS:
            if prop in properties:
                properties[prop].pop("maxLength", None)
        lean: dict[str, Any] = without_null_branches(
            {
                **accepted,
                "properties": {name: schema for name, schema in properties.items() if name not in hidden},
            }
        )
        return lean

    def advertised_schema(
        self,
        *,
        strict: bool,
        form: SchemaForm,
        style: ToolNames,
        max_id_chars: int = DEFAULT_MAX_ID_CHARS,
        max_block_ids: int = DEFAULT_MAX_BLOCK_IDS,
        beside: Collection[str] | None = None,
    ) -> dict[str, Any]:
        """`input_schema` in `form`: the strict form spells every property out (`beside` is not used)."""
        schema = self.input_schema(
            strict=strict,
            max_id_chars=max_id_chars,
            max_block_ids=max_block_ids,
            beside=beside if form == "contract" else (),
        )
        advertised: dict[str, Any] = respell_all(strict_form(schema) if form == "strict" else schema, style)
        return advertised

    def advertised_name(self, style: ToolNames) -> str:
        return spell(self.name, style)

    @cached_property
    def output_schema(self) -> JSONObject:
        """The contract's envelope (`OUTPUT_SCHEMA`, its failure branch as it is) with this tool's
        result in `result`; a recursive definition of the result (a block) at the root, where its
        `$ref` points."""
        result = dict(declared_schema(self.output))
        defs = result.pop("$defs", None)
        envelope = OUTPUT_SCHEMA["properties"]
        assert isinstance(envelope, dict)
        properties: JSONObject = {**envelope, "result": {"anyOf": [result, {"type": "null"}]}}
        return {**OUTPUT_SCHEMA, "properties": properties, **({"$defs": defs} if defs else {})}

    def mcp_annotations(self) -> types.ToolAnnotations:
        return types.ToolAnnotations(
            read_only_hint=not self.writes,
            destructive_hint=self.annotations.destructive,
            idempotent_hint=self.annotations.idempotent,
            open_world_hint=self.annotations.open_world,
        )

    def to_mcp(
        self,
        *,
        style: ToolNames,
        strict: bool,
        form: SchemaForm = "contract",
        output_schema: bool = True,
        max_id_chars: int = DEFAULT_MAX_ID_CHARS,
        max_block_ids: int = DEFAULT_MAX_BLOCK_IDS,
        beside: Collection[str] | None = None,
    ) -> types.Tool:
        return types.Tool(
            name=self.advertised_name(style),
            title=self.title,
            description=respell(self.description, style),
            input_schema=self.advertised_schema(
                strict=strict,
                form=form,
                style=style,
                max_id_chars=max_id_chars,
                max_block_ids=max_block_ids,
                beside=beside,
            ),
            output_schema=self.output_schema if output_schema else None,
            icons=TOOLSET_ICONS[self.toolset],
            annotations=self.mcp_annotations(),
        )

    def model_bytes(self, form: SchemaForm) -> int:
        """What `budget` bounds: the bytes of this tool's definition as Hermes gives it to the model
        (`sizes.function_definition`), from a server with default settings but `form`."""
        tool = self.to_mcp(style="dotted", strict=False, form=form)
        return definition_bytes(function_definition(tool.name, tool.description or "", tool.input_schema))

    def entry_bytes(self, form: SchemaForm) -> int:
        """The size of this tool's `tools/list` entry as such a server sends it (output schema and
        annotations included, which no model reads): compact JSON, UTF-8."""
        tool = self.to_mcp(style="dotted", strict=False, form=form)
        return len(orjson.dumps(tool.model_dump(by_alias=True, exclude_none=True, mode="json")))


class Registry:
    """The tools one server exposes, found by either spelling of their name."""

    def __init__(
        self,
        specs: Iterable[ToolSpec],
        *,
        style: ToolNames = "dotted",
        strict: bool = False,
        form: SchemaForm = "contract",
        max_id_chars: int = DEFAULT_MAX_ID_CHARS,
        max_block_ids: int = DEFAULT_MAX_BLOCK_IDS,
    ) -> None:
        self.specs: tuple[ToolSpec, ...] = tuple(specs)
        self.style: ToolNames = style
        self.strict = strict
        self.form: SchemaForm = form
        self.max_id_chars = max_id_chars
        self.max_block_ids = max_block_ids
        self._by_name: dict[str, ToolSpec] = {}
        for spec in self.specs:
            for alias in (spec.name, spec.underscore_name):
                if alias in self._by_name:
                    raise ValueError(f"two tools answer to {alias!r}")
                self._by_name[alias] = spec
        self._schemas = {
            spec.name: spec.accepted_schema(
                strict=strict, max_id_chars=max_id_chars, max_block_ids=max_block_ids
            )
            for spec in self.specs
        }
        self._validators: dict[str, Validator] = {}

    def find(self, name: str) -> ToolSpec | None:
        return self._by_name.get(name)

    def schema(self, spec: ToolSpec) -> dict[str, Any]:
        """The contract-form schema calls are checked against, whichever form is advertised: a call
        in the strict form is the same call once its nulls (and empty placeholders) are left out."""
        return self._schemas[spec.name]

    def validator(self, spec: ToolSpec) -> Validator:
        """Compiled on first use, so that starting and listing tools never pay for it."""
        validator = self._validators.get(spec.name)
        if validator is None:
            from jsonschema_rs import Draft202012Validator

            schema = copy.deepcopy(self._schemas[spec.name])
            for prop in spec.kernel_validated:
                schema["properties"][prop].pop("items", None)
            validator = self._validators[spec.name] = Draft202012Validator(schema, validate_formats=False)
        return validator

    def advertised(
        self, *, include: Callable[[ToolSpec], bool] = lambda spec: True, output_schema: bool = True
    ) -> list[types.Tool]:
        """The `tools/list` entries; `output_schema=False` for hosts given text only (no structured
        content to check against it)."""
        listed = [spec for spec in self.specs if include(spec)]
        beside = frozenset(spec.name for spec in listed)
        return [
            spec.to_mcp(
                style=self.style,
                strict=self.strict,
                form=self.form,
                output_schema=output_schema,
                max_id_chars=self.max_id_chars,
                max_block_ids=self.max_block_ids,
                beside=beside,
            )
            for spec in listed
        ]
