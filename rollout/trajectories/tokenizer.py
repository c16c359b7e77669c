"""Tokenizers and the append-only chat prompt builder that keeps a sample's exact token ids.

Re-applying a chat template to decoded text does not give back the ids the model produced
(verl's agent-loop docs report PPO failing to converge because of it), so a prompt is never
rebuilt: `ChatPromptBuilder` keeps one token list per sample and only ever appends to it — the
template tokens of each message, the model's ids verbatim, then the tool observation. Every turn's
prompt is therefore the previous turn's prompt plus exactly what followed it.

The template tokens come from a `ChatFormat` (`rollout.trajectories.chat_format`): ChatML by
default, as Qwen uses it (``<|im_start|>role\\ncontent<|im_end|>\\n``), or a model's own chat
template (`rollout.trajectories.hf_tokenizer`). `ByteTokenizer` is a dependency-free
deterministic tokenizer (UTF-8 bytes plus a few special ids) for the simulated default runs; a
real tokenizer (`HFTokenizer`) fits the same `Tokenizer` protocol.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol, runtime_checkable

from rollout.core.types import NO_VERSION
from rollout.errors import TokenizerError
from rollout.trajectories.chat_format import ChatFormat, ChatMLFormat, ChatTemplate

__all__ = [
    "BYTE_SPECIAL_TOKENS",
    "ByteTokenizer",
    "ChatPromptBuilder",
    "ChatTemplate",
    "Span",
    "Tokenizer",
]


@runtime_checkable
class Tokenizer(Protocol):
    """Text ↔ token ids. `encode` must never turn user text into special ids."""

    @property
    def vocab_size(self) -> int:
        """Number of ids, special ids included."""
        ...

    @property
    def eos_token_id(self) -> int:
        """The end-of-text id."""
        ...

    @property
    def pad_token_id(self) -> int:
        """The id used to pad batches (never trained on)."""
        ...

    def encode(self, text: str) -> list[int]:
        """Ids of `text`, special-token look-alikes encoded as plain text."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids`; special ids decode to their names."""
        ...

    def special_token_id(self, token: str) -> int:
        """The id of special token `token` (e.g. ``<|im_end|>``); `TokenizerError` if unknown."""
        ...


BYTE_SPECIAL_TOKENS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|pad|>",
)
"""Special tokens of `ByteTokenizer`, with ids 256, 257, … in this order."""

_BYTE_VALUES = 256


class ByteTokenizer:
    """UTF-8 bytes are ids 0–255; `BYTE_SPECIAL_TOKENS` follow from 256.

    >>> tok = ByteTokenizer()
    >>> tok.encode("hi")
    [104, 105]
    >>> tok.decode([104, 105, tok.special_token_id("<|im_end|>")])
    'hi<|im_end|>'
    """

    def __init__(self) -> None:
        self._special_ids: Mapping[str, int] = MappingProxyType(
            {token: _BYTE_VALUES + offset for offset, token in enumerate(BYTE_SPECIAL_TOKENS)}
        )
        self._special_names: Mapping[int, str] = MappingProxyType(
            {token_id: token for token, token_id in self._special_ids.items()}
        )

    @property
    def vocab_size(self) -> int:
        return _BYTE_VALUES + len(BYTE_SPECIAL_TOKENS)

    @property
    def eos_token_id(self) -> int:
        return self._special_ids["<|endoftext|>"]

    @property
    def pad_token_id(self) -> int:
        return self._special_ids["<|pad|>"]

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: Sequence[int]) -> str:
        pieces: list[str] = []
        pending = bytearray()
        for token_id in ids:
            if 0 <= token_id < _BYTE_VALUES:
                pending.append(token_id)
                continue
            name = self._special_names.get(token_id)
            if name is None:
                raise TokenizerError(
                    f"id {token_id} is outside the byte tokenizer's vocabulary "
                    f"(0..{self.vocab_size - 1})"
                )
            pieces.append(pending.decode("utf-8", errors="replace"))
            pending.clear()
            pieces.append(name)
        pieces.append(pending.decode("utf-8", errors="replace"))
        return "".join(pieces)

    def special_token_id(self, token: str) -> int:
        try:
            return self._special_ids[token]
        except KeyError:
            known = ", ".join(self._special_ids)
            raise TokenizerError(f"unknown special token {token!r}; known: {known}") from None


@dataclass(frozen=True, slots=True)
class Span:
    """A half-open range of token positions, `start:end`."""

    start: int
    end: int

    def __len__(self) -> int:
        return self.end - self.start


class ChatPromptBuilder:
    """Builds one sample's token list append-only; see the module docstring for why.

    Call order per turn: `open_turn()` (returns the prompt to send) → `append_generated(...)`
    one or more times (several when a generation was preempted and resumed) → `end_turn()` →
    `add_observation(...)` before the next `open_turn()`. Only generated tokens get loss mask 1,
    a behaviour logprob and a policy version; all other positions get 0, 0.0 and `NO_VERSION`.

    >>> builder = ChatPromptBuilder(ByteTokenizer(), messages=[("user", "fix it")])
    >>> prompt = builder.open_turn()
    >>> builder.append_generated([111, 107], [-0.1, -0.2], version=3)
    >>> builder.end_turn()
    Span(start=25, end=27)
    >>> builder.loss_mask[-2:]
    (1, 1)
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        template: ChatTemplate | None = None,
        messages: Sequence[tuple[str, str]] = (),
        *,
        chat_format: ChatFormat | None = None,
    ) -> None:
        """`chat_format` writes the template ids (default: ChatML with `template`)."""
        self._tokenizer = tokenizer
        self._template = template or ChatTemplate()
        self._format = chat_format or ChatMLFormat(tokenizer, self._template)
        self._token_ids: list[int] = []
        self._loss_mask: list[int] = []
        self._logprobs: list[float] = []
        self._versions: list[int] = []
        self._turn_open = False
        self._turn_start = 0
        self._prompt_tokens: int | None = None
        for role, content in messages:
            self.add_message(role, content)

    # -- reading ---------------------------------------------------------------------------

    @property
    def token_ids(self) -> tuple[int, ...]:
        """Every token so far: the exact sequence the engine has consumed and produced."""
        return tuple(self._token_ids)

    @property
    def loss_mask(self) -> tuple[int, ...]:
        return tuple(self._loss_mask)

    @property
    def logprobs(self) -> tuple[float, ...]:
        return tuple(self._logprobs)

    @property
    def versions(self) -> tuple[int, ...]:
        return tuple(self._versions)

    @property
    def prompt_tokens(self) -> int:
        """Length of the initial prompt, up to and including the first assistant header."""
        if self._prompt_tokens is None:
            raise TokenizerError("no turn has been opened yet; call open_turn() first")
        return self._prompt_tokens

    @property
    def turn_open(self) -> bool:
        return self._turn_open

    def stop_token_ids(self) -> tuple[int, ...]:
        """Ids that end a model turn (for `SamplingParams.stop_token_ids`)."""
        return self._format.stop_token_ids

    # -- appending -------------------------------------------------------------------------

    def add_message(self, role: str, content: str) -> Span:
        """Append a message (system, user or tool) as template tokens; returns the span of the
        ids appended now (a model's chat template renders consecutive messages together, so
        their ids may come with the next `open_turn`)."""
        if self._turn_open:
            raise TokenizerError("a model turn is open; call end_turn() before adding a message")
        start = len(self._token_ids)
        self._append_fixed(self._format.message(role, content))
        return Span(start, len(self._token_ids))

    def add_observation(self, content: str, role: str | None = None) -> Span:
        """Append a tool observation (role defaults to the template's observation role)."""
        return self.add_message(role or self._template.observation_role, content)

    def open_turn(self) -> tuple[int, ...]:
        """Append the assistant header and return the prompt to send to the engine."""
        if self._turn_open:
            raise TokenizerError("a model turn is already open; call end_turn() first")
        self._append_fixed(self._format.generation_prompt())
        if self._prompt_tokens is None:
            self._prompt_tokens = len(self._token_ids)
        self._turn_open = True
        self._turn_start = len(self._token_ids)
        return tuple(self._token_ids)

    def append_generated(
        self, ids: Sequence[int], logprobs: Sequence[float], version: int | Sequence[int]
    ) -> None:
        """Append the model's ids verbatim with their logprobs and policy version(s).

        `version` is one version for all ids, or one per id (a segment that straddles a weight
        update). Call again after a preemption: the next prompt is `prompt_ids()` = prompt +
        everything generated so far in this turn.
        """
        if not self._turn_open:
            raise TokenizerError("no model turn is open; call open_turn() before appending output")
        versions = [version] * len(ids) if isinstance(version, int) else list(version)
        if not len(ids) == len(logprobs) == len(versions):
            raise TokenizerError(
                f"{len(ids)} ids, {len(logprobs)} logprobs and {len(versions)} versions: "
                "the engine must return one logprob (and the loop one version) per id"
            )
        if any(v < 0 for v in versions):
            raise TokenizerError(f"policy versions must be >= 0, got {min(versions)}")
        vocab = self._tokenizer.vocab_size
        if any(not 0 <= token_id < vocab for token_id in ids):
            raise TokenizerError(f"generated ids must lie in 0..{vocab - 1}")
        self._token_ids.extend(ids)
        self._loss_mask.extend([1] * len(ids))
        self._logprobs.extend(float(x) for x in logprobs)
        self._versions.extend(versions)

    def prompt_ids(self) -> tuple[int, ...]:
        """What to send to the engine now: everything so far (prompt + partial output)."""
        if not self._turn_open:
            raise TokenizerError("no model turn is open; call open_turn() first")
        return tuple(self._token_ids)

    def end_turn(self) -> Span:
        """Close the model turn; returns the span of its generated ids.

        Appends nothing, so a final turn leaves no trailing template tokens; the template's
        closing ids (for ChatML the end token, if the model did not write it, and the
        separator) come with the next `add_message`/`add_observation`/`open_turn`.
        """
        if not self._turn_open:
            raise TokenizerError("no model turn is open; nothing to end")
        self._turn_open = False
        self._format.model_turn(self._token_ids[self._turn_start :])
        return Span(self._turn_start, len(self._token_ids))

    # -- internals -------------------------------------------------------------------------

    def _append_fixed(self, ids: Sequence[int]) -> None:
        self._token_ids.extend(ids)
        self._loss_mask.extend([0] * len(ids))
        self._logprobs.extend([0.0] * len(ids))
        self._versions.extend([NO_VERSION] * len(ids))
