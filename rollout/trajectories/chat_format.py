"""`ChatFormat`: the template tokens a chat prompt builder appends around each message.

A format is stateful, one per sample: it is told every message and every model turn in order
and answers with the ids to append *now*, never with ids that change what was appended before,
so the record stays append-only (see `rollout.trajectories.tokenizer`). A format may hold a
message's ids back until the next generation prompt (a model's template renders consecutive
messages together, e.g. tool messages in a row). `ChatMLFormat` writes
ChatML with any `Tokenizer` (``<|im_start|>role\\ncontent<|im_end|>\\n``, as Qwen does); a model's
own chat template is `rollout.trajectories.hf_tokenizer.HFChatFormat`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["ChatFormat", "ChatMLFormat", "ChatTemplate"]


class _ChatMLTokenizer(Protocol):
    """What ChatML needs of a `rollout.trajectories.tokenizer.Tokenizer`."""

    @property
    def eos_token_id(self) -> int: ...

    def encode(self, text: str) -> list[int]: ...

    def special_token_id(self, token: str) -> int: ...


class ChatFormat(Protocol):
    """Template ids for one sample's chat, in the order things happen."""

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        """Ids that end a model turn."""
        ...

    def use_tools(self, tools: Sequence[Mapping[str, Any]]) -> bool:
        """Offer `tools` (OpenAI function tools) to the model; call before the first message.

        Returns whether the format renders them itself (a model's chat template writes its own
        tools block); if not, the caller describes them in the system message."""
        ...

    def message(self, role: str, content: str) -> list[int]:
        """Ids to append for a system, user or tool message: those closing a model turn before
        it, if any, and the message's own (now, or with the next `generation_prompt`)."""
        ...

    def generation_prompt(self) -> list[int]:
        """Ids that open the model's turn (closing a model turn before it, if any)."""
        ...

    def model_turn(self, ids: Sequence[int]) -> None:
        """The model's turn ended with `ids` (appended verbatim by the builder)."""
        ...


@dataclass(frozen=True, slots=True)
class ChatTemplate:
    """A ChatML-style template: ``{start}{role}{separator}{content}{end}{separator}``."""

    start_token: str = "<|im_start|>"
    end_token: str = "<|im_end|>"
    separator: str = "\n"
    assistant_role: str = "assistant"
    observation_role: str = "tool"


class ChatMLFormat:
    """ChatML over any tokenizer that has the template's start and end as special tokens.

    A model turn is closed lazily: its end token (unless the model wrote it) and the separator
    are appended with the next message or turn, so a final turn leaves no trailing ids.
    """

    def __init__(self, tokenizer: _ChatMLTokenizer, template: ChatTemplate | None = None) -> None:
        self._tokenizer = tokenizer
        self._template = template or ChatTemplate()
        self._start_id = tokenizer.special_token_id(self._template.start_token)
        self._end_id = tokenizer.special_token_id(self._template.end_token)
        self._separator = tokenizer.encode(self._template.separator)
        self._open_turn_ended_with: int | None = None
        self._turn_to_close = False

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return (self._end_id, self._tokenizer.eos_token_id)

    def use_tools(self, tools: Sequence[Mapping[str, Any]]) -> bool:
        return False  # plain ChatML has no tools block: the caller writes one

    def message(self, role: str, content: str) -> list[int]:
        encode = self._tokenizer.encode
        return [
            *self._close_turn(),
            self._start_id,
            *encode(role + self._template.separator),
            *encode(content),
            self._end_id,
            *self._separator,
        ]

    def generation_prompt(self) -> list[int]:
        header = self._tokenizer.encode(self._template.assistant_role + self._template.separator)
        return [*self._close_turn(), self._start_id, *header]

    def model_turn(self, ids: Sequence[int]) -> None:
        self._turn_to_close = True
        self._open_turn_ended_with = ids[-1] if ids else None

    def _close_turn(self) -> list[int]:
        if not self._turn_to_close:
            return []
        self._turn_to_close = False
        closing = [] if self._open_turn_ended_with == self._end_id else [self._end_id]
        return [*closing, *self._separator]
