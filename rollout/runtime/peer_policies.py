"""The knob-free peers: prime-rl's adaptive in-flight control and AReaL's sample-level refill.

Two `RolloutPolicy` subclasses that differ from `traj_async` (trajectory-level, FCFS, LRU KV,
the same staleness bound) only in what bounds their live samples; each one's constants are
configuration with the source's defaults (presets in `rollout.jobs.policies`, sources in
docs/benchmarks.md):

* `AdaptiveInflightPolicy` (`adaptive_inflight`): in-flight samples under prime-rl's adaptive
  cap (`rollout.core.inflight_control`: start at KV capacity ÷ the longest episode, grow per
  turnover while the engines are clear, trim above 0.8 device-KV use, cancel the youngest
  groups above 0.9 or on preemptions). A cancelled group is *restarted*: prime-rl drops it
  (its work is lost, a fresh prompt takes its place); here the same prompt runs again from
  scratch, which loses the same work and keeps every policy on the same prompts;
* `SampleRefillPolicy` (`sample_refill`): AReaL's sample-level refill (PR #1722): sample
  slots, B × K by default, a new group admitted whole when its K slots are free, a finished
  sample freeing its slot at once (`rollout.runtime.group_slots`).
"""

from __future__ import annotations

from pydantic import Field

from rollout.core.inflight_control import InflightControl, InflightControlConfig
from rollout.runtime.config import PolicyConfig
from rollout.runtime.group_slots import GroupSampleSlots
from rollout.runtime.inflight_limit import AdaptiveInflightLimit
from rollout.runtime.policy import LiveLimit, LiveLimitContext, RolloutPolicy

__all__ = [
    "AdaptiveInflightConfig",
    "AdaptiveInflightPolicy",
    "SampleRefillConfig",
    "SampleRefillPolicy",
]


class AdaptiveInflightConfig(PolicyConfig):
    """`PolicyConfig` plus prime-rl's controller constants."""

    inflight: InflightControlConfig = Field(
        default_factory=InflightControlConfig,
        description="The adaptive in-flight cap's constants (prime-rl's defaults; "
        "rollout/core/inflight_control.py).",
    )


class AdaptiveInflightPolicy(RolloutPolicy):
    """Trajectory-level samples under prime-rl's adaptive in-flight cap (module docstring)."""

    config: AdaptiveInflightConfig

    def __init__(self, config: AdaptiveInflightConfig) -> None:
        super().__init__(config)

    def live_limit(self, context: LiveLimitContext) -> LiveLimit:
        if context.now_s is None or context.shed_groups is None:
            raise ValueError(
                "adaptive_inflight needs the conductor's clock and group shedding "
                "(LiveLimitContext.now_s, shed_groups)"
            )
        control = InflightControl(
            self.config.inflight,
            kv_capacity_tokens=context.kv_capacity_tokens,
            max_context_tokens=context.max_context_tokens or context.kv_capacity_tokens,
        )
        return AdaptiveInflightLimit(
            control,
            now_s=context.now_s,
            shed_groups=context.shed_groups,
            min_burst=context.group_size,
        )


class SampleRefillConfig(PolicyConfig):
    """`PolicyConfig` plus AReaL's sample slots."""

    sample_slots_per_batch: float = Field(
        default=1.0,
        gt=0.0,
        description="Sample slots as a multiple of one batch's samples, B × K (at least one "
        "group's K). AReaL bounds concurrent rollouts by the consumer batch size (B prompt "
        "groups) by default; PR #1722 counts that bound in samples (128 at B=16, K=8) (x).",
    )


class SampleRefillPolicy(RolloutPolicy):
    """Trajectory-level samples in sample slots refilled a group at a time (module docstring)."""

    config: SampleRefillConfig

    def __init__(self, config: SampleRefillConfig) -> None:
        super().__init__(config)

    def sample_slots(self, context: LiveLimitContext) -> int:
        """The slots of a run of B groups of K samples: at least one whole group."""
        batch = context.groups_per_step * context.group_size
        return max(context.group_size, round(self.config.sample_slots_per_batch * batch))

    def live_limit(self, context: LiveLimitContext) -> LiveLimit:
        size_of = context.group_size_of or (lambda _group: context.group_size)
        return GroupSampleSlots(self.sample_slots(context), size_of)
