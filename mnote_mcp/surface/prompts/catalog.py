"""The page workflows a person picks from a menu: one `PromptSpec` each, in zh-CN and en.

A prompt is the text a host puts in the conversation as the person's message, with what it is about
attached: the page as Markdown (as `resources/read` gives it) or what one run wrote to it. Its
arguments complete (`surface/prompts/completions.py`): workspaces the caller belongs to, pages by the start of
their title or id, the runs that wrote to a page. A prompt names the tools it leads the model to, and
is listed only to a connection that may use every one of them (`PromptSpec.tools`), as tools are.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from mnote_mcp.vocabulary.messages import Locale

Words = dict[Locale, str]
DEFAULT_MAX_COMPLETIONS = 20  # `--max-completions`: the values one completion/complete answers
MAX_COMPLETIONS = 100  # the protocol's own bound on a completion's `values`


class Attach(StrEnum):
    """What `prompts/get` attaches after the text."""

    PAGE = "page"  # the page as Markdown with block ids (or a link to it, when it is too long)
    RUN = "run"  # the history entries of one run on the page


class ArgumentKind(StrEnum):
    """What an argument names, which is what it completes to."""

    WORKSPACE = "workspaceId"
    PAGE = "documentId"
    RUN = "runId"


_DESCRIBED: dict[ArgumentKind, Words] = {
    ArgumentKind.WORKSPACE: {
        "zh-CN": "页面所在的 workspace（可补全为你所属的 workspace）",
        "en": "The page's workspace (completes to the workspaces you belong to)",
    },
    ArgumentKind.PAGE: {
        "zh-CN": "页面：输入标题或 id 的开头即可补全",
        "en": "The page: type the start of its title or id to complete it",
    },
    ArgumentKind.RUN: {
        "zh-CN": "要查看的运行（可补全为写过该页面的运行，最新的在前）",
        "en": "The run to review (completes to the runs that wrote to the page, newest first)",
    },
}


@dataclass(frozen=True, slots=True)
class PromptSpec:
    """One prompt, whole: its menu entry, its arguments, the text it renders and what it attaches.

    `text` is a template over the arguments and the page's `title` and `revision`; tool names in it are
    written dotted and respelled as the server advertises them."""

    name: str
    title: Words
    description: Words
    arguments: tuple[ArgumentKind, ...]
    text: Words
    attach: Attach
    tools: tuple[str, ...]  # the tools it leads to: listed only where all of them are

    def argument_words(self, kind: ArgumentKind, locale: Locale) -> str:
        return _DESCRIBED[kind][locale]


_PAGE_ARGUMENTS = (ArgumentKind.WORKSPACE, ArgumentKind.PAGE)

SUMMARISE_PAGE = PromptSpec(
    name="summarise_page",
    title={"zh-CN": "总结页面", "en": "Summarise a page"},
    description={
        "zh-CN": "阅读页面，把简短的摘要保存为它的摘要（summary artifact）。",
        "en": "Read a page and save a short summary of it as its summary artifact.",
    },
    arguments=_PAGE_ARGUMENTS,
    text={
        "zh-CN": (
            "请总结 mnote 页面《{title}》（workspaceId {workspaceId}，documentId {documentId}），页面的 Markdown "
            "附在下面。用页面本身的语言写不超过五句话：它讲什么、做了哪些决定、还有哪些待办。用"
            " mnote.artifact.create_summary 保存摘要（workspaceId {workspaceId}，documentId {documentId}，"
            "一个新的 idempotencyKey），不要改动页面正文，然后把摘要给我看。"
        ),
        "en": (
            "Summarise the mnote page “{title}” (workspaceId {workspaceId}, documentId {documentId}); its"
            " Markdown is attached below. Write at most five sentences, in the page's own language: what it"
            " is about, what was decided, what is still open. Save the summary with"
            " mnote.artifact.create_summary (workspaceId {workspaceId}, documentId {documentId}, a new"
            " idempotencyKey), leave the page body alone, then show me the summary."
        ),
    },
    attach=Attach.PAGE,
    tools=("mnote.artifact.create_summary",),
)

REVIEW_RUN = PromptSpec(
    name="review_run",
    title={"zh-CN": "查看一次运行改了什么", "en": "Review what a run changed"},
    description={
        "zh-CN": "列出一次 agent 运行对页面的写入，说明改了什么，并询问是否撤销。",
        "en": "Show what one agent run wrote to a page, explain it, and offer to undo it.",
    },
    arguments=(*_PAGE_ARGUMENTS, ArgumentKind.RUN),
    text={
        "zh-CN": (
            "下面附有运行 {runId} 对 mnote 页面《{title}》（workspaceId {workspaceId}，documentId {documentId}，"
            "当前 revision {revision}）的写入，最新的在前。请用几句话告诉我它改了什么，然后问我是否撤销。"
            "只有在我同意之后：先以 dryRun=true 调用 mnote.page.revert（undoRunId {runId}）给我看将撤销的内容，"
            "我确认后再以 dryRun=false 和同一个 idempotencyKey 调用。只能撤销你自己在该运行中的写入；"
            "要撤销别人的写入，请改用 toRevision。"
        ),
        "en": (
            "Attached below is what run {runId} wrote to the mnote page “{title}” (workspaceId {workspaceId},"
            " documentId {documentId}, now at revision {revision}), newest first. Tell me in a few lines what"
            " it changed, then ask me whether to undo it. Only if I say yes: call mnote.page.revert with"
            " undoRunId {runId} and dryRun=true and show me what it would undo, then, once I confirm, again"
            " with dryRun=false and the same idempotencyKey. undoRunId undoes only your own writes of that"
            " run; to undo someone else's, use toRevision instead."
        ),
    },
    attach=Attach.RUN,
    tools=("mnote.page.history", "mnote.page.revert"),
)

TIDY_PAGE = PromptSpec(
    name="tidy_page",
    title={"zh-CN": "整理页面", "en": "Tidy a page"},
    description={
        "zh-CN": "统一标题层级、把列表写成列表块，不改动措辞。",
        "en": "Make headings consistent and lists into list blocks, without changing the wording.",
    },
    arguments=_PAGE_ARGUMENTS,
    text={
        "zh-CN": (
            "请整理 mnote 页面《{title}》（workspaceId {workspaceId}，documentId {documentId}，revision"
            " {revision}），页面附在下面，每个块后面是它的 id。让标题层级一致（一个一级标题，层级不跳级），"
            "把实际上是列表项的段落改为列表块，措辞保持不变，不要删除内容。用 mnote.block.update、"
            "mnote.block.insert 和 mnote.block.move 逐块修改，带上 baseRevision；先用 dryRun=true"
            " 给我看计划的修改，我同意后再写入。"
        ),
        "en": (
            "Tidy the mnote page “{title}” (workspaceId {workspaceId}, documentId {documentId}, revision"
            " {revision}); it is attached below, each block followed by its id. Make the headings consistent"
            " (one top-level heading, no skipped levels) and turn paragraphs that are really list items into"
            " list blocks; keep the wording and delete nothing. Edit block by block with mnote.block.update,"
            " mnote.block.insert and mnote.block.move, passing baseRevision; show me the planned changes as"
            " dry runs (dryRun=true) first and write them once I agree."
        ),
    },
    attach=Attach.PAGE,
    tools=("mnote.block.update", "mnote.block.insert", "mnote.block.move"),
)

PROMPTS: tuple[PromptSpec, ...] = (SUMMARISE_PAGE, REVIEW_RUN, TIDY_PAGE)
