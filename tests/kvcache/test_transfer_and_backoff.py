"""The link model and the pressure-offload backoff, both pure values."""

from __future__ import annotations

import pytest

from kvcache import Direction, GroupBackoff, TransferConfig, TransferModel


def model() -> TransferModel:
    return TransferModel(
        bytes_per_token=100,
        d2h_bandwidth_bytes_per_s=1000.0,
        h2d_bandwidth_bytes_per_s=500.0,
        latency_s=0.5,
    )


def test_transfer_time_is_latency_plus_bytes_over_bandwidth() -> None:
    assert model().seconds(10, Direction.D2H) == pytest.approx(0.5 + 1000 / 1000)
    assert model().seconds(10, Direction.H2D) == pytest.approx(0.5 + 1000 / 500)


def test_moving_nothing_costs_nothing() -> None:
    assert model().seconds(0, Direction.H2D) == 0.0


def test_round_trip_is_offload_plus_reload() -> None:
    assert model().round_trip_s(10) == pytest.approx(1.5 + 2.5)


def test_defaults_match_the_perf_model_reference() -> None:
    default = TransferModel.from_config(TransferConfig())
    # perf-model.md §4.1: Qwen3-8B reload over PCIe at 47 GB/s is about 3.1 µs per token.
    per_token_s = (default.seconds(1_000_000, Direction.H2D) - default.latency_s) / 1_000_000
    assert per_token_s == pytest.approx(3.1e-6, rel=0.02)


def test_a_non_positive_bandwidth_is_refused() -> None:
    with pytest.raises(ValueError, match="bandwidth"):
        TransferModel(1, 0.0, 1.0, 0.0)


def test_backoff_doubles_under_pressure_up_to_the_cap() -> None:
    backoff = GroupBackoff.start(initial_group=1, max_group=4)
    sizes = []
    for _ in range(4):
        backoff = backoff.after_step(pressured=True)
        sizes.append(backoff.group_size)
    assert sizes == [2, 4, 4, 4]


def test_backoff_halves_without_pressure_down_to_the_first_size() -> None:
    backoff = GroupBackoff(initial_group=2, max_group=16, group_size=16)
    sizes = []
    for _ in range(4):
        backoff = backoff.after_step(pressured=False)
        sizes.append(backoff.group_size)
    assert sizes == [8, 4, 2, 2]


def test_backoff_reset_returns_to_the_first_size() -> None:
    assert GroupBackoff(1, 8, 8).reset().group_size == 1
