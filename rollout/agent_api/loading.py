"""Find a bring-your-own agent function from its `module:function` spec."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType

from foundation.errors import ConfigError
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
            module = _file_module(spec, module_name, base_dir)
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


def _file_module(spec: str, file_name: str, base_dir: Path | None) -> ModuleType:
    """The module of a `.py` file, run once per process (kept in `sys.modules` under a name
    of its path, as `import` keeps packages): the CLI's check and the run share it."""
    path = Path(file_name)
    if not path.is_absolute() and base_dir is not None and (base_dir / path).exists():
        path = base_dir / path
    name = "_conductor_agent_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    if name in sys.modules:
        return sys.modules[name]
    loader_spec = importlib.util.spec_from_file_location(name, path)
    if loader_spec is None or loader_spec.loader is None or not path.is_file():
        raise ConfigError(f"agent {spec!r}: no Python file at {path}")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module
    try:
        loader_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
