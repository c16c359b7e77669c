"""Smoke test of the micro-benchmark at a tiny size (timings themselves are not asserted)."""

from __future__ import annotations

import pytest

from kvcache.bench import BenchSettings, main, run_benchmark

TINY = BenchSettings(cached_tokens=4_000, sessions=80, ops=50)


def test_benchmark_times_every_operation_for_both_policies() -> None:
    rows = run_benchmark(TINY)
    operations = {(row.policy, row.operation) for row in rows}
    assert ("priority", "reserve → evict (low-ref)") in operations
    assert ("lru", "match_prefix (full device hit)") in operations
    assert all(row.ops > 0 and row.p50_us >= 0 for row in rows)


def test_benchmark_cli_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--tokens", "4000", "--sessions", "80", "--ops", "20", "--policy", "lru"]) == 0
    out = capsys.readouterr().out
    assert "p99 µs" in out and "lru" in out and "priority " not in out
