"""The public surface of the sim engine, workload and virtual time is explicit and importable."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import rollout.engines.sim
import rollout.simulation.workload

SIM_API = {
    "CostModelConfig", "GpuConfig", "HostTierConfig", "HostWritePolicy", "JoinedTokens",
    "KVBackend", "KVBackendStats", "LRURadixKV", "LinkConfig", "LoadBack", "CachedPrefix",
    "RetractionPolicy", "SchedulePolicy", "ServedModelConfig", "SimEngine", "SimEngineConfig",
    "SimEngineCounters", "TokenModel", "TokenSeq", "Transfer", "TransferDirection", "TurnPlan",
    "build_lru_kv", "build_sim_engine", "decode_step_time_s", "prefill_attention_units",
    "step_time_s",
}  # fmt: skip
WORKLOAD_API = {
    "SUBMIT_TOOL", "ContextStats", "LengthSpec", "RoutedTokenModel", "SampleScript", "ScriptBook",
    "ScriptedTokenModel", "SimEnv",
    "StepResult", "SyntheticWorkload", "TokenCorpus", "ToolKindConfig", "TurnScript",
    "WorkloadConfig",
    "context_stats", "draw_group", "session_id_of",
}  # fmt: skip


@pytest.mark.parametrize(
    ("package", "api"),
    [(rollout.engines.sim, SIM_API), (rollout.simulation.workload, WORKLOAD_API)],
)
def test_the_package_root_exports_exactly_its_public_api(package: object, api: set[str]) -> None:
    assert set(package.__all__) == api  # type: ignore[attr-defined]


@pytest.mark.parametrize("package", [rollout.engines.sim, rollout.simulation.workload])
def test_every_module_declares_all_and_defines_what_it_lists(package: object) -> None:
    for info in pkgutil.iter_modules(package.__path__):  # type: ignore[attr-defined]
        module = importlib.import_module(f"{package.__name__}.{info.name}")  # type: ignore[attr-defined]
        assert hasattr(module, "__all__"), module.__name__
        assert all(hasattr(module, name) for name in module.__all__), module.__name__


def test_the_virtual_time_module_exports_its_loop_and_runner() -> None:
    vtime = importlib.import_module("rollout.simulation.vtime")
    assert set(vtime.__all__) == {"VirtualTimeLoop", "run_virtual"}
