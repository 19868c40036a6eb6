"""Every tool the server can expose, each declared once with its whole contract."""

from mnote_mcp.tools.artifact import ARTIFACT_TOOLS
from mnote_mcp.tools.block import BLOCK_TOOLS
from mnote_mcp.tools.history import HISTORY_TOOLS
from mnote_mcp.tools.page import PAGE_TOOLS
from mnote_mcp.tools.registry import Annotations, Registry, ToolSpec
from mnote_mcp.tools.selection import TOOLSETS, ToolSelection

CONTRACT_TOOLS = (*PAGE_TOOLS, *ARTIFACT_TOOLS)
ALL_TOOLS = (*PAGE_TOOLS, *BLOCK_TOOLS, *HISTORY_TOOLS, *ARTIFACT_TOOLS)

__all__ = ["ALL_TOOLS", "CONTRACT_TOOLS", "TOOLSETS", "Annotations", "Registry", "ToolSelection", "ToolSpec"]
