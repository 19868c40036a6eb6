"""Identity and correlation bindings of one HTTP request: the bearer token's actor, scopes and
workspaces; `X-Mnote-Session-Id`, `X-Mnote-Run-Id` and `traceparent` as connection-level ids (below
arguments and `_meta` in precedence)."""

from __future__ import annotations

from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser

from mnote_mcp.base.tracecontext import trace_id_of
from mnote_mcp.transports.auth.bearer import CallerToken
from mnote_mcp.transports.runs import client_run
from mnote_mcp.vocabulary.identity import Identity
from mnote_mcp.vocabulary.scopes import parse_scopes

SESSION_HEADER = "x-mnote-session-id"
RUN_HEADER = "x-mnote-run-id"


def identity_from_request(request: Any, fallback: Identity | None) -> Identity:
    """The caller of one HTTP request. Without a token (only with --unsafe-no-auth) the configured
    actor stands in; with neither, the call is unauthenticated."""
    headers = request.headers if request is not None else {}
    bindings: dict[str, str] = {}
    if session := headers.get(SESSION_HEADER):
        bindings["sessionId"] = session
    if run := headers.get(RUN_HEADER):
        bindings["runId"] = run
    if trace := trace_id_of(headers.get("traceparent")):
        bindings["traceId"] = trace
    connection = (
        headers.get("mcp-session-id")
        or (request.query_params.get("session_id") if request else None)
        or client_run(headers)
    )
    # One MCP session (or SSE connection) is one run unless the client says otherwise: both generated
    # ids follow the transport's session id, so every call of a session joins up in the audit trail.
    # Without a session, the HTTP client's run (`transports/runs.py`: its `mnote-run` cookie).
    extra: dict[str, Any] = (
        {"generated_session_id": f"sess_{connection}", "generated_run_id": f"run_{connection}"}
        if connection
        else {}
    )
    user = request.scope.get("user") if request is not None else None
    if isinstance(user, AuthenticatedUser) and isinstance(user.access_token, CallerToken):
        token = user.access_token
        return Identity(
            actor_id=token.actor_id,
            scopes=parse_scopes(token.capabilities),
            bindings=bindings,
            workspaces=frozenset(token.workspaces) if token.workspaces is not None else None,
            credential=token.subject,
            expires_at=token.expires_at,
            **extra,
        )
    if fallback is not None:
        return Identity(
            actor_id=fallback.actor_id,
            scopes=fallback.scopes,
            bindings={**fallback.bindings, **bindings},
            **extra,
        )
    return Identity(actor_id=None, scopes=frozenset(), bindings=bindings, **extra)
