"""Every tool the server can expose, in the order `tools/list` shows them.

A new tool is one declaration in its domain module (`page.py`, `block.py`, ...), listed here; every
table of tools, in the docs (`tools/docs.py`) and in the tests (tests/support/tool_calls.py), is made from
this list.
"""

from __future__ import annotations

from mnote_mcp.tools.artifact import ARTIFACT_TOOLS
from mnote_mcp.tools.block import BLOCK_TOOLS
from mnote_mcp.tools.history import HISTORY_TOOLS
from mnote_mcp.tools.page import PAGE_TOOLS
from mnote_mcp.tools.registry import ToolSpec
from mnote_mcp.tools.search import SEARCH_TOOLS

ALL_TOOLS: tuple[ToolSpec, ...] = (*PAGE_TOOLS, *SEARCH_TOOLS, *BLOCK_TOOLS, *HISTORY_TOOLS, *ARTIFACT_TOOLS)
