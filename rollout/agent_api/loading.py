"""Find a bring-your-own agent function from its `module:function` spec."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from pathlib import Path

from harness.errors import ConfigError
from rollout.agent_api.context import AgentFn

__all__ = ["load_agent"]


def load_agent(spec: str, base_dir: Path | None = None) -> AgentFn:
    """The async function named by `spec`: `package.module:function`, or a `.py` file (relative
    to `base_dir`, else the working directory) and a function.

    Raises:
        ConfigError: the spec is malformed, the module or function is missing, or the function
            is not `async def`.
    """
    module_name, sep, function_name = spec.rpartition(":")
    if not sep or not module_name or not function_name:
        raise ConfigError(
            f"agent {spec!r}: write it as package.module:function or path/to/file.py:function"
        )
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_absolute() and base_dir is not None and (base_dir / path).exists():
                path = base_dir / path
            loader_spec = importlib.util.spec_from_file_location(path.stem, path)
            if loader_spec is None or loader_spec.loader is None or not path.is_file():
                raise ConfigError(f"agent {spec!r}: no Python file at {path}")
            module = importlib.util.module_from_spec(loader_spec)
            loader_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"agent {spec!r}: cannot import {module_name}: {exc}") from exc
    function = getattr(module, function_name, None)
    if function is None:
        raise ConfigError(f"agent {spec!r}: {module_name} has no {function_name!r}")
    if not inspect.iscoroutinefunction(function):
        raise ConfigError(f"agent {spec!r}: it must be an `async def` of one AgentContext")
    return function  # type: ignore[no-any-return]
