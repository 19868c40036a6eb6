"""Hermes (hermes-agent 0.19.0, `.ci/hermes`) signing in to mnote through a real authorization server
(oidc-provider) with its own OAuth client (`tools/mcp_oauth.py`: the MCP SDK's `OAuthClientProvider`),
on the shipped example `examples/hermes-oauth.yaml`, verbatim but for the port and the issuer.

Hermes signs in the way its users do: `hermes mcp login mnote-oauth` once (Hermes starts its browser
flow only on a terminal; the test gives it a pseudo-terminal and does the person's part: it follows
the URL Hermes prints through the provider's forms and opens the redirect, which reaches Hermes's
callback listener). From then on Hermes runs unattended on the token it kept: its MCP client lists
mnote's tools and calls them, and when the access token expires it refreshes it without a person.
"""

from __future__ import annotations

import json
import shutil
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest

from mnote_mcp.tools.catalog import ALL_TOOLS
from tests.clients.consent_scenario import KEPT, PLANTED, TARGET, audit_trail, consent_model, outcome
from tests.clients.hermes.fake_model import scripted_model
from tests.clients.hermes.harness import (
    ADDRESS_PLACEHOLDER,
    demo_store,
    example_config,
    example_serve_command,
    hermes_driver,
    hermes_login,
    model_name,
    model_section,
    require_hermes,
    run_agent_loop,
    unwrap,
    write_home,
)
from tests.support.helpers import run_cli
from tests.support.http_helpers import RunningServer, http_server
from tests.support.oidc import MNOTE_SCOPES, OidcProvider, oidc_provider, require_provider
from tests.support.runtimes import free_port

pytestmark = [pytest.mark.hermes, pytest.mark.e2e]

KEY = "mnote-oauth"
ISSUER_PLACEHOLDER = "https://id.example.org"
TOKEN_LIFETIME = 6  # seconds: short enough that the test sees Hermes refresh one
CONSENT_PAGE = {
    "id": "doc_consent_oauth",
    "title": "Risks (oauth)",
    "blocks": [
        {
            "id": "oauth_risks",
            "type": "bulleted_list",
            "text": "Risks",
            "children": [{"type": "paragraph", "text": f"Risk {n}."} for n in (1, 2)],
        }
    ],
}


@dataclass
class SignedIn:
    provider: OidcProvider
    server: RunningServer
    home: Path
    db: Path
    login_output: str

    @property
    def tokens_file(self) -> Path:
        return self.home / "mcp-tokens" / f"{KEY}.json"

    def access_token(self) -> str:
        token: str = json.loads(self.tokens_file.read_text())["access_token"]
        return token


@pytest.fixture(scope="module")
def signed_in(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SignedIn]:
    require_hermes()
    require_provider()
    base = tmp_path_factory.mktemp("hermes-oauth")
    port = free_port()
    address = f"127.0.0.1:{port}"
    resources = {f"http://{address}/mcp": {"scope": MNOTE_SCOPES, "ttl": TOKEN_LIFETIME}}
    with oidc_provider(base, resources, registration=True, refresh_tokens=True) as provider:
        db = demo_store(base / "mnote.db", CONSENT_PAGE, PLANTED, TARGET)
        args = [
            arg.replace(ADDRESS_PLACEHOLDER, address).replace(ISSUER_PLACEHOLDER, provider.issuer)
            for arg in example_serve_command("hermes-oauth.yaml")
        ]
        args = [str(port) if arg == "8765" else arg for arg in args]
        with http_server(db, *args) as server:
            home = write_home(
                base / "home", example_config("hermes-oauth.yaml", {ADDRESS_PLACEHOLDER: address})
            )
            printed = hermes_login(home, KEY, "user_1")
            yield SignedIn(provider, server, home, db, printed)


def test_hermes_signs_in_once_then_calls_unattended(signed_in: SignedIn, tmp_path: Path) -> None:
    assert f"Authenticated — {len(ALL_TOOLS)} tool(s) available" in signed_in.login_output, (
        signed_in.login_output
    )
    assert stat.S_IMODE(signed_in.tokens_file.stat().st_mode) == 0o600
    with hermes_driver(signed_in.home, tmp_path / "hermes.log") as driver:
        given = {d["function"]["name"] for d in driver.discover(KEY)}
        assert model_name(KEY, "mnote.page.get") in given
        assert len([name for name in given if name.startswith(model_name(KEY, "mnote_"))]) == len(ALL_TOOLS)
        page = unwrap(driver.call(model_name(KEY, "mnote.page.get"), workspaceId="ws_1", documentId="doc_1"))
        assert page["ok"], page

        # The access token expires; Hermes refreshes it on its own and the next call goes through.
        before = signed_in.access_token()
        expires = json.loads(signed_in.tokens_file.read_text())["expires_at"]
        time.sleep(max(0.0, expires + 1 - time.time()))  # the token's lifetime, not a wait for an event
        note = unwrap(
            driver.call(
                model_name(KEY, "mnote.artifact.create_ai_note"),
                workspaceId="ws_1",
                documentId="doc_1",
                content="written by Hermes after a refresh",
                idempotencyKey="hermes-oauth-note",
                dryRun=False,
            )
        )
    assert note["ok"], note
    assert signed_in.access_token() != before, "Hermes refreshed the token"
    records = [json.loads(line) for line in run_cli("audit", "--db", str(signed_in.db)).stdout.splitlines()]
    mine = [record for record in records if record.get("commandId") == note["audit"]["commandId"]]
    assert [record["actorId"] for record in mine] == ["user_1"], "audited under the person who signed in"
    assert signed_in.access_token() not in signed_in.server.log and before not in signed_in.server.log


def test_hermes_signed_in_is_asked_before_a_destructive_delete(signed_in: SignedIn, tmp_path: Path) -> None:
    """Issue 31: over OAuth (the example's server command, `/mcp` without `--sse-responses`) Hermes
    showed no approval prompt and the delete of a list with its children was applied. Now Hermes asks
    at its approval prompt: denied, nothing is written; approved, the delete is written once; and the
    agent's own run is undone unasked."""
    page = {"workspaceId": "ws_1", "documentId": "doc_consent_oauth"}
    with hermes_driver(signed_in.home, tmp_path / "hermes.log") as driver:
        driver.discover(KEY)
        delete_tool = model_name(KEY, "mnote.block.delete")
        arguments = {**page, "blockIds": ["oauth_risks"], "dryRun": False}
        denied, asked = driver.answered(delete_tool, "d", **arguments, idempotencyKey="oauth-delete-1")
        approved, _ = driver.answered(delete_tool, "o", **arguments, idempotencyKey="oauth-delete-2")
        written = unwrap(approved)
        undo = {
            **page,
            "undoRunId": written["result"]["runId"],
            "idempotencyKey": "oauth-undo",
            "dryRun": False,
        }
        undone, unasked = driver.answered(model_name(KEY, "mnote.page.revert"), "d", **undo)
    assert "[o]nce" in asked and "Risks (oauth)" in asked, asked[-2000:]
    assert unwrap(denied)["error"]["details"]["confirmation"] == "declined"
    assert written["ok"] and written["audit"]["effect"] == "write", written
    assert unwrap(undone)["ok"] and "[o]nce" not in unasked
    records = [json.loads(line) for line in run_cli("audit", "--db", str(signed_in.db)).stdout.splitlines()]
    mine = [r for r in records if r["documentId"] == "doc_consent_oauth" and r["effect"] != "replay"]
    assert [(r["effect"], r["outcome"], r["detail"].get("consent")) for r in mine] == [
        ("refused", "declined", None),
        ("write", "applied", "asked"),
        ("write", "applied", "own_run"),
    ]


def test_an_agent_loop_signed_in_obeying_a_planted_instruction_is_stopped(
    signed_in: SignedIn, tmp_path: Path
) -> None:
    """Issue 31, the OAuth cell of the consent table: `hermes chat -q` on the signed-in home, its
    scripted model obeying the instruction planted in a page (tests/clients/consent_scenario.py);
    Hermes asks at its approval prompt, the person types `d`, nothing is written."""
    home = tmp_path / "home"
    shutil.copytree(signed_in.home, home)
    label = "hermes-oauth-no"
    with scripted_model(consent_model) as (url, _):
        (home / "config.yaml").write_text((signed_in.home / "config.yaml").read_text() + model_section(url))
        run = run_agent_loop(home, f"run {label}", KEY, typed="d\n")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "[o]nce" in run.stdout and "Launch plan" in run.stdout and KEPT in run.stdout, run.stdout[-3000:]
    got = outcome(audit_trail(signed_in.db), label)
    assert got.stopped == "declined" and got.writes == [], got


def test_hermes_signs_in_to_a_bare_origin_resource(tmp_path: Path) -> None:
    """Issue 31: docs/deploy.md recommends the bare origin as `--oauth-resource` (one token for `/mcp`
    and `/sse`). Hermes 0.19.0 asks the provider for it with a trailing slash (`http://host:port/`), so
    a provider set up with the resource as mnote published it (`http://host:port`) refused the sign-in
    (`invalid_target`). mnote publishes the origin in the form every client sends back; the provider
    is set up with what mnote's metadata names, as the docs say."""
    require_hermes()
    require_provider()
    port, provider_port = free_port(), free_port()
    address = f"127.0.0.1:{port}"
    issuer = f"http://127.0.0.1:{provider_port}"
    args = [
        arg.replace(ADDRESS_PLACEHOLDER, address).replace(ISSUER_PLACEHOLDER, issuer)
        for arg in example_serve_command("hermes-oauth.yaml")
    ]
    args = [str(port) if arg == "8765" else arg for arg in args]
    args = [f"http://{address}" if arg == f"http://{address}/mcp" else arg for arg in args]
    assert f"http://{address}" in args, args
    db = demo_store(tmp_path / "mnote.db")
    with http_server(db, *args) as server:
        published = httpx2.get(f"{server.url}/.well-known/oauth-protected-resource", timeout=10).json()
        resources = {published["resource"]: {"scope": MNOTE_SCOPES}}
        with oidc_provider(tmp_path, resources, registration=True, refresh_tokens=True, port=provider_port):
            home = write_home(
                tmp_path / "home", example_config("hermes-oauth.yaml", {ADDRESS_PLACEHOLDER: address})
            )
            printed = hermes_login(home, KEY, "user_1")
    assert f"Authenticated — {len(ALL_TOOLS)} tool(s) available" in printed, printed[-3000:]
