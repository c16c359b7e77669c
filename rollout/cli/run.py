"""`conductor run`: the main job. Until the rollout layer is wired in, it drives the example env
through the env pool with a scripted agent and writes the step events to a run directory."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import typer
from rich.progress import Progress
from rich.table import Table

from envs.example.env import FileCheckEnv
from harness.config import load_config
from harness.errors import HarnessError
from harness.events import EventBus, EventRecorder, Phase
from harness.images import ensure_base_image
from harness.pool import EnvLease, EnvPool, PoolConfig
from harness.standalone import make_backend
from rollout.cli.console import console, fail

__all__ = ["run"]

DEFAULT_POOL_CONFIG = Path(__file__).parents[2] / "configs/pool/default.yaml"


def run(
    config: Path = typer.Argument(DEFAULT_POOL_CONFIG, help="pool config (YAML)"),
    overrides: list[str] = typer.Argument(None, help="key=value overrides, e.g. act_slots=4"),
    episodes: int = typer.Option(16, help="scripted episodes to run"),
    out: Path = typer.Option(Path("runs"), help="parent folder of the run directory"),
) -> None:
    """Run scripted episodes of the example env through the warm env pool."""
    try:
        pool_config = load_config(PoolConfig, config, overrides or [])
        backend = make_backend(
            pool_config.backend, limits=pool_config.container, exec_limits=pool_config.exec
        )
        image = ""
        if backend.name == "docker":
            image = ensure_base_image(backend.client, progress=console.print)  # type: ignore[attr-defined]
        else:
            console.print("[yellow]no Docker engine: using the local sandbox (NOT isolated)[/]")
        recorder = EventRecorder()
        rewards = asyncio.run(_run_episodes(backend, pool_config, image, episodes, recorder))
    except HarnessError as exc:
        fail(str(exc))
    run_dir = out / time.strftime("run-%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    with (run_dir / "events.jsonl").open("w") as handle:
        for event in recorder.events:
            handle.write(json.dumps(event.to_dict()) + "\n")
    _print_summary(recorder, rewards, backend.name)
    console.print(f"events written to [bold]{run_dir / 'events.jsonl'}[/]")


async def _run_episodes(
    backend: object, config: PoolConfig, image: str, episodes: int, recorder: EventRecorder
) -> list[float]:
    bus = EventBus()
    bus.subscribe(recorder)
    async with EnvPool(backend, config, bus=bus) as pool:  # type: ignore[arg-type]
        pool.prewarm([image])
        with Progress(console=console, transient=True) as progress:
            bar = progress.add_task("episodes", total=episodes)

            async def episode(index: int) -> float:
                lease = await pool.acquire(
                    FileCheckEnv, image, sample_id=f"s{index}", group_id=f"g{index // 4}"
                )
                try:
                    return await _scripted_episode(lease, seed=index)
                finally:
                    await lease.release()
                    progress.advance(bar)

            return list(await asyncio.gather(*(episode(i) for i in range(episodes))))


async def _scripted_episode(lease: EnvLease, seed: int) -> float:
    _, info = await lease.areset(seed=seed)
    answer = info["word"][::-1] if seed % 4 else "wrong"  # one in four is wrong on purpose
    reward = 0.0
    for action in ("ls -la", f"printf {answer} > answer.txt", "cat answer.txt", "submit"):
        _, reward, terminated, truncated, _ = await lease.astep(action)
        if terminated or truncated:
            break
    return reward


def _print_summary(recorder: EventRecorder, rewards: list[float], backend: str) -> None:
    table = Table(title=f"example env through the env pool ({backend} backend)")
    for column in ("phase", "events", "mean (ms)", "max (ms)"):
        table.add_column(column)
    for phase in (Phase.ENV_INIT, Phase.PRE_ACT, Phase.ACT):
        durations = [event.duration_s * 1000 for event in recorder.of_phase(phase)]
        if durations:
            table.add_row(
                str(phase),
                str(len(durations)),
                f"{sum(durations) / len(durations):.1f}",
                f"{max(durations):.1f}",
            )
    console.print(table)
    console.print(f"mean reward {sum(rewards) / len(rewards):.2f} over {len(rewards)} episodes")
