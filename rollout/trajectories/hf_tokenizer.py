"""A model's own tokenizer and chat template (`transformers.AutoTokenizer`, local files only).

`HFTokenizer` fits the `Tokenizer` protocol: user text never becomes special ids
(`split_special_tokens`), decoding keeps special tokens, nothing is downloaded.

`HFChatFormat` makes the model's chat template append-only. A template renders a whole
conversation, so each message's template ids are the *difference of two renders*: the
conversation with the message minus the conversation without it. Every render must extend the
previous one; a template that rewrites history (for example one that strips the reasoning of
earlier assistant turns once a new message arrives) fails with a `TokenizerError` that says
where, instead of silently training on ids the model never saw. The model's own ids stay
verbatim in the record: the template's ids *after* an assistant message's content (its
"turn suffix", derived once from a probe conversation) close the turn, without the stop
token when the model already wrote it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rollout.errors import TokenizerError
from rollout.trajectories.chat_format import ChatFormat

__all__ = ["HFChatFormat", "HFTokenizer"]

_PROBE_USER = "ping"
_PROBE_REPLY = "pong reply"


class HFTokenizer:
    """`transformers.AutoTokenizer` from a local directory, as a rollout `Tokenizer`."""

    def __init__(self, path: str | Path) -> None:
        try:
            from transformers import AutoTokenizer  # deferred: importing transformers is slow
        except ImportError as exc:
            raise TokenizerError(
                "HFTokenizer needs `transformers` (pip install 'aio-conductor[hf]')"
            ) from exc
        directory = Path(path)
        if not directory.is_dir():
            raise TokenizerError(
                f"tokenizer path {directory} is not a directory; give the model's local "
                "directory (with tokenizer.json / tokenizer_config.json), nothing is downloaded"
            )
        try:
            self._tokenizer = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
        except (OSError, ValueError) as exc:
            raise TokenizerError(f"cannot load a tokenizer from {directory}: {exc}") from exc
        if self._tokenizer.eos_token_id is None:
            raise TokenizerError(f"the tokenizer at {directory} defines no eos_token")
        self.path = directory
        self._special_ids = frozenset(self._tokenizer.all_special_ids)

    @property
    def backend(self) -> Any:
        """The `transformers` tokenizer (for its chat template)."""
        return self._tokenizer

    @property
    def vocab_size(self) -> int:
        return len(self._tokenizer)

    @property
    def eos_token_id(self) -> int:
        return int(self._tokenizer.eos_token_id)

    @property
    def pad_token_id(self) -> int:
        pad = self._tokenizer.pad_token_id
        return int(pad if pad is not None else self._tokenizer.eos_token_id)

    @property
    def special_ids(self) -> frozenset[int]:
        return self._special_ids

    def encode(self, text: str) -> list[int]:
        ids = self._tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True)
        return list(ids)

    def decode(self, ids: Sequence[int]) -> str:
        return str(
            self._tokenizer.decode(
                list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False
            )
        )

    def special_token_id(self, token: str) -> int:
        token_id = self._tokenizer.convert_tokens_to_ids(token)
        if not isinstance(token_id, int) or token_id not in self._special_ids:
            raise TokenizerError(f"{token!r} is not a special token of {self.path}")
        return token_id


class HFChatFormat:
    """A model's chat template as an append-only `ChatFormat`; see the module docstring.

    One per sample (it keeps the conversation as text to render it). Build them with
    `HFChatFormat.factory(tokenizer)`, which checks the template once.
    """

    def __init__(
        self,
        tokenizer: HFTokenizer,
        turn_suffix: Sequence[int],
        chat_template: str | None = None,
    ) -> None:
        self._tokenizer = tokenizer
        self._turn_suffix = list(turn_suffix)
        self._chat_template = chat_template
        self._messages: list[dict[str, str]] = []
        self._rendered: list[int] = []  # the last render; every next one must extend it
        self._model_ids: list[int] | None = None  # a model turn not closed yet
        # The template's end-of-turn token first (what a model writes to end its turn), then
        # end-of-text.
        stops = [tokenizer.eos_token_id]
        end_of_turn = self._turn_suffix[0] if self._turn_suffix else None
        if end_of_turn in tokenizer.special_ids and end_of_turn != tokenizer.eos_token_id:
            stops.insert(0, end_of_turn)
        self._stop_ids = tuple(stops)

    @classmethod
    def factory(
        cls, tokenizer: HFTokenizer, chat_template: str | None = None
    ) -> _HFChatFormatFactory:
        """Checks the template and derives its turn suffix once; call the result per sample.

        `chat_template`: a Jinja chat template to use instead of the tokenizer's own."""
        return _HFChatFormatFactory(
            tokenizer, _turn_suffix(tokenizer, chat_template), chat_template
        )

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return self._stop_ids

    def message(self, role: str, content: str) -> list[int]:
        closing = self._close_turn()
        return [*closing, *self._extend({"role": role, "content": content}, generation=False)]

    def generation_prompt(self) -> list[int]:
        closing = self._close_turn()
        return [*closing, *self._extend(None, generation=True)]

    def model_turn(self, ids: Sequence[int]) -> None:
        self._model_ids = list(ids)

    def _close_turn(self) -> list[int]:
        """Record the model's turn as an assistant message; the ids that close it."""
        if self._model_ids is None:
            return []
        ids, self._model_ids = self._model_ids, None
        content_ids = ids
        while content_ids and content_ids[-1] in self._stop_ids:
            content_ids = content_ids[:-1]
        content = self._tokenizer.decode(content_ids)
        self._extend({"role": "assistant", "content": content}, generation=False)
        suffix = self._turn_suffix
        if ids and suffix and ids[-1] == suffix[0]:
            suffix = suffix[1:]  # the model wrote the end-of-turn token itself
        return list(suffix)

    def _extend(self, message: dict[str, str] | None, *, generation: bool) -> list[int]:
        """Render with `message` added; the ids it appends to the previous render."""
        messages = self._messages if message is None else [*self._messages, message]
        rendered = _render(
            self._tokenizer, messages, generation=generation, chat_template=self._chat_template
        )
        previous = self._rendered
        if rendered[: len(previous)] != previous:
            position = next(
                (i for i, (a, b) in enumerate(zip(previous, rendered, strict=False)) if a != b),
                min(len(previous), len(rendered)),
            )
            what = f"a {message['role']} message" if message else "the generation prompt"
            raise TokenizerError(
                f"the chat template of {self._tokenizer.path} is not append-only: adding {what} "
                f"after {len(self._messages)} messages changes the rendered ids at position "
                f"{position} (the template rewrites history, e.g. it strips earlier reasoning); "
                "a trajectory must hold the ids the model saw, so use a template that renders "
                "every earlier message unchanged"
            )
        self._messages = messages
        self._rendered = rendered
        return rendered[len(previous) :]


class _HFChatFormatFactory:
    def __init__(
        self, tokenizer: HFTokenizer, turn_suffix: list[int], chat_template: str | None
    ) -> None:
        self._tokenizer = tokenizer
        self._turn_suffix = turn_suffix
        self._chat_template = chat_template

    def __call__(self) -> ChatFormat:
        return HFChatFormat(self._tokenizer, self._turn_suffix, self._chat_template)


def _render(
    tokenizer: HFTokenizer,
    messages: Sequence[Mapping[str, str]],
    *,
    generation: bool,
    chat_template: str | None = None,
) -> list[int]:
    if not messages:
        return []
    backend = tokenizer.backend
    if chat_template is None and not getattr(backend, "chat_template", None):
        raise TokenizerError(f"the tokenizer at {tokenizer.path} has no chat template")
    options = {} if chat_template is None else {"chat_template": chat_template}
    rendered = backend.apply_chat_template(
        [dict(message) for message in messages],
        tokenize=True,
        add_generation_prompt=generation,
        **options,
    )
    if isinstance(rendered, Mapping) or hasattr(rendered, "input_ids"):
        rendered = rendered["input_ids"]
    return [int(token) for token in rendered]


def _turn_suffix(tokenizer: HFTokenizer, chat_template: str | None = None) -> list[int]:
    """The ids a template writes after an assistant message's content (e.g. `<|im_end|>\\n`)."""
    user = [{"role": "user", "content": _PROBE_USER}]
    prompt = _render(tokenizer, user, generation=True, chat_template=chat_template)
    answered = _render(
        tokenizer,
        [*user, {"role": "assistant", "content": _PROBE_REPLY}],
        generation=False,
        chat_template=chat_template,
    )
    content = tokenizer.encode(_PROBE_REPLY)
    tail = answered[len(prompt) :]
    if answered[: len(prompt)] != prompt or tail[: len(content)] != content:
        raise TokenizerError(
            f"cannot tell where an assistant message ends in the chat template of "
            f"{tokenizer.path}: rendering [user, assistant] does not extend [user] + the "
            "generation prompt with the assistant's content; the template is not append-only"
        )
    return tail[len(content) :]
