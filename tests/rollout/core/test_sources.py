"""Task sources: the deterministic weighted mix and multi-source admission."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rollout.core.admission import AdmissionController
from rollout.core.classes import PriorityClass
from rollout.core.config import AdmissionConfig
from rollout.core.sources import SourceLayout, SourceMix, SourcePrompts, TaskSourceConfig
from rollout.errors import AdmissionError


def _sources() -> tuple[SourcePrompts, ...]:
    return (
        SourcePrompts(TaskSourceConfig(name="swe", weight=0.7), 5),
        SourcePrompts(
            TaskSourceConfig(
                name="short", weight=0.3, priority_class=PriorityClass.HIGH, group_size=2
            ),
            3,
        ),
    )


def test_mix_shares_are_exact_over_every_window() -> None:
    mix = SourceMix({"a": 0.7, "b": 0.3})
    picks = [mix.next()[0] for _ in range(200)]
    assert picks.count("a") == 140
    for start in range(0, 190):
        window = picks[start : start + 10]
        assert abs(window.count("a") - 7) <= 1  # within one group of the exact share


def test_mix_is_deterministic_and_counts_picks() -> None:
    one, two = SourceMix({"a": 2, "b": 1, "c": 1}), SourceMix({"a": 2, "b": 1, "c": 1})
    assert [one.next() for _ in range(50)] == [two.next() for _ in range(50)]
    mix = SourceMix({"a": 2, "b": 1, "c": 1})
    assert [mix.next() for _ in range(4)] == [("a", 0), ("b", 0), ("c", 0), ("a", 1)]
    assert mix.picks == {"a": 2, "b": 1, "c": 1}


def test_mix_state_round_trip_continues_the_same_sequence() -> None:
    mix = SourceMix({"a": 0.7, "b": 0.3})
    for _ in range(7):
        mix.next()
    copy = SourceMix({"a": 0.7, "b": 0.3})
    copy.load_state_dict(mix.state_dict())
    assert [copy.next() for _ in range(20)] == [mix.next() for _ in range(20)]
    with pytest.raises(AdmissionError, match="does not match"):
        SourceMix({"a": 1}).load_state_dict(mix.state_dict())


def test_mix_skips_ineligible_sources() -> None:
    mix = SourceMix({"a": 0.5, "b": 0.5})
    assert {mix.next({"b"})[0] for _ in range(3)} == {"b"}
    with pytest.raises(AdmissionError, match="eligible"):
        mix.next(())


def test_source_config_validates() -> None:
    with pytest.raises(ValidationError):
        TaskSourceConfig(name="x", weight=0)
    with pytest.raises(ValidationError):
        TaskSourceConfig(name="bad name")
    with pytest.raises(ValidationError):
        TaskSourceConfig(name="x", priority_class="vip")  # type: ignore[arg-type]
    assert TaskSourceConfig(name="x", top_p=0.9).sampling_overrides() == {"top_p": 0.9}


def test_layout_gives_each_source_its_own_index_range() -> None:
    layout = SourceLayout.of(_sources())
    assert layout.offsets == (0, 5) and layout.num_prompts == 8
    assert layout.locate(4) == ("swe", 4) and layout.locate(5) == ("short", 0)
    with pytest.raises(AdmissionError, match="repeat"):
        SourceLayout.of((_sources()[0], _sources()[0]))


def test_admission_draws_sources_in_the_mix_with_their_cursors_and_sizes() -> None:
    config = AdmissionConfig(groups_per_step=10, async_factor=1, group_size=4, shuffle=False)
    ctl = AdmissionController(config, num_prompts=8, sources=_sources())
    peeked = ctl.peek_prompt_indices(10)
    groups = ctl.admit()
    assert tuple(g.prompt_index for g in groups) == peeked
    assert [g.source for g in groups].count("swe") == 7
    swe = [g.prompt_index for g in groups if g.source == "swe"]
    short = [g.prompt_index for g in groups if g.source == "short"]
    assert swe == [0, 1, 2, 3, 4, 0, 1]  # its own cursor, cycling over its 5 prompts
    assert short == [5, 6, 7]  # its own range, offset 5
    assert {g.size for g in groups if g.source == "swe"} == {4}
    assert {g.size for g in groups if g.source == "short"} == {2}


def test_admission_quota_stays_global() -> None:
    config = AdmissionConfig(groups_per_step=3, async_factor=1)
    ctl = AdmissionController(config, num_prompts=8, sources=_sources())
    assert len(ctl.admit()) == 3 and ctl.quota() == 0


def test_admission_max_epochs_exhausts_each_source_on_its_own() -> None:
    config = AdmissionConfig(groups_per_step=100, async_factor=1, max_epochs=1)
    ctl = AdmissionController(config, num_prompts=8, sources=_sources())
    groups = ctl.admit()
    assert len(groups) == 8
    assert sorted(g.prompt_index for g in groups) == list(range(8))


def test_admission_checkpoint_keeps_sources_and_continues_the_mix() -> None:
    config = AdmissionConfig(groups_per_step=4, async_factor=1, seed=3)
    ctl = AdmissionController(config, num_prompts=8, sources=_sources())
    first = ctl.admit()
    ctl.consume([first[0].group_id])
    state = ctl.state_dict()
    restored = AdmissionController(config, num_prompts=8, sources=_sources())
    restored.load_state_dict(state)
    again = restored.admit()
    assert [(g.source, g.size, g.prompt_index) for g in again] == [
        (g.source, g.size, g.prompt_index) for g in first[1:]
    ]
    ctl.set_training_step(1)
    restored.set_training_step(1)
    assert [g.prompt_index for g in ctl.admit()][-4:] == [g.prompt_index for g in restored.admit()][
        -4:
    ]
    with pytest.raises(AdmissionError, match="task sources"):
        AdmissionController(config, num_prompts=8).load_state_dict(state)


def test_admission_rejects_a_wrong_total() -> None:
    with pytest.raises(AdmissionError, match="sum"):
        AdmissionController(AdmissionConfig(), num_prompts=9, sources=_sources())
