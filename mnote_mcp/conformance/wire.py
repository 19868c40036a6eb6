"""How the kit reaches the runtime under test: one request of an operation, and its reply as it came.

The relays (`kernel/relays/http.py`, `kernel/relays/cli.py`) turn every reply that breaks the protocol into
`runtime_unavailable`, which is right for a server and useless to a runtime's authors: they need to
see what their runtime sent. So the kit sends exactly what the relays send (the same request bodies,
query strings, `Idempotency-Key` and `traceparent`, taken from the same operation rows), and keeps the
reply whole: an answer (its value read by the operation's own decoder, which checks it against the
generated schema first), a refusal (a protocol error body, with the status its code has over HTTP), or
why it is neither (`problem`).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import httpx2

from mnote_mcp import __version__
from mnote_mcp.base.tracecontext import traceparent
from mnote_mcp.kernel.errors import ErrorCode, MnoteError
from mnote_mcp.kernel.port import JSONObject
from mnote_mcp.kernel.protocol import (
    CLI_PROTOCOL_VERSION,
    ERROR,
    IDEMPOTENCY_HEADER,
    SERVICE_TOKEN_STATUS,
    STATUS_OF,
    TRACEPARENT_HEADER,
    Ans,
    MalformedReplyError,
    Operation,
    Req,
    encode_key,
    first_error,
)
from mnote_mcp.kernel.relays.cli import CliKernel

if TYPE_CHECKING:
    from pydantic import JsonValue

MAX_KEPT_CHARS = 256 * 1024  # of a reply's text, for the report and the canary scan of refusals


@dataclass(frozen=True)
class Exchange:
    """One request to the runtime and what came back."""

    op: str
    request: JsonValue  # what the operation's request was on the wire (a body, or a GET's fields)
    status: int | None  # the HTTP status; None over the mnote-cli protocol
    text: str  # the reply as it came (its first MAX_KEPT_CHARS characters)
    answered: bool = False
    value: JsonValue = None  # the answer, when `answered`
    error: JSONObject | None = None  # the refusal's error body
    problem: str | None = None  # why the reply is neither an answer nor a refusal the protocol allows


class Wire(ABC):
    """One runtime, over one transport."""

    transport: str

    @abstractmethod
    async def send(self, op: Operation[Req, Ans], request: Req) -> Exchange:
        """`request` (the operation's port type) sent as the relays send it; never raises for what the
        runtime does, only for a bug in the kit."""

    @abstractmethod
    async def aclose(self) -> None:
        """Release what the transport holds."""


def classify_answer(
    op: Operation[Req, Ans], wire: JsonValue, value: JsonValue, *, status: int | None, text: str
) -> Exchange:
    try:
        op.decode(value)
    except MalformedReplyError as exc:
        return Exchange(op.name, wire, status, text, problem=f"the answer breaks {op.name}'s schema: {exc}")
    except Exception as exc:  # a value the schema lets through but the port cannot read
        return Exchange(op.name, wire, status, text, problem=f"the answer cannot be read: {exc!r}"[:500])
    return Exchange(op.name, wire, status, text, answered=True, value=value)


def classify_error(
    op: Operation[Req, Ans], wire: JsonValue, body: object, *, status: int | None, text: str
) -> Exchange:
    problem = error_problem(body, status)
    if problem is not None:
        return Exchange(op.name, wire, status, text, problem=problem)
    assert isinstance(body, dict)
    return Exchange(op.name, wire, status, text, error=body)


def error_problem(body: object, status: int | None) -> str | None:
    """Why `body` (what came under `error`) is not a protocol refusal with the status its code has."""
    if not isinstance(body, Mapping):
        return "the refusal has no error body ({code, reason, details})"
    broken = first_error(ERROR.validator, body)
    if broken is not None:
        return f"the error body breaks its schema at {broken[0]}: {broken[1]}"
    try:
        code = ErrorCode(str(body["code"]))
    except ValueError:
        return f"{body['code']!r} is no error code of the protocol"
    if status is not None and STATUS_OF[code] != status:
        return f"{code.value} came with status {status}; the protocol gives it {STATUS_OF[code]}"
    return None


# -- HTTP ----------------------------------------------------------------------------------------


class HttpWire(Wire):
    transport = "http"

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None,
        timeout: float,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        url = httpx2.URL(base_url)
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(
                f"{base_url!r}: expected http://HOST:PORT, https://HOST:PORT or cli:PATH [ARGS...]"
            )
        self.base_url = base_url.rstrip("/")
        self.token = token.strip() if token and token.strip() else None
        headers = {"User-Agent": f"mnote-mcp/{__version__} (runtime check)", "Accept": "application/json"}
        self._client = httpx2.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx2.Timeout(timeout),
            trust_env=False,  # as the relay: the service token never goes through an environment proxy
            transport=transport,
        )
        self.timeout = timeout

    async def aclose(self) -> None:
        await self._client.aclose()

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    async def send(self, op: Operation[Req, Ans], request: Req) -> Exchange:
        wire = op.request.encode(request)
        headers = self.auth_headers()
        if op.trace is not None:
            headers[TRACEPARENT_HEADER] = traceparent(op.trace(request))
        if op.key is not None:
            headers[IDEMPOTENCY_HEADER] = encode_key(op.key(request))
        return await self.exchange(op, wire, headers)

    async def exchange(
        self, op: Operation[Req, Ans], wire: JsonValue, headers: Mapping[str, str]
    ) -> Exchange:
        """`wire` sent as `op`'s request with exactly these headers (the envelope checks vary them)."""
        params: dict[str, str] | None = None
        body: JsonValue = None
        if op.carrier is None:
            assert isinstance(wire, dict)
            params = {name: str(value) for name, value in wire.items() if value is not None}
        else:
            body = wire
        status, text, reply = await self.request(
            op.method, op.path, json=body, params=params, headers=headers
        )
        if status is None:
            return Exchange(op.name, wire, None, "", problem=text)
        kept = text[:MAX_KEPT_CHARS]
        if status == 200:
            if not isinstance(reply, dict) or op.reply_key not in reply:
                return Exchange(
                    op.name, wire, status, kept, problem=f"200 without a JSON object holding {op.reply_key!r}"
                )
            return classify_answer(op, wire, reply[op.reply_key], status=status, text=kept)
        if status == SERVICE_TOKEN_STATUS:
            why = "the runtime refused the service token (MNOTE_RUNTIME_TOKEN, --runtime-token-file)"
            return Exchange(op.name, wire, status, kept, problem=f"401: {why}")
        error = reply.get("error") if isinstance(reply, dict) else None
        if error is None:
            return Exchange(
                op.name, wire, status, kept, problem=f"status {status} without a protocol error body"
            )
        return classify_error(op, wire, error, status=status, text=kept)

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: JsonValue = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        content: bytes | None = None,
    ) -> tuple[int | None, str, JsonValue]:
        """(status, text, the text as JSON or None); status None and the cause as text when no reply came."""
        try:
            with anyio.fail_after(self.timeout):  # the whole exchange, whatever the transport
                if content is not None:
                    response = await self._client.request(
                        method, path, content=content, params=params, headers=headers
                    )
                else:
                    response = await self._client.request(
                        method, path, json=json, params=params, headers=headers
                    )
                await response.aread()
        except (httpx2.TimeoutException, TimeoutError):
            return None, f"no reply within {self.timeout:g} s (--request-timeout)", None
        except httpx2.HTTPError as exc:
            return None, f"no reply: {type(exc).__name__}: {exc}"[:500], None
        text = response.text
        try:
            parsed: JsonValue = response.json()
        except ValueError:
            parsed = None
        return response.status_code, text, parsed

    async def header(
        self, path: str, name: str, *, auth: bool
    ) -> tuple[int | None, str, JsonValue, str | None]:
        """A GET of `path` (with or without the service token) and one header of its reply."""
        try:
            with anyio.fail_after(self.timeout):
                response = await self._client.get(path, headers=self.auth_headers() if auth else {})
        except (httpx2.TimeoutException, TimeoutError):
            return None, f"no reply within {self.timeout:g} s (--request-timeout)", None, None
        except httpx2.HTTPError as exc:
            return None, f"no reply: {type(exc).__name__}: {exc}"[:500], None, None
        try:
            parsed: JsonValue = response.json()
        except ValueError:
            parsed = None
        return response.status_code, response.text, parsed, response.headers.get(name)


# -- the mnote-cli protocol ------------------------------------------------------------------------------


class CliWire(Wire):
    transport = "cli"

    def __init__(self, argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None) -> None:
        self.argv = list(argv)
        self._cli = CliKernel(argv, timeout=timeout, env=env)
        self.timeout = timeout

    async def aclose(self) -> None:
        """Nothing outlives a request: each program is reaped before its reply is read."""

    async def send(self, op: Operation[Req, Ans], request: Req) -> Exchange:
        return await self.exchange(op, op.request.encode(request), op.trace(request) if op.trace else None)

    async def exchange(
        self, op: Operation[Req, Ans], wire: JsonValue, trace_id: str | None = None
    ) -> Exchange:
        """`wire` sent as `op`'s request as it is (the envelope checks send broken ones)."""
        fields: dict[str, JsonValue]
        if op.carrier is None:
            assert isinstance(wire, dict)
            fields = dict(wire)
        else:
            fields = {op.carrier: wire}
        if trace_id is not None:
            fields["traceparent"] = traceparent(trace_id)
        envelope = {"version": CLI_PROTOCOL_VERSION, "op": op.name, **fields}
        problem, text, reply = await self.run(envelope)
        if problem is not None:
            return Exchange(op.name, wire, None, text, problem=problem)
        if isinstance(reply, dict) and reply.get("ok") is True and "value" in reply:
            return classify_answer(op, wire, reply["value"], status=None, text=text)
        if isinstance(reply, dict) and reply.get("ok") is False:
            return classify_error(op, wire, reply.get("error"), status=None, text=text)
        return Exchange(
            op.name, wire, None, text, problem="the reply is neither {ok: true, value} nor {ok: false, error}"
        )

    async def run(self, envelope: Mapping[str, object]) -> tuple[str | None, str, JsonValue]:
        """(why there is no reply or None, the reply's text, the reply as JSON)."""
        data = json.dumps(envelope, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        try:
            status, stdout, stderr = await self._cli.run_once(data)
        except MnoteError as error:  # spawn, timeout, an output past the relay's bound
            cause = error.details.get("cause", error.reason.value)
            return f"no reply: {cause} (timeout {self.timeout:g} s)", "", None
        text = stdout.decode("utf-8", "replace")[:MAX_KEPT_CHARS]
        if status != 0:
            tail = stderr.decode("utf-8", "replace").strip()[-400:]
            return f"the program exited with status {status}: {tail}", text, None
        try:
            reply: JsonValue = json.loads(stdout)
        except ValueError:
            return "the reply is not one JSON document", text, None
        return None, text, reply
