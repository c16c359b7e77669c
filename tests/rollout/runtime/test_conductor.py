"""The conductor on the simulated engine in virtual time: bounds, no loss, no duplicates."""

from __future__ import annotations

import importlib.util
import json
import math
from collections import Counter

import pytest

from foundation.config import load_config
from rollout.core.config import TrainerApiConfig
from rollout.core.types import Trajectory
from rollout.jobs.config import SimulateConfig
from rollout.jobs.policies import resolve_policy
from rollout.jobs.simulation import simulate_policy
from rollout.jobs.simulation_plan import load_simulation
from rollout.observe.run_records import TimeseriesSample
from rollout.observe.run_summary import RunSummary
from rollout.simulation.vtime import run_virtual
from rollout.trajectories.batch import Batch
from tests.paths import CONFIGS, EXAMPLES
from tests.rollout.fakes import SimRollout, build_rollout, train, workload_config


def consumed_samples(batches: list[Batch]) -> list[Trajectory]:
    return [trajectory for batch in batches for trajectory in batch.trajectories]


def check_whole_groups(batches: list[Batch], group_size: int) -> None:
    for batch in batches:
        for group in batch.groups:
            assert sorted(t.sample_index for t in group) == list(range(group_size))
            assert len({t.group_id for t in group}) == 1


def run(rollout_steps: int, **build: object) -> tuple[list[Batch], SimRollout]:
    async def main() -> tuple[list[Batch], SimRollout]:
        rollout = build_rollout(**build)  # type: ignore[arg-type]
        async with rollout.conductor:
            batches = await train(rollout, rollout_steps)
        await rollout.engine.aclose()
        return batches, rollout

    return run_virtual(main())


def test_the_admission_bound_holds_at_every_step() -> None:
    violations: list[str] = []

    async def main() -> None:
        rollout = build_rollout(groups_per_step=2, async_factor=2)
        admission = rollout.conductor.admission

        def check(_event: object) -> None:
            if admission.admitted_total > admission.admission_limit():
                violations.append(f"{admission.admitted_total} > {admission.admission_limit()}")

        rollout.conductor.bus.subscribe(check)
        async with rollout.conductor:
            await train(rollout, 4)
            limit = (admission.training_step + 2) * 2
            assert admission.admitted_total <= limit
        await rollout.engine.aclose()

    run_virtual(main())
    assert violations == []


def test_sync_admits_the_next_batch_only_after_the_weight_update() -> None:
    admitted_at_batch: list[int] = []

    async def main() -> None:
        rollout = build_rollout(policy="sync", groups_per_step=2)
        admission = rollout.conductor.admission
        async with rollout.conductor:
            await train(
                rollout, 3, on_batch=lambda _b: admitted_at_batch.append(admission.admitted_total)
            )
        await rollout.engine.aclose()

    run_virtual(main())
    assert admitted_at_batch == [2, 4, 6]


def test_every_consumed_group_has_k_samples_and_none_is_duplicated() -> None:
    batches, _ = run(4, group_size=3, engine_overrides=("max_running_requests=3",))
    check_whole_groups(batches, 3)
    samples = [t.sample_id for t in consumed_samples(batches)]
    groups = [group_id for batch in batches for group_id in batch.group_ids]
    assert len(samples) == len(set(samples)) == 4 * 2 * 3
    assert len(groups) == len(set(groups))


def test_preemption_and_weight_updates_lose_no_sample() -> None:
    batches, rollout = run(
        4, group_size=3, engine_overrides=("max_running_requests=2",), async_factor=3
    )
    counts = rollout.conductor.stats.dispatch
    assert counts.preemptions > 0 and counts.interruptions > 0
    check_whole_groups(batches, 3)
    assert all(t.infra_error is None and t.reward is not None for t in consumed_samples(batches))


def test_tokens_generated_across_a_weight_update_carry_their_own_policy_version() -> None:
    batches, _ = run(3, async_factor=3, engine_overrides=("max_running_requests=2",))
    mixed = [t for t in consumed_samples(batches) if len({v for v in t.versions if v >= 0}) > 1]
    assert mixed, "some sample should straddle a weight update"


def test_engine_errors_are_retried_and_no_sample_is_lost() -> None:
    batches, rollout = run(2, fail_generate={3, 10, 11})
    assert rollout.conductor.stats.retries == 3
    check_whole_groups(batches, 3)
    assert all(t.infra_error is None for t in consumed_samples(batches))


def test_infra_errors_of_the_env_are_retried_with_a_fresh_env() -> None:
    async def main() -> tuple[list[Batch], SimRollout]:
        rollout = build_rollout()
        rollout.sessions.fail_start.add(("g00000000-a0-s0", 0))
        rollout.sessions.fail_act[("g00000001-a0-s2", 0)] = 2
        async with rollout.conductor:
            batches = await train(rollout, 2)
        await rollout.engine.aclose()
        return batches, rollout

    batches, rollout = run_virtual(main())
    assert rollout.conductor.stats.retries == 2
    retried = {t.sample_id: t.info["retry"] for t in consumed_samples(batches)}
    assert retried["g00000000-a0-s0"] == 1 and retried["g00000001-a0-s2"] == 1


def test_a_sample_out_of_attempts_is_kept_with_infra_error_and_not_trained_on() -> None:
    async def main() -> list[Batch]:
        rollout = build_rollout(loop_changes={"max_attempts": 2})
        rollout.sessions.fail_start.update({("g00000000-a0-s1", 0), ("g00000000-a0-s1", 1)})
        async with rollout.conductor:
            batches = await train(rollout, 3)
        await rollout.engine.aclose()
        return batches

    batches = run_virtual(main())
    [batch] = [b for b in batches if "g00000000" in b.group_ids]
    [failed] = [t for t in batch.trajectories if t.sample_id == "g00000000-a0-s1"]
    assert failed.infra_error is not None and not failed.is_trainable
    check_whole_groups(batches, 3)
    assert "g00000000-a0-s1" not in batch.advantages(TrainerApiConfig())


def test_a_restart_from_state_dict_neither_loses_nor_duplicates_groups() -> None:
    async def main() -> tuple[list[Batch], list[Batch], dict[str, int], set[str]]:
        first = build_rollout(groups_per_step=2, async_factor=2)
        async with first.conductor:
            before = await train(first, 2)
            state = first.conductor.state_dict()
            unconsumed = {g.group_id for g in first.conductor.admission.live_groups}
        await first.engine.aclose()
        second = build_rollout(groups_per_step=2, async_factor=2)
        second.conductor.load_state_dict(state)
        async with second.conductor:
            after = await train(second, 2)
        await second.engine.aclose()
        attempts = {t.group_id: t.attempt for t in consumed_samples(after)}
        return before, after, attempts, unconsumed

    before, after, attempts, unconsumed = run_virtual(main())
    consumed = [g for batch in [*before, *after] for g in batch.group_ids]
    assert len(consumed) == len(set(consumed)) == 8
    assert [batch.step for batch in after] == [3, 4]
    assert all(attempts[g] == 1 for g in attempts if g in unconsumed)
    assert unconsumed & set(attempts), "re-admitted groups are consumed after the restart"


def test_a_restarted_conductor_keeps_what_its_live_gate_learned_of_final_contexts() -> None:
    async def main() -> tuple[list[int], float | None, float | None]:
        first = build_rollout(groups_per_step=2, async_factor=2)
        async with first.conductor:
            await train(first, 2)
            state = json.loads(json.dumps(first.conductor.state_dict()))  # as on disk
        await first.engine.aclose()
        cold = build_rollout(groups_per_step=2, async_factor=2)
        warm = build_rollout(groups_per_step=2, async_factor=2)
        warm.conductor.load_state_dict(state)
        cold_growth, warm_growth = cold.conductor._growth, warm.conductor._growth
        assert cold_growth is not None and warm_growth is not None  # the preset charges growth
        finals = state["live_growth"]["final_contexts"]
        return finals, cold_growth.newcomer_tokens(), warm_growth.newcomer_tokens()

    finals, cold, warm = run_virtual(main())
    assert cold == workload_config(2).max_context_tokens  # nothing finished: the context limit
    assert finals and warm == pytest.approx(sum(finals) / len(finals))  # what the run had seen


def test_the_same_seed_gives_the_same_run() -> None:
    def fingerprint() -> tuple[object, ...]:
        batches, rollout = run(3, seed=7, engine_overrides=("max_running_requests=2",))
        stats = rollout.conductor.stats
        return (
            [(b.step, b.group_ids, b.complete_s) for b in batches],
            [t.token_ids for t in consumed_samples(batches)],
            (stats.dispatch.preemptions, stats.dispatch.interruptions),
        )

    assert fingerprint() == fingerprint()


def test_trajectory_slot_holding_keeps_live_samples_within_the_agent_slots() -> None:
    from rollout.runtime.config import ConductorConfig

    _, rollout = run(2, policy="traj_async", conductor_config=ConductorConfig(agent_slots=2))
    assert rollout.sessions.max_live == 2


def test_action_level_holding_lets_more_samples_live_than_generation_slots() -> None:
    _, rollout = run(2, policy="aggressive", engine_overrides=("max_running_requests=2",))
    assert rollout.sessions.max_live > 2


def test_baselines_never_preempt() -> None:
    for policy in ("sync", "traj_async"):
        _, rollout = run(2, policy=policy, engine_overrides=("max_running_requests=2",))
        assert rollout.conductor.stats.dispatch.preemptions == 0


def test_timeseries_records_follow_the_run_directory_contract() -> None:
    _, rollout = run(1)
    samples = [TimeseriesSample.from_dict(record) for record in rollout.timeseries]
    assert len(samples) > 2
    assert all(0.0 <= sample.busy <= 1.0 for sample in samples)
    assert samples[-1].kv_misses > 0


def test_each_step_event_names_its_sample_and_group() -> None:
    _, rollout = run(1)
    phases = Counter(str(event.phase) for event in rollout.recorder.events)
    assert {"env_init", "pre_gen", "gen", "act", "reward"} <= set(phases)
    assert all(event.sample_id and event.group_id for event in rollout.recorder.events)


def test_the_example_trainer_loop_trains_on_the_batch_stream() -> None:
    path = EXAMPLES / "trainer_loop.py"
    spec = importlib.util.spec_from_file_location("trainer_loop_example", path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    losses = run_virtual(example.train(2))
    assert len(losses) == 2 and all(math.isfinite(loss) for loss in losses)


def test_the_same_seed_gives_the_same_simulated_metrics() -> None:
    config = load_config(
        SimulateConfig,
        CONFIGS / "simulate" / "short_context.yaml",
        ["steps=2", "groups_per_step=2", "group_size=2", "trainer.train_time_s=2"],
    )
    simulation = load_simulation(config, CONFIGS / "simulate")

    def summary() -> RunSummary:
        return run_virtual(simulate_policy(simulation, resolve_policy("conductor"))).summary

    first = summary()
    assert first == summary()
    assert len(first.t_next_s) == 2 and first.samples == 2 * 2 * 2
