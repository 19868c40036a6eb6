"""How long a test waits for something to happen, from one setting.

Every deadline a test puts on a process, a client or a server to answer (a subprocess's timeout, a
server's or a runtime's start, a client library's connection and read timeouts, the Inspector's
`--connect-timeout`, an `anyio.fail_after` around a wait) is `patience(seconds)`: what it takes on an
idle machine with room to spare, times `MNOTE_TEST_TIMEOUT_SCALE` (1 unless set; `.ci/run` sets 4, so
its lanes stay green on a machine loaded well past its cores). Such a deadline only keeps a hang
from lasting forever: a test that passes does not wait for it.

What a test asserts about time is another matter: a limit the server enforces (408 after
`--header-timeout`) is set small and not scaled, and the slack a test allows around it is
`patience(...)` too; a latency compared with another (a read under attack against the same read
idle) is a ratio, which load does not change much.
"""

from __future__ import annotations

import os

SCALE_VARIABLE = "MNOTE_TEST_TIMEOUT_SCALE"


def _scale() -> float:
    raw = os.environ.get(SCALE_VARIABLE, "").strip()
    if not raw:
        return 1.0
    scale = float(raw)
    if not scale >= 1:
        raise ValueError(f"{SCALE_VARIABLE}={raw!r}: a number of at least 1")
    return scale


SCALE = _scale()


def patience(seconds: float) -> float:
    """`seconds` (enough on an idle machine) scaled for this run's machine."""
    return seconds * SCALE


def patience_ms(seconds: float) -> str:
    """`patience(seconds)` in whole milliseconds, as a command-line argument (the Inspector's)."""
    return str(round(patience(seconds) * 1000))
