"""`RecomputeControl`: a cap on live samples that backs off when the engines recompute.

Why: an agent's context grows several-fold over its trajectory, so a bound on live samples
that charges each its context *today* (the live-KV gate) admits a wave of young samples whose
contexts then outgrow the device and host tiers together; evicted live KV is prefilled again,
which on a growth workload cost ours 12x the recomputation of `traj_async` at its best fixed
slot count (SIMULATED, issue 27). Predicting each sample's future footprint needs priors that
are wrong exactly when it matters (the first wave, before anything has finished). This control
measures the damage instead: recomputed tokens (prefix a sample had computed before that the
engine no longer held; `rollout.observe.timeseries.EngineCounters`, from the engines' own
cached-token counts, so any engine backend reports it).

The law (AIMD, as TCP's congestion avoidance):

* **start** at `start_fraction` of the generation slots (at least one group);
* **grow** by 1/cap for each sample that finishes while samples wait, the cap binds and no
  recomputation was seen since the last poll: about +1 per turnover of the live set, at the
  pace completions reveal how large contexts get;
* **cut** to `decrease_factor` × cap when a poll sees more than `tolerance_tokens` recomputed
  since the previous poll, at most once per `cut_cooldown_s` (the samples live at a cut need
  time to finish before the pool shrinks).

The cap stays within [one group, the generation slots]. Nothing is cancelled: a cut only stops
admissions until completions bring the live set under it. Pure: polls and finished samples in,
the cap out; the asyncio gate is `rollout.runtime.recompute_limit`.
"""

from __future__ import annotations

from pydantic import Field

from foundation.config import FrozenConfig

__all__ = ["RecomputeControl", "RecomputeControlConfig"]


class RecomputeControlConfig(FrozenConfig):
    """The recompute-driven cap's constants (see the module docstring)."""

    start_fraction: float = Field(
        default=0.25,
        gt=0.0,
        le=1.0,
        description="Starting cap as a fraction of the engines' generation slots (fraction).",
    )
    decrease_factor: float = Field(
        default=0.85,
        gt=0.0,
        lt=1.0,
        description="A cut multiplies the cap by this (x).",
    )
    cut_cooldown_s: float = Field(
        default=10.0, ge=0.0, description="Least time between two cuts (s)."
    )
    poll_interval_s: float = Field(
        default=5.0, gt=0.0, description="How often the recomputed tokens are read (s)."
    )
    tolerance_tokens: int = Field(
        default=0,
        ge=0,
        description="Recomputed tokens per poll that do not count as pressure (tokens).",
    )


class RecomputeControl:
    """The cap and its law (module docstring)."""

    def __init__(
        self, config: RecomputeControlConfig, *, generation_slots: int, group_size: int
    ) -> None:
        self.config = config
        self.floor = max(1, min(group_size, generation_slots))
        self.ceiling = max(self.floor, generation_slots)
        start = round(config.start_fraction * generation_slots)
        self._cap = float(min(self.ceiling, max(self.floor, start)))
        self._last_tokens: int | None = None
        self._last_cut_s: float | None = None
        self._clean = True
        self.cuts = 0
        self.grows = 0

    @property
    def limit(self) -> int:
        """How many samples may be live now."""
        return int(self._cap)

    def sample_finished(self, *, live: int, waiting: int) -> None:
        """A live sample ended (`live` are still live, `waiting` wait to start)."""
        if not self._clean or waiting == 0 or live + 1 < self.limit:
            return
        before = self.limit
        self._cap = min(float(self.ceiling), self._cap + 1.0 / max(1.0, self._cap))
        self.grows += self.limit > before

    def poll(self, recomputed_tokens: int, now_s: float) -> None:
        """The engines' cumulative recomputed tokens at `now_s`."""
        last, self._last_tokens = self._last_tokens, recomputed_tokens
        if last is None:
            return
        self._clean = recomputed_tokens - last <= self.config.tolerance_tokens
        if self._clean:
            return
        if self._last_cut_s is not None and now_s - self._last_cut_s < self.config.cut_cooldown_s:
            return
        self._cap = max(float(self.floor), self._cap * self.config.decrease_factor)
        self._last_cut_s = now_s
        self.cuts += 1
