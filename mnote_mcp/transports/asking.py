"""`/mcp` in the 2025-11-25 era: one JSON body per POST, except a call that may have to ask the person.

mnote answers a POST with one JSON body (the spec lets a server choose per request, and it is cheaper
than an SSE stream: docs/performance.md). A JSON body holds the response and nothing else, so a
question to the person (`elicitation/create`, a request from the server inside the call) has no room
in it: until issue 31, a destructive write over `/mcp` was then made without asking, silently. Now
the transport chooses per request: a `tools/call` that may need consent (`confirmation.might_ask`: a
real write of a tool whose rule can ask, under the policy) is answered as an SSE stream, which carries
the question, whatever `--sse-responses` says; every other POST keeps its JSON body. A client that
does not accept `text/event-stream` keeps JSON bodies and cannot be asked (the confirmation result).

`AskingTransport` is the SDK's transport with its POST handling taking that choice; the SDK's own SSE
path serves the streams. `transports/consentpaths.py` says at start-up which paths can ask.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from http import HTTPStatus

import anyio
import pydantic_core
from mcp.server.streamable_http import (
    REQUEST_STREAM_BUFFER_SIZE,
    EventMessage,
    EventStore,
    StreamableHTTPServerTransport,
    check_accept_headers,
)
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp_types import INTERNAL_ERROR, JSONRPCError, JSONRPCRequest, JSONRPCResponse, jsonrpc_message_adapter
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

logger = logging.getLogger(__name__)

# Whether a request may have to ask the person (a `tools/call` the policy may confirm).
MayAsk = Callable[[JSONRPCRequest], bool]


class AskingTransport(StreamableHTTPServerTransport):
    """One JSON body per POST, an SSE stream for a call that may ask (`may_ask`)."""

    def __init__(
        self,
        mcp_session_id: str | None,
        *,
        may_ask: MayAsk,
        event_store: EventStore | None = None,
        security_settings: TransportSecuritySettings | None = None,
        retry_interval: int | None = None,
        idle_timeout: float | None = None,
    ) -> None:
        # The SDK's SSE mode underneath: its router delivers a call's own requests (the question)
        # to the call's stream, and its SSE path serves the streams this transport chooses.
        super().__init__(
            mcp_session_id,
            is_json_response_enabled=False,
            event_store=event_store,
            security_settings=security_settings,
            retry_interval=retry_interval,
            idle_timeout=idle_timeout,
        )
        self.may_ask = may_ask

    async def _validate_accept_header(self, request: Request, scope: Scope, send: Send) -> bool:
        """As with JSON bodies: `application/json` is enough (such a client is never asked)."""
        has_json, _ = check_accept_headers(request)
        if not has_json:
            response = self._create_error_response(
                "Not Acceptable: Client must accept application/json", HTTPStatus.NOT_ACCEPTABLE
            )
            await response(scope, request.receive, send)
        return has_json

    async def _handle_post_request(
        self, scope: Scope, request: Request, receive: Receive, send: Send
    ) -> None:
        message = await _request_in(request, self._check_content_type(request))
        if message is None or (check_accept_headers(request)[1] and self.may_ask(message)):
            # Anything but a well-formed request (the SDK's answers: 202, parse errors, ...), or a
            # call that may ask: the SDK's SSE stream.
            await super()._handle_post_request(scope, request, receive, send)
            return
        try:
            await self._answer_json(message, scope, request, receive, send)
        except Exception as error:  # as the SDK's POST handling does
            logger.exception("Error handling POST request")
            response = self._create_error_response(
                "Error handling POST request", HTTPStatus.INTERNAL_SERVER_ERROR, INTERNAL_ERROR
            )
            await response(scope, receive, send)
            if self._read_stream_writer is not None:
                await self._read_stream_writer.send(Exception(error))

    async def _answer_json(
        self, message: JSONRPCRequest, scope: Scope, request: Request, receive: Receive, send: Send
    ) -> None:
        """The SDK's JSON-body answer of a request (its checks first), never carrying a request of
        the server's: the call's metadata says it cannot send one."""
        if message.method == "initialize":
            other = self._get_session_id(request)
            if self.mcp_session_id and other and other != self.mcp_session_id:
                response = self._create_error_response(
                    "Not Found: Invalid or expired session ID", HTTPStatus.NOT_FOUND
                )
                await response(scope, receive, send)
                return
        elif not await self._validate_request_headers(request, send):
            return
        writer = self._read_stream_writer
        assert writer is not None  # connect() is running: the session manager started it
        request_id = str(message.id)
        self._request_streams[request_id] = anyio.create_memory_object_stream[EventMessage](
            REQUEST_STREAM_BUFFER_SIZE
        )
        reader = self._request_streams[request_id][1]
        metadata = ServerMessageMetadata(
            request_context=request,
            on_request_unanswered=partial(self._terminate_unanswered_request, message.id),
            can_send_request=False,
        )
        await writer.send(SessionMessage(message, metadata=metadata))
        try:
            while True:
                event = await reader.receive()
                if isinstance(event.message, JSONRPCResponse | JSONRPCError):
                    response = self._create_json_response(event.message)
                    break
                # A notification of this call: a JSON body has no room for it (as the SDK's JSON mode).
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            response = self._create_error_response(
                "Session terminated before the request completed",
                HTTPStatus.INTERNAL_SERVER_ERROR,
                INTERNAL_ERROR,
            )
        finally:
            await self._clean_up_memory_streams(request_id)
        await response(scope, receive, send)


async def _request_in(request: Request, json_body: bool) -> JSONRPCRequest | None:
    """The JSON-RPC request a POST carries, or None for anything else (left to the SDK to answer).
    The body is read once: Starlette keeps it for the SDK's own reading."""
    if not json_body:
        return None
    try:
        message = jsonrpc_message_adapter.validate_python(pydantic_core.from_json(await request.body()))
    except (ValueError, ValidationError):
        return None
    return message if isinstance(message, JSONRPCRequest) else None


def calls_that_may_ask(may_ask: Callable[[str, object], bool]) -> MayAsk:
    """`may_ask` of a tool's name and arguments, as a test of a JSON-RPC request."""

    def test(message: JSONRPCRequest) -> bool:
        if message.method != "tools/call" or not isinstance(message.params, dict):
            return False
        name = message.params.get("name")
        return isinstance(name, str) and may_ask(name, message.params.get("arguments"))

    return test
