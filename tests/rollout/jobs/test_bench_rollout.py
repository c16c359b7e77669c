"""`conductor bench rollout`: spreads over seeds, and ratios that count only off 1."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from rollout.cli.bench import app
from rollout.jobs.bench_rollout import (
    Ratio,
    SeedSpread,
    Spread,
    Variant,
    best_lines,
    best_of_sweeps,
    parse_sweep,
    ratios_to_ours,
    refine_sweep,
    refined_values,
    run_seeds,
    spread,
)
from rollout.observe.run_summary import RunSummary
from tests.paths import CONFIGS

SHORT = CONFIGS / "simulate" / "short_context.yaml"
SMALL = ["steps=1", "groups_per_step=2", "group_size=2", "trainer.train_time_s=1"]


def test_a_spread_is_the_mean_and_the_extremes() -> None:
    assert spread([1.0, 2.0, 6.0]) == Spread(3.0, 1.0, 6.0)
    with pytest.raises(ValueError, match="at least one"):
        spread([])


@pytest.mark.parametrize(
    ("low", "high", "decisive"), [(1.05, 1.3, True), (0.7, 0.95, True), (0.9, 1.2, False)]
)
def test_a_ratio_counts_only_when_its_spread_stays_on_one_side_of_one(
    low: float, high: float, decisive: bool
) -> None:
    assert Ratio(Spread((low + high) / 2, low, high)).decisive is decisive


def test_every_policy_runs_on_every_seed_and_seeds_draw_different_workloads() -> None:
    results = run_seeds(SHORT, [*SMALL, "policies=[conductor, sync]"], [0, 1])
    assert [r.policy for r in results] == ["conductor", "sync"]
    assert all(len(r.summaries) == 2 for r in results)
    ours = results[0].summaries
    assert ours[0].t_next_s != ours[1].t_next_s  # a seed is a different workload draw


def test_the_command_prints_a_simulated_table_with_ratios() -> None:
    overrides = [*SMALL, "policies=[conductor, traj_async]"]
    done = CliRunner().invoke(app, ["rollout", str(SHORT), *overrides, "--seeds", "0,1"])
    assert done.exit_code == 0, done.output
    assert "SIMULATED" in done.output and "traj" in done.output and "×" in done.output


def test_a_sweep_is_one_variant_per_value_of_one_knob() -> None:
    variants = parse_sweep("traj_async:conductor.agent_slots=8,16")
    assert variants == [
        Variant("traj_async[agent_slots=8]", "traj_async", ("conductor.agent_slots=8",)),
        Variant("traj_async[agent_slots=16]", "traj_async", ("conductor.agent_slots=16",)),
    ]
    with pytest.raises(ValueError, match="POLICY:KEY=V1,V2"):
        parse_sweep("traj_async")


def test_a_sweep_over_engine_overrides_reads_as_the_override() -> None:
    (eight, sixteen) = parse_sweep(
        "aggressive:engine.overrides=[max_running_requests=8],[max_running_requests=16]"
    )
    assert eight.label == "aggressive[max_running_requests=8]"
    assert eight.overrides == ("engine.overrides=[max_running_requests=8]",)
    assert sixteen.label == "aggressive[max_running_requests=16]"


def test_a_swept_value_in_brackets_may_hold_several_overrides() -> None:
    (both, one) = parse_sweep(
        "conductor:rollout.overrides=[scheduler.a=true, scheduler.b=true],[scheduler.a=true]"
    )
    assert both.overrides == ("rollout.overrides=[scheduler.a=true, scheduler.b=true]",)
    assert both.label == "conductor[scheduler.a=true, scheduler.b=true]"
    assert one.overrides == ("rollout.overrides=[scheduler.a=true]",)


def _spread(policy: str, t_next_s: float) -> SeedSpread:
    summary = RunSummary(policy, (t_next_s,), (), None, None, None, 0, 0, 0, None, 0, 0)
    return SeedSpread(policy, (summary,))


def test_a_baselines_default_setting_counts_when_it_beats_its_sweep() -> None:
    variants = parse_sweep("aggressive:engine.overrides=[max_running_requests=8]")
    label = variants[0].label
    ours, swept = _spread("conductor", 10.0), _spread(label, 12.0)
    default = _spread("aggressive", 9.0)
    assert best_of_sweeps([ours, default, swept], variants) == {"aggressive": "aggressive"}
    assert best_of_sweeps([ours, _spread("aggressive", 13.0), swept], variants) == {
        "aggressive": label
    }
    tuned_ours = parse_sweep("conductor:rollout.overrides=[predictor.kind=oracle]")
    oracle = _spread(tuned_ours[0].label, 11.0)
    assert best_of_sweeps([ours, oracle], tuned_ours) == {"conductor": tuned_ours[0].label}


def test_the_best_value_of_a_sweep_is_the_one_with_the_lowest_mean_t_next() -> None:
    variants = parse_sweep("traj_async:conductor.agent_slots=1,8")
    results = run_seeds(SHORT, [*SMALL, "policies=[conductor]"], [0], variants=variants)
    assert [r.policy for r in results] == ["conductor", *(v.label for v in variants)]
    one_slot, eight = results[1], results[2]
    assert one_slot.t_next().mean > eight.t_next().mean  # one live sample at a time is slow
    assert best_of_sweeps(results, variants) == {"traj_async": "traj_async[agent_slots=8]"}
    (line,) = best_lines(results, variants, ratios_to_ours(results))
    headroom = eight.figure(lambda s: s.over_floor)
    assert headroom is not None and headroom.mean >= 1.0
    assert line.startswith("best traj_async: traj_async[agent_slots=8], ÷ ours ")
    assert f"it runs at {headroom.text('×', digits=2)} the floor" in line


@pytest.mark.parametrize(
    ("grid", "best", "added"),
    [
        ([8, 16, 32, 64], 16, [12, 20, 24, 28]),  # between the best's neighbours, every 4
        ([8, 16, 32, 64], 8, [4, 12]),  # at the low edge: two steps past it, not below 1
        ([8, 16, 32], 32, [20, 24, 28, 36, 40]),  # at the high edge: two steps past it
        ([8, 12, 16], 12, []),  # already within one step
        ([2, 4], 2, [1, 3]),
    ],
)
def test_a_refinement_fills_the_best_values_bracket_in_steps_of_at_most_the_step(
    grid: list[int], best: int, added: list[int]
) -> None:
    assert refined_values(grid, best, 4 if best > 4 else 1) == added


def test_a_refinement_step_below_one_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        refined_values([8, 16], 8, 0)


def test_a_sweep_is_refined_around_its_best_value_in_its_own_form() -> None:
    slots = "traj_async:conductor.agent_slots=8,16,32"
    results = [
        _spread(v.label, t) for v, t in zip(parse_sweep(slots), (30.0, 10.0, 20.0), strict=True)
    ]
    assert [v.label for v in refine_sweep(slots, results, 4)] == [
        "traj_async[agent_slots=12]", "traj_async[agent_slots=20]",
        "traj_async[agent_slots=24]", "traj_async[agent_slots=28]",
    ]  # fmt: skip
    engine = "aggressive:engine.overrides=[max_running_requests=8],[max_running_requests=16]"
    results = [_spread(v.label, t) for v, t in zip(parse_sweep(engine), (5.0, 9.0), strict=True)]
    (first, *_) = refine_sweep(engine, results, 4)
    assert first.overrides == ("engine.overrides=[max_running_requests=4]",)


def test_a_sweep_of_words_is_not_refined() -> None:
    text = "conductor:rollout.overrides=[predictor.kind=constant],[predictor.kind=oracle]"
    results = [_spread(v.label, 1.0) for v in parse_sweep(text)]
    assert refine_sweep(text, results, 4) == []


def test_the_command_runs_the_refined_values_after_the_coarse_sweep(tmp_path) -> None:  # type: ignore[no-untyped-def]
    overrides = [*SMALL, "policies=[conductor]"]
    table = tmp_path / "bench.md"
    done = CliRunner().invoke(
        app,
        ["rollout", str(SHORT), *overrides, "--seeds", "0", "--sweep",
         "traj_async:conductor.agent_slots=1,4", "--refine", "1", "--markdown", str(table)],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    rows = [line.split(" | ")[0] for line in table.read_text().splitlines()]
    swept = [row.removeprefix("| ") for row in rows if row.startswith("| traj_async")]
    assert swept == [f"traj_async[agent_slots={n}]" for n in (1, 4, 2, 3, 5, 6)]


def test_without_refine_the_command_runs_only_the_swept_values(tmp_path) -> None:  # type: ignore[no-untyped-def]
    table = tmp_path / "bench.md"
    done = CliRunner().invoke(
        app,
        ["rollout", str(SHORT), *SMALL, "policies=[conductor]", "--seeds", "0", "--sweep",
         "traj_async:conductor.agent_slots=1,4", "--markdown", str(table)],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    rows = [line for line in table.read_text().splitlines() if line.startswith("| traj_async")]
    assert len(rows) == 2


def test_every_simulated_run_stays_above_its_floor_and_measures_its_length_bias() -> None:
    results = run_seeds(SHORT, [*SMALL, "policies=[conductor, traj_async, sync]"], [0, 1])
    for result in results:
        for summary in result.summaries:
            assert summary.floor_t_next_s is not None and summary.floor_t_next_s > 0
            assert summary.over_floor is not None and summary.over_floor >= 1.0
            assert summary.length_bias is not None and summary.length_bias > 0
            assert summary.length_bias_p90 is not None and summary.length_bias_p90 > 0
            assert summary.reward_bias is not None and -1.0 <= summary.reward_bias <= 1.0
            if result.policy == "sync":  # it consumes exactly the groups it admits
                assert summary.length_bias == summary.length_bias_p90 == 1.0
                assert summary.reward_bias == 0.0
            assert summary.staleness_mean is not None and summary.staleness_mean >= 0
            total, host = summary.kv_hit_rate, summary.kv_host_hit_rate
            assert total is not None and host is not None and 0.0 <= host <= total
            assert summary.kv_device_hit_rate == pytest.approx(total - host)


def test_the_command_appends_its_table_as_markdown(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "bench.md"
    overrides = [*SMALL, "policies=[conductor, sync]"]
    args = ["rollout", str(SHORT), *overrides, "--seeds", "0", "--markdown", str(out)]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    text = out.read_text()
    assert text.startswith("**SIMULATED") and "| policy | T_next |" in text
    assert "| sync |" in text and "÷ floor" in text
    # ÷ floor = 1 + forwards + extra work + idle, each cell rounded
    header, _, *rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| ")]
    at = {name.strip("| "): index for index, name in enumerate(header)}
    for row in rows:
        over, *parts = (
            float(row[at[name]].split()[0])
            for name in ("÷ floor", "forwards", "extra work", "idle")
        )
        assert over == pytest.approx(1 + sum(parts), abs=0.01)


def test_recording_the_first_seed_for_figures_changes_no_figure(tmp_path) -> None:  # type: ignore[no-untyped-def]
    overrides = [*SMALL, "policies=[conductor]"]
    variants = parse_sweep("traj_async:conductor.agent_slots=4")
    plain = run_seeds(SHORT, overrides, [0, 1], variants=variants)
    recorded = run_seeds(SHORT, overrides, [0, 1], variants=variants, record_dir=tmp_path)
    assert [r.summaries for r in recorded] == [r.summaries for r in plain]
    assert [r.run_dir for r in plain] == [None, None]
    names = [r.run_dir.name for r in recorded if r.run_dir]
    assert names == ["conductor", "traj_async_agent_slots_4"]
    for result in recorded:
        assert result.run_dir is not None
        assert (result.run_dir / "steps.jsonl").read_text().count("\n") == 1  # seed 0 only
        assert (result.run_dir / "timeseries.jsonl").exists()
        assert not (result.run_dir / "trajectories.jsonl").exists()
    with pytest.raises(ValueError, match="start empty"):
        run_seeds(SHORT, overrides, [0], record_dir=tmp_path)


def test_runs_in_worker_processes_give_the_summaries_of_one_process(tmp_path) -> None:  # type: ignore[no-untyped-def]
    overrides = [*SMALL, "policies=[conductor, sync]"]
    variants = parse_sweep("traj_async:conductor.agent_slots=4")
    alone = run_seeds(SHORT, overrides, [0, 1], variants=variants)
    lines: list[str] = []
    together = run_seeds(
        SHORT,
        overrides,
        [0, 1],
        variants=variants,
        jobs=2,
        progress=lines.append,
        record_dir=tmp_path,
    )
    assert [r.policy for r in together] == [r.policy for r in alone]
    assert [r.summaries for r in together] == [r.summaries for r in alone]
    assert lines[0] == "0 of 6 runs done, 2 at once" and lines[-1].startswith("6 of 6 runs done")
    assert (tmp_path / "traj_async_agent_slots_4" / "steps.jsonl").exists()  # recorded in a worker
    with pytest.raises(ValueError, match="jobs must be at least 1"):
        run_seeds(SHORT, overrides, [0], jobs=0)


def test_the_command_draws_the_comparison_figures_of_its_first_seed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "figures"
    overrides = [*SMALL, "policies=[conductor, sync]"]
    args = ["rollout", str(SHORT), *overrides, "--seeds", "0", "--figures", str(out)]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    pngs = sorted(path.name for path in out.glob("*.png"))
    assert pngs == ["busy.png", "env_share.png", "kv.png", "throughput.png"]
    assert sorted(path.name for path in (out / "runs").iterdir()) == ["conductor", "sync"]
    again = CliRunner().invoke(app, args)
    assert again.exit_code != 0 and "not empty" in again.output


def test_ours_runs_with_a_constant_and_with_an_oracle_length_predictor() -> None:
    variants = parse_sweep(
        "conductor:rollout.overrides=[predictor.kind=constant],[predictor.kind=oracle]"
    )
    results = run_seeds(SHORT, [*SMALL, "policies=[conductor]"], [0], variants=variants)
    assert [r.policy for r in results] == [
        "conductor",
        "conductor[predictor.kind=constant]",
        "conductor[predictor.kind=oracle]",
    ]
    for result in results:  # the oracle knows a group's samples from its admission on
        assert result.summaries[0].samples == 2 * 2


def test_recompute_lost_to_weight_updates_is_told_apart_only_where_samples_span_them() -> None:
    """`sync` starts every sample after the update it trains on; an async policy's samples live
    across updates, whose cache flush they pay for."""
    overrides = ["steps=3", "groups_per_step=2", "group_size=2", "async_factor=2",
                 "trainer.train_time_s=1", "policies=[sync, traj_async]"]  # fmt: skip
    sync, spanning = (result.summaries[0] for result in run_seeds(SHORT, overrides, [0]))
    assert sync.recomputed_after_update_tokens == 0
    assert 0 < spanning.recomputed_after_update_tokens <= spanning.recomputed_tokens


def test_the_decode_batch_is_decode_tokens_over_decode_steps_of_the_engines() -> None:
    (result,) = run_seeds(SHORT, [*SMALL, "policies=[traj_async]"], [0])
    batch = result.summaries[0].decode_batch_mean
    assert batch is not None and 1.0 <= batch <= 32  # short_context runs 32 generation slots
    one_slot = run_seeds(SHORT, [*SMALL, "policies=[traj_async]", "conductor.agent_slots=1"], [0])
    assert one_slot[0].summaries[0].decode_batch_mean == 1.0  # one live sample: one per step


def test_the_floor_is_that_of_the_engine_that_ran_prefill_forwards_stall_decodes_or_not() -> None:
    """`sync` consumes exactly the groups it admits, so both runs' floors count the same work:
    the engine that mixes prefill into decode forwards has the lower floor, and each run stays
    above its own."""
    floors = {}
    for mixed in (False, True):
        overrides = f"engine.overrides=[max_running_requests=32,mixed_chunk={str(mixed).lower()}]"
        (result,) = run_seeds(SHORT, [*SMALL, "policies=[sync]", overrides], [0])
        (summary,) = result.summaries
        assert summary.over_floor is not None and summary.over_floor >= 1.0
        floors[mixed] = summary.floor_t_next_s
    assert floors[True] < floors[False]
