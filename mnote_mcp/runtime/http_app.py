"""`mnote-mcp runtime serve`: a kernel behind the runtime protocol v1 over HTTP (Starlette + uvicorn).

Each endpoint is one small function from a request to the JSON value of its reply; `_Runtime.route`
wraps it with what every endpoint shares: the test record, the service token (from the headers,
before any body is read), the body read whole within its deadline and size, and the mapping of a
refusal to its status and error body. Adding an operation is one function and one line in `routes`.
What one client may hold (connections, header and body deadlines, body and header sizes) is the MCP
transport's code and flags (`mnote_mcp/httpguard.py`).
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
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, request_response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mnote_mcp import __version__
from mnote_mcp.httpguard import ClientLimits, CloseUnreadBodies, ReadBody, guarded_protocol
from mnote_mcp.httplisten import GuardedServer
from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.port import Kernel
from mnote_mcp.kernel.protocol import (
    AUDIT_TRAIL,
    AUTHORIZE,
    EXECUTE,
    GET_PAGE,
    HEALTH_PATH,
    IDEMPOTENCY_HEADER,
    LIST_PAGES,
    PAGE_HISTORY,
    PAGE_REVISIONS,
    PROTOCOL,
    SEARCH_PAGES,
    SERVICE_TOKEN_STATUS,
    STATUS_OF,
    TRACEPARENT_HEADER,
    decode_key,
)
from mnote_mcp.net import is_loopback
from mnote_mcp.runtime import faults, service
from mnote_mcp.secretfiles import load_or_generate
from mnote_mcp.tracecontext import trace_id_of

logger = logging.getLogger(__name__)
Endpoint = Callable[[Request, Kernel], Awaitable[dict[str, Any]]]


def _invalid(pointer: str, reason: str) -> MnoteError:
    return MnoteError(ErrorCode.INVALID_ARGUMENT, Reason.ENVELOPE, {"pointer": pointer, "reason": reason})


async def _json_body(request: Request) -> Any:
    try:
        return json.loads(await request.body())
    except ValueError:
        raise _invalid("", "the body is not JSON") from None


def _traceparent(request: Request) -> str | None:
    return trace_id_of(request.headers.get(TRACEPARENT_HEADER))


# -- endpoints ---------------------------------------------------------------------------------


async def execute(request: Request, kernel: Kernel) -> dict[str, Any]:
    key = request.headers.get(IDEMPOTENCY_HEADER)
    if key is None:
        raise _invalid("", f"the {IDEMPOTENCY_HEADER} header is required")
    outcome = await service.execute(
        kernel,
        await _json_body(request),
        idempotency_key=decode_key(key),
        traceparent_trace_id=_traceparent(request),
    )
    return {EXECUTE.reply_key: outcome}


async def get_page(request: Request, kernel: Kernel) -> dict[str, Any]:
    page = await service.get_page(
        kernel, await _json_body(request), traceparent_trace_id=_traceparent(request)
    )
    return {GET_PAGE.reply_key: page}


async def page_history(request: Request, kernel: Kernel) -> dict[str, Any]:
    history = await service.page_history(
        kernel, await _json_body(request), traceparent_trace_id=_traceparent(request)
    )
    return {PAGE_HISTORY.reply_key: history}


async def search_pages(request: Request, kernel: Kernel) -> dict[str, Any]:
    hits = await service.search_pages(
        kernel, await _json_body(request), traceparent_trace_id=_traceparent(request)
    )
    return {SEARCH_PAGES.reply_key: hits}


async def authorize(request: Request, kernel: Kernel) -> dict[str, Any]:
    return {AUTHORIZE.reply_key: await service.authorize(kernel, await _json_body(request))}


async def list_pages(request: Request, kernel: Kernel) -> dict[str, Any]:
    return {LIST_PAGES.reply_key: await service.list_pages(kernel, request.query_params.get("actorId"))}


async def page_revisions(request: Request, kernel: Kernel) -> dict[str, Any]:
    return {PAGE_REVISIONS.reply_key: await service.page_revisions(kernel, await _json_body(request))}


async def audit_trail(request: Request, kernel: Kernel, *, max_records: int | None = None) -> dict[str, Any]:
    params = request.query_params
    query: dict[str, Any] = {"traceId": params.get("traceId"), "commandId": params.get("commandId")}
    if "limit" in params:
        try:
            query["limit"] = int(params["limit"])
        except ValueError:
            raise _invalid("/limit", "not an integer") from None
    return {AUDIT_TRAIL.reply_key: await service.audit_trail(kernel, query, max_records=max_records)}


async def health(request: Request, kernel: Kernel) -> dict[str, Any]:
    return {"status": "ok", "protocol": PROTOCOL, "version": __version__}


# -- what every endpoint shares -----------------------------------------------------------------


class _Runtime:
    def __init__(self, kernel: Kernel, token: str | None, record: Path | None, limits: ClientLimits) -> None:
        self.kernel = kernel
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

            if public or self._authorized(request):
                await run(scope, receive, sending)
            else:  # from the headers alone: the body of a refused request is never read
                await _unauthorized()(scope, receive, sending)
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


def _too_large(limit: int) -> Response:
    """A body over `--max-body-bytes`: the caller's to fix (a smaller command, or a larger limit), so
    the protocol's `invalid_argument`, which the HTTP adapter passes on rather than retries."""
    reason = f"the request body is over {limit} bytes (runtime serve --max-body-bytes)"
    error = MnoteError(ErrorCode.INVALID_ARGUMENT, Reason.ENVELOPE, {"pointer": "", "reason": reason})
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
) -> ASGIApp:
    """The runtime's ASGI app; it owns `kernel` and closes it when the server shuts down. A request's
    body is read within `limits`, and a refusal of an unread body closes the connection; the
    connection-level limits are the protocol's that `serve_runtime` gives uvicorn."""
    runtime = _Runtime(kernel, token, record, limits)
    routes = [
        runtime.route(HEALTH_PATH, "GET", health, public=True),
        runtime.route(EXECUTE.path, EXECUTE.method, execute),
        runtime.route(GET_PAGE.path, GET_PAGE.method, get_page),
        runtime.route(AUTHORIZE.path, AUTHORIZE.method, authorize),
        runtime.route(LIST_PAGES.path, LIST_PAGES.method, list_pages),
        runtime.route(PAGE_REVISIONS.path, PAGE_REVISIONS.method, page_revisions),
        runtime.route(PAGE_HISTORY.path, PAGE_HISTORY.method, page_history),
        runtime.route(SEARCH_PAGES.path, SEARCH_PAGES.method, search_pages),
        runtime.route(
            AUDIT_TRAIL.path, AUDIT_TRAIL.method, partial(audit_trail, max_records=max_audit_records)
        ),
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
) -> None:
    """Serve until SIGINT/SIGTERM; uvicorn shuts down gracefully and the lifespan closes the kernel.
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
    app = create_app(kernel, token=token, record=record, limits=limits, max_audit_records=max_audit_records)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        # the connection cap, the header deadline and the header bound, as on the MCP transport
        http=guarded_protocol(limits.max_connections, limits.header_timeout, limits.http_parser),
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=5,
    )
    GuardedServer(config).run()
