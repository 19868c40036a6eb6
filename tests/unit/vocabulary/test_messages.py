"""vocabulary/messages.py: one declaration per refusal, and the tables derived from it."""

from __future__ import annotations

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.vocabulary.messages import HINTS, MESSAGES, REFUSALS, render_error


def test_each_refusal_is_declared_once_with_words() -> None:
    """A second declaration of a (code, reason) would silently replace the first in the tables."""
    keys = [(words.code, words.reason) for words in REFUSALS]
    assert len(keys) == len(set(keys)), [key for key in keys if keys.count(key) > 1]
    assert all(words.message or words.hint for words in REFUSALS)
    for words in REFUSALS:
        for texts in (words.message, words.hint):
            assert texts is None or set(texts) == {"zh-CN", "en"}, (words.code, words.reason)


def test_every_code_has_a_fallback_message() -> None:
    assert {code for code in ErrorCode} <= {code for code, reason in MESSAGES if reason is None}


def test_a_reason_without_words_of_its_own_reads_its_codes() -> None:
    declared = {(words.code, words.reason) for words in REFUSALS}
    assert (ErrorCode.CONFLICT, Reason.REVISION) in HINTS and (
        ErrorCode.CONFLICT,
        Reason.REVISION,
    ) not in MESSAGES
    rendered = render_error(MnoteError(ErrorCode.CONFLICT, Reason.REVISION, {"currentRevision": 7}), "en")
    assert rendered["message"] == MESSAGES[(ErrorCode.CONFLICT, None)]["en"]
    assert rendered["hint"].startswith("the page is at revision 7")
    assert (ErrorCode.NOT_FOUND, Reason.PAGE) in declared
