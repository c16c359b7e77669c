"""`conductor serve-sim` and `conductor serve-sglang`: SGLang's HTTP API, simulated or real.

`serve-sim [CONFIG] [key=value ...]` serves the simulated engine; `serve-sglang -- <args>`
starts a real SGLang server with the flags the rollout needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from pathlib import Path

import typer

from foundation.config import load_config
from foundation.errors import ConductorError
from rollout.cli.console import config_and_overrides, console, fail
from rollout.jobs.serve_sim import ServeSimConfig, serve_forever

__all__ = ["serve_sglang", "serve_sim"]

DEFAULT_SERVE_SIM_CONFIG = Path(__file__).parents[2] / "configs/serve_sim/default.yaml"


def serve_sim(
    config: Path = typer.Argument(DEFAULT_SERVE_SIM_CONFIG, help="serve-sim config (YAML)"),
    overrides: list[str] = typer.Argument(None, help="key=value overrides, e.g. port=30001"),
    host: str | None = typer.Option(None, "--host", help="interface to listen on (as SGLang's)"),
    port: int | None = typer.Option(
        None, "--port", min=0, max=65535, help="port to listen on; 0 picks a free one"
    ),
    served_model_name: str | None = typer.Option(
        None, "--served-model-name", help="the model name /v1/models and replies report"
    ),
    tokenizer_path: str | None = typer.Option(
        None, "--tokenizer-path", help="the model's tokenizer directory (transformers format)"
    ),
    max_running_requests: int | None = typer.Option(
        None, "--max-running-requests", min=1, help="generation slots of the simulated engine"
    ),
    chunked_prefill_size: int | None = typer.Option(
        None, "--chunked-prefill-size", min=1, help="prefill chunk of the simulated engine"
    ),
) -> None:
    """Serve the simulated engine on SGLang's HTTP API (/generate, abort, pause, weights, ...).

    Wall-clock paced on the cost model; scripted SWE agents answer prompts of the shipped SWE
    tasks, filler text answers the rest. Point the SGLang engine client or SGLang's own HTTP
    test kits at it. SGLang's server flags that mean something here are accepted as such
    (`--host`, `--port`, `--served-model-name`, `--tokenizer-path`, `--max-running-requests`,
    `--chunked-prefill-size`); every other setting is a key=value override. Stop it with Ctrl-C.
    """
    config, extra = config_and_overrides(config, overrides, DEFAULT_SERVE_SIM_CONFIG)
    flags = {
        "host": host,
        "port": port,
        "served_model_name": served_model_name,
        "tokenizer_path": tokenizer_path,
        "engine.max_running_requests": max_running_requests,
        "engine.chunked_prefill_tokens": chunked_prefill_size,
    }
    extra += [f"{key}={value}" for key, value in flags.items() if value is not None]
    try:
        settings = load_config(ServeSimConfig, config, extra)
    except ConductorError as exc:
        fail(str(exc))

    def ready(port: int) -> None:
        console.print(
            f"serving the simulated engine on http://{settings.host}:{port} "
            f"(SGLang 0.5.23 HTTP API; SIMULATED timing, model {settings.served_model_name})",
            soft_wrap=True,
        )

    with contextlib.suppress(KeyboardInterrupt):
        try:
            asyncio.run(serve_forever(settings, config.parent, on_ready=ready))
        except OSError as exc:
            fail(f"cannot listen on {settings.host}:{settings.port} ({exc}); pick another port=")


def serve_sglang(
    sglang_args: list[str] = typer.Argument(
        None, help="SGLang's own arguments, after `--` (e.g. -- --model-path /models/qwen3-8b)"
    ),
    python: str = typer.Option(
        sys.executable, help="the Python whose environment has SGLang (on the GPU machine)"
    ),
    kv_backend: str = typer.Option(
        "auto",
        help="agentkv: the rollout's KV policy as SGLang's radix cache (needs the plugin); "
        "default: SGLang's own; auto: agentkv when its plugin is installed",
    ),
    host_tier: bool = typer.Option(
        True, help="HiCache write-through to host memory (low-priority KV waits there)"
    ),
    agentkv_config: Path | None = typer.Option(
        None, help="agentkv plugin settings (configs/kvcache/sglang_plugin.yaml)"
    ),
    dry_run: bool = typer.Option(False, help="print the command and exit"),
) -> None:
    """Start an SGLang server with the flags the rollout needs (and refuse ones that defeat it).

    Adds priority scheduling with preemption at threshold 0, /metrics, page size 64, HiCache
    write-through, and the agentkv radix-cache backend where installed. See docs/sglang.md.
    """
    from rollout.jobs.serve_sglang import (
        AGENTKV_ENTRY_POINT,
        ServeSGLangError,
        installed_sglang,
        launch_plan,
    )

    try:
        version, plugins = installed_sglang(python)
        if version is None and not dry_run:
            fail(f"{python} has no SGLang; install it there (docs/sglang.md) or pass --python")
        backend = kv_backend
        if kv_backend == "auto":
            backend = "agentkv" if AGENTKV_ENTRY_POINT in plugins else "default"
            if backend == "default":
                console.print(
                    "[yellow]note:[/] the agentkv plugin is not installed in "
                    f"{python}; SGLang's own radix cache serves (the rollout's priorities "
                    "and preemption still apply)"
                )
        elif kv_backend == "agentkv" and AGENTKV_ENTRY_POINT not in plugins:
            fail(f"no `{AGENTKV_ENTRY_POINT}` entry point in {python}'s sglang.srt.plugins")
        elif kv_backend not in ("agentkv", "default"):
            fail(f"--kv-backend must be auto, agentkv or default, got {kv_backend!r}")
        plan = launch_plan(
            sglang_args or [],
            python=python,
            kv_backend=backend,  # type: ignore[arg-type]
            host_tier=host_tier,
            agentkv_config=str(agentkv_config.resolve()) if agentkv_config else None,
        )
    except ServeSGLangError as exc:
        fail(str(exc))
    console.print(f"SGLang {version or '(not installed)'}: {plan.shell()}", soft_wrap=True)
    if dry_run:
        return
    completed = subprocess.run(plan.argv, env={**os.environ, **plan.env}, check=False)
    raise typer.Exit(completed.returncode)
