"""The agentkv backend through SGLang's own machinery: its registry, its tree-cache factory, its
argument parser and its plugin loader."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from sglang.srt.mem_cache.registry import registered_radix_cache_backends

from kvcache.sglang_plugin import BACKEND_NAME, register
from kvcache.sglang_plugin.cache import AgentKVCache
from tests.kvcache.sglang_plugin.real_tree import agentkv_tree

pytestmark = pytest.mark.sglang


def test_register_adds_the_backend_once() -> None:
    register()
    register()  # SGLang's load_plugins may run in several processes and repeat
    assert registered_radix_cache_backends().count(BACKEND_NAME) == 1


@pytest.mark.parametrize("core", ["rust", "python"])
def test_sglangs_create_tree_cache_builds_ours_for_radix_cache_backend_agentkv(core: str) -> None:
    with agentkv_tree(core=core) as tree:
        assert type(tree.cache) is AgentKVCache
        assert tree.cache.evictable_size() == 0 and tree.cache.protected_size() == 0


def test_sglangs_plugin_loader_finds_the_entry_point_and_its_parser_accepts_the_flag() -> None:
    probe = (
        "from sglang.srt.plugins import load_plugins\n"
        "from sglang.srt.mem_cache.registry import registered_radix_cache_backends\n"
        "from sglang.srt.server_args import prepare_server_args\n"
        "load_plugins()\n"
        "print('agentkv' in registered_radix_cache_backends())\n"
        "argv = ['--model-path', 'dummy', '--radix-cache-backend', 'agentkv']\n"
        "args = prepare_server_args(argv)\n"
        "print(args.radix_cache_backend)\n"
    )
    env = {**os.environ, "SGLANG_PLUGINS": BACKEND_NAME}
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-2:] == ["True", "agentkv"]


def test_without_the_plugin_whitelisted_the_loader_leaves_it_out() -> None:
    probe = (
        "from sglang.srt.plugins import load_plugins\n"
        "from sglang.srt.mem_cache.registry import registered_radix_cache_backends\n"
        "load_plugins()\n"
        "print('agentkv' in registered_radix_cache_backends())\n"
    )
    env = {**os.environ, "SGLANG_PLUGINS": "some_other_plugin"}
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1] == "False"


def test_the_shipped_plugin_config_loads() -> None:
    from kvcache.sglang_plugin.config import AgentKVConfig, load_plugin_config
    from tests.paths import CONFIGS

    assert load_plugin_config(str(CONFIGS / "kvcache" / "sglang_plugin.yaml")) == AgentKVConfig()
