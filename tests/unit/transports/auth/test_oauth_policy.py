"""`transports/auth/oauth_policy.py`: what an accepted token's claims grant (OAuth scopes to capability
scopes, the actor, the principal a session is bound to) and the introspection answer's dates."""

from __future__ import annotations

import time

import pytest

from mnote_mcp.config import DEFAULT_SCOPE_MAP, scope_map
from mnote_mcp.transports.auth.bearer import TokenRefusedError
from mnote_mcp.transports.auth.oauth_policy import Policy, check_dates

RESOURCE = "https://mnote.example.org/mcp"
ISSUER = "https://id.example.org"


def policy(**changes: object) -> Policy:
    values: dict[str, object] = {
        "resource": RESOURCE,
        "scope_map": DEFAULT_SCOPE_MAP,
        "required_scopes": ("mnote:read",),
        "actor_claim": "sub",
        "leeway": 30.0,
        "max_token_bytes": 8192,
        **changes,
    }
    return Policy(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("claims", "capabilities"),
    [
        ({"scope": "mnote:read"}, ["page.read"]),
        ({"scope": "openid mnote:read mnote:write offline_access"}, ["page.read", "page.write"]),
        ({"scp": ["mnote:artifacts", "mnote:read"]}, ["artifact.write", "page.read"]),
        ({"scope": "page.read page.write admin"}, []),  # only mapped OAuth scopes grant anything
        ({}, []),
    ],
)
def test_oauth_scopes_grant_capability_scopes_through_the_map(
    claims: dict[str, object], capabilities: list[str]
) -> None:
    caller = policy().caller({"sub": "user_1", **claims}, ISSUER)
    assert caller.capabilities == capabilities and caller.actor_id == "user_1"


def test_a_custom_map_may_grant_two_capabilities_for_one_scope() -> None:
    mapped = scope_map("notes=page.read,notes=page.write")
    assert policy(scope_map=mapped).caller({"sub": "u", "scope": "notes"}, ISSUER).capabilities == [
        "page.read",
        "page.write",
    ]


def test_the_actor_claim_and_the_principal() -> None:
    caller = policy(actor_claim="email").caller(
        {"sub": "abc123", "email": "ann@example.org", "client_id": "hermes", "exp": 1000}, ISSUER
    )
    # The actor from the configured claim; the session's principal is (client, issuer, subject).
    assert (caller.actor_id, caller.subject, caller.client_id) == ("ann@example.org", "abc123", "hermes")
    assert caller.claims == {"iss": ISSUER} and caller.token == "" and caller.expires_at == 1030
    with pytest.raises(TokenRefusedError, match="no email claim naming an actor"):
        policy(actor_claim="email").caller({"sub": "abc123"}, ISSUER)
    with pytest.raises(TokenRefusedError, match="no sub claim"):
        policy().caller({"sub": 42}, ISSUER)


def test_the_resource_is_named_with_or_without_a_trailing_slash() -> None:
    assert policy().audiences == [RESOURCE, RESOURCE + "/"]
    assert policy(resource="https://mnote.example.org/").audiences == [
        "https://mnote.example.org",
        "https://mnote.example.org/",
    ]


def test_introspected_dates_with_leeway() -> None:
    now = time.time()
    check_dates({"exp": now - 10, "nbf": now + 10}, 30)
    with pytest.raises(TokenRefusedError, match="token expired"):
        check_dates({"exp": now - 31}, 30)
    with pytest.raises(TokenRefusedError, match="not yet valid"):
        check_dates({"nbf": now + 31}, 30)


def test_a_token_over_the_size_limit_or_of_other_characters_is_refused_unparsed() -> None:
    """RFC 6750 §2.1's b64token: letters, digits, `-._~+/`, then `=` padding (issue 30: what is not
    one never reaches the issuer)."""
    policy(max_token_bytes=10).check_form("x" * 10)
    policy(max_token_bytes=100).check_form("aZ09-._~+/==")
    with pytest.raises(TokenRefusedError, match="token too large"):
        policy(max_token_bytes=10).check_form("x" * 11)
    for token in ("", "a b", "a=b", "ä", 'a"b', "a\nb", "=", "a,b"):
        with pytest.raises(TokenRefusedError, match="malformed token"):
            policy(max_token_bytes=100).check_form(token)
