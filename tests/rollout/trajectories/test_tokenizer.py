"""Spec of the byte tokenizer and the append-only chat prompt builder."""

from __future__ import annotations

import pytest

from rollout.core.types import NO_VERSION
from rollout.errors import TokenizerError
from rollout.trajectories.tokenizer import ByteTokenizer, ChatPromptBuilder, Tokenizer

TOK = ByteTokenizer()
IM_END = TOK.special_token_id("<|im_end|>")


def builder() -> ChatPromptBuilder:
    return ChatPromptBuilder(TOK, messages=[("system", "be brief"), ("user", "fix the bug")])


def test_byte_tokenizer_satisfies_the_protocol() -> None:
    assert isinstance(TOK, Tokenizer)


def test_byte_tokenizer_round_trips_unicode_text() -> None:
    text = "naïve → 修正"
    assert TOK.decode(TOK.encode(text)) == text


def test_special_token_text_in_user_content_is_encoded_as_plain_bytes() -> None:
    ids = TOK.encode("<|im_end|>")
    assert all(token_id < 256 for token_id in ids)


def test_unknown_id_cannot_be_decoded() -> None:
    with pytest.raises(TokenizerError):
        TOK.decode([TOK.vocab_size])


def test_prompt_follows_the_chatml_template() -> None:
    prompt = ChatPromptBuilder(TOK, messages=[("user", "hi")]).open_turn()
    assert TOK.decode(prompt) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_each_turn_prompt_extends_the_previous_prompt_and_output_exactly() -> None:
    chat = builder()
    first_prompt = chat.open_turn()
    output = [*TOK.encode("ls"), IM_END]
    chat.append_generated(output, [-0.1] * len(output), version=0)
    chat.end_turn()
    chat.add_observation("a.py b.py")
    second_prompt = chat.open_turn()
    assert second_prompt[: len(first_prompt) + len(output)] == (*first_prompt, *output)


def test_generated_ids_are_kept_verbatim_even_if_they_do_not_decode_cleanly() -> None:
    chat = builder()
    chat.open_turn()
    odd = [0xE4, 0xBF, IM_END]  # a truncated UTF-8 sequence: re-tokenizing would change it
    chat.append_generated(odd, [-1.0, -1.0, -1.0], version=0)
    span = chat.end_turn()
    assert chat.token_ids[span.start : span.end] == tuple(odd)


def test_loss_mask_is_one_exactly_on_model_generated_tokens() -> None:
    chat = builder()
    chat.open_turn()
    chat.append_generated([7, 8, IM_END], [-0.1, -0.2, -0.3], version=2)
    turn = chat.end_turn()
    observation = chat.add_observation("ok")
    chat.open_turn()
    generated = {i for i, mask in enumerate(chat.loss_mask) if mask == 1}
    assert generated == set(range(turn.start, turn.end))
    assert all(chat.loss_mask[i] == 0 for i in range(observation.start, observation.end))


def test_logprobs_and_versions_align_with_generated_tokens() -> None:
    chat = builder()
    chat.open_turn()
    chat.append_generated([7, 8], [-0.1, -0.2], version=[3, 4])
    span = chat.end_turn()
    assert chat.logprobs[span.start : span.end] == (-0.1, -0.2)
    assert chat.versions[span.start : span.end] == (3, 4)
    assert set(chat.versions[: span.start]) == {NO_VERSION}


def test_preempted_turn_resumes_from_prompt_plus_partial_output() -> None:
    chat = builder()
    prompt = chat.open_turn()
    chat.append_generated([7, 8], [-0.1, -0.2], version=0)  # aborted here
    assert chat.prompt_ids() == (*prompt, 7, 8)
    chat.append_generated([9, IM_END], [-0.3, -0.4], version=1)  # resumed after a weight update
    span = chat.end_turn()
    assert chat.token_ids[span.start : span.end] == (7, 8, 9, IM_END)


def test_missing_end_token_is_added_as_template_when_the_output_was_cut_by_length() -> None:
    chat = builder()
    chat.open_turn()
    chat.append_generated([7, 8], [-0.1, -0.2], version=0)
    span = chat.end_turn()
    chat.add_observation("truncated")
    assert chat.token_ids[span.end] == IM_END
    assert chat.loss_mask[span.end] == 0


def test_final_turn_leaves_no_trailing_template_tokens() -> None:
    chat = builder()
    chat.open_turn()
    chat.append_generated([7, IM_END], [-0.1, -0.2], version=0)
    span = chat.end_turn()
    assert span.end == len(chat.token_ids)


def test_prompt_tokens_is_the_first_prompt_length() -> None:
    chat = builder()
    first_prompt = chat.open_turn()
    chat.append_generated([7, IM_END], [-0.1, -0.2], version=0)
    chat.end_turn()
    chat.add_observation("x")
    chat.open_turn()
    assert chat.prompt_tokens == len(first_prompt)


@pytest.mark.parametrize(
    "misuse",
    [
        lambda chat: chat.append_generated([1], [-0.1], version=0),  # no open turn
        lambda chat: chat.end_turn(),  # no open turn
        lambda chat: (chat.open_turn(), chat.add_observation("x")),  # message inside a turn
        lambda chat: (chat.open_turn(), chat.append_generated([1, 2], [-0.1], version=0)),
        lambda chat: (chat.open_turn(), chat.append_generated([TOK.vocab_size], [0.0], 0)),
    ],
)
def test_out_of_order_or_inconsistent_appends_raise(misuse: object) -> None:
    with pytest.raises(TokenizerError):
        misuse(builder())  # type: ignore[operator]
