"""Who may call over HTTP: bearer tokens, each mapping to an actor, its scopes, and optionally the
workspaces it may touch; where the tokens come from (`resolve_auth`); and the scopes every endpoint and
every connection are held to.

Tokens are kept as SHA-256 digests and every presented token is compared against every entry with
`hmac.compare_digest`, so neither the file nor the timing of a refusal gives a token away. A tokens
file must not be readable by group or others (mode 0600), as for SSH keys.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mnote_mcp.base.net import is_loopback
from mnote_mcp.base.secretfiles import SecretFileError, check_private, load_or_generate, locked, write_private
from mnote_mcp.config import ServerConfig
from mnote_mcp.settings import default_store_path
from mnote_mcp.vocabulary.identity import Identity
from mnote_mcp.vocabulary.scopes import Scope, parse_scopes

if TYPE_CHECKING:  # `mnote-mcp token` runs without loading the MCP SDK
    from starlette.types import ASGIApp

    from mnote_mcp.transports.auth.bearer import CallerToken
    from mnote_mcp.transports.auth.oauth import ResourceServer, Verifier

logger = logging.getLogger("mnote_mcp")
TOKEN_BYTES = 32
# Every MCP endpoint needs a token carrying page.read: there is nothing an agent can do in mnote
# without reading the page first. Lacking it is the HTTP-level 403 insufficient_scope; lacking a
# write scope is the tool-level mnote_tool_permission_denied.
ENDPOINT_SCOPES = [Scope.PAGE_READ.value]


class AuthConfigError(SecretFileError):
    """A tokens file or token setting that cannot be used; the message says how to fix it."""


@dataclass(frozen=True, slots=True)
class TokenGrant:
    actor_id: str
    scopes: frozenset[Scope]
    workspaces: frozenset[str] | None = None
    name: str | None = None


def digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class TokenStore:
    """The tokens a server accepts. A store read from a tokens file can be replaced while serving
    (`TokensFileWatcher`), or set to refuse every token while its file cannot be trusted."""

    def __init__(self, entries: Iterable[tuple[bytes, TokenGrant]]) -> None:
        self._entries = tuple(entries)
        if not self._entries:
            raise AuthConfigError("no token configured")
        self._by_digest = {stored: grant for stored, grant in self._entries}
        self.refusing: str | None = None  # why every token is refused now, or None

    def __len__(self) -> int:
        return len(self._entries)

    def verify(self, token: str) -> TokenGrant | None:
        presented = digest(token)
        found: TokenGrant | None = None
        entries = self._entries  # one consistent set, whatever a reload does meanwhile
        for stored, grant in entries:  # no early exit: every entry costs the same
            if hmac.compare_digest(presented, stored):
                found = grant
        return None if self.refusing is not None else found

    def grant_of(self, subject: str) -> TokenGrant | None:
        """The grant of the token whose digest (hex) is `subject`, if it is still accepted."""
        if self.refusing is not None:
            return None
        try:
            return self._by_digest.get(bytes.fromhex(subject))
        except ValueError:
            return None

    def replace(self, other: TokenStore) -> None:
        self._entries, self._by_digest = other._entries, other._by_digest
        self.refusing = None

    def refuse(self, why: str) -> None:
        self.refusing = why

    @classmethod
    def single(cls, token: str, grant: TokenGrant) -> TokenStore:
        return cls([(digest(token), grant)])

    @classmethod
    def from_file(cls, path: Path) -> TokenStore:
        check_private(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise AuthConfigError(f"{path}: {exc}") from exc
        entries = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(entries, list):
            raise AuthConfigError(f'{path}: expected {{"tokens": [...]}}')
        return cls(_entry(path, index, item) for index, item in enumerate(entries))


def _entry(path: Path, index: int, item: Any) -> tuple[bytes, TokenGrant]:
    where = f"{path}: tokens[{index}]"
    if not isinstance(item, Mapping):
        raise AuthConfigError(f"{where} is not an object")
    if isinstance(item.get("sha256"), str):
        try:
            stored = bytes.fromhex(item["sha256"])
        except ValueError as exc:
            raise AuthConfigError(f"{where}.sha256 is not hex") from exc
        if len(stored) != hashlib.sha256().digest_size:
            raise AuthConfigError(f"{where}.sha256 is not a SHA-256 digest")
    elif isinstance(item.get("token"), str) and item["token"]:
        stored = digest(item["token"])
    else:
        raise AuthConfigError(f"{where} needs 'sha256' (hex digest of the token) or 'token'")
    actor = item.get("actorId")
    if not isinstance(actor, str) or not actor:
        raise AuthConfigError(f"{where}.actorId is missing")
    try:
        scopes = parse_scopes(item.get("scopes", [s.value for s in Scope]))
    except ValueError as exc:
        raise AuthConfigError(f"{where}.scopes: {exc}") from exc
    workspaces = item.get("workspaces")
    if workspaces is not None and not (
        isinstance(workspaces, list) and all(isinstance(w, str) for w in workspaces)
    ):
        raise AuthConfigError(f"{where}.workspaces must be a list of workspace ids")
    name = item.get("name") if isinstance(item.get("name"), str) else None
    return stored, TokenGrant(actor, scopes, frozenset(workspaces) if workspaces is not None else None, name)


def add_token(path: Path, grant: TokenGrant) -> str:
    """Mint a token for `grant`, append its digest to the tokens file (created 0600), return it once.

    Safe to run concurrently: the read-change-write holds the file's lock, and the new file replaces
    the old one whole, so a server reloading it never reads half of it."""
    with locked(path):
        return _add_token(path, grant)


def _add_token(path: Path, grant: TokenGrant) -> str:
    data = _read_tokens_file(path, missing_ok=True)
    token = secrets.token_urlsafe(TOKEN_BYTES)
    entry: dict[str, Any] = {
        "id": f"tok_{secrets.token_hex(6)}",
        "sha256": digest(token).hex(),
        "actorId": grant.actor_id,
        "scopes": sorted(s.value for s in grant.scopes),
        "created": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
    }
    if grant.workspaces is not None:
        entry["workspaces"] = sorted(grant.workspaces)
    if grant.name:
        entry["name"] = grant.name
    data["tokens"].append(entry)
    write_private(path, json.dumps(data, indent=2) + "\n")
    return token


def _read_tokens_file(path: Path, *, missing_ok: bool = False) -> dict[str, Any]:
    """A tokens file's JSON, checked private and shaped `{"tokens": [...]}`, for a change to it."""
    if not path.exists():
        if missing_ok:
            return {"tokens": []}
        raise AuthConfigError(f"{path}: no such tokens file")
    check_private(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise AuthConfigError(f"{path}: {exc}; fix or remove it first") from exc
    if not isinstance(data, dict) or not isinstance(data.get("tokens"), list):
        raise AuthConfigError(f'{path}: expected {{"tokens": [...]}}')
    return data


def token_id(entry: Mapping[str, Any]) -> str:
    """How `token list` and `token revoke` name an entry: its `id`, or (an entry written before ids,
    or by hand) the first 12 hex digits of its digest, which give nothing of the token away."""
    if isinstance(entry.get("id"), str) and entry["id"]:
        return str(entry["id"])
    if isinstance(entry.get("sha256"), str):
        return "sha256:" + str(entry["sha256"])[:12]
    if isinstance(entry.get("token"), str):
        return "sha256:" + digest(entry["token"]).hex()[:12]
    return "?"


def list_tokens(path: Path) -> list[dict[str, Any]]:
    """The tokens of a tokens file as `token list` shows them: id, actor, scopes, workspaces, name,
    created; never the token nor its digest."""
    shown = ("actorId", "scopes", "workspaces", "name", "created")
    return [
        {"id": token_id(entry), **{key: entry[key] for key in shown if key in entry}}
        for entry in _read_tokens_file(path)["tokens"]
        if isinstance(entry, Mapping)
    ]


def revoke_token(path: Path, wanted: str) -> dict[str, Any] | None:
    """Remove the token `token list` names `wanted` from the file (under its lock, replaced whole);
    the entry removed, or None when there is none by that id. A server re-reading the file refuses
    the token from its next check on (`--auth-reload-interval`)."""
    with locked(path):
        data = _read_tokens_file(path)
        kept = [
            entry
            for entry in data["tokens"]
            if not (isinstance(entry, Mapping) and token_id(entry) == wanted)
        ]
        if len(kept) == len(data["tokens"]):
            return None
        removed = next(entry for entry in data["tokens"] if entry not in kept)
        data["tokens"] = kept
        write_private(path, json.dumps(data, indent=2) + "\n")
        return {"id": wanted, "actorId": removed.get("actorId")}


class GrantVerifier:
    """The SDK's `TokenVerifier`, backed by a `TokenStore`."""

    def __init__(self, store: TokenStore) -> None:
        self.store = store

    async def verify_token(self, token: str) -> CallerToken | None:
        from mnote_mcp.transports.auth.bearer import CallerToken

        grant = self.store.verify(token)
        if grant is None:
            return None
        scopes = sorted(s.value for s in grant.scopes)
        return CallerToken(
            token="",  # never keep the secret around in request state
            # The actor rides as the client id too: with the subject, the principal the SDK binds a
            # session to.
            client_id=grant.actor_id,
            # The token's digest: the SDK binds a session to the principal that opened it, so a
            # session belongs to this token, not to its actor (another token of the actor gets 404).
            subject=digest(token).hex(),
            scopes=scopes,
            actor_id=grant.actor_id,
            capabilities=scopes,
            workspaces=sorted(grant.workspaces) if grant.workspaces is not None else None,
        )


@dataclass(frozen=True)
class AuthSetup:
    """How HTTP callers sign in: a token store (`--auth-file`, `MNOTE_TOKEN`, a generated token), an
    OAuth resource server (`--auth oauth`), or neither (`--unsafe-no-auth`)."""

    store: TokenStore | None
    description: str
    source: Path | None = None  # the tokens file the store is read from, re-read while serving
    oauth: ResourceServer | None = None

    @property
    def required(self) -> bool:
        return self.store is not None or self.oauth is not None

    def verifier(self) -> Verifier | None:
        """The SDK's `TokenVerifier` for this mode (None: no token needed)."""
        if self.oauth is not None:
            return self.oauth.verifier
        return GrantVerifier(self.store) if self.store is not None else None

    def gate(self, endpoint: ASGIApp) -> ASGIApp:
        """`endpoint` behind the token check (from the headers alone, before anything else)."""
        from mnote_mcp.transports.auth.bearer import RequireToken

        if self.oauth is not None:
            required = list(self.oauth.policy.required_scopes)
            return RequireToken(endpoint, required, self.oauth.resource_metadata_url)
        return RequireToken(endpoint, ENDPOINT_SCOPES)


def endpoint_grant(store: TokenStore, subject: str) -> TokenGrant | None:
    """The grant of the token whose digest (hex) is `subject`, if it is still accepted and carries
    the scopes every endpoint needs (`ENDPOINT_SCOPES`)."""
    grant = store.grant_of(subject)
    if grant is None or not {Scope(name) for name in ENDPOINT_SCOPES} <= grant.scopes:
        return None
    return grant


class TokensFileWatcher:
    """Re-reads a tokens file when it changes (checked every `interval` seconds): a token removed
    from it is refused from then on, one added is accepted; then `changed()` runs (which ends what
    the tokens no longer accepted still hold open).

    Fails closed: while the file is readable by others, does not parse, or is gone, every token is
    refused (401) and an error is logged at each change; the last good set is not kept, since a file
    that became world-readable may have leaked, and a garbled one may be a removal half done. Once the
    file is good again, its tokens are accepted again.
    """

    def __init__(
        self,
        store: TokenStore,
        path: Path,
        interval: float,
        changed: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.store = store
        self.path = path
        self.interval = interval
        self.changed = changed
        self._seen = self._signature()

    def _signature(self) -> tuple[int, ...] | None:
        try:
            info = self.path.stat()
        except OSError:
            return None
        return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_mode)

    async def run(self) -> None:
        import anyio

        while True:
            await anyio.sleep(self.interval)
            if self.check() and self.changed is not None:
                try:
                    await self.changed()
                except Exception:  # the watcher must go on: the next reload tries again
                    logger.exception("ending what the tokens no longer accepted hold open failed")

    def check(self) -> bool:
        """Re-read the file if it changed; whether it did."""
        signature = self._signature()
        if signature == self._seen:
            return False
        self._seen = signature
        try:
            fresh = TokenStore.from_file(self.path)
        except SecretFileError as exc:
            self.store.refuse(str(exc))
            logger.error(
                "tokens file changed and cannot be used; refusing every token until it is fixed: %s", exc
            )
            return True
        self.store.replace(fresh)
        logger.warning("tokens file %s changed: %d token(s) accepted now", self.path, len(fresh))
        return True


def resolve_auth(config: ServerConfig) -> AuthSetup:
    """Access tokens of an authorization server with --auth oauth; else tokens from --auth-file, else
    MNOTE_TOKEN, else a generated token kept in a 0600 file."""
    if config.auth == "oauth":
        from mnote_mcp.transports.auth.oauth import resolve_oauth

        server = resolve_oauth(config)
        return AuthSetup(None, server.description, oauth=server)
    if config.unsafe_no_auth:
        if not is_loopback(config.host):
            raise AuthConfigError("--unsafe-no-auth is only allowed on a loopback address")
        logger.warning(
            "!!! --unsafe-no-auth: every local process can act as %s on %s without a token !!!",
            config.actor,
            config.host,
        )
        return AuthSetup(None, "none (--unsafe-no-auth)")
    if config.auth_file is not None:
        store = TokenStore.from_file(config.auth_file)
        return AuthSetup(store, f"{len(store)} token(s) from {config.auth_file}", config.auth_file)
    if not config.actor:
        raise AuthConfigError(
            "MNOTE_TOKEN and a generated token act as --actor; give an actor or --auth-file"
        )
    grant = TokenGrant(actor_id=config.actor, scopes=config.granted_scopes)
    if config.token:
        return AuthSetup(TokenStore.single(config.token, grant), f"MNOTE_TOKEN as {config.actor}")
    path = config.token_file or default_store_path().with_name("http-token")
    token, created = load_or_generate(path, TOKEN_BYTES)
    logger.warning(
        "%s bearer token for %s in %s (send 'Authorization: Bearer <token>')",
        "generated a" if created else "using the",
        config.actor,
        path,
    )
    return AuthSetup(TokenStore.single(token, grant), f"token file {path} as {config.actor}")


def within(identity: Identity, ceiling: frozenset[Scope]) -> Identity:
    """The server's static configuration (read-only, --scope) is an upper bound on any token."""
    return identity if identity.scopes <= ceiling else replace(identity, scopes=identity.scopes & ceiling)
