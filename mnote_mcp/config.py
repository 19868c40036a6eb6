"""Server configuration: one frozen value built from flags and their `MNOTE_*` environment twins."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from mnote_mcp.delivery import Delivery, RefusalStyle, ResultForm
from mnote_mcp.identity import ALL_SCOPES, READ_ONLY_SCOPES, Identity, Scope
from mnote_mcp.logs import LogFormat
from mnote_mcp.messages import Locale

if TYPE_CHECKING:  # the tool registry imports the MCP SDK; `runtime cli` starts per call without it
    from mnote_mcp.tools.registry import ToolNames
    from mnote_mcp.tools.selection import ToolSelection


Transport = Literal["stdio", "sse", "http"]
DEFAULT_ACTOR = "user_1"
# A result of this many characters fits Hermes's 100,000-character cut (models with a 128k-token
# window: 76,800) in every result form: "both" doubles it and escapes the text copy (x2.1 measured),
# "structured" adds ~7% (docs/hermes.md, "Limits").
DEFAULT_MAX_RESULT_CHARS = 40_000
MIN_RESULT_CHARS = 4_000  # room for the envelope, a piece of one block and the hint


def default_store_path() -> Path:
    """The per-user data path (XDG on Linux, the platform's own elsewhere)."""
    from platformdirs import user_data_path

    return user_data_path("mnote-mcp", appauthor=False) / "mnote.db"


@dataclass(frozen=True)
class ServerConfig:
    transport: Transport = "stdio"
    host: str = "127.0.0.1"
    port: int = 8765
    db: Path | None = None
    kernel: str = "local"
    actor: str | None = DEFAULT_ACTOR
    scopes: frozenset[Scope] = ALL_SCOPES
    read_only: bool = False
    tool_names: ToolNames = "dotted"
    strict_contract: bool = False
    seed: Path | None = None
    demo: bool = True
    locale: Locale = "zh-CN"
    log_level: str = "info"
    log_format: LogFormat = "text"
    bindings: Mapping[str, str] = field(default_factory=dict)
    call_timeout: float = 60.0
    refusals: RefusalStyle = "error"
    result_form: ResultForm = "both"
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS
    # HTTP transports
    stateless: bool = False
    sse: bool = True
    streamable_http: bool = True
    auth_file: Path | None = None
    token: str | None = None
    token_file: Path | None = None
    unsafe_no_auth: bool = False
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    max_body_bytes: int = 4 * 1024 * 1024
    shutdown_grace: float = 30.0
    toolsets: frozenset[str] = frozenset()
    tools: tuple[str, ...] = ()
    exclude_tools: tuple[str, ...] = ()
    watch_interval: float = 1.0
    # Relay adapters (--kernel http://… | cli:…); the token comes from MNOTE_RUNTIME_TOKEN only.
    runtime_token: str | None = field(default=None, repr=False)
    runtime_timeout: float = 10.0
    runtime_retries: int = 2

    @property
    def store_path(self) -> Path:
        return self.db if self.db is not None else default_store_path()

    @property
    def delivery(self) -> Delivery:
        return Delivery(refusals=self.refusals, form=self.result_form)

    @property
    def granted_scopes(self) -> frozenset[Scope]:
        """Read-only mode wins over everything: it grants page.read alone, whatever --scope says."""
        return self.scopes & READ_ONLY_SCOPES if self.read_only else self.scopes

    @property
    def tool_selection(self) -> ToolSelection:
        from mnote_mcp.tools.selection import ToolSelection

        return ToolSelection(toolsets=self.toolsets, tools=self.tools, exclude=self.exclude_tools)

    def stdio_identity(self) -> Identity:
        return Identity(actor_id=self.actor or None, scopes=self.granted_scopes, bindings=dict(self.bindings))
