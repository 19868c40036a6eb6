"""How tools are named in everything the server says: the advertised spelling, everywhere.

Tool names are dotted in the contract (`mnote.page.get`); `--tool-names underscore` advertises
`mnote_page_get` for hosts whose model APIs allow only `^[a-zA-Z0-9_-]{1,64}$` (OpenAI-style function
names: the OpenAI Agents SDK, LangChain, pydantic-ai pass names through unchanged). A model can call
only what it was shown, so under underscore naming no text the server sends may name a dotted tool:
descriptions, instructions, error messages and hints, warnings, and the envelope's `toolName` are all
spelled as advertised. Texts are written once, with dotted names, and respelled here on the way out.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal, TypeVar, cast

if TYPE_CHECKING:
    from mnote_mcp.vocabulary.envelope import Envelope

J = TypeVar("J")
ToolNames = Literal["dotted", "underscore"]
TOOL_NAME_STYLES: tuple[ToolNames, ...] = ("dotted", "underscore")

# `mnote.page.get`, `mnote.block.*`: a tool name, or a glob over them, as texts write it. Resource
# URIs (`mnote://...`) and kernel command names (`page.block.insert`) do not match.
_DOTTED = re.compile(r"\bmnote\.(page|block|artifact)\.([a-z_]+|\*)")


def spell(name: str, style: ToolNames) -> str:
    """A tool name (`mnote.page.get`) as advertised in `style`."""
    return name.replace(".", "_") if style == "underscore" else name


def respell(text: str, style: ToolNames) -> str:
    """`text` with every tool name in it spelled as advertised."""
    if style == "dotted" or "mnote." not in text:
        return text
    return _DOTTED.sub(lambda match: f"mnote_{match.group(1)}_{match.group(2)}", text)


def respell_all(value: J, style: ToolNames) -> J:
    """Every string in a JSON value respelled (schemas, error details); keys are left alone. The
    value keeps its shape, so its type."""
    if style == "dotted":
        return value
    return cast(J, _respelled(value, style))


def _respelled(value: object, style: ToolNames) -> object:
    if isinstance(value, str):
        return respell(value, style)
    if isinstance(value, list):
        return [_respelled(item, style) for item in value]
    if isinstance(value, dict):
        return {key: _respelled(item, style) for key, item in value.items()}
    return value


def respell_envelope(envelope: Envelope, style: ToolNames) -> Envelope:
    """The parts of an envelope the server wrote (its error, and a result's warnings) respelled.

    The rest of a result is the user's data (page text, titles) and is never touched: a page may
    quote a tool name, and a read must return it as written.
    """
    if style == "dotted":
        return envelope
    error = envelope["error"]
    if error is not None:
        envelope["error"] = respell_all(error, style)
    result = envelope["result"]
    if result is not None and isinstance(result.get("warnings"), list):
        envelope["result"] = {**result, "warnings": respell_all(result["warnings"], style)}
    return envelope
