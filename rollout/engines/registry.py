"""Engine backends by name: what `engine_backend` in a run config can say, and how each is built.

A backend is one object (`EngineBackend`) that knows three things about its engines:

* `config_model`: what the run's `engine` file is read as (the sim engine's settings, the SGLang
  client's endpoints and timeouts, or your own);
* `configure`: how the policy's engine-side asks (`EngineAsks`: its queue order, its KV cache)
  apply to that config, and which of them it cannot honour (those come back as named warnings
  the plan prints and records, never silently dropped);
* `connect`: the started engines, from the config and what the run hands over
  (`EngineBuildContext`: the served model's cost model, the token model that plays the model
  inside a simulated engine, the run's tokenizer).

`default_engine_backends()` registers `sim` and `sglang`; a backend of your own is registered on
a registry you pass in, or named in the config by dotted path (`package.module:name` or
`path/to/file.py:name`, an `EngineBackend` or a class/function of no arguments returning one).
There is no global registry. Unknown names get an error that lists the registered ones.
"""

from __future__ import annotations

import asyncio
import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from foundation.config import FrozenConfig
from foundation.errors import ConfigError
from foundation.loading import is_object_spec, load_object
from rollout.engines.base import Engine, EngineError
from rollout.engines.sglang import SGLangEngineConfig, connect_sglang_engines, probe_endpoints
from rollout.engines.sim.config import KVBackendKind, SchedulePolicy, SimEngineConfig
from rollout.engines.sim.factory import build_sim_engine
from rollout.engines.sim.served_model import ServedModelConfig
from rollout.engines.sim.token_model import TokenModel

__all__ = [
    "EngineAsks",
    "EngineBackend",
    "EngineBackendRegistry",
    "EngineBuildContext",
    "SGLangBackend",
    "SimBackend",
    "default_engine_backends",
]


@dataclass(frozen=True, slots=True)
class EngineAsks:
    """What a rollout policy needs the engine itself to do (`RolloutPolicy.engine_asks`)."""

    policy: str  # the policy's name, for messages
    priority_scheduling: bool  # order the engine's waiting queue by request priority
    priority_kv: bool  # the priority-aware KV manager (kvcache) instead of LRU KV


@dataclass(frozen=True, slots=True)
class EngineBuildContext:
    """What a run hands a backend to build its engines."""

    base_dir: Path  # where the run's config paths resolve
    model: ServedModelConfig | None = None  # the served model's cost model (`model:` file)
    token_model: TokenModel | None = None  # who plays the model inside a simulated engine
    encode: Callable[[str], Sequence[int]] | None = None  # the run's tokenizer


@runtime_checkable
class EngineBackend(Protocol):
    """One kind of engine a run can drive; see the module docstring."""

    name: str
    config_model: type[FrozenConfig]
    needs_model: bool  # reads the run's `model:` file (the cost model of a simulated engine)
    needs_token_model: bool  # a simulated engine: something must play the model inside it

    def configure(
        self, config: FrozenConfig, asks: EngineAsks
    ) -> tuple[FrozenConfig, tuple[str, ...]]:
        """`config` as the policy asks it, and one warning per ask it cannot honour."""
        ...

    async def connect(self, config: FrozenConfig, context: EngineBuildContext) -> list[Engine]:
        """The started engines (closed by the caller with `aclose`)."""
        ...


class SimBackend:
    """The in-process simulated engine, paced on the served model's cost model."""

    name = "sim"
    config_model: type[FrozenConfig] = SimEngineConfig
    needs_model = True
    needs_token_model = True

    def configure(
        self, config: FrozenConfig, asks: EngineAsks
    ) -> tuple[FrozenConfig, tuple[str, ...]]:
        assert isinstance(config, SimEngineConfig)
        schedule = SchedulePolicy.PRIORITY if asks.priority_scheduling else SchedulePolicy.FCFS
        changes: dict[str, object] = {
            "kv_backend": KVBackendKind.KVCACHE if asks.priority_kv else KVBackendKind.RADIX_LRU,
            "schedule_policy": schedule,
        }
        if not asks.priority_scheduling:
            changes["priority_preemption"] = False
        return SimEngineConfig.model_validate({**config.model_dump(), **changes}), ()

    async def connect(self, config: FrozenConfig, context: EngineBuildContext) -> list[Engine]:
        assert isinstance(config, SimEngineConfig)
        if context.model is None or context.token_model is None:
            raise ConfigError("the sim backend needs the served model and a token model")
        return [build_sim_engine(config, context.model, context.token_model)]


class SGLangBackend:
    """SGLang servers over HTTP (`rollout.engines.sglang`); their model writes the turns."""

    name = "sglang"
    config_model: type[FrozenConfig] = SGLangEngineConfig
    needs_model = False
    needs_token_model = False

    def configure(
        self, config: FrozenConfig, asks: EngineAsks
    ) -> tuple[FrozenConfig, tuple[str, ...]]:
        assert isinstance(config, SGLangEngineConfig)
        warnings = []
        if asks.priority_scheduling != config.require_priority_scheduling:
            wanted = "priority order" if asks.priority_scheduling else "FCFS order"
            warnings.append(
                f"policy {asks.policy} asks for the engine's waiting queue in {wanted}, but an "
                "SGLang server takes its order from its own --enable-priority-scheduling flag "
                f"(the client requires it: require_priority_scheduling="
                f"{str(config.require_priority_scheduling).lower()}); start the servers to "
                "match, and set require_priority_scheduling accordingly"
            )
        if asks.priority_kv:
            warnings.append(
                f"policy {asks.policy} asks for the priority KV manager, which an SGLang server "
                "runs only as the agentkv radix-cache plugin (`conductor serve-sglang "
                "--kv-backend agentkv`, docs/sglang.md); the client cannot check it"
            )
        return config, tuple(warnings)

    async def connect(self, config: FrozenConfig, context: EngineBuildContext) -> list[Engine]:
        assert isinstance(config, SGLangEngineConfig)
        return await connect_sglang_engines(config, encode=context.encode)

    def probe(self, config: FrozenConfig) -> None:
        """Check, every endpoint at once within `probe_timeout_s`, that each server answers
        HTTP (before a run makes its directory); `EngineError` names those that do not. A hung
        server is told apart from a live one in seconds, not after a connect timeout each; one
        that answers but is not ready yet (a 5xx while it loads) is waited for by `connect`."""
        assert isinstance(config, SGLangEngineConfig)
        probes = asyncio.run(probe_endpoints(config))
        silent = [probe for probe in probes if not probe.answered]
        if silent:
            listed = "; ".join(f"{probe.url} ({probe.error})" for probe in silent)
            raise EngineError(
                f"no engine answers at {listed} within {config.probe_timeout_s:g} s: start it "
                "(`conductor serve-sim`, or docs/sglang.md for a model) or fix engine.endpoints"
            )


BackendFactory = Callable[[], EngineBackend]


class EngineBackendRegistry:
    """Engine backends by name; refuses empty and duplicate names."""

    def __init__(self) -> None:
        self._backends: dict[str, BackendFactory] = {}

    def register(self, name: str, factory: BackendFactory) -> None:
        if not name or not name.strip():
            raise ValueError("an engine backend needs a non-empty name")
        if name in self._backends:
            raise ValueError(f"engine backend {name!r} is already registered; pick another name")
        self._backends[name] = factory

    def names(self) -> tuple[str, ...]:
        return tuple(self._backends)

    def get(self, name: str, base_dir: Path | None = None) -> EngineBackend:
        """The backend `name` (a registered name or a dotted path); `ConfigError` otherwise."""
        if is_object_spec(name):
            return _load_backend(name, base_dir)
        factory = self._backends.get(name)
        if factory is None:
            close = difflib.get_close_matches(name, list(self._backends), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"no engine backend {name!r}{hint} Known: {', '.join(self._backends)}; or name "
                "your own as package.module:name (docs/design.md, 'Add an engine backend')"
            )
        return factory()


def _load_backend(spec: str, base_dir: Path | None) -> EngineBackend:
    found = load_object(spec, base_dir, what="engine backend")
    backend = (
        found()
        if callable(found) and (isinstance(found, type) or _is_plain_function(found))
        else found
    )
    if not isinstance(backend, EngineBackend):
        raise ConfigError(
            f"engine backend {spec!r} is a {type(backend).__name__}, not an EngineBackend (name, "
            "config_model, needs_model, needs_token_model, configure, connect)"
        )
    return backend


def _is_plain_function(found: object) -> bool:
    return callable(found) and not hasattr(found, "connect")


def default_engine_backends() -> EngineBackendRegistry:
    """A fresh registry with the shipped backends: `sim` and `sglang`."""
    registry = EngineBackendRegistry()
    registry.register("sim", SimBackend)
    registry.register("sglang", SGLangBackend)
    return registry
