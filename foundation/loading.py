"""Find an object a config names by `package.module:name` or `path/to/file.py:name`.

Every seam that takes a user's own code through configuration (a policy, an engine backend,
an env source, a bring-your-own agent) names it this way; this is the one loader, so every
seam accepts the same two spellings and fails with the same clear messages.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from foundation.errors import ConfigError

__all__ = ["is_object_spec", "load_object"]


def is_object_spec(text: str) -> bool:
    """Whether `text` looks like `module:name` rather than a plain registered name."""
    module_name, sep, name = text.rpartition(":")
    return bool(sep and module_name and name)


def load_object(
    spec: str, base_dir: Path | None = None, *, what: str = "object", kind: str = "name"
) -> object:
    """The object `spec` names: `package.module:name`, or a `.py` file (relative to `base_dir`
    when it exists there, else to the working directory) and a name in it.

    Raises:
        ConfigError: the spec is malformed, or the module or the name is missing (the message
            starts with `what` and the spec; `kind` names what follows the colon).
    """
    module_name, sep, name = spec.rpartition(":")
    if not sep or not module_name or not name:
        raise ConfigError(
            f"{what} {spec!r}: write it as package.module:{kind} or path/to/file.py:{kind}"
        )
    try:
        if module_name.endswith(".py"):
            module = _file_module(spec, module_name, base_dir, what)
        else:
            module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{what} {spec!r}: cannot import {module_name}: {exc}") from exc
    found = getattr(module, name, None)
    if found is None:
        raise ConfigError(f"{what} {spec!r}: {module_name} has no {name!r}")
    return found


def _file_module(spec: str, file_name: str, base_dir: Path | None, what: str) -> ModuleType:
    """The module of a `.py` file, run once per process (kept in `sys.modules` under a name
    of its path, as `import` keeps packages): a command's checks and its run share it."""
    path = Path(file_name)
    if not path.is_absolute() and base_dir is not None and (base_dir / path).exists():
        path = base_dir / path
    name = "_conductor_user_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    if name in sys.modules:
        return sys.modules[name]
    loader_spec = importlib.util.spec_from_file_location(name, path)
    if loader_spec is None or loader_spec.loader is None or not path.is_file():
        raise ConfigError(f"{what} {spec!r}: no Python file at {path}")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module
    try:
        loader_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
