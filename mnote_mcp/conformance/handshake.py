"""Before any data: the runtime says which protocol it speaks, refuses what it does not, guards its
service token, and holds the scratch workspace as the seed has it (`seed.loaded`, the gate: nothing
else is checked on data that is not the seed's)."""

from __future__ import annotations

from mnote_mcp.conformance.checks import Registry
from mnote_mcp.conformance.session import NotApplicableError, Session
from mnote_mcp.conformance.wire import CliWire, HttpWire, error_problem
from mnote_mcp.kernel.protocol import CLI_PROTOCOL_VERSION, GET_PAGE, HEALTH_PATH, PROTOCOL, decode_error

registry = Registry()
HTTP_ONLY = frozenset({"http"})
SEED_GATE = "seed.loaded"


@registry.check(
    "handshake.protocol",
    guarantees=f"HTTP: GET {HEALTH_PATH} answers 200 {{status: ok, protocol: {PROTOCOL}, version}} with no"
    f" token; mnote-cli: a request of version {CLI_PROTOCOL_VERSION} (or none) is answered, another"
    " version refused invalid_argument",
    breaks="Versioning: a relay waits for and trusts a runtime that names protocol v1",
)
async def protocol(s: Session) -> str | None:
    wire = s.wire
    if isinstance(wire, HttpWire):
        status, text, body, _ = await wire.header(HEALTH_PATH, "content-type", auth=False)
        expected = {"status": "ok", "protocol": PROTOCOL, "version": "(a string)"}
        s.expect(
            status == 200,
            f"GET {HEALTH_PATH} without a token must answer 200",
            expected=expected,
            actual=f"{status}: {text}",
        )
        s.expect(
            isinstance(body, dict)
            and body.get("status") == "ok"
            and body.get("protocol") == PROTOCOL
            and isinstance(body.get("version"), str),
            f"the health answer must name the protocol {PROTOCOL}",
            request=f"GET {HEALTH_PATH}",
            expected=expected,
            actual=body if body is not None else text,
        )
        assert isinstance(body, dict)
        return f"{body['protocol']}, version {body['version']}"
    assert isinstance(wire, CliWire)
    asked = {"op": "list_pages", "actorId": s.actor("nobody")}
    for envelope in (asked, {"version": CLI_PROTOCOL_VERSION, **asked}):
        problem, text, reply = await wire.run(envelope)
        s.expect(
            problem is None and reply == {"ok": True, "value": []},
            "a request of protocol version 1 (or none) must be answered",
            request=envelope,
            expected={"ok": True, "value": []},
            actual=problem or text,
        )
    later = {"version": CLI_PROTOCOL_VERSION + 1, **asked}
    problem, text, reply = await wire.run(later)
    error = decode_error(reply.get("error")) if isinstance(reply, dict) and reply.get("ok") is False else None
    s.expect(
        problem is None and error is not None and error.code.value == "mnote_tool_invalid_argument",
        "a request of another protocol version must be refused invalid_argument",
        request=later,
        expected={"ok": False, "error": {"code": "mnote_tool_invalid_argument", "reason": "envelope"}},
        actual=problem or text,
    )
    return f"version {CLI_PROTOCOL_VERSION} answered, version {CLI_PROTOCOL_VERSION + 1} refused"


@registry.check(
    "handshake.service_token",
    guarantees="a request without the service token, or with a wrong one, is answered 401 with"
    " WWW-Authenticate: Bearer and {error: {code: mnote_tool_unauthenticated, reason: service_token}}",
    breaks="The service token: only the relay may act as an actor",
    transports=HTTP_ONLY,
)
async def service_token(s: Session) -> str | None:
    wire = s.wire
    assert isinstance(wire, HttpWire)
    if wire.token is None:
        raise NotApplicableError(
            "no service token was given (MNOTE_RUNTIME_TOKEN or --runtime-token-file): nothing to refuse"
        )
    params = {"actorId": s.actor("nobody")}
    for name, headers in (("no token", {}), ("a wrong token", {"Authorization": "Bearer kit-wrong-token"})):
        status, text, body = await wire.request("GET", "/v1/pages", params=params, headers=headers)
        error = body.get("error") if isinstance(body, dict) else None
        s.expect(
            status == 401
            and isinstance(error, dict)
            and (error.get("code"), error.get("reason")) == ("mnote_tool_unauthenticated", "service_token"),
            f"GET /v1/pages with {name} must be refused 401 service_token",
            request=f"GET /v1/pages ({name})",
            expected={
                "status": 401,
                "error": {"code": "mnote_tool_unauthenticated", "reason": "service_token"},
            },
            actual=f"{status}: {text}",
        )
    return "refused without it and with a wrong one"


@registry.check(
    "handshake.unknown_operation",
    guarantees="HTTP: a route the runtime does not have is 404 without a protocol error body; mnote-cli:"
    " an unknown op is refused invalid_argument (exit status 0)",
    breaks="Versioning (additive changes): a relay tells a missing route from a refusal of the kernel",
)
async def unknown_operation(s: Session) -> str | None:
    wire = s.wire
    if isinstance(wire, HttpWire):
        status, text, body = await wire.request(
            "POST", "/v1/kit/no-such-operation", json={}, headers=wire.auth_headers()
        )
        refusal = decode_error(body.get("error")) if isinstance(body, dict) else None
        s.expect(
            status == 404 and refusal is None,
            "an unknown route must be 404, without an error body a relay would read as the kernel's refusal",
            request="POST /v1/kit/no-such-operation",
            expected="404, not {error: {...}}",
            actual=f"{status}: {text}",
        )
        return "404"
    assert isinstance(wire, CliWire)
    envelope = {"version": CLI_PROTOCOL_VERSION, "op": "kit_no_such_operation"}
    problem, text, reply = await wire.run(envelope)
    error = reply.get("error") if isinstance(reply, dict) and reply.get("ok") is False else None
    s.expect(
        problem is None
        and error_problem(error, None) is None
        and isinstance(error, dict)
        and error.get("code") == "mnote_tool_invalid_argument",
        "an unknown op must be refused invalid_argument in a reply (exit status 0)",
        request=envelope,
        expected={"ok": False, "error": {"code": "mnote_tool_invalid_argument"}},
        actual=problem or text,
    )
    return "refused invalid_argument"


@registry.check(
    SEED_GATE,
    guarantees="every page of the kit's seed is there, at revision 1, as the seed has it (read by an actor"
    " the seed lets read it); a failure stops the run: nothing else is checked on other data",
    breaks="(the run's precondition: load the seed, once per run)",
    operations=("get_page",),
)
async def seed_loaded(s: Session) -> str | None:
    pages = s.scratch.pages()
    for ws, page in pages:
        actor = "owner" if ws == s.ws else "stranger"
        await s.call(
            GET_PAGE,
            s.query(page, actor, ws=ws),
            why=f"the seeded page {ws}/{page} (load the seed: mnote-mcp runtime check --write-seed FILE"
            f" --tag {s.scratch.tag}; a seed serves one run)",
        )
    return f"{len(pages)} pages in {s.ws} and {s.scratch.other_ws}"
