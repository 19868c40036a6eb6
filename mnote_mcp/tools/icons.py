"""Icons for hosts that show them beside a tool or a server (MCP 2025-11-25 and 2026-07-28: `Tool.icons`,
`Implementation.icons`): one small SVG per toolset, and the server's own.

Each is a `data:` URI, so a host never fetches anything from anywhere to draw it (the spec asks hosts
to check where an icon URL points; a data URI points nowhere), plain shapes with no script, text or
external reference (the spec warns that SVG can carry script). A host that reads only PNG or JPEG (the
two the spec says every icon-drawing host supports) shows none, which is what it does today. Icons go
in `tools/list`, never to a model: Hermes, like every host we test, leaves them out of the function
definitions, so they cost no model request anything (`tools/sizes.py`).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping

import mcp.types as types

from mnote_mcp.tools.toolsets import Toolset

_FRAME = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="none" stroke="#3a6ea5"'
    ' stroke-width="2" stroke-linecap="round" stroke-linejoin="round">{}</svg>'
)
# The shapes: a page with its lines, stacked blocks, a clock turned back, a spark beside a page.
_SHAPES: Mapping[str, str] = {
    "server": '<path d="M6 3h9l4 4v14H6z"/><path d="M14 3v5h5"/><path d="M9 17V11l3 3 3-3v6"/>',
    Toolset.PAGE: '<path d="M6 3h9l4 4v14H6z"/><path d="M14 3v5h5M9 12h7M9 16h7"/>',
    Toolset.BLOCK: '<rect x="4" y="4" width="16" height="6" rx="1"/><rect x="4" y="14" width="16" height="6" rx="1"/>',
    Toolset.HISTORY: '<path d="M3 12a9 9 0 1 0 3-6.7L3 8"/><path d="M3 3v5h5M12 7v5l3 3"/>',
    Toolset.ARTIFACT: '<path d="M5 3h9l4 4v6M5 3v18h7"/><path d="M18 15l1 2.5 2.5 1-2.5 1-1 2.5-1-2.5-2.5-1 2.5-1z"/>',
}


def _icon(shape: str) -> types.Icon:
    svg = _FRAME.format(shape).encode()
    return types.Icon(
        src="data:image/svg+xml;base64," + base64.b64encode(svg).decode(),
        mime_type="image/svg+xml",
        sizes=["any"],
    )


SERVER_ICONS: list[types.Icon] = [_icon(_SHAPES["server"])]
TOOLSET_ICONS: Mapping[Toolset, list[types.Icon]] = {
    toolset: [_icon(_SHAPES[toolset])] for toolset in Toolset
}
