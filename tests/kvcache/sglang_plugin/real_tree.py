"""A real SGLang cache of ours on CPU pools, built through SGLang's own `create_tree_cache`.

With `host_tier=True` SGLang's HiCache runs too (write-through to a host pool, demotion,
load-back). Two of its pieces exist only for GPUs, so the fixture stands them in: registering
the host buffer with CUDA (skipped: there is no device to pin for) and the `transfer_kv_direct`
kernel (a torch index copy, per layer, which is what the kernel does). The tree, the cache
controller, the host pool and the bookkeeping are SGLang's own.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any
from unittest import mock

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
        return self.match(tokens)[0]

    def match(self, tokens: list[int]) -> tuple[int, int]:
        """(tokens on the device, further tokens on host) of the longest cached prefix."""
        match = self.cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", tokens))))
        return int(match.device_prefix_len), int(match.host_hit_length)

    def tree_tokens(self) -> int:
        return int(self.cache.evictable_size() + self.cache.protected_size())


def _transfer_kv_direct(
    src_layers: list[Any], dst_layers: list[Any], src_indices: Any, dst_indices: Any,
    page_size: int,
) -> None:  # fmt: skip
    for src, dst in zip(src_layers, dst_layers, strict=True):
        dst[dst_indices.long()] = src[src_indices.long()].to(dst.device)


@contextmanager
def agentkv_tree(
    *,
    capacity: int = 512,
    core: str = "rust",
    config: AgentKVConfig | None = None,
    host_tier: bool = False,
) -> Iterator[Tree]:
    register()
    hicache: dict[str, Any] = {}
    if host_tier:
        hicache = {
            "enable_hierarchical_cache": True,
            "hicache_io_backend": "direct",
            "hicache_mem_layout": "layer_first",
            "hicache_write_policy": "write_through",
            "hicache_ratio": 2.0,  # host pool twice the (tiny) device pool
        }
    server_args = ServerArgs(
        model_path="dummy", page_size=1, device="cpu", radix_cache_backend=BACKEND_NAME, **hicache
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
    worker = SimpleNamespace(register_hicache_layer_transfer_counter=lambda counter: None)
    context = TreeCacheBuildContext(
        server_args=server_args, params=params, is_hybrid_swa=False, is_hybrid_ssm=False,
        enable_hierarchical_cache=host_tier, disable_radix_cache=False, tp_worker=worker,
        model_config=None, tp_size=1, tp_rank=0, tp_group=None,
    )  # fmt: skip
    with ExitStack() as stack:
        if host_tier:
            stack.enter_context(
                mock.patch(
                    "sglang.srt.mem_cache.pool_host.common._cuda_host_register",
                    lambda *args, **kwargs: None,
                )
            )
            stack.enter_context(
                mock.patch(
                    "sglang.srt.mem_cache.pool_host.mha.transfer_kv_direct",
                    _transfer_kv_direct,
                    create=True,
                )
            )
        with envs.SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND.override(core):
            cache = create_tree_cache(context)
        assert isinstance(cache, AgentKVCache)
        if config is not None:
            cache.configure(config)
        try:
            yield Tree(cache, allocator, capacity)
        finally:
            if host_tier:
                cache.release_host_resources()
