"""A model's own tokenizer and chat template (`transformers.AutoTokenizer`, local files only).

`HFTokenizer` fits the `Tokenizer` protocol: user text never becomes special ids
(`split_special_tokens`), decoding keeps special tokens, nothing is downloaded.

`HFChatFormat` renders a sample's chat with the model's chat template (and `tools=`, so the
template writes its own tools block) into one append-only token list: the ids the engine was
sent at each turn are the ids of the turn before, the model's own ids verbatim, then the ids
the template gives the new messages. The rule for those ids (docs/trainers.md, "Chat
templates"):

1. The first prompt is the template's render of the opening messages.
2. After a model turn, the turn is closed with the template's *turn suffix* (the ids it writes
   after an assistant message's content, e.g. ``<|im_end|>\\n``, derived once from a probe;
   without the stop token when the model wrote it), and the messages that arrived since (tool
   messages in a row included) are rendered *together* at the next generation prompt: their
   ids are the render of the whole conversation minus the render without them.
3. Some templates rewrite earlier turns once a message follows (Qwen3 drops the reasoning of
   earlier assistant turns, and the empty think block of the last one), so that difference is
   not an extension. Then the earlier turns stay exactly as the model saw and wrote them -- as
   prefix-preserving training renders them (TRL's `qwen3_training` variant keeps every think
   block) -- and the new messages' ids are the template's render of them after a neutral probe
   turn (the conversation's system message, a probe user message and a probe reply), located
   right after the probe reply.

So the trainer gets one token list per sample in which every prompt the model was sent is a
prefix, never a re-rendering; for templates that are already prefix-preserving (Qwen2.5, the
`_training` variants) it equals the template's own render of the conversation.
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

Message = dict[str, Any]


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


class _Renderer:
    """`apply_chat_template` with one sample's template, tools and template options."""

    def __init__(
        self,
        tokenizer: HFTokenizer,
        chat_template: str | None,
        template_kwargs: Mapping[str, Any],
    ) -> None:
        backend = tokenizer.backend
        if chat_template is None and not getattr(backend, "chat_template", None):
            raise TokenizerError(f"the tokenizer at {tokenizer.path} has no chat template")
        self.tokenizer = tokenizer
        self._options: dict[str, Any] = dict(template_kwargs)
        if chat_template is not None:
            self._options["chat_template"] = chat_template

    def __call__(
        self,
        messages: Sequence[Message],
        *,
        generation: bool,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> list[int]:
        if not messages:
            return []
        try:
            rendered = self.tokenizer.backend.apply_chat_template(
                [dict(message) for message in messages],
                tools=[dict(tool) for tool in tools] if tools else None,
                tokenize=True,
                add_generation_prompt=generation,
                **self._options,
            )
        except Exception as exc:  # Jinja's own errors (raise_exception, undefined names)
            raise TokenizerError(
                f"the chat template of {self.tokenizer.path} failed on roles "
                f"{[m['role'] for m in messages]}: {exc}"
            ) from exc
        if isinstance(rendered, Mapping) or hasattr(rendered, "input_ids"):
            rendered = rendered["input_ids"]
        return [int(token) for token in rendered]


class HFChatFormat:
    """A model's chat template as an append-only `ChatFormat`; see the module docstring.

    One per sample (it keeps the conversation as text to render it). Build them with
    `HFChatFormat.factory(tokenizer)`, which checks the template once. A message's ids come
    with the next `generation_prompt()` (so consecutive messages render together);
    `message()` returns only the ids that close the model's turn before it.
    """

    def __init__(
        self,
        renderer: _Renderer,
        turn_suffix: Sequence[int],
        probe_tail: Sequence[int],
    ) -> None:
        self._render = renderer
        self._tokenizer = renderer.tokenizer
        self._turn_suffix = list(turn_suffix)
        self._probe_tail = list(probe_tail)  # the probe reply's ids and the turn suffix
        self._tools: list[dict[str, Any]] | None = None
        self._messages: list[Message] = []  # rendered into the token list so far
        self._pending: list[Message] = []  # arrived since, rendered with the next prompt
        self._model_ids: list[int] | None = None  # a model turn not closed yet
        self._kept_turns = 0
        # The template's end-of-turn token first (what a model writes to end its turn), then
        # end-of-text.
        tokenizer = self._tokenizer
        stops = [tokenizer.eos_token_id]
        end_of_turn = self._turn_suffix[0] if self._turn_suffix else None
        if end_of_turn in tokenizer.special_ids and end_of_turn != tokenizer.eos_token_id:
            stops.insert(0, end_of_turn)
        self._stop_ids = tuple(stops)

    @classmethod
    def factory(
        cls,
        tokenizer: HFTokenizer,
        chat_template: str | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> _HFChatFormatFactory:
        """Checks the template and derives its turn suffix once; call the result per sample.

        `chat_template`: a Jinja chat template to use instead of the tokenizer's own.
        `template_kwargs`: extra variables for the template (e.g. ``enable_thinking``)."""
        renderer = _Renderer(tokenizer, chat_template, template_kwargs or {})
        suffix, probe_tail = _turn_suffix(renderer)
        return _HFChatFormatFactory(renderer, suffix, probe_tail)

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return self._stop_ids

    @property
    def kept_turns(self) -> int:
        """How often the template would have rewritten an earlier turn and rule 3 kept it."""
        return self._kept_turns

    def use_tools(self, tools: Sequence[Mapping[str, Any]]) -> bool:
        """The template renders `tools` (its own tools block); call before the first message."""
        if self._messages or self._pending:
            raise TokenizerError("declare the tools before the first message")
        self._tools = [dict(tool) for tool in tools] or None
        return True

    def message(self, role: str, content: str) -> list[int]:
        closing = self._close_turn()
        self._pending.append({"role": role, "content": content})
        return closing

    def generation_prompt(self) -> list[int]:
        closing = self._close_turn()
        new, self._pending = self._pending, []
        ids = self._new_ids(new)
        self._messages.extend(new)
        return [*closing, *ids]

    def model_turn(self, ids: Sequence[int]) -> None:
        self._model_ids = list(ids)

    def _close_turn(self) -> list[int]:
        """Record the model's turn as an assistant message; the ids that close it (rule 2)."""
        if self._model_ids is None:
            return []
        ids, self._model_ids = self._model_ids, None
        content_ids = ids
        while content_ids and content_ids[-1] in self._stop_ids:
            content_ids = content_ids[:-1]
        content = self._tokenizer.decode(content_ids)
        self._messages.append({"role": "assistant", "content": content})
        suffix = self._turn_suffix
        if ids and suffix and ids[-1] == suffix[0]:
            suffix = suffix[1:]  # the model wrote the end-of-turn token itself
        return list(suffix)

    def _new_ids(self, new: list[Message]) -> list[int]:
        """The ids of `new` and the generation prompt after the conversation so far."""
        render = self._render
        if not self._messages:
            return render(new, generation=True, tools=self._tools)  # rule 1
        before = render(self._messages, generation=False, tools=self._tools)
        after = render([*self._messages, *new], generation=True, tools=self._tools)
        if after[: len(before)] == before:
            return after[len(before) :]  # rule 2
        self._kept_turns += 1
        return self._after_probe(new)  # rule 3

    def _after_probe(self, new: list[Message]) -> list[int]:
        """Rule 3: `new` rendered after a probe turn, cut right after the probe reply."""
        head = self._messages[:1] if self._messages[0]["role"] == "system" else []
        probe = [
            *head,
            {"role": "user", "content": _PROBE_USER},
            {"role": "assistant", "content": _PROBE_REPLY},
        ]
        rendered = self._render([*probe, *new], generation=True, tools=self._tools)
        at = _find(rendered, self._probe_tail)
        if at < 0:
            roles = [m["role"] for m in new]
            raise TokenizerError(
                f"the chat template of {self._tokenizer.path} rewrites earlier turns, and its "
                f"render of new {roles} messages after a probe turn does not keep the probe "
                "reply and its turn suffix, so the new messages' ids cannot be told apart; use "
                "a prefix-preserving variant of the template (chat_template: file)"
            )
        return rendered[at + len(self._probe_tail) :]


class _HFChatFormatFactory:
    def __init__(self, renderer: _Renderer, turn_suffix: list[int], probe_tail: list[int]) -> None:
        self._renderer = renderer
        self._turn_suffix = turn_suffix
        self._probe_tail = probe_tail

    def __call__(self) -> ChatFormat:
        return HFChatFormat(self._renderer, self._turn_suffix, self._probe_tail)


def _turn_suffix(render: _Renderer) -> tuple[list[int], list[int]]:
    """The ids a template writes after an assistant message's content (e.g. `<|im_end|>\\n`),
    and the probe reply's ids followed by them (what rule 3 looks for)."""
    tokenizer = render.tokenizer
    user = [{"role": "user", "content": _PROBE_USER}]
    prompt = render(user, generation=True)
    answered = render([*user, {"role": "assistant", "content": _PROBE_REPLY}], generation=False)
    content = tokenizer.encode(_PROBE_REPLY)
    tail = answered[len(prompt) :]
    at = _find(tail, content, last=True)
    if answered[: len(prompt)] != prompt or at < 0:
        raise TokenizerError(
            f"cannot tell where an assistant message ends in the chat template of "
            f"{tokenizer.path}: rendering [user, assistant] does not extend [user] + the "
            "generation prompt with the assistant's content"
        )
    suffix = tail[at + len(content) :]
    return suffix, [*content, *suffix]


def _find(ids: Sequence[int], part: Sequence[int], *, last: bool = False) -> int:
    """Where `part` starts in `ids` (the first or last occurrence), or -1."""
    width = len(part)
    starts = range(len(ids) - width, -1, -1) if last else range(len(ids) - width + 1)
    for start in starts:
        if list(ids[start : start + width]) == list(part):
            return start
    return -1
