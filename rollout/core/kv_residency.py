"""`KVResidency`: the contexts an engine's device KV must hold, and whether one more fits.

The live-KV budget at sample start (`rollout.core.live_gate`) counts a newcomer at the size of a
first context; contexts then grow by about a thousand tokens a turn for dozens of turns, the
live set outgrows the pool and the engine thrashes (simulated on the 32B-like SWE case: 15 M
tokens recomputed, against 0.7 M for trajectory-level async at 12 agent slots). Residency is
checked at every generation instead, against what the device must really hold:

* a sample that generates is **resident**, charged its context plus a reserve for the turn it
  writes (the mean tokens a turn has added so far, `prior_turn_tokens` before any);
* a sample stops being resident when its turn ends: the KV manager offloads its KV to host for
  a tool call that outlasts the round trip (`tool_wait`) and prefetches it before the tool
  returns, and the sample must find room again for its next turn;
* with `hold_critical_kv`, a critical sample stays resident through its tool call instead (the
  KV manager keeps its KV on device, `high_ref`). Measured on the 32B-like SWE case this holds
  pool space no generation uses: off is the default.

* with `shared_prefix`, the prompt a group's samples share (GRPO: K samples of one task) is
  charged once per engine while any of them is resident there, as the prefix cache holds it
  once; each sample is charged its context beyond it. Without it every sibling pays the prompt
  again (simulated on swe_like/32B, ~4.5k-token prompts: the gate left ~7 % of the pool idle).

* with `adaptive_room`, the pool the charges are held against is the engine's capacity plus an
  overcommit that follows what the engine reports free (AIMD, as Concur sizes its agent pool):
  one turn reserve more while the engine has at least two turns' worth of KV free (evictable
  cache counts as free), halved once it has less than one. The charges are an estimate (a
  decode writes its turn gradually, siblings share their prompt in the cache, a tool-waiting
  context moves to host); the engine's own figure corrects it.

A generation may start on an engine while its resident charges plus the newcomer's fit the pool;
an engine with nothing resident takes anything (one sample always makes progress), and a sample
already resident always may (its context is held; waiting would only deadlock critical samples
that hold the pool between them). Pure
accounting (no clock, no I/O); the scheduler decides the order and whom to preempt for room.
"""

from __future__ import annotations

import bisect

__all__ = ["KVResidency"]


class KVResidency:
    """Per-engine device-KV charges of resident samples (see the module docstring)."""

    def __init__(
        self,
        prior_turn_tokens: int,
        prior_peak_tokens: int = 0,
        *,
        shared_prefix: bool = False,
        adaptive_room: bool = False,
        live_projection: bool = True,
    ) -> None:
        self._shared_prefix = shared_prefix
        self._adaptive_room = adaptive_room
        self._live_projection = live_projection
        self._overcommit: dict[str, int] = {}  # engine -> tokens admitted beyond its capacity
        self._groups: dict[str, tuple[str, int]] = {}  # sample -> (group, shared prompt tokens)
        # (engine, group) -> [resident samples of the group there, prompt tokens charged once]
        self._group_charges: dict[tuple[str, str], list[int]] = {}
        self._capacity: dict[str, int] = {}
        self._host_capacity: dict[str, int] = {}
        self._live: dict[str, int] = {}  # started, unfinished sample -> context tokens
        self._live_sorted: list[int] = []  # the same contexts, ascending (projection in C loops)
        self._live_total = 0
        self._prior_peak_tokens = prior_peak_tokens
        self._finished = 0
        self._finished_tokens = 0
        self._charged: dict[str, int] = {}  # engine -> tokens charged
        self._charges: dict[str, tuple[str, int]] = {}  # sample -> (engine, tokens)
        self._prior_turn_tokens = prior_turn_tokens
        self._turns = 0
        self._turn_tokens = 0

    def set_capacity(self, engine: str, tokens: int, host_tokens: int = 0) -> None:
        """The engine's device KV pool and host tier; 0 = unknown (everything fits)."""
        self._capacity[engine] = tokens
        self._host_capacity[engine] = host_tokens
        self._charged.setdefault(engine, 0)

    def set_group(self, sample_id: str, group_id: str, prompt_tokens: int) -> None:
        """`sample_id` belongs to `group_id`, whose samples share a `prompt_tokens` prompt
        (charged once per engine with `shared_prefix`; ignored without it)."""
        if self._shared_prefix:
            self._groups[sample_id] = (group_id, prompt_tokens)

    # -- the live set: every started sample's context, on device or on host ---------------

    def expected_peak(self) -> int:
        """A sample's expected final context: the mean over finished samples, else the prior."""
        if not self._finished:
            return self._prior_peak_tokens
        return round(self._finished_tokens / self._finished)

    def new_sample_fits(self, context_tokens: int) -> bool:
        """Whether one more sample may start: every live sample, projected at least to the
        expected final context, must fit device and host KV together (a context that fits
        neither is dropped and recomputed later). Unknown capacity or none live: yes; without
        `live_projection` always yes: a policy whose live gate charges growth
        (`rollout.core.final_context`) turns it off, since that gate measures the same without
        a prior (simulated: the 32,768-token prior held the first wave of short_context/32B
        B=16 to ~23 samples, 4 % of T_next at 64 engine slots)."""
        if not self._live_projection:
            return True
        total = sum(self._capacity.values()) + sum(self._host_capacity.values())
        if not self._live or not all(self._capacity.values()):
            return True
        peak = self.expected_peak()
        # sum(max(tokens, peak)) over the live set: those below the peak count as the peak.
        below = bisect.bisect_left(self._live_sorted, peak)
        projected = peak * below + self._live_total - sum(self._live_sorted[:below])
        return projected + max(context_tokens, peak) <= total

    def set_live(self, sample_id: str, context_tokens: int) -> None:
        """A started sample's context is now `context_tokens` (it counts from its first start)."""
        self._drop_live(sample_id)
        self._live[sample_id] = context_tokens
        bisect.insort(self._live_sorted, context_tokens)
        self._live_total += context_tokens

    def sample_finished(self, sample_id: str) -> None:
        """The sample ended: it leaves the live set, its final context feeds the estimate."""
        final = self._drop_live(sample_id)
        if final is not None:
            self._finished += 1
            self._finished_tokens += final
        self.release(sample_id)
        self._groups.pop(sample_id, None)

    def charged_tokens(self, engine: str) -> int:
        return self._charged.get(engine, 0)

    def is_resident(self, sample_id: str) -> bool:
        return sample_id in self._charges

    def turn_reserve(self) -> int:
        """Tokens a generation is expected to add: the mean over turns seen, else the prior."""
        if not self._turns:
            return self._prior_turn_tokens
        return round(self._turn_tokens / self._turns)

    def need(self, sample_id: str, engine: str, context_tokens: int) -> int:
        """Extra tokens the engine must find for `sample_id` to generate there now."""
        wanted = context_tokens + self.turn_reserve()
        group = self._groups.get(sample_id)
        if group is not None and (engine, group[0]) in self._group_charges:
            wanted -= min(self._group_charges[engine, group[0]][1], context_tokens)
        held = self._charges.get(sample_id)
        already = held[1] if held is not None and held[0] == engine else 0
        return max(0, wanted - already)

    def room(self, engine: str) -> int | None:
        """Tokens still free on `engine` (None: unknown capacity, no limit)."""
        capacity = self._capacity.get(engine, 0)
        if capacity <= 0:
            return None
        return capacity + self._overcommit.get(engine, 0) - self._charged.get(engine, 0)

    def observe_free(self, engine: str, free_tokens: int) -> None:
        """The engine reports `free_tokens` of device KV free (with `adaptive_room`: one turn
        reserve more overcommit at two turns free or more, half as much below one turn)."""
        if not self._adaptive_room:
            return
        reserve = max(1, self.turn_reserve())
        over = self._overcommit.get(engine, 0)
        if free_tokens >= 2 * reserve:
            self._overcommit[engine] = over + reserve
        elif free_tokens < reserve:
            self._overcommit[engine] = over // 2

    def overcommit(self, engine: str) -> int:
        """Tokens `room` currently adds beyond the engine's capacity (`adaptive_room`)."""
        return self._overcommit.get(engine, 0)

    def fits(self, sample_id: str, engine: str, context_tokens: int) -> bool:
        """Whether `sample_id` may generate on `engine` now."""
        room = self.room(engine)
        if room is None or not self._charged.get(engine, 0):
            return True
        held = self._charges.get(sample_id)
        if held is not None and held[0] == engine:
            return True  # it already holds its context there; only its next turn is new
        return self.need(sample_id, engine, context_tokens) <= room

    def charge(self, sample_id: str, engine: str, tokens: int) -> None:
        """Hold `tokens` of `engine`'s KV for `sample_id` (replacing what it held)."""
        self.release(sample_id)
        group = self._groups.get(sample_id)
        extra = 0
        if group is not None:
            shared = self._group_charges.get((engine, group[0]))
            if shared is None:
                shared = self._group_charges[engine, group[0]] = [0, min(group[1], tokens)]
                extra = shared[1]  # the first resident of its group there pays the prompt
            shared[0] += 1
            tokens = max(0, tokens - shared[1])
        self._charges[sample_id] = (engine, tokens)
        self._charged[engine] = self._charged.get(engine, 0) + tokens + extra

    def charge_generation(self, sample_id: str, engine: str, context_tokens: int) -> None:
        """`sample_id` starts a generation on `engine` with a `context_tokens` prompt."""
        self.charge(sample_id, engine, context_tokens + self.turn_reserve())

    def turn_written(self, added_tokens: int) -> None:
        """A turn added `added_tokens` to some context (feeds the reserve)."""
        if added_tokens > 0:
            self._turns += 1
            self._turn_tokens += added_tokens

    def release(self, sample_id: str) -> int:
        """`sample_id` no longer needs device KV; returns the tokens it held."""
        held = self._charges.pop(sample_id, None)
        if held is None:
            return 0
        engine, tokens = held
        group = self._groups.get(sample_id)
        if group is not None:
            shared = self._group_charges[engine, group[0]]
            shared[0] -= 1
            if not shared[0]:  # the last of its group there: the prompt goes too
                del self._group_charges[engine, group[0]]
                tokens += shared[1]
        self._charged[engine] -= tokens
        return tokens

    def held(self, sample_id: str) -> int:
        """Tokens `release(sample_id)` would free (its shared prompt only if it is the last of
        its group on its engine)."""
        held = self._charges.get(sample_id)
        if held is None:
            return 0
        group = self._groups.get(sample_id)
        shared = None if group is None else self._group_charges.get((held[0], group[0]))
        return held[1] + (shared[1] if shared is not None and shared[0] == 1 else 0)

    def _drop_live(self, sample_id: str) -> int | None:
        """Take `sample_id` out of the live set; returns the context it had there."""
        tokens = self._live.pop(sample_id, None)
        if tokens is not None:
            del self._live_sorted[bisect.bisect_left(self._live_sorted, tokens)]
            self._live_total -= tokens
        return tokens
