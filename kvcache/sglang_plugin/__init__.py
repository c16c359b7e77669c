"""The `agentkv` radix-cache backend for SGLang: the rollout's session KV policy in the server.

High-priority sessions' KV is pinned on the device between turns; low-priority sessions' KV is
demoted to host as soon as its write-through is acknowledged (with HiCache).

`register` is the `sglang.srt.plugins` entry point (`agentkv = "kvcache.sglang_plugin:register"`
in pyproject.toml): SGLang's `load_plugins()` calls it in every process it starts when
`SGLANG_PLUGINS` names it, and `--radix-cache-backend agentkv` then builds `AgentKVCache`
(`cache`). The decisions are pure and SGLang-free (`pins`, `hints`); only `cache` imports
SGLang, and only this package of `kvcache` may (checked by `make lint`).
"""

from __future__ import annotations

import os

__all__ = ["BACKEND_NAME", "register"]

BACKEND_NAME = "agentkv"


def register() -> None:
    """Register the `agentkv` backend with SGLang (idempotent, as `load_plugins` may repeat)."""
    from sglang.srt.mem_cache.registry import (
        register_radix_cache_backend,
        registered_radix_cache_backends,
    )

    if BACKEND_NAME in registered_radix_cache_backends():
        return
    register_radix_cache_backend(BACKEND_NAME, _factory)


def _factory(ctx: object) -> object:
    from kvcache.sglang_plugin.cache import build_agentkv_cache
    from kvcache.sglang_plugin.config import AGENTKV_CONFIG_ENV, load_plugin_config

    return build_agentkv_cache(ctx, load_plugin_config(os.environ.get(AGENTKV_CONFIG_ENV)))  # type: ignore[arg-type]
