"""`mnote-mcp runtime serve`: a kernel behind the runtime protocol v1 over HTTP (Starlette + uvicorn).

Each endpoint is one small function from a request to the JSON value of its reply; `_Runtime.route`
wraps it with what every endpoint shares: the service token, the test record, and the mapping of a
refusal to its status and error body. Adding an operation is one function and one line in `routes`.
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mnote_mcp import __version__
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


async def audit_trail(request: Request, kernel: Kernel) -> dict[str, Any]:
    params = request.query_params
    query: dict[str, Any] = {"traceId": params.get("traceId"), "commandId": params.get("commandId")}
    if "limit" in params:
        try:
            query["limit"] = int(params["limit"])
        except ValueError:
            raise _invalid("/limit", "not an integer") from None
    return {AUDIT_TRAIL.reply_key: await service.audit_trail(kernel, query)}


async def health(request: Request, kernel: Kernel) -> dict[str, Any]:
    return {"status": "ok", "protocol": PROTOCOL, "version": __version__}


# -- what every endpoint shares -----------------------------------------------------------------


class _Runtime:
    def __init__(self, kernel: Kernel, token: str | None, record: Path | None) -> None:
        self.kernel = kernel
        self._token = token.strip().encode("utf-8") if token and token.strip() else None
        self._record = record

    def route(self, path: str, method: str, endpoint: Endpoint, *, public: bool = False) -> Route:
        async def handle(request: Request) -> Response:
            self._write_record(request)
            started = time.perf_counter()
            response = await self._answer(request, endpoint, public)
            if not public:
                logger.info(
                    "%s %s %d %.1fms%s",
                    method,
                    path,
                    response.status_code,
                    (time.perf_counter() - started) * 1000,
                    f" trace={trace}" if (trace := _traceparent(request)) else "",
                )
            return response

        return Route(path, handle, methods=[method])

    async def _answer(self, request: Request, endpoint: Endpoint, public: bool) -> Response:
        if not public and not self._authorized(request):
            return JSONResponse(
                {"error": MnoteError(ErrorCode.UNAUTHENTICATED, Reason.SERVICE_TOKEN).to_wire()},
                status_code=SERVICE_TOKEN_STATUS,
                headers={"WWW-Authenticate": 'Bearer realm="mnote-runtime"'},
            )
        try:
            return JSONResponse(await endpoint(request, self.kernel))
        except MnoteError as error:
            return JSONResponse({"error": error.to_wire()}, status_code=STATUS_OF[error.code])
        except Exception:
            logger.exception("runtime %s %s failed unexpectedly", request.method, request.url.path)
            internal = MnoteError(ErrorCode.INTERNAL, Reason.UNEXPECTED)
            return JSONResponse({"error": internal.to_wire()}, status_code=STATUS_OF[internal.code])

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


def create_app(kernel: Kernel, *, token: str | None = None, record: Path | None = None) -> Starlette:
    """The runtime's ASGI app; it owns `kernel` and closes it when the server shuts down."""
    runtime = _Runtime(kernel, token, record)
    routes = [
        runtime.route(HEALTH_PATH, "GET", health, public=True),
        runtime.route(EXECUTE.path, EXECUTE.method, execute),
        runtime.route(GET_PAGE.path, GET_PAGE.method, get_page),
        runtime.route(AUTHORIZE.path, AUTHORIZE.method, authorize),
        runtime.route(LIST_PAGES.path, LIST_PAGES.method, list_pages),
        runtime.route(PAGE_REVISIONS.path, PAGE_REVISIONS.method, page_revisions),
        runtime.route(PAGE_HISTORY.path, PAGE_HISTORY.method, page_history),
        runtime.route(SEARCH_PAGES.path, SEARCH_PAGES.method, search_pages),
        runtime.route(AUDIT_TRAIL.path, AUDIT_TRAIL.method, audit_trail),
    ]

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await kernel.aclose()

    return Starlette(routes=routes, lifespan=lifespan)


def serve_runtime(
    open_kernel: Callable[[], Kernel],
    *,
    host: str,
    port: int,
    token: str | None,
    record: Path | None,
    description: str,
) -> None:
    """Serve until SIGINT/SIGTERM; uvicorn shuts down gracefully and the lifespan closes the kernel."""
    import uvicorn

    token = (token or "").strip() or None
    if not token and not is_loopback(host):
        raise ValueError(
            f"binding the runtime to {host} needs a service token (--token or MNOTE_RUNTIME_TOKEN)"
        )
    faults.warn_if_enabled()
    kernel = open_kernel()
    logger.info(
        "mnote runtime (%s) on http://%s:%d: kernel=%s token=%s%s",
        PROTOCOL,
        host,
        port,
        description,
        "required" if token else "none (loopback only)",
        f" record={record}" if record else "",
    )
    app = create_app(kernel, token=token, record=record)
    config = uvicorn.Config(
        app, host=host, port=port, log_config=None, access_log=False, timeout_graceful_shutdown=5
    )
    uvicorn.Server(config).run()
