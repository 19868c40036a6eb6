"""Test-only fault injection for the reference runtime. Never set these in a deployment.

`MNOTE_TEST_CRASH_AFTER_COMMIT=1` makes the runtime process die (`os._exit(70)`) right after a real
command has committed and before its reply is sent: the one failure where the write happened and the
caller cannot know it. The fault tests use it to prove that a retry with the same idempotency key
writes exactly once. It is an environment variable, not a flag, so `--help` never offers it.
"""

from __future__ import annotations

import logging
import os
import sys

CRASH_AFTER_COMMIT_ENV = "MNOTE_TEST_CRASH_AFTER_COMMIT"
CRASH_EXIT_STATUS = 70

logger = logging.getLogger(__name__)


def crash_after_commit_enabled() -> bool:
    return os.environ.get(CRASH_AFTER_COMMIT_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def warn_if_enabled() -> None:
    if crash_after_commit_enabled():
        logger.warning("%s is set: this runtime dies after every commit (test-only)", CRASH_AFTER_COMMIT_ENV)


def after_commit(command_name: str) -> None:
    if crash_after_commit_enabled():
        print(f"{CRASH_AFTER_COMMIT_ENV}: dying after committing {command_name}", file=sys.stderr, flush=True)
        os._exit(CRASH_EXIT_STATUS)
