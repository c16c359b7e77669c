"""`StepFill`: tokens per engine step against its budget, as a histogram with mean and p99."""

from __future__ import annotations

import pytest

from rollout.engines.step_fill import StepFill


def test_no_step_has_no_figures() -> None:
    assert StepFill().summary() is None


def test_mean_and_p99_weigh_each_step_and_split_by_kind() -> None:
    fill = StepFill()
    fill.record("decode", 8, 32, steps=98)  # 0.25 each
    fill.record("decode", 32, 32)  # one full decode step
    fill.record("prefill", 4096, 16384)  # 0.25
    summary = fill.summary()
    assert summary is not None
    assert (summary["steps"], summary["tokens"]) == (100, 98 * 8 + 32 + 4096)
    assert summary["mean_fill"] == pytest.approx((99 * 0.25 + 1.0) / 100)
    assert summary["p99_fill"] == 0.25  # the 99th of 100 steps by fill
    decode = summary["decode"]
    assert isinstance(decode, dict)
    assert (decode["steps"], decode["budget_tokens"], decode["p99_fill"]) == (99, 32, 1.0)
    assert summary["prefill"] == {
        "steps": 1,
        "tokens": 4096,
        "mean_fill": 0.25,
        "p99_fill": 0.25,
        "budget_tokens": 16384,
    }


def test_merging_engines_adds_their_steps() -> None:
    one, two = StepFill(), StepFill()
    one.record("decode", 4, 8, steps=3)
    two.record("decode", 4, 8, steps=2)
    two.record("prefill", 100, 1000, steps=0)  # nothing ran
    one.merge(two)
    assert one.counts == {("decode", 4, 8): 5}
