"""Asking the person through the client, in both protocol eras: the `Asker`s of `mnote_mcp.calls.confirmation`.

The question is a form-mode elicitation with no fields (`FORM`): the client shows the message and
accept / decline; Hermes 0.19.0 routes it to its approval prompt and accepts with empty content.
Only a client that declares form elicitation is asked (`can_elicit`); any other keeps today's
behaviour or is refused, as `--confirm-fallback` says.

- **2025-11-25** (`SessionAsker`): `elicitation/create` on the request's own channel while the call
  waits, within `--confirm-timeout`; giving up cancels the request on the client (the SDK sends
  `notifications/cancelled`). A channel that cannot carry a server request (streamable HTTP answering
  POSTs with one JSON body, mnote's default; `--stateless`) cannot ask.
- **2026-07-28** (`RetryAsker`): servers send no requests. The call ends with an `input_required`
  result (`input_required`) carrying the same form under `INPUT_KEY` and a `requestState` naming the
  question's digest and when it was asked; the client asks the person and retries the same call with
  the answer in `inputResponses`. The state is sealed by the SDK's `RequestStateBoundary` (AES-GCM
  under a key of this process, bound to the tool, its arguments and the caller: `install_boundary`),
  so a client can neither forge nor move an answer; mnote checks its age against
  `--confirm-timeout`.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import is_version_at_least
from pydantic import ValidationError

from mnote_mcp.base.secretfiles import read_secret
from mnote_mcp.calls.confirmation import Answer, Asker, ConfirmationPending, Question
from mnote_mcp.vocabulary.identity import Identity

logger = logging.getLogger(__name__)

INPUT_KEY = "mnote/confirm"  # the key of the question in `inputRequests` and of its answer
FORM: dict[str, Any] = {"type": "object", "properties": {}}  # accept or decline, nothing to fill in
MODERN = "2026-07-28"  # the first version that asks through `input_required` results
# How long the SDK accepts a sealed state at all; mnote's own check (`--confirm-timeout`) is stricter.
STATE_TTL = 24 * 3600.0
_STATE_VERSION = 1
_ANSWERS: frozenset[str] = frozenset({"accept", "decline", "cancel"})


def can_elicit(ctx: ServerRequestContext[Any, Any]) -> bool:
    """The client declared form elicitation (a bare `elicitation: {}` is form, as before modes)."""
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def asks_by_retry(ctx: ServerRequestContext[Any, Any]) -> bool:
    return is_version_at_least(ctx.protocol_version, MODERN)


def asker_for(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams, timeout: float
) -> Asker | None:
    """How this request can ask its person, or None when it cannot."""
    if not can_elicit(ctx):
        return None
    if asks_by_retry(ctx):
        return RetryAsker(params, timeout)
    if ctx.session.can_send_request:
        return SessionAsker(ctx, timeout)
    return None


def form_request(question: Question) -> types.ElicitRequest:
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(message=question.text, requested_schema=FORM)
    )


class SessionAsker:
    """2025-11-25: `elicitation/create` on the request's channel, answered while the call waits."""

    def __init__(self, ctx: ServerRequestContext[Any, Any], timeout: float) -> None:
        self.ctx = ctx
        self.timeout = timeout

    @property
    def prior(self) -> Mapping[str, Answer]:
        return {}

    async def ask(self, question: Question) -> Answer:
        with anyio.move_on_after(self.timeout):
            try:
                result = await self.ctx.session.send_request(
                    form_request(question),
                    types.ElicitResult,
                    metadata=ServerMessageMetadata(related_request_id=self.ctx.request_id),
                )
            except (MCPError, ValidationError) as error:
                # The client refused to ask or answered nonsense: nobody said yes.
                logger.warning("the client did not answer the confirmation of %s: %s", question.tool, error)
                return "cancel"
            return result.action
        return "timeout"


class RetryAsker:
    """2026-07-28: the question is this request's result; its answer comes with the retry."""

    def __init__(self, params: types.CallToolRequestParams, timeout: float) -> None:
        self._prior = _prior_answer(params.request_state, params.input_responses, timeout)

    @property
    def prior(self) -> Mapping[str, Answer]:
        return self._prior

    async def ask(self, question: Question) -> Answer:
        raise ConfirmationPending(question)


def input_required(question: Question) -> dict[str, Any]:
    """The `input_required` result asking `question` (its state sealed by the boundary on the way out)."""
    state = json.dumps({"v": _STATE_VERSION, "q": question.digest, "at": time.time()})
    result = types.InputRequiredResult(
        input_requests={INPUT_KEY: form_request(question)}, request_state=state
    )
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


def _prior_answer(
    state: str | None, responses: Mapping[str, Any] | None, timeout: float
) -> dict[str, Answer]:
    """The answer a retry carries, by the digest of the question it answers: only for a question
    this server asked (its state), and `timeout` when it came later than `timeout` seconds after."""
    if state is None or not responses or INPUT_KEY not in responses:
        return {}
    try:
        claims = json.loads(state)
        digest, asked_at = str(claims["q"]), float(claims["at"])
    except (ValueError, KeyError, TypeError):
        return {}
    if claims.get("v") != _STATE_VERSION:
        return {}
    answer = responses[INPUT_KEY]
    action = getattr(answer, "action", None)
    if action not in _ANSWERS:
        return {}  # not an elicitation answer: ask again
    if time.time() - asked_at > timeout:
        return {digest: "timeout"}
    return {digest: action}


def read_keys(path: Path) -> list[str]:
    """The keys of `--confirm-key-file`: a private file, one key per line, each at least 32 bytes."""
    keys = [line.strip() for line in read_secret(path).splitlines() if line.strip()]
    short = [number for number, key in enumerate(keys, 1) if len(key.encode()) < 32]
    if not keys or short:
        raise ValueError(f"{path}: every key must be at least 32 bytes (line {short[0] if short else 1})")
    return keys


def principal(identity: Identity) -> str:
    """Who a sealed state belongs to: the actor and the credential behind the connection."""
    return identity.principal


def install_boundary(
    server: Server[Any],
    identity_for: Callable[[ServerRequestContext[Any, Any]], Identity],
    keys: Sequence[str] = (),
) -> None:
    """Seal and check every `requestState` (the SDK's boundary; the low-level server has none by
    default) under `keys` (`--confirm-key-file`: the first seals, every one opens), or else a key of
    this process, when a retry must come back to the process that asked."""
    security = RequestStateSecurity(
        keys=list(keys) or [os.urandom(32)],
        ttl=STATE_TTL,
        bind_principal=lambda ctx: principal(identity_for(ctx)),
    )
    server.middleware.append(RequestStateBoundary(security, default_audience=server.name))
