"""What a check is, and the checks every operation of the protocol's table gets without being named.

A `Check` is one line of the report: a name (`group.what`), what passing it guarantees, which promise
of the contract a failure breaks, the operations it exercises and the transports it applies to. The
scenarios (`handshake.py`, `reads.py`, `writes.py`, `guards.py`) declare theirs with a `Registry`;
`operation_checks` derives three from each row of `protocol.OPERATIONS`, read when a run is planned, so
an operation declared there is checked the day it is declared:

- `differential.<op>`: a request of it (one the kit knows to be meaningful, or, for an operation the
  kit has no probe for, one filled in from its request schema) answered as the embedded kernel
  answers it on the mirror;
- `schema.<op>`: every reply of it the whole run received followed the protocol: an answer under its
  reply key that its generated schema accepts and the port reads, or a refusal with the error body
  and (over HTTP) the status its code has;
- `coverage.<op>`: which scenarios exercise it, or, reported as skipped, that none does yet.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mnote_mcp.conformance.seed import READ_PAGE
from mnote_mcp.conformance.session import NotApplicableError, Session, shown
from mnote_mcp.kernel.port import JSONObject
from mnote_mcp.kernel.protocol import Ans, Operation, Req, first_error

if TYPE_CHECKING:
    from pydantic import JsonValue

Run = Callable[[Session], Awaitable[str | None]]
TRANSPORTS = frozenset({"http", "cli"})


@dataclass(frozen=True)
class Check:
    name: str
    guarantees: str  # what a pass means
    breaks: str  # the contract promise a failure breaks (docs/runtime-protocol.md's table)
    run: Run  # returns a note for the report, raises CheckFailedError / ProtocolBrokenError / NotApplicableError
    operations: tuple[str, ...] = ()
    transports: frozenset[str] = TRANSPORTS

    @property
    def group(self) -> str:
        return self.name.split(".", 1)[0]


@dataclass
class Registry:
    """The checks of one module, in the order they are declared (and run)."""

    checks: list[Check] = field(default_factory=list)

    def check(
        self,
        name: str,
        *,
        guarantees: str,
        breaks: str,
        operations: tuple[str, ...] = (),
        transports: frozenset[str] = TRANSPORTS,
    ) -> Callable[[Run], Run]:
        def declare(run: Run) -> Run:
            self.checks.append(Check(name, guarantees, breaks, run, operations, transports))
            return run

        return declare


# -- per operation ----------------------------------------------------------------------------------

Probe = Callable[[Session, Operation[Any, Any]], Awaitable[str | None]]


def operation_checks(
    op: Operation[Req, Ans], probes: dict[str, Probe], scenarios: list[Check]
) -> tuple[Check, Check, Check]:
    probe = probes.get(op.name, filled_probe)

    async def differential(session: Session) -> str | None:
        return await probe(session, op)

    async def schema(session: Session) -> str | None:
        return schema_verdict(session, op)

    users = [check.name for check in scenarios if op.name in check.operations]

    async def coverage(session: Session) -> str | None:
        if not users:
            raise NotApplicableError(
                f"the kit has no scenario for {op.name} yet: only its generic checks ran"
                f" (schema.{op.name}, differential.{op.name})"
            )
        return shown(f"exercised by {len(users)} checks: " + ", ".join(users), 400)

    where = f"{op.method} {op.path}"
    return (
        Check(
            f"differential.{op.name}",
            f"a request of {op.name} ({where}) is answered as the embedded kernel answers it",
            f"the relay's answers are the embedded kernel's ({op.name})",
            differential,
            (op.name,),
        ),
        Check(
            f"schema.{op.name}",
            f"every reply of {op.name} in the run is its generated answer schema or a protocol refusal",
            f"a relay can read every reply of {op.name} (else: runtime_unavailable, malformed_reply)",
            schema,
            (op.name,),
        ),
        Check(
            f"coverage.{op.name}",
            f"the kit has scenarios for {op.name}",
            "(a report line, not a promise)",
            coverage,
            (op.name,),
        ),
    )


def schema_verdict(session: Session, op: Operation[Req, Ans]) -> str | None:
    entry = session.ledger.get(op.name)
    if entry is None or entry.answers + entry.refusals + entry.broken_count == 0:
        raise NotApplicableError(
            f"no request of {op.name} was made (the checks that make one were skipped or stopped)"
        )
    if entry.broken is not None:
        broken = entry.broken
        seen = entry.answers + entry.refusals + entry.broken_count
        session.fail(
            f"{entry.broken_count} of {seen} replies of {op.name} break the protocol; the first: {broken.problem}",
            request=broken.request,
            expected={"answer schema": op.answer.schema, "or": "a refusal {error: {code, reason, details}}"},
            actual=(f"status {broken.status}: " if broken.status is not None else "") + broken.text,
        )
    return f"{entry.answers} answers and {entry.refusals} refusals followed the protocol"


# -- a request from an operation's schema alone ------------------------------------------------------


def filled_request(schema: JSONObject, session: Session) -> JsonValue:
    """The smallest request the schema allows: its required fields, named ones from the scratch
    workspace (an actor who may read, the workspace, a readable page, a correlation, a new key)."""
    defs = schema.get("$defs") if isinstance(schema.get("$defs"), dict) else {}
    known: dict[str, JsonValue] = {
        "actorId": session.actor("editor"),
        "workspaceId": session.ws,
        "documentId": READ_PAGE,
        "correlation": session.correlation().to_wire(),
        "idempotencyKey": session.key("filled"),
        "traceId": session.trace,
    }

    def fill(node: JsonValue, name: str | None) -> JsonValue:
        if not isinstance(node, dict):
            return None
        ref = node.get("$ref")
        if isinstance(ref, str) and isinstance(defs, dict):
            return fill(defs.get(ref.rsplit("/", 1)[-1]), name)
        if name in known:
            return known[name]
        if "const" in node:
            return node["const"]
        enum = node.get("enum")
        if isinstance(enum, list) and enum:
            return enum[0]
        variants = node.get("anyOf")
        if isinstance(variants, list):
            chosen = next((v for v in variants if isinstance(v, dict) and v.get("type") != "null"), None)
            return fill(chosen, name)
        kind = node.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), None)
        if kind == "object":
            properties = node.get("properties")
            required = node.get("required")
            declared: dict[str, JsonValue] = properties if isinstance(properties, dict) else {}
            return {
                prop: fill(declared.get(prop, {}), prop)
                for prop in (required if isinstance(required, list) else [])
                if isinstance(prop, str)
            }
        if kind == "array":
            return []
        if kind == "string":
            return "kit"
        if kind in ("integer", "number"):
            minimum = node.get("minimum", 1)
            return max(1, int(minimum) if isinstance(minimum, int | float | str) else 1)
        if kind == "boolean":
            return False
        return None

    return fill(schema, None)


async def filled_probe(session: Session, op: Operation[Req, Ans]) -> str | None:
    """The probe of an operation the kit has none for: a request filled in from its schema."""
    wire = filled_request(op.request.schema, session)
    problem = first_error(op.request.validator, wire)
    if problem is not None:
        raise NotApplicableError(
            f"the kit cannot fill in a valid {op.name} request from its schema ({problem[0]}: {problem[1]})"
        )
    answer = await session.call(op, op.request.decode(wire), why=f"{op.name}, asked from its schema alone")
    kind = "refused " + ":".join(answer.refusal) if answer.refusal else "answered"
    return f"no probe of its own: a request filled in from its schema, {kind} as the embedded kernel, {shown(wire, 200)}"
