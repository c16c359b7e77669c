"""Find a bring-your-own agent function from its `module:function` spec."""

from __future__ import annotations

import inspect
from pathlib import Path

from foundation.errors import ConfigError
from foundation.loading import load_object
from rollout.agent_api.context import AgentFn

__all__ = ["load_agent"]


def load_agent(spec: str, base_dir: Path | None = None) -> AgentFn:
    """The async function named by `spec`: `package.module:function`, or a `.py` file (relative
    to `base_dir`, else the working directory) and a function.

    Raises:
        ConfigError: the spec is malformed, the module or function is missing, or the function
            is not `async def`.
    """
    function = load_object(spec, base_dir, what="agent", kind="function")
    if not inspect.iscoroutinefunction(function):
        raise ConfigError(f"agent {spec!r}: it must be an `async def` of one AgentContext")
    return function  # type: ignore[no-any-return]
