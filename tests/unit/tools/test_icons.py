"""Icons where the spec allows them (issue 35): every tool carries its toolset's icon and the server its
own, in `tools/list` and `initialize` (both protocol eras), as data URIs of plain SVG (nothing
fetched, no script, no link), and none of it reaches a model's function definition."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
from mcp.types import Icon

from mnote_mcp.tools.catalog import ALL_TOOLS
from mnote_mcp.tools.icons import SERVER_ICONS, TOOLSET_ICONS
from mnote_mcp.tools.sizes import function_definition
from tests.support.helpers import MODES, connect

pytestmark = pytest.mark.anyio
DATA_SVG = "data:image/svg+xml;base64,"


def _svg(src: str) -> str:
    assert src.startswith(DATA_SVG), src[:40]
    return base64.b64decode(src.removeprefix(DATA_SVG), validate=True).decode()


@pytest.mark.parametrize("icons", [SERVER_ICONS, *TOOLSET_ICONS.values()])
def test_an_icon_is_plain_svg_drawn_from_nowhere_else(icons: list[Icon]) -> None:
    for icon in icons:
        svg = _svg(icon.src)
        assert svg.startswith("<svg ") and svg.endswith("</svg>")
        assert not re.search(r"<script|on\w+=|href|<image|<foreignObject|url\(", svg, re.IGNORECASE), svg
        assert re.findall(r"https?://[^\"']+", svg) == ["http://www.w3.org/2000/svg"], (
            "a namespace, nothing fetched"
        )
        assert icon.mime_type == "image/svg+xml" and icon.sizes == ["any"]


@pytest.mark.parametrize("mode", MODES)
async def test_every_tool_and_the_server_carry_their_icon(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        listed = (await client.list_tools()).tools
        info = client.server_info
    by_name = {spec.name: spec for spec in ALL_TOOLS}
    assert listed and all(tool.icons == TOOLSET_ICONS[by_name[tool.name].toolset] for tool in listed)
    assert info is not None and info.icons == SERVER_ICONS


def test_no_icon_reaches_a_model() -> None:
    for spec in ALL_TOOLS:
        tool = spec.to_mcp(style="dotted", strict=False)
        assert tool.icons and "data:image" not in str(
            function_definition(tool.name, tool.description or "", tool.input_schema)
        )
