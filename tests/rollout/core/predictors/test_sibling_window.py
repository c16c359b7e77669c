"""The sibling predictor's prior: running window moments against a two-pass fit."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout.core.predictors.sibling import _WindowMoments


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("abcd"), st.integers(1, 80)), max_size=60),
    st.integers(1, 12),
)
def test_the_running_window_fits_the_prior_like_a_two_pass_computation(
    samples: list[tuple[str, int]], size: int
) -> None:
    """The prior is refit after every finished sample from running sums over a sliding window;
    they must agree with computing the moments afresh over the samples still in the window."""
    window = _WindowMoments(size)
    for group_id, turns in samples:
        window.add(group_id, turns, 10 * turns)
    kept = samples[-size:] if samples else []
    logs = [math.log(turns) for _, turns in kept]
    assert window.count == len(kept)
    assert window.turns == sum(turns for _, turns in kept)
    if not kept:
        return
    mean = sum(logs) / len(logs)
    assert window.log_sum / window.count == pytest.approx(mean)
    by_group: dict[str, list[float]] = {}
    for (group_id, _), value in zip(kept, logs, strict=True):
        by_group.setdefault(group_id, []).append(value)
    within = sum(sum((x - sum(xs) / len(xs)) ** 2 for x in xs) for xs in by_group.values())
    assert window.within_ss == pytest.approx(within, abs=1e-9)
    assert window.within_dof == sum(len(xs) - 1 for xs in by_group.values())
