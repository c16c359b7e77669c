"""Which tasks a SWE run needs images for, and where its tasks come from (pure and file I/O)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from foundation.errors import ConfigError
from rollout.core.admission import AdmissionController
from rollout.core.config import AdmissionConfig
from rollout.jobs.env_sources import select_tasks
from rollout.jobs.run_job import reachable_prompts


def admission(shuffle: bool = True) -> AdmissionController:
    config = AdmissionConfig(groups_per_step=2, async_factor=1, shuffle=shuffle, seed=5)
    return AdmissionController(config, num_prompts=36)


def test_a_short_run_needs_only_the_prompts_it_can_reach() -> None:
    assert reachable_prompts(admission(shuffle=False), 4) == {0, 1, 2, 3}
    assert len(reachable_prompts(admission(), 10)) == 10


def test_a_run_of_a_billion_steps_needs_every_prompt_at_once_without_listing_them() -> None:
    started = time.perf_counter()
    assert reachable_prompts(admission(), 2 * 10**9) == set(range(36))
    assert time.perf_counter() - started < 1.0  # not an O(steps) walk (was: hangs, memory grows)


def test_every_window_of_two_epochs_covers_every_prompt() -> None:
    source = admission()
    for cursor_shift in range(0, 40, 7):
        window = source.peek_prompt_indices(72 + cursor_shift)[cursor_shift:]
        assert set(window) == set(range(36))


def test_unknown_task_ids_name_where_to_look(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown SWE task ids"):
        select_tasks(["no-such-task"])
