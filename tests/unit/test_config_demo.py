"""Issue 23: no demo data in a store an operator names. A new store gets the demo workspace only on
the embedded default path (the README's first command) or when asked (`--demo`); a store named by
`--db` stays empty, and a PostgreSQL database never gets it (`--demo` there is a usage error naming
`mnote-mcp seed`). The demo's members are real grants (`user_1` edits `ws_1`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mnote_mcp.app import open_kernel
from mnote_mcp.cli import parse
from mnote_mcp.config import ServerConfig
from mnote_mcp.kernel.port import PagesQuery
from mnote_mcp.kernel.store.kernel import StoreKernel
from mnote_mcp.settings import SettingError
from tests.support.helpers import run_cli


def demo_pages(config: ServerConfig) -> list[str]:
    """The pages the demo's editor can see once the server's kernel has opened the store."""
    kernel, _ = open_kernel(config)
    assert isinstance(kernel, StoreKernel)
    try:
        return [
            f"{page.workspace_id}/{page.document_id}"
            for page in kernel.store.list_pages(PagesQuery("user_1"))
        ]
    finally:
        kernel.store.close()


def configured(*argv: str) -> ServerConfig:
    command, config = parse(["serve", *argv], environ={})
    assert command == "serve" and isinstance(config, ServerConfig)
    return config


def test_the_default_store_gets_the_demo_and_a_named_one_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert "ws_1/doc_1" in demo_pages(configured()), "the README's first command: a demo to try"
    assert demo_pages(configured("--db", str(tmp_path / "named.db"))) == []
    assert "ws_1/doc_1" in demo_pages(configured("--db", str(tmp_path / "asked.db"), "--demo"))


def test_no_demo_keeps_even_the_default_store_empty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert demo_pages(configured("--no-demo")) == []


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--demo", "--no-demo"], "--demo and --no-demo"),
        (["--db", "postgresql://mnote@db.internal/mnote", "--demo"], "mnote-mcp seed --db URL"),
    ],
)
def test_a_demo_request_that_cannot_be_honoured_is_a_usage_error(argv: list[str], says: str) -> None:
    with pytest.raises(SettingError, match=says):
        configured(*argv)
    for command in (["serve"], ["runtime", "serve"], ["runtime", "cli"]):
        done = run_cli(*command, *argv)
        assert done.returncode == 2 and says in done.stderr, (command, done.stderr)


def test_a_postgresql_store_never_gets_the_demo(pg_url: str) -> None:
    assert demo_pages(configured("--db", pg_url)) == []
