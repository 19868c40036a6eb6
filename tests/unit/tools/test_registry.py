"""A tool is one declaration (`ToolSpec`), and it is whole: every registered tool states who may call
it (a permission case for every `Caller`), what else it can answer (its errors) and at least one
example call, and each of these is true of the server. A declaration missing any of them is refused
when it is made, so a tool cannot be registered without them. The pages generated from the
declarations (README, docs/contract.md, docs/errors.md) are what `python -m mnote_mcp.tools.docs`
makes of them today."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.tools.catalog import ALL_TOOLS
from mnote_mcp.tools.docs import SECTIONS, main, stale
from mnote_mcp.tools.examples import Example, overridden
from mnote_mcp.tools.failures import ErrorCase
from mnote_mcp.tools.permissions import WRITE_PAGE, Caller, Permissions, Refusal
from mnote_mcp.tools.registry import ToolSpec
from mnote_mcp.vocabulary.messages import render_error
from tests.support.helpers import IDS, ROOT, call, connect, dump
from tests.support.tool_calls import TOOLS, arguments, target

pytestmark = pytest.mark.anyio
DOC_1 = target("doc_1")
NAMES = [spec.name for spec in ALL_TOOLS]


@pytest.mark.parametrize("name", NAMES)
def test_every_registered_tool_is_declared_whole(name: str) -> None:
    spec = TOOLS[name]
    assert spec.examples and spec.errors, name
    assert {
        caller for caller in Caller if spec.permissions.refusal(caller) is None
    } == spec.permissions.allowed
    assert set(spec.permissions.allowed) | set(spec.permissions.refused) == set(Caller)
    schema = Draft202012Validator(spec.input_schema(strict=False))
    # an example may use a property accepted but not advertised (`quiet`: baseRevision on most writes)
    properties = set(spec.accepted_schema(strict=False)["properties"])
    for example in spec.examples:
        assert set(example.arguments) <= properties, (name, set(example.arguments) - properties)
        call_arguments = {**IDS, **arguments(spec, DOC_1, example=example)}
        errors = [error.message for error in schema.iter_errors(call_arguments)]
        assert not errors, (name, example, errors)
        for step in example.setup:  # a real write, valid as its tool accepts it
            before = TOOLS[step.tool]
            assert before.writes, (name, step)
            made = {**IDS, **arguments(before, DOC_1, example=step)}
            accepts = before.accepted_schema(strict=False)
            accepted = Draft202012Validator(accepts)
            assert set(step.arguments) <= set(accepts["properties"]), (name, step)
            assert not [error.message for error in accepted.iter_errors(made)], (name, step)
    assert any(case.example is not None for case in spec.errors), f"{name}: show one error by example"
    for case in spec.errors:
        assert case.when and case.recovery, (name, case)
        assert set(case.example or {}) <= properties, (name, case)
    for refusal in spec.permissions.refusals():
        assert refusal.recovery, (name, refusal)


def test_a_tool_without_a_permission_case_an_example_or_its_errors_cannot_be_declared() -> None:
    spec = TOOLS["mnote.page.update_title"]
    with pytest.raises(ValueError, match="at least one example"):
        dataclasses.replace(spec, examples=())
    with pytest.raises(ValueError, match="at least one example call and the errors"):
        dataclasses.replace(spec, errors=())
    with pytest.raises(ValueError, match="no case for"):
        Permissions(
            allowed=WRITE_PAGE.allowed,
            refused={k: v for k, v in WRITE_PAGE.refused.items() if k != Caller.VIEWER},
        )
    denied = Refusal(ErrorCode.PERMISSION_DENIED, Reason.PAGE_WRITE, "no")
    with pytest.raises(ValueError, match="allowed and refused"):
        Permissions(allowed=WRITE_PAGE.allowed, refused={**WRITE_PAGE.refused, Caller.OWNER: denied})
    fields = {field.name: getattr(spec, field.name) for field in dataclasses.fields(spec) if field.init}
    for required in ("permissions", "errors", "examples", "budget"):
        with pytest.raises(TypeError, match=required):
            ToolSpec(**{name: value for name, value in fields.items() if name != required})


def _showing(spec: ToolSpec, case: ErrorCase) -> Example:
    assert case.example is not None
    return Example(overridden(spec.example.arguments, case.example))


@pytest.mark.parametrize("mode", ["legacy"])
@pytest.mark.parametrize("name", NAMES)
async def test_each_error_a_tool_shows_by_example_is_what_the_server_answers(
    db: Path, mode: str, name: str
) -> None:
    """Every error case with an example call, made by a caller the tool admits: the declared code, and
    the words of the declared reason (message, hint, retryable), nothing written."""
    spec = TOOLS[name]
    caller = next(
        caller for caller in (Caller.EDITOR, Caller.OWNER) if spec.permissions.refusal(caller) is None
    )
    actor = {Caller.EDITOR: "user_editor", Caller.OWNER: "user_owner"}[caller]
    before = dump(db, audit=False)
    async with connect(db, mode, actor=actor) as client:
        for index, case in enumerate(spec.errors):
            if case.example is None:
                continue
            made = arguments(spec, DOC_1, f"error-{index}", example=_showing(spec, case))
            envelope = await call(client, spec.name, **{**IDS, **made})
            error = envelope["error"]
            assert error is not None, (name, case.when, envelope["result"])
            assert error == render_error(MnoteError(case.code, case.reason, error.get("details")), "en"), (
                name,
                case.when,
                error,
            )
            # issue 30: every refusal names its argument ("invalid argument at : ..." named none)
            pointer = error.get("details", {}).get("pointer")
            assert pointer is None or pointer.startswith("/"), (name, case.when, error)
            assert " at :" not in error["message"], (name, case.when, error)
    assert dump(db, audit=False) == before


def test_the_generated_pages_are_current() -> None:
    """README.md, docs/contract.md and docs/errors.md hold what the declarations make today."""
    assert not stale(ROOT), "run: python -m mnote_mcp.tools.docs (and review the diff)"


def test_the_docs_command_rewrites_a_stale_page_and_checks(tmp_path: Path) -> None:
    for path in {section.path for section in SECTIONS}:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / path, tmp_path / path)
    readme = tmp_path / "README.md"
    readme.write_text(readme.read_text(encoding="utf-8").replace("| `mnote.page.get` |", "| `x` |"), "utf-8")
    assert main(["--root", str(tmp_path), "--check"]) == 1
    assert "| `x` |" in readme.read_text(encoding="utf-8"), "--check changes nothing"
    assert main(["--root", str(tmp_path)]) == 0
    assert main(["--root", str(tmp_path), "--check"]) == 0
    assert readme.read_text(encoding="utf-8") == (ROOT / "README.md").read_text(encoding="utf-8")


def test_a_case_says_what_to_do_once() -> None:
    """Where the refusal's words declare a hint, that is the case's recovery; words of its own beside it
    are refused, and a case with neither."""
    with pytest.raises(ValueError, match="say it once"):
        ErrorCase(ErrorCode.CONFLICT, Reason.REVISION, "another write came first", "read it again")
    with pytest.raises(ValueError, match="say what to do"):
        ErrorCase(ErrorCode.NOT_FOUND, Reason.PAGE, "the page does not exist")
    derived = ErrorCase(ErrorCode.CONFLICT, Reason.REVISION, "another write came first")
    assert derived.recovery.startswith("the page is at revision `details.currentRevision`: read it again")
    assert derived.given({"baseRevision": 0}).recovery == derived.recovery
