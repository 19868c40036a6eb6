"""A real authorization server for the OAuth tests, and a browser for its sign-in pages.

`OidcProvider` runs `oidc-provider` (npm, a certified OpenID Provider; installed into `.ci/oidc` by
`.ci/run`) as a Node process configured by the test: its issuer and port, the resource servers it
issues tokens for (RFC 8707), its signing keys, its clients. The keys are generated here, so that a
restart with another set is a key rotation, and so that the bad-token tests can sign what the
provider never would with a key the provider publishes (a local key pair, used for those cases only).

`sign_in` is the person at the browser: it follows an authorization URL through the provider's sign-in
and consent forms (oidc-provider's development interactions, plain HTML forms) with HTTP requests and
returns where the provider finally redirects, the client's redirect URI with `code`, `state`, `iss`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from tests.support.helpers import ROOT
from tests.support.runtimes import free_port
from tests.support.timing import patience

OIDC_MODULES = ROOT / ".ci" / "oidc" / "node_modules"
PROVIDER_SCRIPT = Path(__file__).resolve().parent / "oidc_provider.mjs"
NODE22 = ROOT / ".ci" / "node" / "node_modules" / ".bin" / "node"
START_TIMEOUT = patience(30.0)
MNOTE_SCOPES = "mnote:read mnote:write mnote:artifacts"


def require_provider() -> None:
    """Skip (or, under `.ci/run`, fail) when oidc-provider or Node is not installed."""
    missing = None
    if not (OIDC_MODULES / "oidc-provider" / "package.json").exists():
        missing = f"oidc-provider is not installed in {OIDC_MODULES.parent} (bash .ci/run installs it)"
    elif node() is None:
        missing = "node is not installed"
    if missing is None:
        return
    if os.environ.get("MNOTE_REQUIRE_OIDC") == "1":
        pytest.fail(missing)
    pytest.skip(missing)


def node() -> str | None:
    """Node 22 from `.ci/node` (what oidc-provider asks for), else the one on PATH."""
    return str(NODE22) if NODE22.exists() else shutil.which("node")


@dataclass
class SigningKey:
    """A key pair the provider signs with (its private JWK goes into the provider's configuration)."""

    kid: str
    private: Any
    alg: str

    @classmethod
    def rsa(cls, kid: str) -> SigningKey:
        return cls(kid, rsa.generate_private_key(public_exponent=65537, key_size=2048), "RS256")

    @classmethod
    def ec(cls, kid: str) -> SigningKey:
        return cls(kid, ec.generate_private_key(ec.SECP256R1()), "ES256")

    def jwk(self) -> dict[str, Any]:
        to_jwk = RSAAlgorithm.to_jwk if self.alg.startswith(("RS", "PS")) else ECAlgorithm.to_jwk
        found: dict[str, Any] = json.loads(to_jwk(self.private))
        return {**found, "kid": self.kid, "use": "sig", "alg": self.alg}

    def public_pem(self) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return bytes(
            self.private.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )

    def sign(self, claims: Mapping[str, Any], **header: Any) -> str:
        """A token the provider's published key verifies, with whatever claims the test wants."""
        return jwt.encode(dict(claims), self.private, algorithm=self.alg, headers={"kid": self.kid, **header})


@dataclass
class OidcProvider:
    """oidc-provider on 127.0.0.1, restartable on the same port (and so the same issuer)."""

    workdir: Path
    resources: dict[str, dict[str, Any]]
    keys: list[SigningKey] = field(default_factory=lambda: [SigningKey.rsa("key-1")])
    clients: list[dict[str, Any]] = field(default_factory=list)
    registration: bool = True
    refresh_tokens: bool = False  # to every client allowed the grant, without offline_access
    short_lived_clients: dict[str, int] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[str] | None = None
    starts: int = 0

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.workdir / f"oidc-{self.starts}.log"

    def start(self) -> None:
        assert self.process is None or self.process.poll() is not None, "already running"
        self.starts += 1
        config = self.workdir / f"oidc-{self.starts}.json"
        config.write_text(
            json.dumps(
                {
                    "modules": str(OIDC_MODULES),
                    "issuer": self.issuer,
                    "port": self.port,
                    "jwks": {"keys": [key.jwk() for key in self.keys]},
                    "resources": self.resources,
                    "clients": self.clients,
                    "registration": self.registration,
                    "refresh_tokens": self.refresh_tokens,
                    "short_lived_clients": self.short_lived_clients,
                }
            )
        )
        node_binary = node()
        assert node_binary is not None
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [node_binary, str(PROVIDER_SCRIPT), str(config)],
                stdout=subprocess.PIPE,
                stderr=log,
                stdin=subprocess.DEVNULL,
                text=True,
            )
        ready = threading.Event()

        def wait_ready() -> None:
            assert self.process is not None and self.process.stdout is not None
            if self.process.stdout.readline().startswith("listening on"):
                ready.set()

        threading.Thread(target=wait_ready, daemon=True).start()
        if not ready.wait(START_TIMEOUT):
            self.stop()
            raise RuntimeError(f"oidc-provider did not start:\n{self.log.read_text()}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(patience(10))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(patience(10))

    def restart(self, keys: list[SigningKey] | None = None) -> None:
        """Stop and start again on the same port, with `keys` if given (a key rotation). What the
        provider held in memory (grants, sessions, dynamically registered clients) is gone."""
        self.stop()
        if keys is not None:
            self.keys = keys
        self.start()

    def client_credentials(self, client_id: str, secret: str, resource: str, scope: str) -> str:
        """An access token for `resource` by the client credentials grant."""
        answer = httpx2.post(
            f"{self.issuer}/token",
            data={"grant_type": "client_credentials", "resource": resource, "scope": scope},
            auth=(client_id, secret),
            timeout=patience(30),
            trust_env=False,
        )
        assert answer.status_code == 200, answer.text
        token: str = answer.json()["access_token"]
        return token


@contextmanager
def oidc_provider(
    workdir: Path, resources: dict[str, dict[str, Any]], **options: Any
) -> Iterator[OidcProvider]:
    require_provider()
    provider = OidcProvider(workdir, resources, **options)
    provider.start()
    try:
        yield provider
    finally:
        provider.stop()


def confidential_client(client_id: str, secret: str) -> dict[str, Any]:
    """A client of the client credentials grant (a service, no person)."""
    return {
        "client_id": client_id,
        "client_secret": secret,
        "grant_types": ["client_credentials"],
        "response_types": [],
        "redirect_uris": [],
    }


def introspecting_client(client_id: str, secret: str) -> dict[str, Any]:
    """A resource server's client at the provider: it may only introspect."""
    return {
        "client_id": client_id,
        "client_secret": secret,
        "grant_types": [],
        "response_types": [],
        "redirect_uris": [],
    }


# -- the person at the browser ----------------------------------------------------------------------


class _Forms(HTMLParser):
    """The forms of a page: action, method and the inputs' names and values."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, Any]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "form":
            self.forms.append(
                {"action": found.get("action") or "", "method": found.get("method"), "inputs": {}}
            )
        elif tag == "input" and self.forms and found.get("name"):
            self.forms[-1]["inputs"][found["name"]] = found.get("value") or ""


def sign_in(authorization_url: str, redirect_uri: str, login: str, *, steps: int = 12) -> str:
    """Open `authorization_url` as a browser would, sign in as `login` and consent to what is asked,
    following every redirect until one leads to `redirect_uri`; returns that URL (never fetched)."""
    with httpx2.Client(follow_redirects=False, timeout=patience(30), trust_env=False) as browser:
        url, form_data, method = authorization_url, None, "GET"
        for _ in range(steps):
            if url.startswith(redirect_uri):
                return url
            response = browser.request(method, url, data=form_data)
            if response.is_redirect:
                url, form_data, method = urljoin(url, response.headers["location"]), None, "GET"
                continue
            assert response.status_code == 200, f"{url}: {response.status_code} {response.text[:500]}"
            parser = _Forms()
            parser.feed(response.text)
            assert parser.forms, f"{url} shows no form: {response.text[:500]}"
            form = parser.forms[0]
            inputs = dict(form["inputs"])
            if "login" in inputs:
                inputs.update(login=login, password="any password")
            url, form_data, method = urljoin(url, form["action"]), inputs, "POST"
        raise AssertionError(f"no redirect to {redirect_uri} after {steps} steps")
