"""`TrajectoryBuilder`: the record the agent loop appends to, and its cheap slices."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rollout.errors import TrajectoryError
from rollout.trajectories.builder import TrajectoryBuilder
from rollout.trajectories.tokenizer import Span


def builder_with_two_turns() -> tuple[TrajectoryBuilder, Span, Span]:
    record = TrajectoryBuilder((1, 2, 3))
    record.open_turn()
    record.append_generated((10, 11), (-0.1, -0.2), version=0)
    first = record.end_turn()
    record.append_observation((20, 21, 22))
    record.open_turn()
    record.append_generated((12,), (-0.3,), version=1)
    second = record.end_turn()
    return record, first, second


def test_a_turn_span_slices_exactly_its_generated_ids() -> None:
    record, first, second = builder_with_two_turns()
    assert record.token_slice(first.start, first.end) == (10, 11)
    assert record.token_slice(second.start, second.end) == (12,)
    assert record.token_ids == (1, 2, 3, 10, 11, 20, 21, 22, 12)
    for start in range(record.length + 1):
        for end in range(start, record.length + 2):
            assert record.token_slice(start, end) == record.token_ids[start:end]


def test_each_prompt_extends_the_previous_one_by_exactly_what_came_after_it() -> None:
    record = TrajectoryBuilder((1, 2))
    before = record.token_ids
    record.open_turn()
    record.append_generated((5, 6), (0.0, 0.0), version=0)
    record.end_turn()
    record.append_observation((7,))
    assert record.token_ids[: len(before)] == before
    assert record.generated_tokens == 2
    assert record.observation_tokens == 1


def test_output_without_an_open_turn_is_refused_with_what_to_call() -> None:
    record = TrajectoryBuilder((1,))
    with pytest.raises(TrajectoryError, match="open_turn"):
        record.append_generated((5,), (0.0,), version=0)


def test_built_records_skip_the_per_token_check_but_any_change_gets_it() -> None:
    """`build` is correct by construction (each segment is validated as it is appended), so
    the O(tokens) check is skipped for it; `replace` on the result runs every check."""
    record, _, _ = builder_with_two_turns()
    trajectory = record.build(sample_id="s", group_id="g", prompt_index=0, sample_index=0, reward=1)
    assert trajectory.loss_mask == (0, 0, 0, 1, 1, 0, 0, 0, 1)
    generated_without_version = (*trajectory.versions[:3], -1, *trajectory.versions[4:])
    with pytest.raises(TrajectoryError, match="token 3"):
        replace(trajectory, versions=generated_without_version)
    with pytest.raises(TrajectoryError, match="not generated but carries version"):
        replace(trajectory, versions=(7, *trajectory.versions[1:]))


def test_a_generation_spanning_a_weight_update_records_each_tokens_version() -> None:
    record = TrajectoryBuilder((1, 2))
    record.open_turn()
    record.append_generated((11, 12, 13), (-0.1, -0.2, -0.3), version=(4, 4, 5))
    record.end_turn()
    trajectory = record.build(
        sample_id="s", group_id="g", prompt_index=0, sample_index=0, reward=0.0
    )
    assert trajectory.versions == (-1, -1, 4, 4, 5)


def test_per_token_versions_must_match_the_generated_ids() -> None:
    record = TrajectoryBuilder((1,))
    record.open_turn()
    with pytest.raises(TrajectoryError, match="3 generated ids but 2 per-token versions"):
        record.append_generated((11, 12, 13), (-0.1, -0.2, -0.3), version=(4, 5))
