"""The error catalogue in words: what a caller reads for each (code, reason), in zh-CN or en.

zh-CN is the contract's language and the default; `MNOTE_LOCALE=en` (or `--locale en`) switches.
Messages interpolate only safe details (ids, revisions, option names, JSON pointers), never content.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, NotRequired

from typing_extensions import TypedDict

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason, reason_of
from mnote_mcp.kernel.errors import Locale as Locale
from mnote_mcp.kernel.errors import Words as Words
from mnote_mcp.kernel.store.commands import ALL as COMMANDS

if TYPE_CHECKING:
    from pydantic import JsonValue

DEFAULT_LOCALE: Locale = "zh-CN"
_LANGUAGES: dict[str, Locale] = {"zh": "zh-CN", "en": "en", "c": "en", "posix": "en"}


def parse_locale(value: str) -> Locale:
    """`zh-CN` or `en` from the spellings people and systems use: `zh_CN`, `zh-cn`, `zh_CN.UTF-8`,
    `en_US.UTF-8`, `en-GB`, `C`. Messages exist in two languages, so the region only picks the language."""
    language = value.strip().split(".", 1)[0].split("@", 1)[0].replace("_", "-").split("-", 1)[0].lower()
    if language not in _LANGUAGES:
        raise ValueError(
            f"unknown locale {value!r}; use zh-CN or en (zh_CN, en_US.UTF-8 and the like work too)"
        )
    return _LANGUAGES[language]


_C = ErrorCode
_R = Reason


# Every refusal's words, one declaration each: its (code, reason), the message and the hint a caller
# reads, in both locales. Reason None is the code's fallback; a reason without a message of its own
# reads its code's, and one without a hint has none. A refusal only one kernel command raises is
# declared with the command (`CommandSpec.refusals`), the others here.
_DECLARED: tuple[Words, ...] = (
    Words(
        _C.UNAUTHENTICATED,
        None,
        message={
            "zh-CN": "未登录：当前连接没有绑定用户身份",
            "en": "not signed in: no actor is bound to this connection",
        },
    ),
    Words(_C.PERMISSION_DENIED, None, message={"zh-CN": "没有权限", "en": "permission denied"}),
    Words(
        _C.PERMISSION_DENIED,
        _R.NOT_MEMBER,
        message={
            "zh-CN": "不是该 workspace 的成员",
            "en": "not a member of this workspace",
        },
    ),
    Words(
        _C.PERMISSION_DENIED,
        _R.PAGE_READ,
        message={"zh-CN": "无页面读取权限", "en": "no page read permission"},
    ),
    Words(
        _C.PERMISSION_DENIED,
        _R.PAGE_WRITE,
        message={"zh-CN": "无页面写权限", "en": "no page write permission"},
    ),
    Words(
        _C.PERMISSION_DENIED,
        _R.ARTIFACT_WRITE,
        message={
            "zh-CN": "无 artifact 写权限",
            "en": "no artifact write permission",
        },
    ),
    Words(
        _C.PERMISSION_DENIED,
        _R.SCOPE,
        message={
            "zh-CN": "当前连接未授予权限范围 {scope}",
            "en": "this connection is not granted the scope {scope}",
        },
    ),
    Words(
        _C.PERMISSION_DENIED,
        _R.READ_ONLY,
        message={
            "zh-CN": "服务器处于只读模式，写工具不可用",
            "en": "the server is in read-only mode: write tools are disabled",
        },
        hint={
            "zh-CN": "只读模式下只能调用读取的工具：{readTools}",
            "en": "in read-only mode only the tools that read are available: {readTools}",
        },
    ),
    Words(
        _C.PERMISSION_DENIED,
        _R.ACTOR_MISMATCH,
        message={
            "zh-CN": "actorId 与当前连接的身份不一致",
            "en": "actorId does not match the identity of this connection",
        },
    ),
    Words(
        _C.PERMISSION_DENIED,
        _R.DECLINED,
        message={
            "zh-CN": "用户拒绝了这次写入，未写入任何内容",
            "en": "the person declined this write; nothing was written",
        },
        hint={
            "zh-CN": "不要以相同参数重试；先问用户想要怎样修改",
            "en": "do not retry the same write; ask the person what they want instead",
        },
    ),
    Words(
        _C.PERMISSION_DENIED,
        _R.CANCELLED,
        message={
            "zh-CN": "用户取消了确认，未写入任何内容",
            "en": "the person dismissed the confirmation; nothing was written",
        },
        hint={
            "zh-CN": "先在对话中征得用户同意，再以相同的 idempotencyKey 重试",
            "en": "ask the person in the conversation first, then retry with the same idempotencyKey",
        },
    ),
    Words(
        _C.PERMISSION_DENIED,
        _R.CONFIRM_TIMEOUT,
        message={
            "zh-CN": "{timeoutSeconds} 秒内没有得到用户确认，未写入任何内容",
            "en": "the person did not confirm within {timeoutSeconds} s; nothing was written",
        },
        hint={
            "zh-CN": "用户在场时以相同的 idempotencyKey 重试",
            "en": "retry with the same idempotencyKey when the person is there to answer",
        },
    ),
    Words(
        _C.PERMISSION_DENIED,
        _R.CONFIRM_UNAVAILABLE,
        message={
            "zh-CN": "这次写入需要用户确认，但当前客户端无法询问用户，未写入任何内容",
            "en": "this write needs the person's confirmation and this client cannot ask them; nothing was written",
        },
        hint={
            "zh-CN": "改用不需要确认的小步修改（mnote.block.* 工具），或请用户自己修改",
            "en": "make the change in smaller steps that need no confirmation (the mnote.block.* tools), or ask the person to make it",
        },
    ),
    Words(
        _C.PERMISSION_DENIED,
        _R.CONFIRMATION_REQUIRED,
        message={
            "zh-CN": "这次写入需要用户确认，未写入任何内容。它将对页面《{page}》：{change}",
            "en": "this write needs the person's confirmation; nothing was written. On the page “{page}” it: {change}",
        },
        hint={
            "zh-CN": "先在对话中问用户是否要这样修改；用户同意后，以相同参数、idempotencyKey 设为 {confirmationKey} 再调用一次"
            "（{expiresInSeconds} 秒内有效，仅限一次）；用户不同意就不要修改",
            "en": "ask the person in the conversation whether to make this change; if they agree, call again with the"
            " same arguments and idempotencyKey {confirmationKey} (once, within {expiresInSeconds} s); if not, leave it",
        },
    ),
    Words(
        _C.PERMISSION_DENIED,
        _R.CONFIRMATION_INVALID,
        message={
            "zh-CN": "该 idempotencyKey 不是本服务器为这次调用（相同的工具、参数、页面和用户）签发的确认，未写入任何内容",
            "en": "this idempotencyKey is not a confirmation this server issued for this call (the same tool,"
            " arguments, page and caller); nothing was written",
        },
        hint={
            "zh-CN": "用自己的 idempotencyKey 再调用一次，以取得这次修改的确认",
            "en": "call again with an idempotencyKey of your own to get a confirmation for this change",
        },
    ),
    Words(
        _C.PERMISSION_DENIED,
        _R.CONFIRMATION_EXPIRED,
        message={
            "zh-CN": "该确认已过期，未写入任何内容",
            "en": "this confirmation has expired; nothing was written",
        },
        hint={
            "zh-CN": "用自己的 idempotencyKey 再调用一次，并就新的确认询问用户",
            "en": "call again with an idempotencyKey of your own, and ask the person about the new confirmation",
        },
    ),
    Words(
        _C.PERMISSION_DENIED,
        _R.CONFIRMATION_USED,
        message={
            "zh-CN": "该确认已使用过：那次写入已完成（{commandId}），这次没有再写入",
            "en": "this confirmation was already used: that write was made ({commandId}) and nothing was written again",
        },
        hint={
            "zh-CN": "用 mnote.page.get 查看页面；新的修改请用新的 idempotencyKey",
            "en": "read the page with mnote.page.get; a new change needs a new idempotencyKey",
        },
    ),
    Words(_C.NOT_FOUND, None, message={"zh-CN": "对象不存在", "en": "not found"}),
    Words(_C.NOT_FOUND, _R.PAGE, message={"zh-CN": "页面不存在", "en": "page not found"}),
    Words(
        _C.NOT_FOUND, _R.BLOCK, message={"zh-CN": "块不存在：{blockId}", "en": "block not found: {blockId}"}
    ),
    Words(
        _C.NOT_FOUND,
        _R.COMMAND,
        message={
            "zh-CN": "该页面的历史中没有 commandId 为 {commandId} 的写入",
            "en": "this page's history has no write with commandId {commandId}",
        },
    ),
    Words(
        _C.NOT_FOUND,
        _R.RUN,
        message={
            "zh-CN": "该页面的历史中没有你在运行 {runId} 中的写入",
            "en": "this page's history has no write of yours in the run {runId}",
        },
        hint={
            "zh-CN": "使用你的某次写入结果中给出的 runId（每次写入的结果都有）",
            "en": "use the runId one of your writes' results names (every write's result has one)",
        },
    ),
    Words(
        _C.INVALID_ARGUMENT,
        None,
        message={
            "zh-CN": "参数无效：{pointer} {reason}",
            "en": "invalid argument at {pointer}: {reason}",
        },
    ),
    Words(
        _C.INVALID_ARGUMENT,
        _R.BLOCK_TYPE,
        message={
            "zh-CN": "不支持的块类型（{pointer}），支持：{supportedTypes}",
            "en": "unsupported block type at {pointer}; supported: {supportedTypes}",
        },
        hint={
            "zh-CN": "把块的 type 改为支持的类型之一",
            "en": "use one of the supported block types",
        },
    ),
    Words(
        _C.INVALID_ARGUMENT,
        _R.PAGE_TOO_LARGE,
        message={
            "zh-CN": "页面将超出大小限制 {limit}={maximum}（{flag}），未写入任何内容",
            "en": "the page would exceed its size limit {limit}={maximum} ({flag}); nothing was written",
        },
    ),
    Words(
        _C.INVALID_ARGUMENT,
        _R.TITLE_AMBIGUOUS,
        message={
            "zh-CN": "你可读的页面中有 {matches} 个页面使用这个标题，未执行任何操作",
            "en": "{matches} pages you can read have this title; nothing was done",
        },
        hint={
            "zh-CN": "用 documentId 和 workspaceId 指明其中一个页面（details.candidates 列出这些页面）",
            "en": "name one of them by its documentId and workspaceId (details.candidates lists them)",
        },
    ),
    Words(
        _C.INVALID_ARGUMENT,
        _R.UNKNOWN_COMMAND,
        message={
            "zh-CN": "未知的 kernel 命令 {command}",
            "en": "unknown kernel command {command}",
        },
    ),
    Words(
        _C.CONFLICT,
        None,
        message={
            "zh-CN": "页面版本冲突，需要刷新后重试",
            "en": "page revision conflict, refresh and retry",
        },
    ),
    Words(
        _C.CONFLICT,
        _R.CURSOR,
        message={
            "zh-CN": "分页读取期间页面已修改，cursor 已失效",
            "en": "the page changed while it was read in pieces; the cursor is no longer valid",
        },
        hint={
            "zh-CN": "页面当前 revision 为 {currentRevision}：不带 cursor 从头重新读取",
            "en": "the page is at revision {currentRevision}: read it again from the start, without cursor",
        },
    ),
    Words(
        _C.CONFLICT,
        _R.BLOCKS,
        message={
            "zh-CN": "baseRevision 之后这些块已被修改：{blockIds}",
            "en": "these blocks changed after baseRevision: {blockIds}",
        },
        hint={
            "zh-CN": "页面当前 revision 为 {currentRevision}：用 mnote.page.get 重新读取这些块，再以 baseRevision={currentRevision} 重试",
            "en": "the page is at revision {currentRevision}: read these blocks again with mnote.page.get, then retry "
            "with baseRevision={currentRevision}",
        },
    ),
    Words(
        _C.CONFLICT,
        _R.PLAN_CHANGED,
        message={
            "zh-CN": "在等待用户确认期间页面一再变化，未写入任何内容",
            "en": "the page kept changing while the person was asked to confirm; nothing was written",
        },
        hint={
            "zh-CN": "用 mnote.page.get 重新读取页面，再决定是否重试",
            "en": "read the page again with mnote.page.get before deciding whether to retry",
        },
    ),
    Words(
        _C.CONFLICT,
        _R.CONFIRMATION_STALE,
        message={
            "zh-CN": "用户确认之后页面已有改动（revision {revision} 之后），未写入任何内容",
            "en": "the page changed after the person was asked (since revision {revision}); nothing was written",
        },
        hint={
            "zh-CN": "用 mnote.page.get 重新读取页面，再用自己的 idempotencyKey 调用，并就新的确认询问用户",
            "en": "read the page again with mnote.page.get, then call with an idempotencyKey of your own and ask the"
            " person about the new confirmation",
        },
    ),
    Words(
        _C.CONFLICT,
        _R.REVISION,
        hint={
            "zh-CN": "页面当前 revision 为 {currentRevision}：先用 mnote.page.get 重新读取，再以 baseRevision={currentRevision} 重试",
            "en": "the page is at revision {currentRevision}: read it again with mnote.page.get, then retry with "
            "baseRevision={currentRevision}",
        },
    ),
    Words(
        _C.IDEMPOTENCY_CONFLICT,
        None,
        message={
            "zh-CN": "同一幂等键已用于不同参数",
            "en": "the same idempotency key was already used with different arguments",
        },
        hint={
            "zh-CN": "重试请使用与首次完全相同的参数；新的修改请换一个新的 idempotencyKey",
            "en": "a retry must repeat the first call exactly; use a new idempotencyKey for a different change",
        },
    ),
    Words(
        _C.IDEMPOTENCY_CONFLICT,
        _R.OTHER_COMMAND,
        message={
            "zh-CN": "同一幂等键已用于另一个操作（{usedBy}）",
            "en": "the same idempotency key was already used for another operation ({usedBy})",
        },
    ),
    Words(
        _C.IDEMPOTENCY_CONFLICT,
        _R.SUMMARY,
        message={
            "zh-CN": "同一幂等键已用于不同 summary 内容",
            "en": "the same idempotency key was already used for different summary content",
        },
    ),
    Words(
        _C.OPTION_NOT_WIRED,
        None,
        message={
            "zh-CN": "页面选项尚未接入运行时：{options}",
            "en": "page option not wired in the runtime yet: {options}",
        },
        hint={
            "zh-CN": "去掉这些选项再调用；用 dryRun=true 可以先查看警告",
            "en": "leave these options out; a dryRun=true call shows the warning without failing",
        },
    ),
    Words(
        _C.RUNTIME_UNAVAILABLE,
        None,
        message={
            "zh-CN": "mnote 运行时暂时不可用，请稍后重试",
            "en": "the mnote runtime is unavailable, retry later",
        },
        hint={
            "zh-CN": "稍后用相同的 idempotencyKey 重试，不会重复写入",
            "en": "retry later with the same idempotencyKey; it will not be written twice",
        },
    ),
    Words(
        _C.RUNTIME_UNAVAILABLE,
        _R.STORE_BUSY,
        message={
            "zh-CN": "页面存储正被其他写入锁定，请稍后重试",
            "en": "the page store is locked by another writer; retry later",
        },
    ),
    Words(
        _C.RUNTIME_UNAVAILABLE,
        _R.STORE_UNREACHABLE,
        message={
            "zh-CN": "页面存储的数据库暂时无法连接，请稍后重试",
            "en": "the page store's database cannot be reached right now; retry later",
        },
    ),
    Words(
        _C.RUNTIME_UNAVAILABLE,
        _R.STORE_UNAVAILABLE,
        message={
            "zh-CN": "服务器暂时无法打开页面存储（例如文件描述符已用尽），请稍后重试",
            "en": "the server cannot open the page store right now (for instance, out of file descriptors); retry later",
        },
    ),
    Words(
        _C.RUNTIME_UNAVAILABLE,
        _R.SHUTTING_DOWN,
        message={
            "zh-CN": "服务器正在关闭，请稍后重试",
            "en": "the server is shutting down; retry later",
        },
    ),
    Words(
        _C.RATE_LIMITED,
        None,
        message={
            "zh-CN": "调用过于频繁，请 {retryAfterSeconds} 秒后重试",
            "en": "too many calls; retry in {retryAfterSeconds} s",
        },
        hint={
            "zh-CN": "等待 {retryAfterSeconds} 秒后以相同参数重试（写入用相同的 idempotencyKey）；这次调用没有执行任何操作",
            "en": "wait {retryAfterSeconds} s, then retry the same call (a write with the same idempotencyKey);"
            " nothing was run",
        },
    ),
    Words(
        _C.RATE_LIMITED,
        _R.RATE,
        message={
            "zh-CN": "{limit} 类调用过于频繁（每个用户每分钟至多 {perMinute} 次，突发至多 {burst} 次），请 {retryAfterSeconds} 秒后重试",
            "en": "too many {limit} calls (at most {perMinute} a minute per actor, bursts of {burst}); retry in"
            " {retryAfterSeconds} s",
        },
    ),
    Words(
        _C.RATE_LIMITED,
        _R.IN_FLIGHT,
        message={
            "zh-CN": "你同时进行的 {limit} 类调用已达上限（{inFlight} 个），请 {retryAfterSeconds} 秒后重试",
            "en": "you have {inFlight} {limit} calls in flight already, the most allowed; retry in {retryAfterSeconds} s",
        },
        hint={
            "zh-CN": "等已发出的 {limit} 类调用返回后再发新的（约 {retryAfterSeconds} 秒）；这次调用没有执行任何操作",
            "en": "wait for the {limit} calls already sent to answer (about {retryAfterSeconds} s) before sending"
            " another; nothing was run",
        },
    ),
    Words(
        _C.RATE_LIMITED,
        _R.SHARE,
        message={
            "zh-CN": "你的 {limit} 类调用已用完在服务器上的时间份额（{share}），请 {retryAfterSeconds} 秒后重试",
            "en": "your {limit} calls have used their share ({share}) of the server's time; retry in"
            " {retryAfterSeconds} s",
        },
    ),
    Words(
        _C.RATE_LIMITED,
        _R.BUSY,
        message={
            "zh-CN": "服务器正忙于其他用户的 {limit} 类调用（等待了 {waitedSeconds} 秒），请 {retryAfterSeconds} 秒后重试",
            "en": "the server is busy with other callers' {limit} calls (waited {waitedSeconds} s); retry in"
            " {retryAfterSeconds} s",
        },
    ),
    Words(
        _C.RUNTIME_UNAVAILABLE,
        _R.SEARCH_TIMEOUT,
        message={
            "zh-CN": "搜索超过 {searchTimeoutSeconds} 秒，已被停止",
            "en": "the search ran longer than {searchTimeoutSeconds} s and was stopped",
        },
        hint={
            "zh-CN": "缩小搜索范围（更长或更多的词、指定 workspaceId）后重试",
            "en": "narrow the search (longer or more words, a workspaceId), then retry",
        },
    ),
    Words(
        _C.RUNTIME_UNAVAILABLE,
        _R.SERVICE_TOKEN,
        message={
            "zh-CN": "mnote 运行时拒绝了本服务器的服务令牌：这是服务器的配置错误，重试无法解决",
            "en": "the mnote runtime refused this server's service token: a configuration error that retrying will not fix",
        },
        hint={
            "zh-CN": "请告知运维：服务器的 MNOTE_RUNTIME_TOKEN 与运行时要求的令牌不一致",
            "en": "tell the operator: the server's MNOTE_RUNTIME_TOKEN does not match the token the runtime requires",
        },
    ),
    Words(
        _C.INTERNAL,
        None,
        message={"zh-CN": "内部错误，已记录日志", "en": "internal error; it has been logged"},
    ),
)
REFUSALS: tuple[Words, ...] = (*_DECLARED, *(words for command in COMMANDS for words in command.refusals))
MESSAGES: dict[tuple[ErrorCode, Reason | None], dict[Locale, str]] = {
    (words.code, words.reason): words.message for words in REFUSALS if words.message is not None
}
HINTS: dict[tuple[ErrorCode, Reason | None], dict[Locale, str]] = {
    (words.code, words.reason): words.hint for words in REFUSALS if words.hint is not None
}


def _lookup(
    table: Mapping[tuple[ErrorCode, Reason | None], dict[Locale, str]], code: ErrorCode, reason: Reason
) -> dict[Locale, str] | None:
    return table.get((code, reason)) or table.get((code, None))


def hint_of(code: ErrorCode, reason: Reason) -> dict[Locale, str] | None:
    """The hint a refusal of `code` for `reason` reads, if any (its own, else its code's)."""
    return _lookup(HINTS, code, reason)


@dataclass(frozen=True, slots=True)
class Shown:
    """How much of an error's details a refusal shows: lists cut to their first `items`, strings (a
    client's ids, pointers, reasons) to `chars` (their middle left out). An error may name thousands of
    blocks (a conflict over a whole page); a model can act on the count and the first few, and the
    result budget holds errors too."""

    items: int = 20
    chars: int = 200


SHOWN = Shown()
# Tighter and tighter, until an error fits the result budget (`vocabulary.envelope.failure`).
SHOWN_STEPS: tuple[Shown, ...] = (SHOWN, Shown(5, 100), Shown(1, 60), Shown(0, 40))
_IN_ALL: dict[Locale, str] = {"zh-CN": "…（共 {count:,} 个）", "en": "… ({count:,} in all)"}


def _cut(text: str, chars: int) -> str:
    if len(text) <= chars:
        return text
    return text[: chars // 2] + "…" + text[-(chars - chars // 2 - 1) :] if chars > 1 else "…"


def _shown(value: JsonValue, shown: Shown) -> JsonValue:
    if isinstance(value, str):
        return _cut(value, shown.chars)
    if isinstance(value, list):
        return [_shown(item, shown) for item in value[: shown.items]]
    if isinstance(value, dict):
        return {key: _shown(item, shown) for key, item in value.items()}
    return value


def _listed(values: list[JsonValue], shown: Shown, locale: Locale) -> str:
    """A list in a sentence: all of it, or its first items and how many there are in all."""
    text = ", ".join(_cut(str(value), shown.chars) for value in values[: shown.items])
    if len(values) <= shown.items:
        return text
    return f"{text}{', ' if text else ''}{_IN_ALL[locale].format(count=len(values))}"


def _fill(
    template: str, details: Mapping[str, JsonValue], locale: Locale = "en", shown: Shown = SHOWN
) -> str:
    values = {
        key: _listed(value, shown, locale) if isinstance(value, list) else _shown(value, shown)
        for key, value in details.items()
    }
    try:
        return template.format_map(_Missing(values))
    except (ValueError, IndexError):
        return template


class _Missing(dict[str, object]):
    def __missing__(self, key: str) -> str:
        return "?"


class RenderedError(TypedDict):
    """The envelope's `error` object (docs/contract.md, "3. The response")."""

    code: str
    message: str
    retryable: bool
    hint: NotRequired[str]
    details: NotRequired[dict[str, JsonValue]]


class RenderedWarning(TypedDict):
    """One of a result's `warnings`: what the real call would refuse or do differently."""

    code: str
    message: str
    details: NotRequired[dict[str, JsonValue]]


def render_error(error: MnoteError, locale: Locale, shown: Shown = SHOWN) -> RenderedError:
    """The envelope's `error` object: code, message, retryable, and hint/details where they help.

    Bounded whatever the error holds (`Shown`): a list in the message is its first items and a count
    ("b_1, b_2, … (2,000 in all)"); a list in `details` is cut the same way, how many were left out
    per field in `details.omitted`; long strings lose their middle."""
    texts = _lookup(MESSAGES, error.code, error.reason) or MESSAGES[(ErrorCode.INTERNAL, None)]
    rendered: RenderedError = {
        "code": error.code.value,
        "message": _fill(texts[locale], error.details, locale, shown),
        "retryable": error.retryable,
    }
    hint = _lookup(HINTS, error.code, error.reason)
    if hint:
        rendered["hint"] = _fill(hint[locale], error.details, locale, shown)
    if error.details:
        details: dict[str, JsonValue] = {key: _shown(value, shown) for key, value in error.details.items()}
        omitted: dict[str, JsonValue] = {
            key: len(value) - shown.items
            for key, value in error.details.items()
            if isinstance(value, list) and len(value) > shown.items
        }
        if omitted:
            details["omitted"] = omitted
        rendered["details"] = details
    return rendered


def render_warning(warning: Mapping[str, object], locale: Locale) -> RenderedWarning:
    """A dry-run warning: the same words the real call's error would use."""
    name = str(warning.get("code"))
    given = warning.get("details")
    details: dict[str, JsonValue] = dict(given) if isinstance(given, dict) else {}
    try:
        code = ErrorCode(name)
    except ValueError:
        code = None
    text = WARNINGS.get(name, {}).get(locale)
    if text is None and code is not None:
        texts = _lookup(MESSAGES, code, reason_of(warning.get("reason")))
        text = texts[locale] if texts else None
    rendered: RenderedWarning = {"code": name, "message": _fill(text or name, details, locale)}
    if details:
        rendered["details"] = details
    return rendered


WARNINGS: dict[str, dict[Locale, str]] = {
    "result_piece": {
        "zh-CN": "页面超出单个结果的大小上限，这里只返回其中一段：用 cursor=nextCursor 再次调用以读取下一段",
        "en": "the page is longer than one result may be, so this is one piece of it: call again with"
        " cursor=nextCursor for the next piece",
    },
    "result_block_piece": {
        "zh-CN": "有一个块超出单个结果的大小上限，这里只返回其中一段（blockPiece 说明位置）：用 cursor=nextCursor"
        " 再次调用以读取其余部分；不要只凭一段改写整个块",
        "en": "one block is longer than one result may be, so this is a piece of it (blockPiece says"
        " where): call again with cursor=nextCursor for the rest; do not rewrite the block from a piece",
    },
    "result_oversized": {
        "zh-CN": "页面的标题和选项已占满单个结果的大小上限，此段仍超出上限",
        "en": "the page's title and options alone fill what one result may be, so this piece is still larger",
    },
    "result_list": {
        "zh-CN": "单个结果只容得下前 {shown} 项：用 cursor=nextCursor 再次调用以读取其余部分",
        "en": "only the first {shown} fit in one result: call again with cursor=nextCursor for the rest",
    },
    "result_cut": {
        "zh-CN": "这一项本身超出单个结果的大小上限，其中的部分列表已省略（见 details.omitted）",
        "en": "this entry alone is larger than one result may be, so lists inside it are cut (see"
        " details.omitted)",
    },
    "result_trimmed": {
        "zh-CN": "结果超出大小上限，已省略部分列表项（见 details.omitted）；写入本身已完整完成，可重新读取页面查看",
        "en": "the result was larger than one result may be, so some list entries are left out (see"
        " details.omitted); the write itself is complete: read the page to see it",
    },
    "page_text_withheld": {
        "zh-CN": "此连接未被授予 page.read，答复中省略了页面文本（{withheld}）；写入本身不受影响",
        "en": "this connection is not granted page.read, so page text is left out of this answer"
        " ({withheld}); the write itself is not affected",
    },
    "idempotent_replay": {
        "zh-CN": "该 idempotencyKey 已执行过（{commandId}）：真实调用将重放首次结果，不会再次写入",
        "en": "this idempotencyKey was already executed ({commandId}): a real call replays that result and writes nothing",
    },
}

CATALOGUE_BEGIN = "<!-- catalogue: generated by `python -m mnote_mcp.vocabulary.messages`; do not edit -->"
CATALOGUE_END = "<!-- end of catalogue -->"


def catalogue_markdown() -> str:
    """docs/errors.md's tables, from the catalogue above (a test keeps the page equal to this)."""

    def rows(table: Mapping[tuple[ErrorCode, Reason | None], dict[Locale, str]]) -> list[str]:
        return [
            f"| `{code.value}` | {reason.value if reason else '*'} | {texts['zh-CN']} | {texts['en']} |"
            for (code, reason), texts in table.items()
        ]

    header = ["| code | reason | zh-CN | en |", "|---|---|---|---|"]
    warnings = [f"| `{code}` | {texts['zh-CN']} | {texts['en']} |" for code, texts in WARNINGS.items()]
    return "\n".join(
        [
            CATALOGUE_BEGIN,
            *header,
            *rows(MESSAGES),
            "",
            "## Hints",
            "",
            *header,
            *rows(HINTS),
            "",
            "## Dry-run warnings",
            "",
            "A dry run reports, as `result.warnings[]`, what the real call would refuse or do differently:",
            "`mnote_tool_option_not_wired` (with the error's words) and:",
            "",
            "| code | zh-CN | en |",
            "|---|---|---|",
            *warnings,
            CATALOGUE_END,
        ]
    )


if __name__ == "__main__":
    print(catalogue_markdown())
