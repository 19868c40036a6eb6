"""Fair admission of expensive calls, the same on every store (issue 32): what searches, listings,
history and completions may hold of a replica, so that one caller's expensive work cannot slow
everybody else's.

It was PostgreSQL's search gate (issue 26: sixteen `w*` searches in flight held every pooled connection
and worker thread, and another actor's page read waited 10 s behind them); SQLite had none (sixteen
broad searches took another actor's read from 7.6 to 84 ms). Now one admission, keyed by the cost
class each call declares (`tools/cost.py`, `Cost.admitted`), runs before any kernel work, for the
embedded SQLite and PostgreSQL stores and a relay alike:

- at most `--expensive-calls` admitted calls run at once on the replica (a place each: on PostgreSQL
  at most one less than `--db-pool-size`, so other calls keep a connection; on SQLite a worker thread
  and the GIL's share), whatever their class;
- one actor's take their turns: one runs, the others wait (on the event loop, holding no thread nor
  connection), so an actor never holds more than one place and another actor's call waits for at most
  the calls already running;
- an actor may have `--expensive-calls-per-actor` in flight, running or waiting: one more is refused at
  once (`mnote_tool_rate_limited`, reason `in_flight`), before any work;
- an actor's expensive calls may keep a place at most `--expensive-share` of the time (a tenth by
  default), after a burst of `--expensive-burst` seconds (2 by default): a bucket of place-time that
  a call drains by the seconds it held its place and that refills at the share. Once it is spent, a
  call that held its place t seconds is followed by a rest of t x (1/share - 1). What they cost is
  what is shared, not how many they are: in a storm a 60 ms listing run on the event loop (SQLite's
  completions) is followed by a 540 ms rest, a 5 ms search by 45 ms. The burst is for the machine's
  bad moments: a search that took 1.2 s on a loaded replica (seen in CI: the demo's) must not make
  the same agent's next call wait 10.8 s;
- a call waits for its turn, its rest and a place at most `--expensive-wait` seconds, then is refused
  (`in_flight` while its own earlier calls still ran, `share` while it rested, else `busy`),
  retryable, with an estimate of the seconds to wait. A rest that ends after the wait is refused as
  soon as the call has its turn, with the whole rest to wait: nothing can let it through sooner.

Waiting rather than refusing below the bounds matters: a client keeping many calls in flight and
sending a refused one again at once costs the replica a request each time, a waiting one nothing. Used
on the event loop only (no lock: admitting and leaving never yield between reading and writing a count).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
from anyio import CapacityLimiter, Lock

from mnote_mcp.kernel.errors import MnoteError, Reason
from mnote_mcp.tools.cost import (
    DEFAULT_EXPENSIVE_BURST,
    DEFAULT_EXPENSIVE_CALLS,
    DEFAULT_EXPENSIVE_PER_ACTOR,
    DEFAULT_EXPENSIVE_SHARE,
    DEFAULT_EXPENSIVE_WAIT,
    Cost,
    rate_limited,
)

_FIRST_HOLD = 0.05  # seconds a place is held, assumed until one has been measured
_SMOOTHING = 0.2  # weight of the newest hold time in the running mean
_RESTS_KEPT = 4096  # actors' credits remembered before those full again are forgotten


@dataclass(frozen=True, slots=True)
class AdmissionBounds:
    """The bounds above (`--expensive-calls`, `--expensive-calls-per-actor`, `--expensive-wait`,
    `--expensive-share`, `--expensive-burst`)."""

    running: int = DEFAULT_EXPENSIVE_CALLS
    per_actor: int = DEFAULT_EXPENSIVE_PER_ACTOR
    wait: float = DEFAULT_EXPENSIVE_WAIT
    share: float = DEFAULT_EXPENSIVE_SHARE
    burst: float = DEFAULT_EXPENSIVE_BURST

    def __post_init__(self) -> None:
        if self.running < 1 or self.per_actor < 1 or not self.wait > 0 or not 0 < self.share <= 1:
            raise ValueError("admission bounds must be positive (and the share at most 1)")
        if not self.burst >= 0:
            raise ValueError("the burst of place-time must be 0 or more seconds")


class Admission:
    """The places expensive calls take, each actor's turn, and each actor's calls in flight."""

    def __init__(self, bounds: AdmissionBounds) -> None:
        self.bounds = bounds
        self._limiter: CapacityLimiter | None = None  # made on the event loop (anyio needs one)
        self._in_flight: dict[str, int] = {}
        self._turns: dict[str, Lock] = {}  # an actor's, while it has a call in flight
        self._admitted = 0  # calls in flight, running or waiting (every actor's)
        self._mean_hold = _FIRST_HOLD
        self._full: dict[str, float] = {}  # when an actor's credit of place-time is full again

    def in_flight(self, actor_id: str) -> int:
        return self._in_flight.get(actor_id, 0)

    def counts(self) -> tuple[int, int]:
        """(running, waiting): calls holding a place, and those waiting for their turn or one."""
        running = 0 if self._limiter is None else int(self._limiter.borrowed_tokens)
        return running, self._admitted - running

    @asynccontextmanager
    async def admit(self, actor_id: str, cost: Cost) -> AsyncIterator[None]:
        """Hold the actor's turn and a place for the body, or refuse (see the module)."""
        held = self._in_flight.get(actor_id, 0)
        if held >= self.bounds.per_actor:
            raise self._refusal(cost, Reason.IN_FLIGHT, held, inFlight=self.bounds.per_actor)
        self._in_flight[actor_id] = held + 1
        self._admitted += 1
        turn = self._turns.setdefault(actor_id, Lock())
        if self._limiter is None:
            self._limiter = CapacityLimiter(self.bounds.running)
        limiter = self._limiter
        has_turn = has_place = False
        try:
            asked = anyio.current_time()
            with anyio.move_on_after(self.bounds.wait):
                await turn.acquire()
                has_turn = True
                now = anyio.current_time()
                rest = self._rest_left(actor_id, now)
                if rest > self.bounds.wait - (now - asked):  # it cannot end within the wait
                    raise self._resting(cost, rest, now - asked)
                await anyio.sleep(rest)
                await limiter.acquire()
                has_place = True
            if not has_place:
                raise self._busy(cost, has_turn, actor_id, anyio.current_time() - asked)
            started = anyio.current_time()
            try:
                yield
            finally:
                limiter.release()
                ended = anyio.current_time()
                took = ended - started
                self._mean_hold += _SMOOTHING * (took - self._mean_hold)
                self._spend(actor_id, started, ended)
        finally:
            if has_turn:
                turn.release()
            self._admitted -= 1
            left = self._in_flight[actor_id] - 1
            if left:
                self._in_flight[actor_id] = left
            else:  # nobody holds or waits for its turn
                del self._in_flight[actor_id], self._turns[actor_id]

    def _credit(self, actor_id: str, now: float) -> float:
        """The place-time the actor may still use at once: the burst, less what its calls spent and
        the share has not yet given back."""
        full = self._full.get(actor_id, now)
        return self.bounds.burst - max(0.0, full - now) * self.bounds.share

    def _rest_left(self, actor_id: str, now: float) -> float:
        """Seconds until the actor's credit is no longer below 0 (0 while it has credit)."""
        return max(0.0, -self._credit(actor_id, now) / self.bounds.share)

    def _spend(self, actor_id: str, started: float, ended: float) -> None:
        """A call held its place from `started` to `ended`: it drained a second a second and the
        share refilled meanwhile, so the credit it started with falls by (1 - share) x the time."""
        credit = self._credit(actor_id, started) - (ended - started) * (1 - self.bounds.share)
        if len(self._full) >= _RESTS_KEPT:  # forget the actors whose credit is full again
            self._full = {actor: time for actor, time in self._full.items() if time > ended}
        self._full[actor_id] = ended + (self.bounds.burst - credit) / self.bounds.share

    def _busy(self, cost: Cost, had_turn: bool, actor_id: str, waited: float) -> MnoteError:
        waited = round(waited, 1)
        if not had_turn:  # its own earlier calls held its turn all along
            ahead = self._in_flight.get(actor_id, 1)
            return self._refusal(cost, Reason.IN_FLIGHT, ahead, inFlight=ahead, waitedSeconds=waited)
        rest = self._rest_left(actor_id, anyio.current_time())
        if rest > 0:  # it rests after its own calls: they used their share
            return self._resting(cost, rest, waited)
        running, waiting = self.counts()
        ahead = math.ceil((running + waiting) / self.bounds.running)
        return self._refusal(cost, Reason.BUSY, ahead, waitedSeconds=waited, places=self.bounds.running)

    def _resting(self, cost: Cost, rest: float, waited: float) -> MnoteError:
        """Refused while the actor rests: its calls used their share (and their burst)."""
        return self._refusal(
            cost, Reason.SHARE, 0, seconds=rest, share=self.bounds.share, waitedSeconds=round(waited, 1)
        )

    def _refusal(
        self, cost: Cost, reason: Reason, ahead: int, seconds: float = 0.0, **details: object
    ) -> MnoteError:
        """Refused, with an estimate of when a place will be free: `seconds`, or the calls `ahead`
        times the mean time a place is held (at least half a second, at most a minute)."""
        estimate = min(60.0, max(0.5, seconds, ahead * self._mean_hold))
        return rate_limited(cost, reason, round(math.ceil(estimate * 10) / 10, 1), **details)
