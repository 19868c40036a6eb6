"""The kernel port relayed to mnote's runtime over HTTP (runtime protocol v1, docs/runtime-protocol.md).

What the tools get back must be exactly what the embedded kernel would have said, or a retryable
`mnote_tool_runtime_unavailable`: a refused connection, a timeout, a 5xx, a reply that does not follow
the protocol never escape as transport exceptions and never yield a half-decoded result.

Retries are bounded and only where repeating cannot write twice: a query reads, and a command carries
its idempotency key (the same key on every attempt), so the runtime replays instead of writing again.
They cover what did not reach the kernel or says "try again" (connection refused or dropped, pool
exhausted, 429/502/503/504). A read timeout is not retried: the runtime got the request and is slow,
and the caller, told `retryable: true`, decides whether to wait longer.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from typing import TYPE_CHECKING

import anyio
import httpx2

from mnote_mcp import __version__
from mnote_mcp.base.tracecontext import traceparent
from mnote_mcp.kernel.errors import MnoteError, Reason
from mnote_mcp.kernel.port import JSONObject
from mnote_mcp.kernel.protocol import (
    IDEMPOTENCY_HEADER,
    RETRY_STATUSES,
    SERVICE_TOKEN_STATUS,
    TRACEPARENT_HEADER,
    Ans,
    MalformedReplyError,
    Operation,
    Req,
    decode_error,
    encode_key,
    unavailable,
)
from mnote_mcp.kernel.relays.relay import Relay

if TYPE_CHECKING:
    from pydantic import JsonValue

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 10.0
DEFAULT_RETRIES = 2
CONNECT_TIMEOUT = 3.0
BACKOFF_BASE = 0.1
BACKOFF_CAP = 2.0
# A runtime on the same host or network: a few connections kept warm, a bounded burst.
LIMITS = httpx2.Limits(max_connections=32, max_keepalive_connections=8, keepalive_expiry=30.0)


class _AttemptError(Exception):
    """One attempt that did not produce an answer; `retry` says whether another attempt is safe."""

    def __init__(self, cause: Reason, *, retry: bool, status: int | None = None, wait: float | None = None):
        super().__init__(cause.value)
        self.cause = cause
        self.retry = retry
        self.status = status
        self.wait = wait


class HttpKernel(Relay):
    """One shared connection pool to one runtime, for every call of this server process."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        try:
            url = httpx2.URL(base_url)
        except httpx2.InvalidURL as exc:
            raise ValueError(f"--kernel {base_url!r}: {exc}") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"--kernel {base_url!r}: expected http://HOST:PORT or https://HOST:PORT")
        if timeout <= 0 or retries < 0:
            raise ValueError("the runtime timeout must be positive and the retry count not negative")
        self.base_url = base_url.rstrip("/")
        self.retries = retries
        headers = {"User-Agent": f"mnote-mcp/{__version__}", "Accept": "application/json"}
        if token and token.strip():  # a token read from a file often ends in a newline
            headers["Authorization"] = f"Bearer {token.strip()}"
        self._client = httpx2.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx2.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT)),
            limits=LIMITS,
            # The runtime is an internal service: an environment proxy must not see the service token.
            trust_env=False,
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    # -- one call, attempts and their outcomes -----------------------------------------------------

    async def call(self, op: Operation[Req, Ans], request: Req) -> Ans:
        wire = op.request.encode(request)
        body: JsonValue = None
        params: dict[str, str] | None = None
        if op.carrier is None:  # a GET: the request's fields are its query string
            assert isinstance(wire, dict)
            params = {name: str(value) for name, value in wire.items() if value is not None}
        else:
            body = wire
        trace_id = op.trace(request) if op.trace is not None else None
        attempts = self.retries + 1
        for attempt in range(1, attempts + 1):
            headers: dict[str, str] = {}
            if trace_id is not None:
                headers[TRACEPARENT_HEADER] = traceparent(trace_id)
            if op.key is not None:
                headers[IDEMPOTENCY_HEADER] = encode_key(op.key(request))
            try:
                return await self._attempt(op, json=body, params=params, headers=headers)
            except _AttemptError as failed:
                last_try = not failed.retry or attempt == attempts
                logger.warning(
                    "runtime %s %s attempt %d/%d failed: %s%s%s",
                    op.method,
                    op.path,
                    attempt,
                    attempts,
                    failed.cause,
                    f" (status {failed.status})" if failed.status else "",
                    f" trace={trace_id}" if trace_id else "",
                )
                if last_try:
                    details: dict[str, JsonValue] = {"attempts": attempt}
                    if failed.status is not None:
                        details["status"] = failed.status
                    raise unavailable("http", failed.cause, **details) from None
                await anyio.sleep(_backoff(attempt, failed.wait))
        raise AssertionError("unreachable")  # pragma: no cover

    async def _attempt(
        self,
        op: Operation[Req, Ans],
        *,
        json: JsonValue,
        params: Mapping[str, str] | None,
        headers: dict[str, str],
    ) -> Ans:
        try:
            response = await self._client.request(
                op.method, op.path, json=json, params=params, headers=headers
            )
        except (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout):
            raise _AttemptError(Reason.CONNECT, retry=True) from None
        except httpx2.TimeoutException:
            raise _AttemptError(Reason.TIMEOUT, retry=False) from None
        except (httpx2.RemoteProtocolError, httpx2.ReadError, httpx2.WriteError):
            # The connection broke mid-request (a stale keep-alive, a runtime that died): whether the
            # command ran is unknown, which the idempotency key makes safe to find out by asking again.
            raise _AttemptError(Reason.CONNECTION_LOST, retry=True) from None
        except httpx2.HTTPError:
            raise _AttemptError(Reason.TRANSPORT, retry=False) from None
        return self._interpret(op, response)

    def _interpret(self, op: Operation[Req, Ans], response: httpx2.Response) -> Ans:
        status = response.status_code
        if status == 200:
            body = _json_object(response)
            if body is None or op.reply_key not in body:
                raise _AttemptError(Reason.MALFORMED_REPLY, retry=False, status=status)
            try:
                return op.decode(body[op.reply_key])
            except MalformedReplyError as exc:
                logger.warning("runtime reply does not follow the protocol: %s", exc)
                raise _AttemptError(Reason.MALFORMED_REPLY, retry=False, status=status) from None
        if status == SERVICE_TOKEN_STATUS:
            logger.error("the runtime refused the service token: check MNOTE_RUNTIME_TOKEN")
            raise _AttemptError(Reason.SERVICE_TOKEN, retry=False, status=status)
        if status in RETRY_STATUSES:
            raise _AttemptError(Reason.STATUS, retry=True, status=status, wait=_retry_after(response))
        if 400 <= status < 500:
            body = _json_object(response)
            error: MnoteError | None = decode_error(body.get("error")) if body is not None else None
            if error is not None:
                raise error
        raise _AttemptError(Reason.STATUS, retry=False, status=status)


def _json_object(response: httpx2.Response) -> JSONObject | None:
    try:
        body = response.json()
    except ValueError:  # json.JSONDecodeError and UnicodeDecodeError are both ValueErrors
        return None
    return body if isinstance(body, dict) else None


def _retry_after(response: httpx2.Response) -> float | None:
    try:
        return max(0.0, float(response.headers.get("Retry-After", "")))
    except ValueError:
        return None


def _backoff(attempt: int, wait: float | None) -> float:
    """Exponential with jitter (half fixed, half random), or the runtime's Retry-After; capped."""
    if wait is not None:
        return min(wait, BACKOFF_CAP)
    delay = min(BACKOFF_CAP, BACKOFF_BASE * 2.0 ** (attempt - 1))
    return delay / 2 + random.uniform(0, delay / 2)
