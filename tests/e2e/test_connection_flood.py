"""Connection floods (issue 26, finding 4): clients that connect and send nothing, or half a request's
headers, as fast as the server lets them, against a real server on each event loop. The server holds
at most `--max-connections` connections (counted in its file descriptors, /proc/PID/fd), logs a
bounded few lines (no traceback per connection), and an authenticated client keeps being served
meanwhile; under a low file limit (`ulimit -n`) the cap is fitted to it at start, and running out of
descriptors anyway (the limit lowered under a running server) is one log line and a lower cap, not
a flood of accept tracebacks. The reference runtime's server is the same code."""

from __future__ import annotations

import resource
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.support.flood import HALF_SENT, fd_peak, flooding, open_fds
from tests.support.helpers import call, page_args
from tests.support.http_helpers import address, http_server, mcp_http, wait_until, write_tokens
from tests.support.runtimes import RuntimeProcess
from tests.support.timing import patience

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
CAP = 40
CLIENTS = 300  # flood connections held at once: several times the cap
MARGIN = 16  # descriptors over the cap the server may hold at once (a small constant)
CALLS = 8
LOG_BOUND = 4000  # characters the server may log during a flood
THINK = 0.2  # seconds an agent's connection stays idle between two calls (kept alive)
LOOPS = pytest.mark.parametrize("loop", ["uvloop", "asyncio"])


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    return write_tokens(tmp_path / "tokens.json", {"tok-a": {"actorId": "user_editor"}})


def _loop_args(loop: str) -> tuple[str, ...]:
    return ("--no-uvloop",) if loop == "asyncio" else ()


def _healthy(url: str) -> bool:
    try:
        return httpx2.get(f"{url}/healthz", timeout=patience(10)).status_code == 200
    except httpx2.HTTPError:
        return False


async def _calls_during_a_flood(
    url: str, pid: int, payload: bytes, until: Callable[[], bool] = lambda: True
) -> tuple[int, int, int]:
    """An authenticated MCP client's calls while the flood runs (once it is in full swing and
    `until()`): all must answer. Returns the descriptors the server held before the flood, at its
    peak, and once the calls are done (the flood still on)."""
    host, port = address(url)
    async with mcp_http(url, "tok-a") as client:
        assert (await call(client, "mnote.page.get", **page_args()))["ok"]
        before = open_fds(pid)
        with fd_peak(pid) as peak:
            async with flooding(host, port, clients=CLIENTS, payload=payload) as flood:
                await flood.reached(5 * CAP)
                assert await anyio.to_thread.run_sync(wait_until, until, 60)
                for _ in range(CALLS):
                    answer = await call(client, "mnote.page.get", **page_args())
                    assert answer["ok"], answer
                    await anyio.sleep(THINK)
                await flood.reached(flood.opened + 2 * CAP)  # still flooding after the calls
                late = open_fds(pid)
    return before, peak.value, late


@LOOPS
@pytest.mark.parametrize("payload", [b"", HALF_SENT], ids=["silent", "half-sent"])
async def test_a_flood_stays_within_the_cap_and_calls_go_on(
    db: Path, tokens: Path, loop: str, payload: bytes
) -> None:
    args = ("--auth-file", str(tokens), "--max-connections", str(CAP), *_loop_args(loop))
    with http_server(db, *args) as server:
        logged = len(server.log)
        before, peak, _ = await _calls_during_a_flood(server.url, server.process.pid, payload)
        assert peak <= before + CAP + MARGIN, (before, peak)
        assert wait_until(lambda: _healthy(server.url), timeout=20)
        during = server.log[logged:]
        assert "Traceback" not in during and len(during) < LOG_BOUND, during[:2000]


@LOOPS
async def test_under_a_low_file_limit_the_cap_fits_it(db: Path, tokens: Path, loop: str) -> None:
    """`ulimit -n 200` and the default --max-connections (500): the cap is lowered at start so that
    connections cannot use up the process's descriptors; a flood never reaches the limit."""
    limit = 200
    args = ("--auth-file", str(tokens), *_loop_args(loop))
    with http_server(db, *args, open_files=limit) as server:
        logged = len(server.log)
        before, peak, _ = await _calls_during_a_flood(server.url, server.process.pid, b"")
        assert peak < limit - 16, (before, peak)  # room left for the store and the logs
        during = server.log[logged:]
        assert "Traceback" not in during and len(during) < LOG_BOUND, during[:2000]
        started = server.log[:logged]
        assert "--max-connections" in started and "ulimit -n" in started, started


@LOOPS
async def test_running_out_of_descriptors_is_one_line_and_a_lower_cap(
    db: Path, tokens: Path, loop: str
) -> None:
    """The file limit lowered under a running server (below what --max-connections needs): accepting
    runs into EMFILE; that is logged once, connections are capped below the limit from then on, and
    an authenticated client is still served."""
    args = ("--auth-file", str(tokens), *_loop_args(loop))
    with http_server(db, *args) as server:
        pid = server.process.pid
        limit = open_fds(pid) + 80
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        logged = len(server.log)

        def ran_out() -> bool:
            return "out of file descriptors" in server.log[logged:]

        _, _, late = await _calls_during_a_flood(server.url, pid, b"", until=ran_out)
        assert late <= limit - 8, (limit, late)  # descriptors left for the store, the flood still on
        assert wait_until(lambda: _healthy(server.url), timeout=20)
        during = server.log[logged:]
        assert "Traceback" not in during and len(during) < LOG_BOUND, during[:2000]
        assert during.count("out of file descriptors") == 1, during[:2000]


async def test_the_runtime_server_fits_its_cap_to_a_low_file_limit_too(db: Path, tmp_path: Path) -> None:
    """`runtime serve` is the same server: under `ulimit -n 200` with the default --max-connections
    (500), a flood never reaches the limit, and a relay's calls (kept alive) go on."""
    limit = 200
    runtime = RuntimeProcess(db=db, workdir=tmp_path)
    runtime.start(open_files=limit)
    try:
        assert runtime.process is not None
        pid, (host, port) = runtime.process.pid, address(runtime.url)
        auth = {"Authorization": f"Bearer {runtime.token}"}
        async with httpx2.AsyncClient(base_url=runtime.url, headers=auth, timeout=patience(30)) as http:
            assert (await http.get("/v1/pages", params={"actorId": "user_editor"})).status_code == 200
            with fd_peak(pid) as peak:
                async with flooding(host, port, clients=CLIENTS) as flood:
                    await flood.reached(5 * CAP)
                    statuses: list[Any] = []
                    for _ in range(CALLS):
                        reply = await http.get("/v1/pages", params={"actorId": "user_editor"})
                        statuses.append(reply.status_code)
                        await anyio.sleep(THINK)
                    await flood.reached(flood.opened + 2 * CAP)
        assert peak.value < limit - 16, peak.value
        assert statuses == [200] * CALLS, statuses
    finally:
        runtime.stop()
    log = runtime.log.read_text()
    assert "Traceback" not in log and len(log) < LOG_BOUND, log[:2000]
    assert "--max-connections 500 lowered to" in log
