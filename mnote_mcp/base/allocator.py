"""How many malloc arenas the process may use, set at start (`--malloc-arenas`).

glibc gives each thread that allocates an arena of its own, up to eight per core, and keeps what is
freed in it for that arena's next allocation. The server's calls run on worker threads that come and
go (anyio ends an idle one after ten seconds), so each burst of calls may land on fresh arenas and
resident memory creeps while every count of what is in use stays flat: a ten-minute soak measured
0.66 MB a minute of it, none of it a leak (docs/security.md, "Memory over a soak"). Two arenas keep
it flat at no measured cost in calls a second. `MALLOC_ARENA_MAX` in the environment, when set, is
glibc's own and wins; off glibc (musl, macOS) there is nothing to set.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import platform

DEFAULT_MALLOC_ARENAS = 2
_M_ARENA_MAX = -8  # glibc's malloc.h

logger = logging.getLogger(__name__)


chosen = "default"  # what `limit_arenas` did, for the start-up line


def limit_arenas(arenas: int) -> str:
    """Ask glibc for at most `arenas` arenas (0: leave glibc's default), before any thread allocates.
    What was done, for the start-up line."""
    global chosen
    chosen = _limit(arenas)
    return chosen


def _limit(arenas: int) -> str:
    if os.environ.get("MALLOC_ARENA_MAX"):
        return f"MALLOC_ARENA_MAX={os.environ['MALLOC_ARENA_MAX']}"
    if arenas == 0 or platform.libc_ver()[0] != "glibc":
        return "default"
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        done = libc.mallopt(ctypes.c_int(_M_ARENA_MAX), ctypes.c_int(arenas))
    except (OSError, AttributeError):
        return "default"
    if not done:
        logger.warning("could not limit malloc arenas to %d", arenas)
        return "default"
    return str(arenas)
