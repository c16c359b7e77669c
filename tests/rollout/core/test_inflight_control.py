"""InflightControl: prime-rl's adaptive in-flight cap (start, grow per turnover, trim on KV use,
cut on overload), each rule as prime-rl main states it."""

from __future__ import annotations

import pytest

from rollout.core.inflight_control import (
    CapChange,
    EngineLoadSample,
    InflightControl,
    InflightControlConfig,
)


def control(cap: int = 10, **changes: object) -> InflightControl:
    config = InflightControlConfig.model_validate({"initial_inflight": cap, **changes})
    return InflightControl(config, kv_capacity_tokens=1_000_000, max_context_tokens=100_000)


def poll(usage: float = 0.1, *, waiting: int = 0, running: int = 4, preemptions: int = 0,
         engine: str = "e0") -> list[EngineLoadSample]:  # fmt: skip
    return [EngineLoadSample(engine, usage, running, waiting, preemptions)]


def test_the_cap_starts_at_kv_capacity_over_the_longest_episode() -> None:
    config = InflightControlConfig()
    start = InflightControl(config, kv_capacity_tokens=774_720, max_context_tokens=131_072)
    assert start.limit == 5  # 774,720 / 131,072 = 5.9 episodes of full length


def test_a_configured_initial_inflight_replaces_the_derived_start() -> None:
    assert control(cap=17).limit == 17


def test_the_start_is_clamped_to_min_inflight() -> None:
    config = InflightControlConfig(min_inflight=3)
    assert InflightControl(config, kv_capacity_tokens=10, max_context_tokens=100).limit == 3


def test_each_finished_episode_grows_the_cap_by_its_share_of_a_quarter_per_turnover() -> None:
    ctl = control(cap=10)
    ctl.observe(poll(), inflight=10, now_s=0.0)
    assert ctl.episode_finished(9, generated=True, now_s=1.0) is None  # 10.22: still 10 whole
    assert ctl.cap == pytest.approx(10 * 1.25**0.1) and ctl.turnover == pytest.approx(0.1)
    while ctl.turnover < 2.0:  # the pool kept full at the cap
        ctl.episode_finished(ctl.limit - 1, generated=True, now_s=1.0)
    assert ctl.cap == pytest.approx(10 * 1.25**ctl.turnover)  # x1.25 per whole turnover
    assert ctl.limit == int(ctl.cap) >= 15


def test_the_cap_does_not_grow_unless_in_flight_reaches_nine_tenths_of_it() -> None:
    ctl = control(cap=10)
    ctl.observe(poll(), inflight=5, now_s=0.0)
    assert all(ctl.episode_finished(4, generated=True, now_s=1.0) is None for _ in range(20))
    assert ctl.limit == 10


@pytest.mark.parametrize(
    "samples",
    [poll(usage=0.65), poll(preemptions=0, waiting=1)],
    ids=["kv use above 0.6", "requests queued"],
)
def test_the_cap_does_not_grow_unless_the_last_poll_was_clear(
    samples: list[EngineLoadSample],
) -> None:
    ctl = control(cap=4)
    ctl.observe(samples, inflight=4, now_s=0.0)
    assert all(ctl.episode_finished(3, generated=True, now_s=1.0) is None for _ in range(20))


def test_a_clear_poll_older_than_the_growth_gate_allows_no_growth() -> None:
    ctl = control(cap=4)
    ctl.observe(poll(), inflight=4, now_s=0.0)
    assert ctl.episode_finished(3, generated=True, now_s=15.0) is None


def test_an_episode_that_generated_nothing_advances_the_turnover_but_grows_nothing() -> None:
    ctl = control(cap=4)
    ctl.observe(poll(), inflight=4, now_s=0.0)
    for _ in range(8):
        assert ctl.episode_finished(3, generated=False, now_s=1.0) is None
    assert ctl.turnover == pytest.approx(2.0) and ctl.limit == 4


def test_kv_use_above_the_soft_cap_lowers_the_cap_and_cancels_nothing() -> None:
    change = control(cap=20).observe(poll(usage=0.85), inflight=20, now_s=0.0)
    assert change is not None and "soft" in change.reason
    assert change == CapChange(int(20 * 0.7 / 0.85), 0, "trim", change.reason)


def test_kv_use_above_the_hard_cap_also_cancels_the_excess() -> None:
    change = control(cap=20).observe(poll(usage=0.95), inflight=20, now_s=0.0)
    assert change is not None and change.cap == 14 and change.cancel == 6  # 20 x 0.7 / 0.95
    assert "hard" in change.reason


def test_a_trim_waits_six_polls_before_the_next() -> None:
    ctl = control(cap=20)
    assert ctl.observe(poll(usage=0.85), inflight=20, now_s=0.0) is not None
    later = [ctl.observe(poll(usage=0.85), inflight=16, now_s=5.0 * i) for i in range(1, 7)]
    assert later[:5] == [None] * 5 and later[5] is not None


def test_a_trim_never_raises_the_cap() -> None:
    ctl = control(cap=10)
    change = ctl.observe(poll(usage=0.81), inflight=30, now_s=0.0)  # 30 x 0.7 / 0.81 = 25
    assert change is not None and change.cap == 10


def test_a_preemption_cuts_to_four_fifths_of_in_flight_and_cancels_the_excess() -> None:
    ctl = control(cap=20)
    ctl.observe(poll(preemptions=3), inflight=20, now_s=0.0)  # the first poll is the baseline
    change = ctl.observe(poll(preemptions=4), inflight=20, now_s=5.0)
    assert change is not None and (change.cap, change.cancel, change.kind) == (16, 4, "cut")
    assert change.reason == "preemptions"


def test_overload_while_draining_is_ignored() -> None:
    ctl = control(cap=20)
    ctl.observe(poll(preemptions=0), inflight=20, now_s=0.0)
    ctl.observe(poll(preemptions=1), inflight=20, now_s=5.0)  # cut to 16
    assert ctl.observe(poll(preemptions=2), inflight=18, now_s=10.0) is None  # still 18 > 16


def test_a_new_overload_within_the_grace_after_a_drain_cuts_to_half() -> None:
    ctl = control(cap=20)
    ctl.observe(poll(preemptions=0), inflight=20, now_s=0.0)
    ctl.observe(poll(preemptions=1), inflight=20, now_s=5.0)  # cut to 16, draining
    ctl.observe(poll(preemptions=1), inflight=16, now_s=10.0)  # drained: grace begins
    change = ctl.observe(poll(preemptions=2), inflight=16, now_s=15.0)
    assert change is not None and change.cap == 8


def test_a_queue_that_persists_six_polls_cuts_to_nine_tenths() -> None:
    ctl = control(cap=40)
    changes = [
        ctl.observe(poll(usage=0.5, waiting=10, running=10), inflight=40, now_s=5.0 * i)
        for i in range(6)
    ]
    assert changes[:5] == [None] * 5
    assert changes[5] is not None and changes[5].cap == 36 and changes[5].reason == "queue overload"


def test_the_cap_stays_within_min_and_max_inflight() -> None:
    ctl = control(cap=4, max_inflight=4, min_inflight=2)
    ctl.observe(poll(), inflight=4, now_s=0.0)
    assert all(ctl.episode_finished(3, generated=True, now_s=1.0) is None for _ in range(40))
    change = ctl.observe(poll(usage=0.99), inflight=1, now_s=2.0)
    assert change is not None and change.cap == 2


def test_thresholds_out_of_order_are_a_config_error() -> None:
    with pytest.raises(ValueError, match="kv_usage_grow <= kv_usage_soft_cap"):
        InflightControlConfig.model_validate({"kv_usage_grow": 0.9, "kv_usage_soft_cap": 0.8})
