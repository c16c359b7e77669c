"""`conductor bench engine` smoke: both sides measured, stats() never calls the server."""

from __future__ import annotations

from rollout.jobs.engine_bench import EngineBenchConfig, run_engine_bench
from tests.paths import CONFIGS


async def test_the_engine_bench_measures_both_sides_and_stats_make_no_http_call() -> None:
    config = EngineBenchConfig(
        serve_sim_config=CONFIGS / "serve_sim" / "default.yaml",
        sessions=(1, 4),
        turns=2,
        prompt_tokens=256,
        cost="zero",
    )
    rows = await run_engine_bench(config)
    assert [(row.sessions, row.turns) for row in rows] == [(1, 2), (4, 8)]
    for row in rows:
        assert 0 < row.in_process_ms[0] <= row.in_process_ms[1]
        assert 0 < row.http_ms[0] <= row.http_ms[1]
        assert row.client_cpu_ms > 0 and row.stats_http_calls == 0
