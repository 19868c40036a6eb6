"""The project's stdio transport (`mnote_mcp.transports.stdio`): its framing function under arbitrary
input, the stdio it claims, the pipes it cannot watch (regular files), and the SDK fallback flag.
The exact answers to malformed lines over a real pipe are in `tests/e2e/test_stdio_framing.py`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp_types
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.shared.message import SessionMessage

from mnote_mcp.transports.stdio import INVALID_REQUEST, PARSE_ERROR, encode, frame
from tests.support.helpers import RAW_INITIALIZE, ROOT
from tests.support.timing import patience

TIMEOUT = patience(30)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
IDS = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text()
MESSAGE_LIKE = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]),
        "id": IDS,
        "method": st.text(max_size=12) | st.integers(-5, 5),
        "params": JSON,
        "result": JSON,
        "error": JSON,
    },
)


def check_answer(answer: Any) -> None:
    """One JSON-RPC error object: -32700 or -32600, an id a client could have sent, a message."""
    assert set(answer) == {"jsonrpc", "id", "error"} and answer["jsonrpc"] == "2.0"
    assert answer["error"]["code"] in (PARSE_ERROR, INVALID_REQUEST) and answer["error"]["message"]
    assert answer["id"] is None or type(answer["id"]) in (str, int, float)


def check(line: bytes) -> None:
    framed = frame(line)
    assert framed.message is None or framed.answer is None
    if framed.answer is not None:
        assert framed.answer.endswith(b"\n") and framed.answer.count(b"\n") == 1
        answered = orjson.loads(framed.answer)
        for answer in answered if isinstance(answered, list) else [answered]:
            check_answer(answer)
    if framed.message is not None:  # what the server gets is what was sent
        sent = orjson.loads(line)
        again = framed.message.message.model_dump(by_alias=True, exclude_unset=True)
        # a request or notification carries its params; a response is its result or error (a stray
        # key beside them, such as "params", is no part of it: the SDK's parse leaves it out too)
        keys = ("method", "params") if "method" in sent else ("result", "error")
        for key in ("jsonrpc", "id", *keys):
            assert again.get(key) == sent.get(key), key
        assert type(again.get("id", 0)) in (str, int)
        # built without the SDK's validation pass, it must equal the SDK's own parse (an SDK upgrade
        # that changes its message models fails here)
        assert framed.message.message == mcp_types.jsonrpc_message_adapter.validate_python(
            sent, by_name=False
        )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200).filter(lambda b: b"\n" not in b))
def test_arbitrary_bytes_are_a_message_or_an_answer_never_an_exception(line: bytes) -> None:
    check(line)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON | MESSAGE_LIKE | st.lists(MESSAGE_LIKE, max_size=3))
def test_arbitrary_json_is_a_valid_message_or_its_json_rpc_error(value: Any) -> None:
    line = json.dumps(value).encode()  # Infinity included: not JSON, a parse error
    check(line)
    framed = frame(line)
    if isinstance(value, dict) and "method" in value and "id" in value and framed.message is None:
        # a request the server does not get is always answered, with its id when it is a valid one
        assert framed.answer is not None
        answer = orjson.loads(framed.answer)
        valid_id = isinstance(value["id"], str | int) and not isinstance(value["id"], bool)
        if valid_id and answer["error"]["code"] != PARSE_ERROR:  # Infinity somewhere: not JSON at all
            assert answer["id"] == value["id"]


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(
    st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8),
    st.dictionaries(st.text(max_size=8), JSON, max_size=4),
)
def test_answers_are_encoded_as_the_sdk_encodes_them(request_id: int | str, result: dict[str, Any]) -> None:
    for message in (
        mcp_types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result),
        mcp_types.JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params=result),
        mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id, error=mcp_types.ErrorData(code=-1, message="m")),
    ):
        line = encode(SessionMessage(message))
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        assert json.loads(line) == json.loads(message.model_dump_json(by_alias=True, exclude_unset=True))


def test_requests_reach_the_server_as_the_sdk_parses_them() -> None:
    line = json.dumps(
        {"jsonrpc": "2.0", "id": "r1", "method": "tools/call", "params": {"name": "x"}}
    ).encode()
    framed = frame(line)
    assert framed.message is not None
    assert framed.message.message == mcp_types.jsonrpc_message_adapter.validate_json(line)
    assert frame(b'{"jsonrpc":"2.0","id":3,"result":{}}').message is not None, "responses pass through"


def test_a_bad_response_is_logged_not_answered(caplog: pytest.LogCaptureFixture) -> None:
    assert frame(b'{"jsonrpc":"2.0","id":true,"result":{}}').answer is None
    assert frame(b'[{"jsonrpc":"2.0","method":"notifications/initialized"}]').answer is None
    assert [r.levelname for r in caplog.records].count("WARNING") >= 2


CLAIM = """
import os, sys
from mnote_mcp.transports.stdio import _claimed_stdio
with _claimed_stdio() as (wire_in, wire_out):
    print("stray print"); sys.stdout.flush(); os.write(1, b"stray write\\n")
    os.write(wire_out, b"wire\\n")
    assert os.read(0, 10) == b"", "fd 0 reads /dev/null while serving"
    assert os.read(wire_in, 10) == b"input"
print("restored")
"""


@pytest.mark.slow
def test_stdout_is_the_wire_alone_while_serving() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CLAIM], input=b"input", capture_output=True, timeout=TIMEOUT, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"wire\nrestored\n"
    assert b"stray print\n" in proc.stderr and b"stray write\n" in proc.stderr


def requests(*lines: bytes) -> bytes:
    initialize = json.dumps(RAW_INITIALIZE).encode()
    listed = b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
    return b"\n".join([initialize, *lines, listed]) + b"\n"


def serve_files(tmp_path: Path, data: bytes, *args: str) -> list[Any]:
    """A server whose stdin and stdout are regular files (the loop cannot watch them)."""
    (tmp_path / "in").write_bytes(data)
    with (tmp_path / "in").open("rb") as stdin, (tmp_path / "out").open("wb") as stdout:
        proc = subprocess.run(
            [sys.executable, "-m", "mnote_mcp", "serve", "--db", str(tmp_path / "m.db"), *args],
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            timeout=TIMEOUT,
            cwd=ROOT,
        )
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in (tmp_path / "out").read_bytes().splitlines()]


@pytest.mark.slow
@pytest.mark.e2e
def test_stdin_and_stdout_as_regular_files(tmp_path: Path) -> None:
    answers = serve_files(tmp_path, requests(b"{oops", b'{"jsonrpc":"2.0","id":null,"method":"ping"}'))
    # Framing answers are written as the lines are read; the server's answers come when ready.
    by_id = sorted(((a["id"] or 0), a.get("error", {}).get("code", 0)) for a in answers)
    assert by_id == [(0, PARSE_ERROR), (0, INVALID_REQUEST), (1, 0), (2, 0)]
    assert next(a for a in answers if a["id"] == 2)["result"]["tools"]


@pytest.mark.slow
@pytest.mark.e2e
def test_the_sdk_transport_remains_as_a_fallback(tmp_path: Path) -> None:
    answers = serve_files(tmp_path, requests(), "--stdio-transport", "sdk")
    assert [a["id"] for a in answers] == [1, 2] and answers[-1]["result"]["tools"]


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.parametrize("flags", [(), ("--no-uvloop",), ("--transport", "http", "--port", "0")])
def test_the_start_up_line_names_the_loop_uvloop_unless_turned_off(
    tmp_path: Path, flags: tuple[str, ...]
) -> None:
    """uvloop is a dependency (issue 34) wherever it has a wheel: a default install runs on it."""
    if sys.platform == "win32":
        pytest.skip("uvloop has no Windows wheel: the standard loop runs there")
    import uvloop  # noqa: F401  (installed with the package: pyproject's dependencies)

    argv = [sys.executable, "-m", "mnote_mcp", "serve", "--db", str(tmp_path / "m.db"), *flags]
    env = {**os.environ, "MNOTE_UNSAFE_NO_AUTH": "1"}
    with subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env
    ) as proc:
        assert proc.stderr is not None
        banner = b""
        while b" loop=" not in banner:
            line = proc.stderr.readline()
            assert line, "the server stopped before its banner"
            banner = line
        proc.terminate()
        proc.communicate(timeout=TIMEOUT)
    loop = b"asyncio" if "--no-uvloop" in flags else b"uvloop"
    assert f" loop={loop.decode()} ".encode() in banner, banner
