"""Spec of what shared prompts spare the engine-time floor: the prefill of each distinct prompt
prefix once, and the shared prompt part of every decode context."""

from __future__ import annotations

import random
import struct

import pytest

from rollout.observe.engine_work import EngineWork
from rollout.observe.prompt_sharing import (
    PromptUse,
    SharedPrompts,
    shared_prompts,
    without_shared_prompts,
)


def _use(tokens: list[int], decoded: int = 0) -> PromptUse:
    return PromptUse(struct.pack(f">{len(tokens)}I", *tokens), decoded)


def test_k_samples_of_one_prompt_prefill_it_once_and_share_it_while_decoding() -> None:
    prompt = list(range(100, 150))  # 50 tokens
    shared = shared_prompts([_use(prompt, decoded=10) for _ in range(4)])
    assert shared.prefill_tokens == 3 * 50
    assert shared.prefill_attention == pytest.approx(3 * 50 * 50 / 2)
    assert shared.decode_context_tokens == 4 * 10 * 50


def test_a_prompt_no_other_sample_starts_with_spares_nothing() -> None:
    shared = shared_prompts([_use([1, 2, 3], 5), _use([9, 2, 3], 7)])
    assert shared == SharedPrompts()


def test_groups_sharing_a_system_prefix_spare_the_prefix_only() -> None:
    system = [7] * 20
    uses = [_use([*system, 1, 1], 3), _use([*system, 2, 2, 2], 4), _use([5, 5], 6)]
    shared = shared_prompts(uses)
    assert shared.prefill_tokens == 20
    assert shared.decode_context_tokens == (3 + 4) * 20  # the third shares nothing


def test_token_order_not_byte_order_decides_the_common_prefix() -> None:
    # 256 and 1 share a low byte: a little-endian key would see a common byte
    shared = shared_prompts([_use([256, 5]), _use([1, 5]), _use([256, 6])])
    assert shared.prefill_tokens == 1  # only [256] is common, between the first and third


def test_the_spared_prefill_is_what_a_trie_of_the_prompts_saves() -> None:
    rng = random.Random(3)
    prompts = [[rng.randrange(3) for _ in range(rng.randrange(1, 9))] for _ in range(40)]
    distinct_prefixes = {tuple(p[: n + 1]) for p in prompts for n in range(len(p))}
    shared = shared_prompts([_use(p) for p in prompts])
    assert sum(map(len, prompts)) - shared.prefill_tokens == len(distinct_prefixes)
    positions = sum(len(prefix) - 0.5 for prefix in distinct_prefixes)  # Σ (position + 1/2)
    all_positions = sum(n * n / 2 for n in map(len, prompts))
    assert all_positions - shared.prefill_attention == pytest.approx(positions)


def test_each_sample_shares_its_longest_prefix_with_any_other() -> None:
    rng = random.Random(5)
    prompts = [[rng.randrange(2) for _ in range(6)] for _ in range(12)]

    def common(a: list[int], b: list[int]) -> int:
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n

    expected = sum(
        max(common(p, q) for j, q in enumerate(prompts) if j != i) for i, p in enumerate(prompts)
    )
    assert shared_prompts([_use(p, decoded=1) for p in prompts]).decode_context_tokens == expected


def test_the_work_loses_the_spared_prefill_and_marks_the_shared_context() -> None:
    work = EngineWork(decode_tokens=20, decode_context_tokens=5_000, prefill_tokens=300,
                      prefill_attention=9_000.0, longest_decode_tokens=10)  # fmt: skip
    prompt = list(range(100))
    spared = without_shared_prompts(work, [_use(prompt, 10), _use(prompt, 10)])
    assert spared.prefill_tokens == 200
    assert spared.prefill_attention == pytest.approx(9_000 - 100 * 100 / 2)
    assert spared.decode_shared_context_tokens == 2 * 10 * 100
    assert (spared.decode_tokens, spared.decode_context_tokens) == (20, 5_000)
