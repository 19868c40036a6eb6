"""The tasks: what a person asks an agent to do with their notes, each done by a best-case scripted
agent on mnote and on the filesystem server, and its end state checked.

An agent knows only what the task says (a page's title or a word in it, the notes folder for the
filesystem server, as a user would tell it) and learns every id, path, revision, cursor and line from
the results it is shown (`session.Agent`: what Hermes shows the model). Best case: it makes no wasted
call, uses each server's cheapest way (the filesystem server's `edit_file` with several edits, `head`
and `tail`, `read_multiple_files` packed under Hermes's cut, smallest files first), and reads nothing
it does not need. On mnote it names a page by its title in the call that acts on it where the server
says it may (issue 35: `documentId` an id or a title, `workspaceId` ""), and otherwise searches for the
page first, as an agent of an earlier release must. A task that changes a page a task before it changed
first puts that page back as the corpus has it (`reset`, in every store, outside the agents: not
counted).
"""

from __future__ import annotations

import itertools
import json
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from bench.agenttasks.corpus import ACTOR, COLOUR, CUTOVER, CUTOVER_ZH, MISSPELT, SPELT, WORKSPACE, Page
from bench.agenttasks.session import Agent
from tests.support.helpers import call, connect, page_args

# Under Hermes's 100,000-character cut for one result, with room for its wrapping.
FS_BATCH_BYTES = 60_000
_KEYS = itertools.count(1)


@dataclass(frozen=True)
class Place:
    db: Path  # the mnote store of the side running (the filesystem side: this checkout's, unused)
    notes: Path
    pages: dict[str, Page]  # by title: what the checks compare with (agents never read it)
    dbs: tuple[Path, ...] = ()  # every mnote store, for `reset`


AgentFactory = Callable[[], Agent]
Run = Callable[[AgentFactory, Place], bool]  # True when the end state is what the task asked


@dataclass(frozen=True)
class Task:
    name: str
    asks: str
    mnote: Run
    filesystem: Run
    reset: tuple[str, ...] = ()  # pages (titles) put back as the corpus has them before the task runs


# -- reading answers as the model does ---------------------------------------------------------


def envelope(agent: Agent, tool: str, **arguments: Any) -> dict[str, Any]:
    """A mnote call's envelope, read from what Hermes showed (a text block: `{"result": "<JSON>"}`)."""
    outer = agent.result(tool, **arguments)
    if outer is None:
        raise AssertionError(f"{tool}: Hermes cut the answer to a preview")
    value = outer.get("result", outer.get("error"))
    found: dict[str, Any] = json.loads(value) if isinstance(value, str) else value
    return found


def text(agent: Agent, tool: str, **arguments: Any) -> str | None:
    """A filesystem call's text as Hermes showed it; None where it was cut to a preview."""
    outer = agent.result(tool, **arguments)
    if outer is None:
        return None
    value = outer.get("result", outer.get("error"))
    return value if isinstance(value, str) else json.dumps(value)


def key() -> str:
    return f"bench-{next(_KEYS)}"


def page_of(hit: dict[str, Any]) -> dict[str, str]:
    return {"workspaceId": hit["workspaceId"], "documentId": hit["documentId"]}


def found_page(agent: Agent, query: str) -> dict[str, Any]:
    """The best hit of a mnote search: the model picks the first."""
    hits = envelope(agent, "mnote.page.search", query=query)["result"]["hits"]
    hit: dict[str, Any] = hits[0]
    return hit


def whole_markdown(agent: Agent, page: dict[str, str]) -> str:
    """A page as Markdown, piece by piece while the answer names a `nextCursor`."""
    parts: list[str] = []
    cursor = None
    while True:
        more: dict[str, str] = {"cursor": cursor} if cursor else {}
        read = envelope(agent, "mnote.page.get", **page, format="markdown", includeOptions=False, **more)
        parts.append(read["result"]["markdown"])
        cursor = read["result"].get("nextCursor")
        if not cursor:
            return "\n".join(parts)


def found_file(agent: Agent, place: Place, pattern: str) -> str:
    listed = text(agent, "search_files", path=str(place.notes), pattern=pattern) or ""
    return listed.splitlines()[0].strip()


# -- the checks: end states, read from the stores directly ---------------------------------------


def mnote_page(db: Path, document_id: str) -> dict[str, Any]:
    async def read() -> dict[str, Any]:
        async with connect(db, actor=ACTOR, max_result_chars=100_000_000) as client:  # one answer, whole
            answer = await call(
                client, "mnote.page.get", **page_args(document_id, "ws_notes", maxBlocks=20_000)
            )
            result: dict[str, Any] = answer["result"]
            return result

    return anyio.run(read)


def texts_of(db: Path, document_id: str) -> list[str]:
    return [block["text"] for block in mnote_page(db, document_id)["blocks"]]


def file_text(place: Place, title: str) -> str:
    return (place.notes / f"{title}.md").read_text(encoding="utf-8")


def lines_of(place: Place, title: str) -> list[str]:
    return [line for line in file_text(place, title).splitlines() if line.strip()]


def reset(place: Place, title: str) -> None:
    """The page as the corpus has it again, in every store: a task that runs after another one changed
    it starts where that one started. Written beside the agents (its own connection and run), never
    counted."""
    page = place.pages[title]
    (place.notes / f"{title}.md").write_text(page.markdown(), encoding="utf-8")

    async def save(db: Path) -> None:
        async with connect(db, actor=ACTOR) as client:
            answer = await call(
                client,
                "mnote.page.save",
                **page_args(page.id, WORKSPACE, content=page.blocks, idempotencyKey=key(), dryRun=False),
            )
            if not answer["ok"]:
                raise AssertionError(f"reset {title}: {answer['error']}")

    for db in place.dbs or (place.db,):
        anyio.run(save, db)


def page_named(agent: Agent, title: str, words: str) -> dict[str, str]:
    """The page the person named: by its title where the server takes one (no call), else the first
    hit of a search for `words` (the title's words, or a word on the page)."""
    if agent.titles:
        return {"workspaceId": "", "documentId": title}
    return page_of(found_page(agent, words))


# -- 1, 2: find a page by what it says ----------------------------------------------------------


def find_mnote(word: str, sentence: str) -> Run:
    def run(new: AgentFactory, place: Place) -> bool:
        agent = new()
        hit = found_page(agent, word)
        block_id = hit["snippets"][0]["blockId"]
        read = envelope(agent, "mnote.page.get", **page_of(hit), blockIds=[block_id], format="markdown")
        return sentence in read["result"]["markdown"]

    return run


_SIZE = re.compile(r"^\[FILE\]\s+(.+?)\s+([\d.]+) (B|KB|MB)$")
_UNIT = {"B": 1, "KB": 1024, "MB": 1024 * 1024}


def find_filesystem(word: str, sentence: str) -> Run:
    """No content search: list the files with their sizes and read them, smallest first, packed in
    `read_multiple_files` calls under Hermes's cut, until one holds the words."""

    def run(new: AgentFactory, place: Place) -> bool:
        agent = new()
        listing = text(agent, "list_directory_with_sizes", path=str(place.notes), sortBy="size") or ""
        files = []
        for line in listing.splitlines():
            match = _SIZE.match(line.strip())
            if match:
                files.append((float(match.group(2)) * _UNIT[match.group(3)], match.group(1)))
        files.sort()
        batch: list[str] = []
        size = 0.0
        for bytes_, name in [*files, (float("inf"), "")]:
            if batch and (size + bytes_ > FS_BATCH_BYTES or not name):
                read = text(agent, "read_multiple_files", paths=[str(place.notes / n) for n in batch]) or ""
                if word in read:
                    return sentence in read
                batch, size = [], 0.0
            if name:
                batch.append(name)
                size += bytes_
        return False

    return run


# -- 3: read a page ------------------------------------------------------------------------------


def read_mnote(new: AgentFactory, place: Place) -> bool:
    agent = new()
    page = page_named(agent, "Team onboarding checklist", "onboarding checklist")
    read = envelope(agent, "mnote.page.get", **page, format="markdown", includeOptions=False)
    return all(
        block["text"] in read["result"]["markdown"]
        for block in place.pages["Team onboarding checklist"].blocks
    )


def read_filesystem(new: AgentFactory, place: Place) -> bool:
    agent = new()
    path = found_file(agent, place, "*onboarding*")
    read = text(agent, "read_text_file", path=path) or ""
    return all(block["text"] in read for block in place.pages["Team onboarding checklist"].blocks)


# -- 4: fix a misspelt word in a 1,000-block page --------------------------------------------------


def fix_text_mnote(new: AgentFactory, place: Place) -> bool:
    """One exact-text edit: in the page named by its title (the word occurs once there), or, on a
    release without titles, in the block the search's snippet names."""
    agent = new()
    if agent.titles:
        page, where = page_named(agent, "Meeting minutes 2026", MISSPELT), {}
    else:
        hit = found_page(agent, MISSPELT)
        page, where = page_of(hit), {"blockId": hit["snippets"][0]["blockId"]}
    written = envelope(
        agent,
        "mnote.page.edit_text",
        **page,
        **where,
        edits=[{"oldText": MISSPELT, "newText": SPELT}],
        idempotencyKey=key(),
        dryRun=False,
    )
    body = " ".join(texts_of(place.db, written["audit"]["documentId"]))
    return written["ok"] and SPELT in body and MISSPELT not in body


def fix_filesystem(new: AgentFactory, place: Place) -> bool:
    agent = new()
    path = found_file(agent, place, "*Meeting minutes*")
    text(agent, "edit_file", path=path, edits=[{"oldText": MISSPELT, "newText": SPELT}])
    body = file_text(place, "Meeting minutes 2026")
    return SPELT in body and MISSPELT not in body


# -- 5: append a to-do ---------------------------------------------------------------------------

TODO = "Book the venue"


def append_mnote(new: AgentFactory, place: Place) -> bool:
    agent = new()
    page = page_named(agent, "Launch checklist", "Launch checklist")
    blocks = [{"type": "todo", "text": TODO, "props": {"checked": False}}]
    added = envelope(
        agent, "mnote.block.insert", **page, blocks=blocks, position="end", idempotencyKey=key(), dryRun=False
    )
    return texts_of(place.db, added["audit"]["documentId"])[-1] == TODO


def _last_line(read: str) -> str:
    return [line for line in read.splitlines() if line.strip()][-1]


def append_filesystem(new: AgentFactory, place: Place) -> bool:
    agent = new()
    path = found_file(agent, place, "*Launch checklist*")
    last = _last_line(text(agent, "read_text_file", path=path, tail=2) or "")
    text(agent, "edit_file", path=path, edits=[{"oldText": last, "newText": f"{last}\n\n- [ ] {TODO}"}])
    return lines_of(place, "Launch checklist")[-1] == f"- [ ] {TODO}"


# -- 6: rename a page ----------------------------------------------------------------------------

OLD_TITLE, NEW_TITLE = "Project Nimbus charter", "Project Stratus charter"


def rename_mnote(new: AgentFactory, place: Place) -> bool:
    agent = new()
    page = page_named(agent, OLD_TITLE, "Nimbus")
    renamed = envelope(
        agent, "mnote.page.update_title", **page, title=NEW_TITLE, idempotencyKey=key(), dryRun=False
    )
    return bool(mnote_page(place.db, renamed["audit"]["documentId"])["title"] == NEW_TITLE)


def rename_filesystem(new: AgentFactory, place: Place) -> bool:
    """The title is the file's name and its first heading: both change."""
    agent = new()
    path = found_file(agent, place, "*Nimbus*")
    target = str(Path(path).with_name(f"{NEW_TITLE}.md"))
    text(agent, "move_file", source=path, destination=target)
    text(agent, "edit_file", path=target, edits=[{"oldText": f"# {OLD_TITLE}", "newText": f"# {NEW_TITLE}"}])
    return (
        file_text(place, NEW_TITLE).startswith(f"# {NEW_TITLE}\n")
        and not (place.notes / f"{OLD_TITLE}.md").exists()
    )


# -- 7: move a section to the top ----------------------------------------------------------------

SECTION = "Next steps"


def _expected_order(place: Place) -> list[str]:
    blocks = place.pages["Quarterly review"].blocks
    start = next(i for i, block in enumerate(blocks) if block["text"] == SECTION)
    return [block["text"] for block in blocks[start:] + blocks[:start]]


_HEADING_ID = re.compile(r"^#+ (.*?) <!-- (\S+) -->$", re.MULTILINE)


def move_section_mnote(new: AgentFactory, place: Place) -> bool:
    """The heading's id, then the heading moved with its section in one call: read from the page
    named by its title (its Markdown names every block's id), or, on a release without titles, from
    the snippet of a search for the heading's words on the hit with the page's title."""
    agent = new()
    if agent.titles:
        page = page_named(agent, "Quarterly review", "Quarterly review")
        markdown = whole_markdown(agent, page)
        heading_id = next(found[1] for found in _HEADING_ID.findall(markdown) if found[0] == SECTION)
    else:
        hits = envelope(agent, "mnote.page.search", query=SECTION)["result"]["hits"]
        hit = next(hit for hit in hits if hit["title"] == "Quarterly review")
        page = page_of(hit)
        heading_id = next(s for s in hit["snippets"] if s["text"].replace("**", "") == SECTION)["blockId"]
    moved = envelope(
        agent,
        "mnote.block.move",
        **page,
        blockId=heading_id,
        section=True,
        position="start",
        idempotencyKey=key(),
        dryRun=False,
    )
    return texts_of(place.db, moved["audit"]["documentId"]) == _expected_order(place)


def move_filesystem(new: AgentFactory, place: Place) -> bool:
    agent = new()
    path = found_file(agent, place, "*Quarterly review*")
    read = text(agent, "read_text_file", path=path) or ""
    title, _, body = read.partition("\n\n")
    parts = body.split("\n## ")
    sections = [parts[0], *(f"## {part}" for part in parts[1:])]
    moved = next(s for s in sections if s.startswith(f"## {SECTION}"))
    rest = [s.rstrip("\n") for s in sections if s is not moved]
    text(agent, "write_file", path=path, content="\n\n".join([title, moved.rstrip("\n"), *rest]) + "\n")
    lines = [line.removeprefix("## ") for line in lines_of(place, "Quarterly review")[1:]]
    return lines == _expected_order(place)


# -- 8: summarise a page into an artifact --------------------------------------------------------

SUMMARISED = "产品需求汇总"


def _summary(markdown: str) -> str:
    headings = [line.removeprefix("## ") for line in markdown.splitlines() if line.startswith("## ")]
    return "要点：" + "；".join(heading.split("<!--")[0].strip() for heading in headings[:5])


def summarise_mnote(new: AgentFactory, place: Place) -> bool:
    agent = new()
    page = page_named(agent, SUMMARISED, SUMMARISED)
    summary = _summary(whole_markdown(agent, page))
    made = envelope(
        agent, "mnote.artifact.create_summary", **page, summary=summary, idempotencyKey=key(), dryRun=False
    )
    with sqlite3.connect(place.db) as conn:
        row = conn.execute(
            "SELECT content FROM artifacts WHERE page_id = ? AND kind = 'summary'",
            (made["audit"]["documentId"],),
        ).fetchone()
    return row is not None and row[0] == summary and summary.count("；") == 4


def summarise_filesystem(new: AgentFactory, place: Place) -> bool:
    agent = new()
    path = found_file(agent, place, f"*{SUMMARISED}*")
    read = text(agent, "read_text_file", path=path) or ""
    summary = _summary(read)
    text(agent, "write_file", path=str(Path(path).with_suffix(".summary.md")), content=summary + "\n")
    written = (place.notes / f"{SUMMARISED}.summary.md").read_text(encoding="utf-8").strip()
    return written == summary and summary.count("；") == 4


# -- 9: preview a change ---------------------------------------------------------------------------


def preview_text_mnote(new: AgentFactory, place: Place) -> bool:
    """One exact-text edit's dry run (its `textDiff` shows the line before and after): in the page
    named by its title, or in the block a search's snippet names."""
    agent = new()
    if agent.titles:
        page, where = page_named(agent, "Style guide", "colour"), {}
    else:
        hit = found_page(agent, "colour")
        page, where = page_of(hit), {"blockId": hit["snippets"][0]["blockId"]}
    plan = envelope(
        agent,
        "mnote.page.edit_text",
        **page,
        **where,
        edits=[{"oldText": "colour", "newText": "color"}],
        idempotencyKey=key(),
        dryRun=True,
    )
    return (
        plan["result"]["dryRun"] is True
        and "+Every heading uses the brand color" in plan["result"]["textDiff"]
        and COLOUR in texts_of(place.db, plan["audit"]["documentId"])
    )


def preview_filesystem(new: AgentFactory, place: Place) -> bool:
    agent = new()
    path = found_file(agent, place, "*Style guide*")
    diff = (
        text(agent, "edit_file", path=path, edits=[{"oldText": "colour", "newText": "color"}], dryRun=True)
        or ""
    )
    return "+Every heading uses the brand color" in diff and COLOUR in file_text(place, "Style guide")


# -- 10: undo what the agent just did -------------------------------------------------------------

UNDO_TODO, STATUS_OLD, STATUS_NEW = "Send the minutes", "Status: draft", "Status: approved"


@dataclass(frozen=True)
class Undoing:
    """An undo task's first write made: the agent, its page, the page before, the write's envelope."""

    agent: Agent
    page: dict[str, str]
    before: list[str]
    added: dict[str, Any]

    def revert(self, place: Place, run_id: str) -> bool:
        """Undo the run; True when the page is as it was before the first write."""
        envelope(
            self.agent,
            "mnote.page.revert",
            **self.page,
            undoRunId=run_id,
            idempotencyKey=key(),
            dryRun=False,
        )
        return texts_of(place.db, place.pages["Weekly plan"].id) == self.before


def _append_undo_todo(new: AgentFactory, place: Place) -> Undoing:
    """Find the page and append the to-do (the person will approve the revert once, when mnote asks)."""
    agent = new()
    agent.approve = "o"
    page = page_named(agent, "Weekly plan", "Weekly plan")
    before = texts_of(place.db, place.pages["Weekly plan"].id)
    todo = [{"type": "todo", "text": UNDO_TODO, "props": {"checked": False}}]
    added = envelope(
        agent, "mnote.block.insert", **page, blocks=todo, position="end", idempotencyKey=key(), dryRun=False
    )
    return Undoing(agent, page, before, added)


def undo_run_mnote(new: AgentFactory, place: Place) -> bool:
    """The same two writes (the status changed by one exact-text edit, no read), then the revert of
    the run the first write's result named."""
    undoing = _append_undo_todo(new, place)
    envelope(
        undoing.agent,
        "mnote.page.edit_text",
        **undoing.page,
        edits=[{"oldText": STATUS_OLD, "newText": STATUS_NEW}],
        idempotencyKey=key(),
        dryRun=False,
    )
    return undoing.revert(place, undoing.added["result"]["runId"])


def undo_filesystem(new: AgentFactory, place: Place) -> bool:
    """No history: the agent remembers what it changed and changes it back, both in one `edit_file`."""
    agent = new()
    before = file_text(place, "Weekly plan")
    path = found_file(agent, place, "*Weekly plan*")
    read = text(agent, "read_text_file", path=path) or ""
    last = _last_line(read)
    added = f"{last}\n\n- [ ] {UNDO_TODO}"
    status = next(line for line in read.splitlines() if line.startswith(STATUS_OLD))
    changed = status.replace(STATUS_OLD, STATUS_NEW)
    text(agent, "edit_file", path=path, edits=[{"oldText": last, "newText": added}])
    text(agent, "edit_file", path=path, edits=[{"oldText": status, "newText": changed}])
    text(
        agent,
        "edit_file",
        path=path,
        # in the reverse order (an edit_file's edits apply one after the other)
        edits=[{"oldText": changed, "newText": status}, {"oldText": added, "newText": last}],
    )
    return file_text(place, "Weekly plan") == before


# -- 11: two agents add to one page at once ------------------------------------------------------

EACH = 10


def together_mnote(new: AgentFactory, place: Place) -> bool:
    agents = [new(), new()]
    pages = [page_named(agent, "Sprint board", "Sprint board") for agent in agents]
    for n in range(EACH):
        for who, (agent, page) in enumerate(zip(agents, pages, strict=True)):
            todo = [{"type": "todo", "text": f"Agent {who} task {n}", "props": {"checked": False}}]
            envelope(
                agent,
                "mnote.block.insert",
                **page,
                blocks=todo,
                position="end",
                idempotencyKey=key(),
                dryRun=False,
            )
    added = [t for t in texts_of(place.db, place.pages["Sprint board"].id) if t.startswith("Agent ")]
    return len(added) == 2 * EACH


def together_filesystem(new: AgentFactory, place: Place) -> bool:
    """Each agent reads the last line and appends after it; the two interleave, read then write."""
    agents = [new(), new()]
    paths = [found_file(agent, place, "*Sprint board*") for agent in agents]
    for n in range(EACH):
        lasts = [
            _last_line(text(agent, "read_text_file", path=path, tail=2) or "")
            for agent, path in zip(agents, paths, strict=True)
        ]
        for who, (agent, path) in enumerate(zip(agents, paths, strict=True)):
            line = f"- [ ] Agent {who} task {n}"
            text(
                agent,
                "edit_file",
                path=path,
                edits=[{"oldText": lasts[who], "newText": f"{lasts[who]}\n\n{line}"}],
            )
    added = [line for line in lines_of(place, "Sprint board") if "Agent " in line]
    return len(added) == 2 * EACH


# -- 12: read a 2,000-block page whole ------------------------------------------------------------

LONG = "Research log"


def read_long_mnote(new: AgentFactory, place: Place) -> bool:
    agent = new()
    seen = whole_markdown(agent, page_named(agent, LONG, LONG))
    return all(block["text"] in seen for block in place.pages[LONG].blocks)


def read_long_filesystem(new: AgentFactory, place: Place) -> bool:
    """`read_text_file` answers the whole file (cut by Hermes past 100,000 characters) or its first or
    last lines: cut, the agent learns the file's size from Hermes's note and the length of a line from
    the preview, and reads as many lines as fit from each end."""
    agent = new()
    path = found_file(agent, place, f"*{LONG}*")
    shown = agent.call("read_text_file", path=path)
    if "[Truncated: tool response was" not in shown:
        seen = json.loads(shown)["result"]
        return all(block["text"] in seen for block in place.pages[LONG].blocks)
    preview = shown.split("\n\n[Truncated:")[0]
    per_line = max(1.0, len(preview) / max(1, preview.count("\n")))
    fits = int(80_000 / per_line)  # lines that stay under Hermes's cut, with room
    head = text(agent, "read_text_file", path=path, head=fits) or ""
    tail = text(agent, "read_text_file", path=path, tail=fits) or ""
    return all(block["text"] in head + tail for block in place.pages[LONG].blocks)


TASKS: tuple[Task, ...] = (
    Task(
        "find (English)",
        "which page says when the database cutover starts?",
        find_mnote("cutover", CUTOVER),
        find_filesystem("cutover", CUTOVER),
    ),
    Task(
        "find (Chinese)",
        "哪一页写了割接什么时候开始？",
        find_mnote("割接", CUTOVER_ZH),
        find_filesystem("割接", CUTOVER_ZH),
    ),
    Task("read a page", "read the 'Team onboarding checklist'", read_mnote, read_filesystem),
    Task(
        "small edit",
        f"fix '{MISSPELT}' in 'Meeting minutes 2026' (1,000 blocks)",
        fix_text_mnote,
        fix_filesystem,
    ),
    Task("append a to-do", f"add '{TODO}' to the 'Launch checklist'", append_mnote, append_filesystem),
    Task("rename", f"rename '{OLD_TITLE}' to '{NEW_TITLE}'", rename_mnote, rename_filesystem),
    Task(
        "move a section",
        f"move '{SECTION}' (a heading and 3 paragraphs) to the top of 'Quarterly review'",
        move_section_mnote,
        move_filesystem,
    ),
    Task(
        "summarise into an artifact",
        f"summarise '{SUMMARISED}' (500 blocks) beside it",
        summarise_mnote,
        summarise_filesystem,
    ),
    Task(
        "preview",
        "show what replacing 'colour' by 'color' in the 'Style guide' would change",
        preview_text_mnote,
        preview_filesystem,
    ),
    Task(
        "undo",
        "add a to-do and approve the 'Weekly plan', then undo both",
        undo_run_mnote,
        undo_filesystem,
    ),
    Task(
        "two agents at once",
        f"two agents each add {EACH} to-dos to the 'Sprint board', interleaved",
        together_mnote,
        together_filesystem,
    ),
    Task("read a long page whole", f"read '{LONG}' (2,000 blocks)", read_long_mnote, read_long_filesystem),
)
