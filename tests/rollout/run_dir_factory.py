"""Writes a small synthetic run directory, as the conductor would, for report tests."""

from __future__ import annotations

from pathlib import Path

from harness.events import Phase, StepEvent
from rollout.observe.run_dir import RunDir
from rollout.observe.run_records import StepRecord, TimeseriesSample
from rollout.trajectories.writers import JsonlTrajectoryWriter
from tests.rollout.trajectory_factory import make_trajectory

GROUPS = 6
GROUP_SIZE = 2
GROUPS_PER_STEP = 2
TURNS = 3
ENGINES = ("engine-0", "engine-1")
SAMPLE_INTERVAL_S = 0.5


def sample_events(group: int, index: int) -> list[StepEvent]:
    """Three turns of one sample; later groups start later; sample 0 of group 0 is preempted."""
    group_id, sample_id = f"g{group}", f"g{group}-a0-s{index}"
    now = 2.0 * group + 0.3 * index
    events = [StepEvent(Phase.ENV_INIT, now, now + 1.0, sample_id, group_id)]
    for turn in range(TURNS):
        pre_gen_s, gen_s, pre_act_s, act_s = 0.4 + 0.1 * group, 1.2 + 0.2 * turn, 0.1, 0.8
        events.append(StepEvent(Phase.PRE_GEN, now, now + pre_gen_s, sample_id, group_id))
        now += pre_gen_s
        if group == 0 and index == 0 and turn == 1:
            events.append(StepEvent(Phase.GEN, now, now + 0.5, sample_id, group_id))
            events.append(StepEvent(Phase.PREEMPT, now + 0.5, now + 0.5, sample_id, group_id))
            events.append(StepEvent(Phase.PRE_GEN, now + 0.5, now + 1.5, sample_id, group_id))
            now += 1.5
        events.append(StepEvent(Phase.GEN, now, now + gen_s, sample_id, group_id))
        now += gen_s
        if turn + 1 < TURNS:
            events.append(StepEvent(Phase.PRE_ACT, now, now + pre_act_s, sample_id, group_id))
            events.append(
                StepEvent(Phase.ACT, now + pre_act_s, now + pre_act_s + act_s, sample_id, group_id)
            )
            now += pre_act_s + act_s
    events.append(
        StepEvent(Phase.REWARD, now, now, sample_id, group_id, {"reward": float(index % 2)})
    )
    return events


def write_synthetic_run(root: Path) -> RunDir:
    """events, trajectories, steps, timeseries and config for GROUPS groups and two engines."""
    run_dir = RunDir(root).create()
    events = [e for g in range(GROUPS) for i in range(GROUP_SIZE) for e in sample_events(g, i)]
    with run_dir.open_log("events") as log:
        for step_event in events:
            log.append_event(step_event)
    writer = JsonlTrajectoryWriter(run_dir.trajectories_path, fsync=False)
    for group in range(GROUPS):
        writer.write_group(
            [
                make_trajectory(f"g{group}", index, reward=float(index % 2))
                for index in range(GROUP_SIZE)
            ]
        )
    writer.close()
    done_s = {g: max(e.end_s for e in events if e.group_id == f"g{g}") for g in range(GROUPS)}
    with run_dir.open_log("steps", flush_each_record=True) as log:
        for number in range(1, GROUPS // GROUPS_PER_STEP + 1):
            groups = range((number - 1) * GROUPS_PER_STEP, number * GROUPS_PER_STEP)
            log.append(
                StepRecord(
                    step=number,
                    t_s=max(done_s[g] for g in groups),
                    groups=tuple(f"g{g}" for g in groups),
                    policy_version=number - 1,
                    staleness=tuple(min(g % 3, 2) for g in groups),
                    rewards_mean=0.5,
                ).to_dict()
            )
    end_s = max(done_s.values())
    with run_dir.open_log("timeseries") as log:
        for tick in range(int(end_s / SAMPLE_INTERVAL_S) + 1):
            t_s = tick * SAMPLE_INTERVAL_S
            for number, engine in enumerate(ENGINES):
                log.append(
                    TimeseriesSample(
                        t_s=t_s,
                        engine=engine,
                        running=tick % 5,
                        waiting=tick % 3,
                        max_running=8,
                        busy=float((tick + number) % 4 != 0),
                        kv_used_tokens=1000.0 * ((tick * 7 + number) % 10),
                        kv_capacity_tokens=10000.0,
                        kv_device_hits=60.0 * tick,
                        kv_host_hits=10.0 * tick,
                        kv_misses=30.0 * tick + 100.0,
                        recomputed_tokens=5.0 * tick,
                        extra={"decode_tokens": 100.0 * tick},
                    ).to_dict()
                )
    run_dir.config_path.write_text("admission:\n  groups_per_step: 2\n", encoding="utf-8")
    return run_dir
