"""A real SGLang cache of ours on CPU pools, built through SGLang's own `create_tree_cache`."""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from sglang.srt.environ import envs
from sglang.srt.mem_cache.allocator import TokenToKVPoolAllocator
from sglang.srt.mem_cache.base_prefix_cache import (
    EvictParams,
    InsertParams,
    MatchPrefixParams,
)
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool, ReqToTokenPool
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang.srt.mem_cache.registry import TreeCacheBuildContext, create_tree_cache
from sglang.srt.mem_cache.unified_cache.components.base import ComponentType
from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler

from kvcache.sglang_plugin import BACKEND_NAME, register
from kvcache.sglang_plugin.cache import AgentKVCache
from kvcache.sglang_plugin.config import AgentKVConfig


@dataclass
class Tree:
    """A real SGLang cache of ours over CPU pools, with helpers that act as the scheduler."""

    cache: AgentKVCache
    allocator: Any
    capacity: int

    def insert(self, tokens: list[int], priority: int = 0) -> tuple[int, int]:
        """Cache `tokens` (evicting what must go, as the scheduler's allocation does);
        returns (node, cached length)."""
        value = self.allocator.alloc(len(tokens))
        if value is None:
            self.cache.evict(EvictParams(num_tokens=len(tokens)))
            value = self.allocator.alloc(len(tokens))
        if value is None:
            raise MemoryError("no room even after evicting everything evictable")
        result = self.cache.insert(
            InsertParams(key=RadixKey(array("q", tokens)), value=value, priority=priority)
        )
        return result.last_device_node, len(tokens)

    def on_device(self, tokens: list[int]) -> int:
        match = self.cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", tokens))))
        return int(match.device_prefix_len)

    def tree_tokens(self) -> int:
        return int(self.cache.evictable_size() + self.cache.protected_size())


@contextmanager
def agentkv_tree(
    *, capacity: int = 512, core: str = "rust", config: AgentKVConfig | None = None
) -> Iterator[Tree]:
    register()
    server_args = ServerArgs(
        model_path="dummy", page_size=1, device="cpu", radix_cache_backend=BACKEND_NAME
    )
    set_global_server_args_for_scheduler(server_args)
    pool = ReqToTokenPool(size=8, max_context_len=4096, device="cpu", enable_memory_saver=False)
    kv = MHATokenToKVPool(
        size=capacity, page_size=1, dtype=torch.bfloat16, head_num=1, head_dim=8,
        layer_num=1, device="cpu", enable_memory_saver=False,
    )  # fmt: skip
    allocator = TokenToKVPoolAllocator(
        size=capacity, dtype=torch.bfloat16, device="cpu", kvcache=kv, need_sort=False
    )
    params = CacheInitParams(
        req_to_token_pool=pool,
        token_to_kv_pool_allocator=allocator,
        page_size=1,
        disable=False,
        tree_components=(ComponentType.FULL,),
    )
    context = TreeCacheBuildContext(
        server_args=server_args, params=params, is_hybrid_swa=False, is_hybrid_ssm=False,
        enable_hierarchical_cache=False, disable_radix_cache=False, tp_worker=None,
        model_config=None, tp_size=1, tp_rank=0, tp_group=None,
    )  # fmt: skip
    with envs.SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND.override(core):
        cache = create_tree_cache(context)
    assert isinstance(cache, AgentKVCache)
    if config is not None:
        cache.configure(config)
    yield Tree(cache, allocator, capacity)
