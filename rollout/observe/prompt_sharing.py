"""What a prefix cache spares when samples share their prompt: the floor must not charge it.

GRPO samples K answers to one prompt, and a trace may give every group the same system prompt.
A radix cache prefills a shared prompt prefix once and holds it once, so the engine-time floor
(`rollout.simulation.lower_bound`) must count, over the consumed samples:

* **prefill**: each distinct prompt prefix once (the nodes of a trie of the prompts), not each
  sample's whole prompt;
* **KV held while decoding**: a sample's context minus the part of its prompt another sample
  shares (that part may sit in the pool once for all of them), so the pool's limit on how many
  contexts a decode step reads counts only what each sample holds alone.

Both come from the prompts sorted as token strings: in sorted order a prompt's longest common
prefix with any other is the one with a neighbour, and the trie's size is the total length less
the common prefixes of neighbours. A prompt is kept as `prompt_key` (4 bytes per token, big
endian, so byte order is token order) and only for the consumed samples' batches. Pure.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Sequence
from dataclasses import dataclass, replace

from rollout.core.types import Trajectory
from rollout.observe.engine_work import EngineWork

__all__ = ["PromptUse", "SharedPrompts", "prompt_key", "shared_prompts", "without_shared_prompts"]

_TOKEN_BYTES = 4


def prompt_key(trajectory: Trajectory) -> bytes:
    """The trajectory's prompt tokens as comparable bytes (see the module docstring)."""
    return struct.pack(
        f">{trajectory.prompt_tokens}I", *trajectory.token_ids[: trajectory.prompt_tokens]
    )


@dataclass(frozen=True, slots=True)
class PromptUse:
    """One consumed sample's prompt and the tokens it decoded (each reads the whole prompt)."""

    key: bytes
    decode_tokens: int


@dataclass(frozen=True, slots=True)
class SharedPrompts:
    """Work a prefix cache spares over a set of samples (see the module docstring)."""

    prefill_tokens: int = 0  # prompt tokens another sample already prefilled
    prefill_attention: float = 0.0  # their Σ (position + 1/2), as `n(p + n/2)` counts it
    decode_context_tokens: int = 0  # Σ over decoded tokens of the prompt part others share


def _common_tokens(a: bytes, b: bytes) -> int:
    """Tokens two keys start with in common (binary search on slice equality, C-speed)."""
    if a == b:
        return len(a) // _TOKEN_BYTES
    low, high = 0, min(len(a), len(b)) // _TOKEN_BYTES
    while low < high:
        middle = (low + high + 1) // 2
        end = middle * _TOKEN_BYTES
        if a[:end] == b[:end]:
            low = middle
        else:
            high = middle - 1
    return low


def shared_prompts(uses: Sequence[PromptUse]) -> SharedPrompts:
    """What the samples' shared prompt prefixes spare (the module docstring's two terms)."""
    ordered = sorted(uses, key=lambda use: use.key)
    common = [_common_tokens(a.key, b.key) for a, b in itertools.pairwise(ordered)]
    prefill_tokens = sum(common)
    attention = sum(n * n / 2 for n in common)
    decode_context = 0
    for index, use in enumerate(ordered):
        before = common[index - 1] if index > 0 else 0
        after = common[index] if index < len(common) else 0
        decode_context += use.decode_tokens * max(before, after)
    return SharedPrompts(prefill_tokens, attention, decode_context)


def without_shared_prompts(work: EngineWork, uses: Sequence[PromptUse]) -> EngineWork:
    """`work` of the samples `uses` describes, less the prefill their shared prompts spare, and
    with the shared part of their decode contexts marked (`decode_shared_context_tokens`)."""
    shared = shared_prompts(uses)
    return replace(
        work,
        prefill_tokens=work.prefill_tokens - shared.prefill_tokens,
        prefill_attention=work.prefill_attention - shared.prefill_attention,
        decode_shared_context_tokens=work.decode_shared_context_tokens
        + shared.decode_context_tokens,
    )
