"""`mnote-mcp runtime serve`: a kernel behind the runtime protocol v1 over HTTP (Starlette + uvicorn).

Every operation of `protocol.OPERATIONS` is a route, answered by one `endpoint` (a POST's body or a
GET's query string, through `service.answer`); `_Runtime.route` wraps it with what every endpoint
shares: the test record, the service token (from the headers, before any body is read), the body read
whole within its deadline and size, and the mapping of a refusal to its status and error body. An
operation added to the table is served with no change here.
What one client may hold (connections, header and body deadlines, body and header sizes) is the MCP
transport's code and flags (`mnote_mcp/base/httpguard.py`). How it stops (`--shutdown-grace`, then the
protocol's `shutting_down` refusal, never a bare 500) is `runtime/stopping.py`.
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, request_response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mnote_mcp import __version__
from mnote_mcp.base.httpguard import ClientLimits, CloseUnreadBodies, ReadBody, guarded_protocol
from mnote_mcp.base.net import is_loopback
from mnote_mcp.base.secretfiles import load_or_generate
from mnote_mcp.base.tracecontext import trace_id_of
from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.port import JSONObject, Kernel
from mnote_mcp.kernel.protocol import (
    HEALTH_PATH,
    IDEMPOTENCY_HEADER,
    OPERATIONS,
    PROTOCOL,
    SERVICE_TOKEN_STATUS,
    STATUS_OF,
    TRACEPARENT_HEADER,
    Operation,
    decode_key,
)
from mnote_mcp.runtime import faults, service
from mnote_mcp.runtime.stopping import RETRY_AFTER_SECONDS, Requests, StoppingServer, shutting_down

if TYPE_CHECKING:
    from pydantic import JsonValue

logger = logging.getLogger(__name__)
Endpoint = Callable[[Request, Kernel], Awaitable[JSONObject]]


async def _json_body(request: Request) -> JsonValue:
    try:
        body: JsonValue = json.loads(await request.body())
    except ValueError:
        raise service.invalid("", "the body is not JSON") from None
    return body


def _traceparent(request: Request) -> str | None:
    return trace_id_of(request.headers.get(TRACEPARENT_HEADER))


def _query_string(op: Operation[Any, Any], request: Request) -> dict[str, JsonValue]:
    """A GET's request: its query parameters, those the schema declares integers read as integers."""
    properties = op.request.schema.get("properties")
    declared = properties if isinstance(properties, dict) else {}
    fields: dict[str, JsonValue] = {}
    for name, text in request.query_params.items():
        kind = declared.get(name)
        kinds = kind.get("type") if isinstance(kind, dict) else None
        if kinds == "integer" or (isinstance(kinds, list) and "integer" in kinds):
            try:
                fields[name] = int(text)
            except ValueError:
                raise service.invalid(f"/{name}", "not an integer") from None
        else:
            fields[name] = text
    return service.flat_fields(op, fields)


# -- the endpoints: one per operation, and health ---------------------------------------------------


async def endpoint(
    op: Operation[Any, Any], request: Request, kernel: Kernel, *, max_audit_records: int | None = None
) -> JSONObject:
    """`{reply_key: answer}` to one request of `op`: a POST's body, or a GET's query string."""
    key: str | None = None
    if op.key is not None:
        header = request.headers.get(IDEMPOTENCY_HEADER)
        if header is None:
            raise service.invalid("", f"the {IDEMPOTENCY_HEADER} header is required")
        key = decode_key(header)
    value = _query_string(op, request) if op.carrier is None else await _json_body(request)
    answer = await service.answer(
        op,
        kernel,
        value,
        idempotency_key=key,
        traceparent_trace_id=_traceparent(request),
        max_audit_records=max_audit_records,
    )
    return {op.reply_key: answer}


async def health(request: Request, kernel: Kernel) -> JSONObject:
    return {"status": "ok", "protocol": PROTOCOL, "version": __version__}


# -- what every endpoint shares -----------------------------------------------------------------


class _Runtime:
    def __init__(
        self, kernel: Kernel, token: str | None, record: Path | None, limits: ClientLimits, requests: Requests
    ) -> None:
        self.kernel = kernel
        self.requests = requests
        self._token = token.strip().encode("utf-8") if token and token.strip() else None
        self._record = record
        self._limits = limits

    def route(self, path: str, method: str, endpoint: Endpoint, *, public: bool = False) -> Route:
        async def answer(request: Request) -> Response:
            try:
                return JSONResponse(await endpoint(request, self.kernel))
            except MnoteError as error:
                return JSONResponse({"error": error.to_wire()}, status_code=STATUS_OF[error.code])
            except Exception:
                logger.exception("runtime %s %s failed unexpectedly", request.method, request.url.path)
                internal = MnoteError(ErrorCode.INTERNAL, Reason.UNEXPECTED)
                return JSONResponse({"error": internal.to_wire()}, status_code=STATUS_OF[internal.code])

        # the body is read whole, within its deadline and size, before the endpoint runs
        run = ReadBody(
            request_response(answer),
            max_bytes=self._limits.max_body_bytes,
            timeout=self._limits.body_timeout,
            too_large=_too_large(self._limits.max_body_bytes),
        )

        async def handle(scope: Scope, receive: Receive, send: Send) -> None:
            request = Request(scope)
            self._write_record(request)
            started = time.perf_counter()
            status = [0]

            async def sending(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status[0] = message["status"]
                await send(message)

            if not (public or self._authorized(request)):
                # from the headers alone: the body of a refused request is never read
                await _unauthorized()(scope, receive, sending)
            elif self.requests.closing and not public:
                await _shutting_down()(scope, receive, sending)
            else:
                with self.requests.running() as running:
                    await run(scope, receive, sending)
                if running.cancelled_caught and not status[0]:  # stopped past the grace, unanswered
                    await _shutting_down()(scope, receive, sending)
            if not public:
                logger.info(
                    "%s %s %d %.1fms%s",
                    method,
                    path,
                    status[0],
                    (time.perf_counter() - started) * 1000,
                    f" trace={trace}" if (trace := _traceparent(request)) else "",
                )

        return Route(path, _Endpoint(handle), methods=[method])

    def _authorized(self, request: Request) -> bool:
        if self._token is None:
            return True
        scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
        # Constant-time, so the comparison does not tell an attacker how much of a guess was right.
        return scheme.lower() == "bearer" and hmac.compare_digest(credentials.strip().encode(), self._token)

    def _write_record(self, request: Request) -> None:
        """Test hook (`--record FILE`): what arrived, as one JSON line, before anything is done with it."""
        if self._record is None:
            return
        entry = {
            "method": request.method,
            "path": request.url.path,
            "query": dict(request.query_params),
            "traceparent": request.headers.get(TRACEPARENT_HEADER),
            "idempotencyKey": request.headers.get(IDEMPOTENCY_HEADER),
            "authorization": "Authorization" in request.headers,
        }
        with self._record.open("a", encoding="utf-8") as sink:
            sink.write(json.dumps(entry, ensure_ascii=False) + "\n")


def _unauthorized() -> Response:
    return JSONResponse(
        {"error": MnoteError(ErrorCode.UNAUTHENTICATED, Reason.SERVICE_TOKEN).to_wire()},
        status_code=SERVICE_TOKEN_STATUS,
        headers={"WWW-Authenticate": 'Bearer realm="mnote-runtime"'},
    )


def _shutting_down() -> Response:
    """The runtime is stopping: the protocol's retryable refusal (503), and the connection closed."""
    return JSONResponse(
        {"error": shutting_down().to_wire()},
        status_code=STATUS_OF[ErrorCode.RUNTIME_UNAVAILABLE],
        headers={"Retry-After": str(RETRY_AFTER_SECONDS), "Connection": "close"},
    )


def _too_large(limit: int) -> Response:
    """A body over `--max-body-bytes`: the caller's to fix (a smaller command, or a larger limit), so
    the protocol's `invalid_argument`, which the HTTP adapter passes on rather than retries."""
    error = service.invalid("", f"the request body is over {limit} bytes (runtime serve --max-body-bytes)")
    return JSONResponse({"error": error.to_wire()}, status_code=413)


class _Endpoint:
    """An ASGI callable as an object: Starlette's `Route` takes a plain function for a request handler."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def create_app(
    kernel: Kernel,
    *,
    limits: ClientLimits,
    token: str | None = None,
    record: Path | None = None,
    max_audit_records: int | None = None,
    requests: Requests | None = None,
) -> ASGIApp:
    """The runtime's ASGI app; it owns `kernel` and closes it when the server shuts down. A request's
    body is read within `limits`, and a refusal of an unread body closes the connection; the
    connection-level limits are the protocol's that `serve_runtime` gives uvicorn. `requests` are the
    requests running, which the server stops (`stopping.StoppingServer`)."""
    runtime = _Runtime(kernel, token, record, limits, requests or Requests())
    routes = [runtime.route(HEALTH_PATH, "GET", health, public=True)] + [
        runtime.route(op.path, op.method, partial(endpoint, op, max_audit_records=max_audit_records))
        for op in OPERATIONS.values()
    ]

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await kernel.aclose()

    return CloseUnreadBodies(Starlette(routes=routes, lifespan=lifespan))


def serve_runtime(
    open_kernel: Callable[[], Kernel],
    *,
    host: str,
    port: int,
    token: str | None,
    record: Path | None,
    description: str,
    limits: ClientLimits,
    max_audit_records: int | None = None,
    token_path: Path | None = None,
    shutdown_grace: float = 5.0,
) -> None:
    """Serve until SIGINT/SIGTERM; then the requests in flight get `shutdown_grace` seconds to answer
    (`stopping.py`), uvicorn closes the connections and the lifespan closes the kernel.
    The service token required is `token`, else the one kept in `token_path` (generated there, 0600,
    once the store is open); with neither, none (loopback only)."""
    import uvicorn

    token = (token or "").strip() or None
    if not token and token_path is None and not is_loopback(host):
        raise ValueError(
            f"binding the runtime to {host} needs a service token (MNOTE_RUNTIME_TOKEN or --token-file)"
        )
    faults.warn_if_enabled()
    kernel = open_kernel()
    if token is None and token_path is not None:
        token, created = load_or_generate(token_path)
        logger.warning(
            "%s service token in %s: relays on this machine read it there (--kernel http://%s:%d)",
            "generated a" if created else "using the",
            token_path,
            host,
            port,
        )
    logger.info(
        "mnote runtime (%s) on http://%s:%d: kernel=%s token=%s%s",
        PROTOCOL,
        host,
        port,
        description,
        "required" if token else "none (--unsafe-no-auth: loopback only)",
        f" record={record}" if record else "",
    )
    requests = Requests()
    app = create_app(
        kernel,
        token=token,
        record=record,
        limits=limits,
        max_audit_records=max_audit_records,
        requests=requests,
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        # the connection cap, the header deadline and the header bound, as on the MCP transport
        http=guarded_protocol(limits.max_connections, limits.header_timeout, limits.http_parser),
        log_config=None,
        access_log=False,
        # the requests were given their grace and answered already (StoppingServer); this only bounds
        # the writing of their answers
        timeout_graceful_shutdown=2,
    )
    StoppingServer(config, requests, shutdown_grace).run()
