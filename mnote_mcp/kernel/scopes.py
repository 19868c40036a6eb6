"""`Scope`: what a call may do to a page. One vocabulary for both ends of a call: the connection's
upper bound (`--scope`, a bearer token's scopes, `capabilityScope`) and what an actor's role grants in a
workspace (`kernel.policy`). A call needs both."""

from __future__ import annotations

from enum import StrEnum


class Scope(StrEnum):
    PAGE_READ = "page.read"
    PAGE_WRITE = "page.write"
    ARTIFACT_WRITE = "artifact.write"
