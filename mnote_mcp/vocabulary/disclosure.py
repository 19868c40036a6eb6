"""Page text in an answer reaches only a caller granted `page.read`.

A connection may be granted `page.write` without `page.read` (`--scope`, a token's scopes, a call's
`capabilityScope`): it may change a page that `mnote.page.get` refuses to show it. The kernel checks
the actor's role, not the connection's grant, so what a write answers is the same for both: the
few fields that carry page text are declared here, and the builders of every answer
(`vocabulary.envelope.success` and `failure`, and the question before a write in
`mnote_mcp.calls.confirmation`) take them out for a caller who may not read. The answer says what was left
out (a `page_text_withheld` warning in a result, `details.withheld` in a refusal), never silently.

What stays: ids, revisions, counts, option values and pointers, which a writer needs to act on the
page and which `--scope page.write` was granted to use (docs/security.md, "Page text").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mnote_mcp.vocabulary.scopes import Scope

# A write's or dry run's result: the unified diff of the page's Markdown (`textDiff`).
RESULT_TEXT: frozenset[str] = frozenset({"textDiff"})
# A refusal's details: `mnote.page.edit_text`'s places where the text occurs (`candidates`).
DETAILS_TEXT: frozenset[str] = frozenset({"candidates"})
# In a result's `diff`: an op setting the title says what it was and what it becomes.
TITLE_TEXT: tuple[str, ...] = ("from", "to")
WITHHELD_WARNING = "page_text_withheld"


def may_read(scopes: frozenset[Scope]) -> bool:
    return Scope.PAGE_READ in scopes


def withheld_result(result: Mapping[str, Any], scopes: frozenset[Scope]) -> tuple[dict[str, Any], list[str]]:
    """`result` without the page text a caller granted `scopes` may not see, and the names of the
    fields it was taken from (none for a caller who may read, or a result with none)."""
    if may_read(scopes):
        return dict(result), []
    out = dict(result)
    withheld = [name for name in sorted(RESULT_TEXT) if out.pop(name, None) is not None]
    diff = out.get("diff")
    if isinstance(diff, list) and any(_titled(op) for op in diff):
        out["diff"] = [_untitled(op) if _titled(op) else op for op in diff]
        withheld.append("diff")
    return out, withheld


def withheld_details(details: Mapping[str, Any], scopes: frozenset[Scope]) -> dict[str, Any]:
    """A refusal's `details` without page text for a caller granted `scopes`; what was taken out is
    named in `details.withheld`."""
    if may_read(scopes) or not DETAILS_TEXT & details.keys():
        return dict(details)
    out = {key: value for key, value in details.items() if key not in DETAILS_TEXT}
    out["withheld"] = sorted(DETAILS_TEXT & details.keys())
    return out


def _titled(op: object) -> bool:
    return isinstance(op, Mapping) and op.get("field") == "title" and any(key in op for key in TITLE_TEXT)


def _untitled(op: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in op.items() if key not in TITLE_TEXT}
