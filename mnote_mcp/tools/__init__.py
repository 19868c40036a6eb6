"""Every tool the server can expose, each declared once with its whole contract."""

from mnote_mcp.tools.artifact import ARTIFACT_TOOLS
from mnote_mcp.tools.page import PAGE_TOOLS
from mnote_mcp.tools.registry import Annotations, Registry, ToolSpec

CONTRACT_TOOLS = (*PAGE_TOOLS, *ARTIFACT_TOOLS)
ALL_TOOLS = CONTRACT_TOOLS

__all__ = ["ALL_TOOLS", "CONTRACT_TOOLS", "Annotations", "Registry", "ToolSpec"]
