"""The ground floor every package stands on: frozen validated configs, clocks, the base error.

It imports nothing beyond pydantic and PyYAML, so the pure decision core (`rollout.core`), the
KV-cache manager (`kvcache`) and the SGLang plugin (loaded inside SGLang's server process) can
use configs and clocks without importing the harness, Docker, gymnasium or aiohttp.

* `config`: `FrozenConfig` (immutable, unknown keys rejected), `load_config` (YAML + dotted
  `key=value` overrides, every problem named with its field path), `ConfigRef`.
* `clock`: the `Clock` protocol and the loop, monotonic and manual clocks.
* `errors`: `ConductorError`, the base of every project error, and `ConfigError`.
"""

from foundation.clock import Clock, LoopClock, ManualClock, MonotonicClock
from foundation.config import ConfigRef, FrozenConfig, apply_overrides, load_config, parse_config
from foundation.errors import ConductorError, ConfigError

__all__ = [
    "Clock",
    "ConductorError",
    "ConfigError",
    "ConfigRef",
    "FrozenConfig",
    "LoopClock",
    "ManualClock",
    "MonotonicClock",
    "apply_overrides",
    "load_config",
    "parse_config",
]
