"""`HFTokenizer` and `HFChatFormat`: a model's own tokenizer and chat template, append-only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rollout.errors import TokenizerError
from rollout.trajectories.hf_tokenizer import HFChatFormat, HFTokenizer
from rollout.trajectories.tokenizer import ChatPromptBuilder
from tests.rollout.trajectories.local_tokenizer import (
    STRIPS_EARLIER_REASONING,
    save_local_tokenizer,
)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> HFTokenizer:
    return HFTokenizer(save_local_tokenizer(tmp_path_factory.mktemp("tokenizer")))


def render(tokenizer: HFTokenizer, messages: list[dict[str, str]], generation: bool) -> list[int]:
    rendered: Any = tokenizer.backend.apply_chat_template(
        messages, tokenize=True, add_generation_prompt=generation
    )
    return list(rendered["input_ids"] if hasattr(rendered, "keys") else rendered)


def test_text_never_becomes_special_ids_and_decoding_keeps_them(tokenizer: HFTokenizer) -> None:
    end = tokenizer.special_token_id("<|im_end|>")
    ids = tokenizer.encode("a <|im_end|> b")
    assert end not in ids and tokenizer.decode(ids) == "a <|im_end|> b"
    assert tokenizer.decode([*tokenizer.encode("done"), end]) == "done<|im_end|>"
    assert tokenizer.eos_token_id == tokenizer.special_token_id("<|endoftext|>")


def test_a_token_that_is_not_special_is_refused(tokenizer: HFTokenizer) -> None:
    with pytest.raises(TokenizerError, match="not a special token"):
        tokenizer.special_token_id("the")


def test_every_prompt_equals_the_templates_render_of_the_conversation(
    tokenizer: HFTokenizer,
) -> None:
    chat = ChatPromptBuilder(
        tokenizer,
        messages=[("system", "be brief"), ("user", "fix the bug")],
        chat_format=HFChatFormat.factory(tokenizer)(),
    )
    history = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "fix the bug"},
    ]
    assert list(chat.open_turn()) == render(tokenizer, history, generation=True)
    answer = [*tokenizer.encode("run the tests"), tokenizer.special_token_id("<|im_end|>")]
    chat.append_generated(answer, [-0.5] * len(answer), version=0)
    chat.end_turn()
    chat.add_observation("hello world", role="tool")
    history += [{"role": "assistant", "content": "run the tests"},
                {"role": "tool", "content": "hello world"}]  # fmt: skip
    assert list(chat.open_turn()) == render(tokenizer, history, generation=True)


def test_the_models_own_ids_stay_verbatim_when_they_are_not_the_canonical_tokenization(
    tokenizer: HFTokenizer,
) -> None:
    chat = ChatPromptBuilder(
        tokenizer, messages=[("user", "hi")], chat_format=HFChatFormat.factory(tokenizer)()
    )
    prompt = chat.open_turn()
    spelled = [token for char in "the tests" for token in tokenizer.encode(char)]  # one per char
    assert spelled != tokenizer.encode("the tests")
    chat.append_generated(spelled, [-0.1] * len(spelled), version=2)  # no end token written
    span = chat.end_turn()
    chat.add_observation("ok", role="tool")
    chat.open_turn()
    ids = chat.token_ids
    assert list(ids[span.start : span.end]) == spelled and ids[: len(prompt)] == prompt
    closing_and_tool = list(ids[span.end :])
    assert closing_and_tool[0] == tokenizer.special_token_id("<|im_end|>")  # the turn suffix
    assert tokenizer.decode(closing_and_tool) == (
        "<|im_end|>\n<|im_start|>tool\nok<|im_end|>\n<|im_start|>assistant\n"
    )
    assert chat.loss_mask[span.start : span.end] == (1,) * len(spelled)
    assert sum(chat.loss_mask) == len(spelled)


def test_a_template_that_rewrites_history_keeps_what_the_model_saw(tmp_path: Path) -> None:
    tokenizer = HFTokenizer(save_local_tokenizer(tmp_path, STRIPS_EARLIER_REASONING))
    chat_format = HFChatFormat.factory(tokenizer)()
    chat = ChatPromptBuilder(tokenizer, messages=[("user", "hi")], chat_format=chat_format)
    first = chat.open_turn()
    end = tokenizer.special_token_id("<|im_end|>")
    reasoned = [*tokenizer.encode("<think>ls first</think>run the tests"), end]
    chat.append_generated(reasoned, [-0.1] * len(reasoned), version=0)
    chat.end_turn()
    chat.add_observation("ok", role="tool")
    second = chat.open_turn()
    assert second[: len(first) + len(reasoned)] == (*first, *reasoned)  # reasoning kept
    after = tokenizer.decode(second[len(first) + len(reasoned) :])
    assert after == "\n<|im_start|>tool\nok<|im_end|>\n<|im_start|>assistant\n"
    assert chat_format.kept_turns == 1


def test_consecutive_messages_render_together_with_the_next_prompt(
    tokenizer: HFTokenizer,
) -> None:
    chat = ChatPromptBuilder(
        tokenizer, messages=[("user", "hi")], chat_format=HFChatFormat.factory(tokenizer)()
    )
    chat.open_turn()
    listing = tokenizer.encode("ls")
    chat.append_generated(listing, [-0.1] * len(listing), version=0)
    chat.end_turn()
    span = chat.add_observation("a", role="tool")
    assert tokenizer.decode(chat.token_ids[span.start : span.end]) == "<|im_end|>\n"
    chat.add_observation("b", role="tool")
    before = len(chat.token_ids)
    chat.open_turn()
    assert tokenizer.decode(chat.token_ids[before:]) == (
        "<|im_start|>tool\na<|im_end|>\n<|im_start|>tool\nb<|im_end|>\n<|im_start|>assistant\n"
    )


def test_stop_ids_are_the_end_of_turn_and_end_of_text_tokens(tokenizer: HFTokenizer) -> None:
    chat_format = HFChatFormat.factory(tokenizer)()
    assert chat_format.stop_token_ids == (
        tokenizer.special_token_id("<|im_end|>"),
        tokenizer.eos_token_id,
    )


def test_a_tokenizer_without_a_chat_template_or_directory_is_refused(tmp_path: Path) -> None:
    bare = HFTokenizer(save_local_tokenizer(tmp_path / "bare", chat_template=None))
    with pytest.raises(TokenizerError, match="no chat template"):
        HFChatFormat.factory(bare)
    with pytest.raises(TokenizerError, match="not a directory"):
        HFTokenizer(tmp_path / "missing")
