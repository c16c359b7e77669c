"""How titles and reports name a run's engine: from the backend the run used, never assumed.

`conductor run` prints it over its steps table and the report puts it in its heading, so a run
on SGLang servers is never labelled a simulated engine. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

__all__ = ["BUSY_UNKNOWN", "ENGINE_TITLES", "busy_text", "engine_title", "run_engine_title"]

ENGINE_TITLES: Mapping[str, str] = MappingProxyType(
    {
        "sim": "simulated engine (wall clock)",
        "sglang": "SGLang servers",
    }
)
"""`RunConfig.engine_backend` → how titles name it."""

BUSY_UNKNOWN = (
    "the engines reported no busy time (an SGLang server reports it through /metrics: start "
    "it with --enable-metrics)"
)
"""Why an engine busy fraction reads n/a."""


def engine_title(engine_backend: str) -> str:
    """The title of `engine_backend` (an unknown backend by its own name)."""
    return ENGINE_TITLES.get(engine_backend, f"{engine_backend} engine")


def run_engine_title(config: Mapping[str, Any]) -> str | None:
    """The engine title of a run directory's resolved `config.yaml` (None: not a `conductor
    run` config, e.g. a simulation's, which titles itself)."""
    backend = config.get("engine_backend")
    return engine_title(str(backend)) if backend else None


def busy_text(busy_fraction: float | None) -> str:
    """ "engine busy 42%", or "engine busy n/a (why)" when the engines reported none."""
    if busy_fraction is None:
        return f"engine busy n/a ({BUSY_UNKNOWN})"
    return f"engine busy {busy_fraction:.0%}"
