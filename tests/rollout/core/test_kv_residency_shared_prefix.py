"""Spec of two refinements of KV residency: `shared_prefix` (a group's shared prompt is charged
once per engine, as the prefix cache holds it once) and `adaptive_room` (the charges are held
against the pool plus an AIMD overcommit that follows the KV the engine reports free)."""

from __future__ import annotations

from rollout.core.config import SchedulerConfig
from rollout.core.kv_residency import KVResidency
from rollout.core.scheduler import (
    EngineAdded,
    EngineLoad,
    EngineStatsUpdated,
    RolloutScheduler,
    SampleAdmitted,
    StartGeneration,
)

PROMPT = 400


def siblings(*, shared_prefix: bool = True) -> KVResidency:
    """Samples a, b of group G and c of group H, each with a 400-token prompt; 1,000-token pool."""
    residency = KVResidency(prior_turn_tokens=100, shared_prefix=shared_prefix)
    residency.set_capacity("e0", 1_000)
    for sample, group in (("a", "G"), ("b", "G"), ("c", "H")):
        residency.set_group(sample, group, PROMPT)
    return residency


def test_a_sibling_of_a_resident_sample_is_charged_only_its_context_beyond_the_prompt() -> None:
    residency = siblings()
    residency.charge_generation("a", "e0", 500)  # 500 + 100 reserve
    assert residency.charged_tokens("e0") == 600
    assert residency.need("b", "e0", 500) == 200  # the prompt is held already
    assert residency.need("c", "e0", 500) == 600  # another group's is not
    residency.charge_generation("b", "e0", 500)
    assert residency.charged_tokens("e0") == 800


def test_without_it_every_sibling_pays_its_whole_context() -> None:
    residency = siblings(shared_prefix=False)
    residency.charge_generation("a", "e0", 500)
    assert residency.need("b", "e0", 500) == 600
    residency.charge_generation("b", "e0", 500)
    assert residency.charged_tokens("e0") == 1_200


def test_the_prompt_stays_charged_until_the_last_resident_of_its_group_leaves() -> None:
    residency = siblings()
    residency.charge_generation("a", "e0", 500)
    residency.charge_generation("b", "e0", 700)
    assert (residency.held("a"), residency.held("b")) == (200, 400)
    assert residency.release("a") == 200  # the first one leaves: b still needs the prompt
    assert residency.charged_tokens("e0") == 800
    assert residency.held("b") == 800  # now the last: releasing it frees the prompt too
    assert residency.release("b") == 800
    assert residency.charged_tokens("e0") == 0
    residency.charge_generation("b", "e0", 700)  # alone again: pays the prompt
    assert residency.charged_tokens("e0") == 800


def test_a_resident_sample_recharged_for_its_next_turn_keeps_the_prompt_charged_once() -> None:
    residency = siblings()
    residency.charge_generation("a", "e0", 500)
    residency.charge_generation("b", "e0", 500)
    residency.charge("a", "e0", 900)  # a's turn grew its context
    assert residency.charged_tokens("e0") == 900 + 200
    residency.sample_finished("a")
    residency.sample_finished("b")
    assert residency.charged_tokens("e0") == 0


def test_the_scheduler_starts_siblings_together_that_would_not_fit_charged_in_full() -> None:
    def started_with(shared_prefix: bool) -> list[str]:
        scheduler = RolloutScheduler(
            SchedulerConfig(
                low_priority_kv_watermark=0.0,
                kv_residency=True,
                kv_residency_shared_prefix=shared_prefix,
                prior_turn_tokens=100,
                prior_peak_context_tokens=0,
            )
        )
        scheduler.handle(EngineAdded("e0", EngineLoad(8, 1.0, 800, 4_000)))
        started: list[str] = []
        for now, sample in enumerate(("a", "b"), start=1):
            decisions = scheduler.handle(
                SampleAdmitted(sample, "G", context_tokens=PROMPT, now_s=float(now))
            )
            started += [d.sample_id for d in decisions if isinstance(d, StartGeneration)]
        return started

    assert started_with(shared_prefix=True) == ["a", "b"]  # 500 + 100 of 800
    assert started_with(shared_prefix=False) == ["a"]  # 500 + 500 > 800


# -- adaptive room (AIMD overcommit from the engine's free KV) ---------------------------------


def adaptive(*, adaptive_room: bool = True) -> KVResidency:
    """A 1,000-token pool, a 100-token turn reserve, a 900-token sample resident."""
    residency = KVResidency(prior_turn_tokens=100, adaptive_room=adaptive_room)
    residency.set_capacity("e0", 1_000)
    residency.charge_generation("a", "e0", 800)
    return residency


def test_the_room_grows_one_turn_per_report_while_the_engine_has_two_turns_free() -> None:
    residency = adaptive()
    assert residency.room("e0") == 100
    residency.observe_free("e0", 200)
    residency.observe_free("e0", 350)
    assert residency.overcommit("e0") == 200
    assert residency.room("e0") == 300
    assert residency.fits("b", "e0", 200)  # 200 + 100 of 300


def test_the_overcommit_halves_once_the_engine_has_less_than_a_turn_free() -> None:
    residency = adaptive()
    for _ in range(4):
        residency.observe_free("e0", 500)
    residency.observe_free("e0", 99)
    assert residency.overcommit("e0") == 200
    residency.observe_free("e0", 150)  # between one and two turns free: holds
    assert residency.overcommit("e0") == 200


def test_without_it_the_engine_report_changes_nothing() -> None:
    residency = adaptive(adaptive_room=False)
    residency.observe_free("e0", 10_000)
    assert residency.overcommit("e0") == 0 and residency.room("e0") == 100


def test_the_scheduler_starts_what_the_engine_reports_room_for() -> None:
    scheduler = RolloutScheduler(
        SchedulerConfig(
            low_priority_kv_watermark=0.0,
            kv_residency=True,
            kv_residency_adaptive_room=True,
            prior_turn_tokens=100,
            prior_peak_context_tokens=0,
        )
    )
    scheduler.handle(EngineAdded("e0", EngineLoad(8, 1.0, 1_000, 4_000)))
    scheduler.handle(SampleAdmitted("a", "A", context_tokens=700, now_s=1.0))
    assert not scheduler.handle(SampleAdmitted("b", "B", context_tokens=300, now_s=2.0))
    started: list[str] = []
    for now in range(3, 6):  # the engine says 60 % of its pool is free
        load = EngineLoad(8, 0.6, 1_000, 4_000)
        decisions = scheduler.handle(EngineStatsUpdated("e0", load, now_s=float(now)))
        started += [d.sample_id for d in decisions if isinstance(d, StartGeneration)]
    assert started == ["b"]  # 800 charged + 400 needed: after two reports (+100 each)
