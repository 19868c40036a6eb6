"""A scripted OpenAI-compatible chat endpoint: the model in Hermes's agent loop, without a model.

Each request that offers tools is one turn of the agent loop; the script decides the next step from
what the model has been shown so far (the tool messages, exactly as Hermes sent them), so later calls
can use earlier results (a revision, a cursor) the way a model would. Requests without tools
(Hermes's auxiliary calls: titles, summaries) get a short answer and do not advance the script.
Every request is recorded, so a test can assert what reached the model.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "scripted-model"


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Turn:
    """What the model answers in one turn: tool calls, or a final text when there are none."""

    calls: tuple[ToolCall, ...] = ()
    text: str = ""


@dataclass
class Transcript:
    """What the model was shown: every tool message's content, in order, with the call it answers."""

    requests: list[dict[str, Any]] = field(default_factory=list)

    @property
    def agent_requests(self) -> list[dict[str, Any]]:
        return [request for request in self.requests if request.get("tools")]

    def tool_messages(self) -> list[dict[str, Any]]:
        if not self.agent_requests:
            return []
        messages = self.agent_requests[-1]["messages"]
        return [message for message in messages if message.get("role") == "tool"]

    def tool_contents(self) -> list[str]:
        return [_text(message.get("content")) for message in self.tool_messages()]

    def tool_names(self) -> list[str]:
        if not self.agent_requests:
            return []
        return [tool["function"]["name"] for tool in self.agent_requests[0]["tools"]]


Script = Callable[[Transcript], Turn]


def _text(content: Any) -> str:
    """A message's content as the model reads it (a string, or the text parts of a list)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


class _Handler(BaseHTTPRequestHandler):
    server: _ModelServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the test's output stays readable
        return

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._json({"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "test"}]})
        else:
            self._json({"error": {"message": "not found"}}, status=404)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._json({"error": {"message": f"not served here: {self.path}"}}, status=404)
            return
        with self.server.lock:
            self.server.transcript.requests.append(body)
            turn = self.server.script(self.server.transcript) if body.get("tools") else Turn(text="ok")
        message = _message(turn)
        if body.get("stream"):
            self._stream(message)
        else:
            self._json(
                {
                    "id": "chatcmpl-scripted",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": MODEL,
                    "choices": [{"index": 0, "message": message, "finish_reason": _finish(message)}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
            )

    def _json(self, payload: dict[str, Any], status: int = 200) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, message: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
        chunks = [
            {"index": 0, "delta": delta, "finish_reason": None},
            {"index": 0, "delta": {}, "finish_reason": _finish(message)},
        ]
        for choice in chunks:
            chunk = {
                "id": "chatcmpl-scripted",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": MODEL,
                "choices": [choice],
            }
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        tail = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0, "model": MODEL}
        self.wfile.write(f"data: {json.dumps({**tail, 'choices': [], 'usage': usage})}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def _message(turn: Turn) -> dict[str, Any]:
    if not turn.calls:
        return {"role": "assistant", "content": turn.text or "done"}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_scripted_{time.monotonic_ns()}_{index}",
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for index, call in enumerate(turn.calls)
        ],
    }


def _finish(message: dict[str, Any]) -> str:
    return "tool_calls" if message.get("tool_calls") else "stop"


class _ModelServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, script: Script) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script = script
        self.transcript = Transcript()
        self.lock = threading.Lock()


@contextmanager
def scripted_model(script: Script) -> Iterator[tuple[str, Transcript]]:
    """Serve the script on a free loopback port; yields the base URL (`.../v1`) and the transcript."""
    server = _ModelServer(script)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        yield f"http://127.0.0.1:{port}/v1", server.transcript
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
