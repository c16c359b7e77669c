"""The scheduler's health figures of a run: health.json, metrics.json, report.md and the live
Prometheus endpoint of `conductor run --metrics-port N`."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from foundation.config import load_config
from rollout.cli.app import app
from rollout.cli.run import DEFAULT_RUN_CONFIG
from rollout.engines.sim import SimEngine
from rollout.engines.sim.batcher import SimEngineCounters
from rollout.errors import RolloutError
from rollout.jobs.config import SimulateConfig
from rollout.jobs.policies import resolve_policy
from rollout.jobs.run_health import RunHealth
from rollout.jobs.simulation import simulate_policy, simulated_conductor
from rollout.jobs.simulation_plan import Simulation, load_simulation
from rollout.simulation.vtime import run_virtual
from rollout.standins.trainer import SimulatedTrainer
from rollout.trajectories.batch import Batch
from tests.paths import CONFIGS
from tests.rollout.cli.test_cli_run import SPANS_TASK, TINY_RUN

TINY_SIM = ["steps=2", "groups_per_step=2", "group_size=2", "trainer.train_time_s=1"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_simulated_run_writes_health_figures_that_agree_with_its_records(
    tmp_path: Path,
) -> None:
    config = CONFIGS / "simulate" / "short_context.yaml"
    args = ["simulate", str(config), *TINY_SIM, "policies=[conductor]", "--out", str(tmp_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    (run_dir,) = tmp_path.glob("*/conductor")
    health = json.loads((run_dir / "metrics.json").read_text())["health"]
    assert health == json.loads((run_dir / "health.json").read_text())
    steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    assert health["steps"] == len(steps) == 2
    assert health["deadline_misses"] == 0 and health["starved_requests"] == 0
    # Every start decision closes one wait; all samples are of the one (normal) source.
    records = [json.loads(line) for line in (run_dir / "decisions.jsonl").read_text().splitlines()]
    starts = sum(record.get("kind") == "start" for record in records)
    assert set(health["wait_by_class"]) == {"normal"}
    assert health["wait_by_class"]["normal"]["count"] == starts > 0
    assert 0.0 < health["prefix_hit_rate"] < 1.0
    assert health["consumption_rate_per_s"] > 0
    assert "## Scheduler health" in (run_dir / "report.md").read_text()


def test_a_simulated_run_records_why_samples_waited_at_the_conductor(tmp_path: Path) -> None:
    """One generation slot: the other live samples wait for it, and every step says for how
    long (sample-seconds, by reason), the report too."""
    config = CONFIGS / "simulate" / "short_context.yaml"
    one_slot = "engine.overrides=[max_running_requests=1]"
    args = ["simulate", str(config), *TINY_SIM, one_slot, "policies=[conductor]"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    (run_dir,) = tmp_path.glob("*/conductor")
    steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    held = [step["held_sample_s"] for step in steps]
    assert all(
        set(step) <= {"slot", "kv_room", "live_set", "low_priority_headroom"} for step in held
    )
    slot_s = sum(step.get("slot", 0.0) for step in held)
    records = [json.loads(line) for line in (run_dir / "decisions.jsonl").read_text().splitlines()]
    samples = {
        record["fields"]["sample_id"]
        for record in records
        if record.get("type") == "SampleAdmitted"
    }
    assert 0.0 < slot_s <= (len(samples) - 1) * steps[-1]["t_s"]  # one runs, the rest may wait
    summary = json.loads((run_dir / "metrics.json").read_text())["summary"]
    assert summary["held_share[slot]"] > 0.5
    assert "ready samples held at the conductor (mean)" in (run_dir / "report.md").read_text()


def test_conductor_run_serves_live_health_metrics(tmp_path: Path) -> None:
    port = _free_port()
    overrides = [*TINY_RUN, "steps=1", f"task_ids=[{SPANS_TASK}]"]
    args = ["run", str(DEFAULT_RUN_CONFIG), *overrides, "--out", str(tmp_path)]
    pages: list[str] = []
    done = threading.Event()

    def scrape() -> None:  # the run installs signal handlers, so it keeps the main thread
        while not done.is_set():
            try:
                url = f"http://127.0.0.1:{port}/metrics"
                with urllib.request.urlopen(url, timeout=2) as reply:
                    page = reply.read().decode()
            except OSError:
                time.sleep(0.02)
                continue
            if "conductor_generation_starts_total 0.0" not in page:
                pages.append(page)
                return
            time.sleep(0.02)

    scraper = threading.Thread(target=scrape)
    scraper.start()
    try:
        result = CliRunner().invoke(app, [*args, "--metrics-port", str(port)])
    finally:
        done.set()
        scraper.join(timeout=10)
    assert result.exit_code == 0, result.output
    assert pages, "no page with a started generation was scraped during the run"
    scraped = pages[0]
    starts = [line for line in scraped.splitlines() if line.startswith("conductor_generation_")]
    assert starts and float(starts[0].split()[-1]) >= 1, scraped
    assert 'conductor_wait_seconds_count{priority_class="normal"}' in scraped
    with pytest.raises(OSError):  # the endpoint closed with the run
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)


def test_a_metrics_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(RolloutError, match=f"--metrics-port {port}.*free port"):
            RunHealth(starvation_bound_s=None, step_budget_s=None, metrics_port=port)


# -- tokens per engine step against its budget; `conductor simulate --metrics-port` ----------


def _simulation(*overrides: str) -> Simulation:
    config = CONFIGS / "simulate" / "short_context.yaml"
    settings = load_config(SimulateConfig, config, [*TINY_SIM, *overrides])
    return load_simulation(settings, config.parent)


def test_the_step_fill_figure_agrees_with_the_engines_own_counters() -> None:
    simulation = _simulation()
    health = RunHealth(starvation_bound_s=None, step_budget_s=None)

    async def main() -> tuple[dict[str, object], SimEngineCounters]:
        async with simulated_conductor(simulation, resolve_policy("conductor")) as conductor:
            health.attach(conductor)
            trainer = SimulatedTrainer(simulation.config.trainer, on_batch=health.on_batch)
            await trainer.run(conductor, 2)
            engine = conductor.engine(simulation.engine.name)
            assert isinstance(engine, SimEngine)
            summary = health.finish(conductor, None)
            return summary, replace(engine.counters)

    summary, counters = run_virtual(main())
    fill = summary["engine_step_fill"]
    assert isinstance(fill, dict)
    prefill, decode = fill["prefill"], fill["decode"]
    assert fill["steps"] == counters.prefill_steps + counters.decode_steps > 0
    assert (prefill["steps"], decode["steps"]) == (counters.prefill_steps, counters.decode_steps)
    # mixed_chunk is off: a prefill step runs prompt tokens only, a decode step one per request
    assert prefill["tokens"] == counters.prefill_tokens
    assert decode["tokens"] == counters.decode_tokens
    assert prefill["budget_tokens"] == simulation.engine.max_prefill_tokens
    assert decode["budget_tokens"] == simulation.engine.max_running_requests
    # every decode step ran at least one request, and no step over its budget
    assert 1 / simulation.engine.max_running_requests <= decode["mean_fill"] <= 1.0
    assert 0.0 < fill["mean_fill"] <= fill["p99_fill"] <= 1.0


def _scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    pairs = (line.rsplit(" ", 1) for line in text.splitlines() if line and line[0] != "#")
    return {name: float(value) for name, value in pairs}


def test_a_simulated_run_serves_live_health_metrics_in_virtual_time(tmp_path: Path) -> None:
    simulation = _simulation("conductor.deadline.step_budget_s=3")
    port = _free_port()
    scraped: list[dict[str, float]] = []

    def scrape(batch: Batch) -> None:  # on the loop's thread; the server answers on its own
        scraped.append(_scrape(port))

    run = run_virtual(
        simulate_policy(
            simulation,
            resolve_policy("conductor"),
            run_dir=tmp_path / "conductor",
            on_batch=scrape,
            metrics_port=port,
        )
    )
    assert [page["conductor_trainer_steps_total"] for page in scraped] == [1.0, 2.0]
    last = scraped[-1]
    assert last["conductor_generation_starts_total"] > 0
    assert 0.0 < last["conductor_engine_step_fill_mean"] <= last["conductor_engine_step_fill_p99"]
    # virtual seconds: the blocked time is the simulated trainer's wait, not wall time
    health = json.loads((tmp_path / "conductor" / "health.json").read_text())
    blocked_sum = last["conductor_trainer_blocked_seconds_sum"]
    assert blocked_sum == pytest.approx(health["trainer_blocked_total_s"])
    assert run.summary.policy == "conductor"
    with pytest.raises(OSError):  # the endpoint closed with the run
        _scrape(port)


def test_conductor_simulate_says_when_its_metrics_port_is_taken(tmp_path: Path) -> None:
    config = CONFIGS / "simulate" / "short_context.yaml"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = ["simulate", str(config), *TINY_SIM, "policies=[conductor]", "--out"]
        args += [str(tmp_path), "--metrics-port", str(port)]
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    output = " ".join(result.output.split())
    assert f"--metrics-port {port}: cannot listen" in output and "free port" in output
    assert not list(tmp_path.glob("*/conductor/steps.jsonl"))  # nothing ran
