"""Spec of priority classes in the scheduler: class order above the five levels, and
starvation promotion. One engine; events are built by hand with explicit times."""

from __future__ import annotations

from types import MappingProxyType

from rollout.core.classes import PriorityClass
from rollout.core.config import SchedulerConfig
from rollout.core.priority import PriorityAssignment
from rollout.core.scheduler import (
    ActFinished,
    ActStarted,
    Decision,
    EngineAdded,
    EngineLoad,
    GenerationAborted,
    GenerationFinished,
    Preempt,
    PrioritiesChanged,
    Promote,
    RolloutScheduler,
    SampleAdmitted,
    StartGeneration,
)

U, H, N, L = PriorityClass.URGENT, PriorityClass.HIGH, PriorityClass.NORMAL, PriorityClass.LOW


def scheduler(slots: int = 1, bound: float | None = None) -> RolloutScheduler:
    s = RolloutScheduler(SchedulerConfig(low_priority_kv_watermark=0.0, starvation_bound_s=bound))
    s.handle(EngineAdded("e0", EngineLoad(max_running_requests=slots, kv_headroom=1.0)))
    return s


def admit(
    s: RolloutScheduler, sid: str, cls: PriorityClass, now: float = 0.0
) -> tuple[Decision, ...]:
    return s.handle(SampleAdmitted(sid, "g_" + sid, now_s=now, priority_class=cls))


def started(decisions: tuple[Decision, ...]) -> list[str]:
    return [d.sample_id for d in decisions if isinstance(d, StartGeneration)]


def free_slot(s: RolloutScheduler, sid: str, now: float) -> tuple[Decision, ...]:
    return s.handle(GenerationFinished(sid, now_s=now))


def test_later_higher_classes_start_before_an_earlier_low_sample() -> None:
    s = scheduler()
    assert started(admit(s, "busy", N)) == ["busy"]
    for sid, cls in (("low", L), ("norm", N), ("high", H), ("urg", U)):
        admit(s, sid, cls)
    assert s.waiting_order() == ("urg", "high", "norm", "low")
    assert s.class_of("low") is L and s.class_of("urg") is U


def test_critical_priority_ranks_within_a_class_but_never_above_a_higher_class() -> None:
    s = scheduler()
    admit(s, "busy", N)
    admit(s, "n_plain", N)
    admit(s, "n_crit", N)
    admit(s, "h_plain", H)
    admit(s, "l_crit", L)
    s.handle(
        PrioritiesChanged(
            PriorityAssignment(
                critical=frozenset({"g_n_crit", "g_l_crit"}), ranks=MappingProxyType({})
            )
        )
    )
    assert s.waiting_order() == ("h_plain", "n_crit", "n_plain", "l_crit")


def test_five_levels_hold_inside_a_class() -> None:
    s = scheduler()
    admit(s, "busy", N)
    admit(s, "back", L)  # will come back from its tool
    admit(s, "new", L)
    # Let `back` generate once and return from the env: it then waits at BACK_FROM_ENV_LOW.
    free_slot(s, "busy", 1.0)  # `back` starts (first come)
    s.handle(ActStarted("busy", now_s=1.0))
    s.handle(GenerationFinished("back", now_s=2.0))  # `new` starts
    s.handle(ActStarted("back", now_s=2.0))
    s.handle(ActFinished("back", now_s=3.0))
    admit(s, "new2", L, now=3.0)
    assert s.waiting_order() == ("back", "new2")


def test_promotion_after_the_bound_and_not_before_repeated_up_to_urgent() -> None:
    s = scheduler(bound=10.0)
    admit(s, "busy", U)
    admit(s, "low", L, now=0.0)
    admit(s, "probe1", U, now=10.0)  # exactly the bound: not longer, no promotion
    assert s.class_of("low") is L
    decisions = admit(s, "probe2", U, now=10.5)
    assert [d for d in decisions if isinstance(d, Promote)] == [Promote("low", L, N, 10.5)]
    assert s.class_of("low") is N
    # The clock restarted at 10.5: not promoted again at 20, but at 21.
    assert not [d for d in admit(s, "p3", U, now=20.0) if isinstance(d, Promote)]
    assert [d.to_class for d in admit(s, "p4", U, now=21.0) if isinstance(d, Promote)] == [H]
    assert [d.to_class for d in admit(s, "p5", U, now=32.0) if isinstance(d, Promote)] == [U]
    # Urgent is the top: no further promotion of `low` (others may be promoted meanwhile).
    later = admit(s, "p6", U, now=100.0)
    assert not [d for d in later if isinstance(d, Promote) and d.sample_id == "low"]
    assert s.class_of("low") is U


def test_promoted_sample_starts_ahead_of_later_same_class_samples() -> None:
    s = scheduler(bound=5.0)
    admit(s, "busy", N)
    admit(s, "old_low", L, now=0.0)
    admit(s, "norm", N, now=1.0)
    assert s.waiting_order() == ("norm", "old_low")
    admit(s, "norm2", N, now=6.0)  # old_low waited 6 s > 5 s: promoted to normal
    assert s.class_of("old_low") is N
    assert s.waiting_order() == ("old_low", "norm", "norm2")  # first come within normal
    assert started(free_slot(s, "busy", 6.0)) == ["old_low"]  # norm: exactly 5 s, not promoted


def test_a_priority_change_while_waiting_keeps_the_starvation_clock() -> None:
    """Found in a simulated mixed run: a re-queue on a priority change lost the promotion."""
    s = scheduler(bound=10.0)
    admit(s, "busy", N)
    admit(s, "low", L, now=0.0)
    assignment = PriorityAssignment(critical=frozenset({"g_low"}), ranks=MappingProxyType({}))
    s.handle(PrioritiesChanged(assignment, now_s=2.0))  # `low` moves to a critical level
    promoted = [d for d in admit(s, "probe", N, now=10.5) if isinstance(d, Promote)]
    assert promoted == [Promote("low", L, N, 10.5)]


def test_starvation_off_never_promotes() -> None:
    s = scheduler(bound=None)
    admit(s, "busy", N)
    admit(s, "low", L, now=0.0)
    decisions = admit(s, "later", N, now=1e9)
    assert not [d for d in decisions if isinstance(d, Promote)]
    assert s.class_of("low") is L


def test_a_running_sample_is_not_promoted() -> None:
    s = scheduler(bound=1.0)
    admit(s, "run", L, now=0.0)
    decisions = admit(s, "other", N, now=50.0)
    assert not [d for d in decisions if isinstance(d, Promote) and d.sample_id == "run"]
    assert s.class_of("run") is L


def test_a_waiting_higher_class_sample_preempts_a_running_lower_class_one() -> None:
    s = scheduler(slots=2)
    admit(s, "run_low", L)
    admit(s, "run_norm", N)
    decisions = admit(s, "urg", U, now=1.0)
    preempts = [d for d in decisions if isinstance(d, Preempt)]
    assert [(d.sample_id, d.for_sample_id) for d in preempts] == [("run_low", "urg")]
    # Its abort frees the slot, and the urgent sample takes it.
    after = s.handle(GenerationAborted("run_low", partial_tokens=3, now_s=2.0))
    assert started(after) == ["urg"]
    assert s.waiting_order() == ("run_low",)


def test_a_same_class_waiting_sample_preempts_nothing() -> None:
    s = scheduler(slots=1)
    admit(s, "run", L)
    decisions = admit(s, "other", L, now=1.0)
    assert not [d for d in decisions if isinstance(d, Preempt)]


def test_critical_of_a_lower_class_does_not_preempt_a_higher_class() -> None:
    s = scheduler(slots=1)
    admit(s, "run_high", H)
    admit(s, "crit_norm", N, now=1.0)
    decisions = s.handle(
        PrioritiesChanged(
            PriorityAssignment(critical=frozenset({"g_crit_norm"}), ranks=MappingProxyType({})),
            now_s=2.0,
        )
    )
    assert not [d for d in decisions if isinstance(d, Preempt)]
