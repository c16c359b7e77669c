"""`conductor serve-sglang`: an SGLang server started with the flags this rollout needs.

`launch_plan` is pure: from the user's SGLang arguments it builds the command line and the
environment, adding what the rollout relies on and refusing what would silently defeat it:

* priority scheduling with preemption at threshold 0 (`--enable-priority-scheduling
  --priority-scheduling-preemption-threshold 0`, FCFS within a priority): the rollout's
  priorities are small integers (0 and 1), which SGLang's default threshold of 10 never lets
  preempt; higher numbers must mean more urgent;
* the radix cache on (`--disable-radix-cache` is refused: every turn would re-prefill);
* `/metrics` on (`--enable-metrics`): the client's load poll reads it;
* `--page-size 64` unless given; with `host_tier`, HiCache write-through
  (`--enable-hierarchical-cache --hicache-write-policy write_through`) so low-priority KV can
  wait for its session on host memory;
* with `kv_backend="agentkv"`, the `agentkv` radix-cache backend of `kvcache.sglang_plugin`
  (`--radix-cache-backend agentkv`, `SGLANG_PLUGINS=agentkv`, its config file through
  `AGENTKV_CONFIG`). The launcher checks that the target Python has that plugin's entry point.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "AGENTKV_ENTRY_POINT",
    "LaunchPlan",
    "ServeSGLangError",
    "installed_sglang",
    "launch_plan",
]

AGENTKV_ENTRY_POINT = "agentkv"  # name in the `sglang.srt.plugins` entry-point group
KVBackend = Literal["default", "agentkv"]


class ServeSGLangError(ValueError):
    """The SGLang arguments conflict with what the rollout needs; the message says what to do."""


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    """The command and the environment additions that start the server."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    added_flags: tuple[str, ...]

    def shell(self) -> str:
        env = " ".join(f"{name}={value}" for name, value in sorted(self.env.items()))
        return f"{env} {' '.join(self.argv)}".strip()


def launch_plan(
    sglang_args: Sequence[str],
    *,
    python: str,
    kv_backend: KVBackend,
    host_tier: bool,
    agentkv_config: str | None = None,
) -> LaunchPlan:
    """`python -m sglang.launch_server` with `sglang_args` and the rollout's flags."""
    args = list(sglang_args)
    flags = {arg.split("=", 1)[0] for arg in args if arg.startswith("--")}
    if "--model-path" not in flags and "--model" not in flags:
        raise ServeSGLangError("give the model: conductor serve-sglang -- --model-path PATH ...")
    refusals = {
        "--disable-radix-cache": "every turn would re-prefill its whole context",
        "--schedule-low-priority-values-first": "the rollout's larger priorities are the urgent "
        "ones (SGLang's default direction)",
        "--disable-priority-preemption": "critical samples must be able to preempt",
    }
    for flag, why in refusals.items():
        if flag in flags:
            raise ServeSGLangError(f"{flag} cannot be used: {why}; drop it")
    policy = _value(args, "--schedule-policy")
    if policy is not None and policy not in ("fcfs", "lof"):
        raise ServeSGLangError(
            f"--schedule-policy {policy} cannot be combined with priority scheduling (SGLang "
            "accepts fcfs or lof with it); drop it or use fcfs"
        )
    threshold = _value(args, "--priority-scheduling-preemption-threshold")
    if threshold is not None and threshold != "0":
        raise ServeSGLangError(
            f"--priority-scheduling-preemption-threshold {threshold}: the rollout's priorities "
            "differ by 1, so only 0 lets a critical sample preempt; drop the flag"
        )
    backend = _value(args, "--radix-cache-backend")
    if backend is not None and (kv_backend != "agentkv" or backend != AGENTKV_ENTRY_POINT):
        raise ServeSGLangError(
            f"--radix-cache-backend {backend}: the launcher sets the backend itself; drop it "
            "(and pass --kv-backend agentkv for the rollout's KV policy)"
        )
    added: list[str] = []

    def add(flag: str, *value: str) -> None:
        if flag not in flags:
            added.extend((flag, *value))

    add("--enable-priority-scheduling")
    add("--priority-scheduling-preemption-threshold", "0")
    add("--schedule-policy", "fcfs")
    add("--enable-metrics")
    add("--page-size", "64")
    if host_tier:
        add("--enable-hierarchical-cache")
        add("--hicache-write-policy", "write_through")
    env: dict[str, str] = {}
    if kv_backend == "agentkv":
        add("--radix-cache-backend", AGENTKV_ENTRY_POINT)
        env = {"SGLANG_PLUGINS": AGENTKV_ENTRY_POINT}
        if agentkv_config:
            env["AGENTKV_CONFIG"] = agentkv_config  # read in the scheduler process
    argv = (python, "-m", "sglang.launch_server", *args, *added)
    return LaunchPlan(argv, env, tuple(added))


def installed_sglang(python: str) -> tuple[str | None, tuple[str, ...]]:
    """SGLang's version in `python` (None: not installed) and its `sglang.srt.plugins` names."""
    probe = (
        "import json, importlib.metadata as m\n"
        "try:\n    version = m.version('sglang')\nexcept m.PackageNotFoundError:\n"
        "    version = None\n"
        "names = [e.name for e in m.entry_points(group='sglang.srt.plugins')]\n"
        "print(json.dumps([version, names]))\n"
    )
    try:
        done = subprocess.run(
            [python, "-c", probe], capture_output=True, text=True, timeout=60, check=True
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise ServeSGLangError(f"cannot run {python}: {exc}") from exc
    version, names = json.loads(done.stdout)
    return version, tuple(names)


def _value(args: Sequence[str], flag: str) -> str | None:
    for index, arg in enumerate(args):
        if arg == flag and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None
