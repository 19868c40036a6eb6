"""The kit's scratch workspace: one fixture per tag, loaded into the runtime before a run.

Protocol v1 has no operation that creates a workspace, a member or a page (a runtime that let its
service create workspaces would be a larger surface than the relay needs), so the kit cannot make its
scratch data through the protocol. It ships it instead: `mnote-mcp runtime check --write-seed FILE`
writes this fixture (the format `mnote-mcp seed` reads), the runtime's authors load it with their own
tool, and the kit loads the very same fixture into its mirror store. Every id in it carries the tag:
two workspaces (`kit_<tag>`, `kit_<tag>_other`) and five actors (`kit_<tag>_owner`, ...) that belong to
nothing else, so the kit never reads or writes another workspace's data, and what an actor may read is
exactly what the seed gives it. Each scenario has pages of its own, so one runtime defect shows in the
checks about it and does not spill into the others. A seed serves one run: a second run on the same
data finds the pages written (`seed.loaded` fails) and needs a fresh seed or another tag.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

TAG = re.compile(r"[A-Za-z0-9_-]{1,32}")
DEFAULT_TAG = "kit"
ROLES = ("owner", "editor", "commenter", "viewer")
STANDARD_BLOCKS: tuple[dict[str, Any], ...] = (
    {"id": "heading_1", "type": "heading", "text": "Chapter one", "props": {"level": 1}},
    {"id": "p_1", "type": "paragraph", "text": "First paragraph."},
    {"id": "p_2", "type": "paragraph", "text": "Second paragraph."},
)
# The pages of the main workspace that only the scenarios named write; each starts as STANDARD_BLOCKS.
SCENARIO_PAGES = (
    "probe",
    "commands",
    "dryrun",
    "validation",
    "replay",
    "keyconflict",
    "dryreplay",
    "race",
    "stale",
    "rebase",
    "history",
    "revert",
    "revertblocked",
    "permissions",
    "refusal",
    "limitblocks",
    "limitbytes",
    "audit",
    "audittrace",
    "envelope",
    "keys",
)
# Pages nothing writes: listings and searches compare them whole whatever else a run wrote. (`search`
# and the other workspace's `notes` are written by `search.hits`.)
READ_PAGE, SECRET_PAGE, SEARCH_PAGE, OTHER_PAGE, OTHER_NOTES = "read", "secret", "search", "other", "notes"
STABLE_PAGES = frozenset({READ_PAGE, SECRET_PAGE, OTHER_PAGE})


def check_tag(value: str) -> str:
    if not TAG.fullmatch(value):
        raise ValueError(f"{value!r} is not a kit tag: 1 to 32 letters, digits, '-' or '_'")
    return value


@dataclass(frozen=True)
class Scratch:
    """The ids of one tag's scratch workspace."""

    tag: str = DEFAULT_TAG

    def __post_init__(self) -> None:
        check_tag(self.tag)

    @property
    def ws(self) -> str:
        return f"kit_{self.tag}"

    @property
    def other_ws(self) -> str:
        return f"kit_{self.tag}_other"

    def actor(self, role: str) -> str:
        """`owner`, `editor`, `commenter`, `viewer` (members of the main workspace), `stranger` (owner of
        the other one only), `nobody` (member of nothing)."""
        return f"kit_{self.tag}_{role}"

    @property
    def secret_title(self) -> str:
        return f"KIT-SECRET-TITLE-{self.tag}"

    @property
    def secret_text(self) -> str:
        return f"KIT-SECRET-BODY-{self.tag}"

    @property
    def other_title(self) -> str:
        return f"KIT-OTHER-TITLE-{self.tag}"

    @property
    def other_text(self) -> str:
        return f"KIT-OTHER-BODY-{self.tag}"

    def fixture(self) -> dict[str, Any]:
        """The seed: what the runtime and the mirror both load."""
        standard = [dict(block) for block in STANDARD_BLOCKS]
        pages: list[dict[str, Any]] = [
            {"id": READ_PAGE, "title": "Project plan", "options": {"wideLayout": True}, "blocks": standard},
            {
                "id": SECRET_PAGE,
                "title": self.secret_title,
                "members": [{"actorId": self.actor("owner"), "role": "owner"}],
                "blocks": [{"id": "s_1", "type": "paragraph", "text": f"{self.secret_text} aurora"}],
            },
            {
                "id": SEARCH_PAGE,
                "title": "Aurora watch",
                "blocks": [
                    {"id": "a_1", "type": "heading", "text": "Aurora season", "props": {"level": 2}},
                    {"id": "a_2", "type": "paragraph", "text": "The aurora over the fjord, twice."},
                    {"id": "a_3", "type": "paragraph", "text": "蓝色的海洋和天空"},
                ],
            },
        ]
        pages += [
            {"id": page, "title": f"Kit {page} page", "blocks": [dict(block) for block in STANDARD_BLOCKS]}
            for page in SCENARIO_PAGES
        ]
        return {
            "workspaces": [
                {
                    "id": self.ws,
                    "name": f"Kit scratch workspace {self.tag}",
                    "members": [{"actorId": self.actor(role), "role": role} for role in ROLES],
                    "pages": pages,
                },
                {
                    "id": self.other_ws,
                    "name": f"KIT-OTHER-WORKSPACE-{self.tag}",
                    "members": [{"actorId": self.actor("stranger"), "role": "owner"}],
                    "pages": [
                        {
                            "id": OTHER_PAGE,
                            "title": self.other_title,
                            "blocks": [
                                {"id": "o_1", "type": "paragraph", "text": f"{self.other_text} aurora"}
                            ],
                        },
                        {
                            "id": OTHER_NOTES,
                            "title": "Field notes",
                            "blocks": [
                                {"id": "n_1", "type": "paragraph", "text": "An aurora again tonight."}
                            ],
                        },
                    ],
                },
            ]
        }

    def canaries(self) -> list[str]:
        """Text no refusal may carry: every title, workspace name and block text of the seed (a
        refusal holds ids, revisions, option names and pointers, never page content)."""
        found: list[str] = []
        for workspace in self.fixture()["workspaces"]:
            found.append(workspace["name"])
            for page in workspace["pages"]:
                found.append(page["title"])
                found += [block["text"] for block in page["blocks"] if block.get("text")]
        return sorted({text for text in found if len(text) >= 8}, key=lambda text: (-len(text), text))

    def pages(self) -> list[tuple[str, str]]:
        """(workspace, page) of every seeded page."""
        return [(ws["id"], page["id"]) for ws in self.fixture()["workspaces"] for page in ws["pages"]]

    def block_ids(self) -> set[str]:
        return {
            block["id"]
            for ws in self.fixture()["workspaces"]
            for page in ws["pages"]
            for block in page["blocks"]
        }
