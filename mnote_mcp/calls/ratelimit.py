"""Per-actor rates: how many calls of a class one actor may make a minute, in bursts of how many.

One token bucket per (class, actor), each `CallLimit` a GCRA of throttled-py (`throttled-py`: the
generic cell rate algorithm, a token bucket's exact equivalent kept as one timestamp per key, on the
monotonic clock; its memory store is a bounded LRU, thread-safe, with no thread of its own). A call
takes `weight` tokens or is refused with the seconds until it would not be: `Refused`. docs/decisions.md,
"Rate limits: which library", says why this library and not `limits`, `aiolimiter` or `pyrate-limiter`.

The buckets are this process's: behind several replicas a limit is per replica (docs/deploy.md, "Limits
across replicas").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from throttled import RateLimiterType, Throttled, per_min
from throttled.store import MemoryStore

from mnote_mcp.tools.cost import CallLimit

# Buckets kept at most (the least recently used is forgotten, and starts full again): actors times
# classes. Each is a float and a key; a team server has far fewer actors than this.
MAX_BUCKETS = 65_536


@dataclass(frozen=True, slots=True)
class Refused:
    """A call over its limit: the limit, and the seconds to wait before the same call is let through
    (rounded up to a tenth, so that waiting exactly that long is enough)."""

    limit: CallLimit
    retry_after: float


class Buckets:
    """The buckets of every named limit (None: that one is off)."""

    def __init__(self, limits: Mapping[str, CallLimit | None], max_buckets: int = MAX_BUCKETS) -> None:
        store = MemoryStore(options={"MAX_SIZE": max_buckets})
        self.limits = dict(limits)
        self._throttles = {
            name: Throttled(
                using=RateLimiterType.GCRA.value, quota=per_min(limit.per_minute, limit.burst), store=store
            )
            for name, limit in self.limits.items()
            if limit is not None
        }

    def take(self, name: str, key: str, weight: int = 1) -> Refused | None:
        """Take `weight` tokens (at most the burst) from `key`'s bucket of limit `name`, or say how long
        to wait; None also where that limit is off."""
        throttle = self._throttles.get(name)
        if throttle is None:
            return None
        limit = self.limits[name]
        assert limit is not None
        result = throttle.limit(f"{name}:{key}", cost=max(1, min(weight, limit.burst)))
        if not result.limited:
            return None
        return Refused(limit, max(0.1, round(math.ceil(result.state.retry_after * 10) / 10, 1)))
