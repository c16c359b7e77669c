"""The chat templates the TRL wheel ships (Qwen2.5, Qwen3, Qwen3-Instruct-2507 and their
prefix-preserving `_training` variants), rendered append-only by `HFChatFormat`.

The rule under test (rollout.trajectories.hf_tokenizer, docs/trainers.md): every prompt the
model is sent is the one before plus the model's own ids plus the template's ids for what came
after; for a template that rewrites earlier turns (Qwen3 drops earlier reasoning) the earlier
turns stay as the model saw them, which is what the template's prefix-preserving variant renders.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from rollout.trajectories.hf_tokenizer import HFChatFormat, HFTokenizer
from rollout.trajectories.tokenizer import ChatPromptBuilder
from tests.rollout.trajectories.local_tokenizer import (
    QWEN_ADDED_TOKENS,
    save_local_tokenizer,
    trl_chat_template,
)

# template -> its prefix-preserving reference (itself when it already is one)
REFERENCE = {
    "qwen2_5": "qwen2_5",
    "qwen2_5_training": "qwen2_5_training",
    "qwen3": "qwen3_training",
    "qwen3_training": "qwen3_training",
    "qwen3_instruct_2507": "qwen3_instruct_2507",
    "qwen3_instruct_2507_training": "qwen3_instruct_2507_training",
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    },
    {"type": "function", "function": {"name": "submit", "description": "Finish."}},
]


def call(name: str, **arguments: Any) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


# (what arrives before the turn, the model's text for the turn)
SCRIPT: list[tuple[list[dict[str, str]], str]] = [
    (
        [{"role": "system", "content": "You fix bugs."},
         {"role": "user", "content": "fix the parser"}],
        "<think>\nlook first\n</think>\n\n" + call("bash", command="ls"),
    ),
    (
        [{"role": "tool", "content": "a.py b.py"}, {"role": "tool", "content": "exit code 0"}],
        "<think>\nrun the tests\n</think>\n\nI think the answer is 42.",
    ),
    (
        [{"role": "user", "content": "Call one of the tools."}],
        "<think>\nsubmit now\n</think>\n\n" + call("submit"),
    ),
]  # fmt: skip


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, HFTokenizer]:
    """One local tokenizer per TRL template (Qwen's special and added tokens)."""
    return {
        name: HFTokenizer(
            save_local_tokenizer(
                tmp_path_factory.mktemp(name), trl_chat_template(name), QWEN_ADDED_TOKENS
            )
        )
        for name in REFERENCE
    }


def render(
    tokenizer: HFTokenizer, template: str, messages: list[dict[str, str]], generation: bool
) -> list[int]:
    rendered: Any = tokenizer.backend.apply_chat_template(
        messages,
        tools=TOOLS,
        chat_template=trl_chat_template(template),
        tokenize=True,
        add_generation_prompt=generation,
    )
    return list(rendered["input_ids"] if hasattr(rendered, "keys") else rendered)


def play(tokenizer: HFTokenizer) -> tuple[ChatPromptBuilder, list[tuple[int, ...]], Any]:
    """The script through a builder: the prompts the model was sent, turn by turn."""
    chat_format = HFChatFormat.factory(tokenizer)()
    assert chat_format.use_tools(TOOLS)
    chat = ChatPromptBuilder(tokenizer, chat_format=chat_format)
    end = tokenizer.special_token_id("<|im_end|>")
    prompts = []
    for arrived, reply in SCRIPT:
        for message in arrived:
            chat.add_message(message["role"], message["content"])
        prompts.append(chat.open_turn())
        ids = [*tokenizer.encode(reply), end]
        chat.append_generated(ids, [-0.25] * len(ids), version=1)
        chat.end_turn()
    return chat, prompts, chat_format


@pytest.mark.parametrize("template", sorted(REFERENCE))
def test_every_prompt_is_the_prefix_preserving_render_of_the_conversation_so_far(
    template: str, tokenizers: dict[str, HFTokenizer]
) -> None:
    tokenizer = tokenizers[template]
    _, prompts, _ = play(tokenizer)
    history: list[dict[str, str]] = []
    for (arrived, reply), prompt in zip(SCRIPT, prompts, strict=True):
        history += arrived
        assert list(prompt) == render(tokenizer, REFERENCE[template], history, generation=True)
        history.append({"role": "assistant", "content": reply})


@pytest.mark.parametrize("template", sorted(REFERENCE))
def test_the_models_ids_stay_verbatim_and_alone_under_the_loss_mask(
    template: str, tokenizers: dict[str, HFTokenizer]
) -> None:
    tokenizer = tokenizers[template]
    chat, prompts, _ = play(tokenizer)
    ids, mask = chat.token_ids, chat.loss_mask
    end = tokenizer.special_token_id("<|im_end|>")
    replies = [[*tokenizer.encode(reply), end] for _, reply in SCRIPT]
    for prompt, reply in zip(prompts, replies, strict=True):
        assert list(ids[len(prompt) : len(prompt) + len(reply)]) == reply
        assert mask[len(prompt) : len(prompt) + len(reply)] == (1,) * len(reply)
    assert sum(mask) == sum(len(reply) for reply in replies)
    for earlier, later in itertools.pairwise(prompts):
        assert later[: len(earlier)] == earlier  # each prompt extends the one before


def test_qwen3_rewrites_history_and_only_it_needs_the_kept_turn_rule(
    tokenizers: dict[str, HFTokenizer],
) -> None:
    kept = {name: play(tokenizer)[2].kept_turns for name, tokenizer in tokenizers.items()}
    # The new user query: Qwen3 then drops the reasoning of every earlier turn (tool messages
    # after a turn that reasoned keep it).
    assert kept.pop("qwen3") == 1
    assert set(kept.values()) == {0}


def test_a_turn_without_reasoning_gets_no_think_block_under_qwen3(
    tokenizers: dict[str, HFTokenizer],
) -> None:
    """Qwen3 renders an empty think block on its last assistant turn and drops it once a
    message follows: the model wrote none, so none is added or removed."""
    tokenizer = tokenizers["qwen3"]
    chat = ChatPromptBuilder(
        tokenizer, messages=[("user", "fix it")], chat_format=HFChatFormat.factory(tokenizer)()
    )
    first = chat.open_turn()
    reply = [
        *tokenizer.encode(call("bash", command="ls")),
        tokenizer.special_token_id("<|im_end|>"),
    ]
    chat.append_generated(reply, [-0.5] * len(reply), version=0)
    chat.end_turn()
    chat.add_observation("a.py", role="tool")
    second = chat.open_turn()
    assert second[: len(first) + len(reply)] == (*first, *reply)
    after = tokenizer.decode(second[len(first) + len(reply) :])
    assert after == (
        "\n<|im_start|>user\n<tool_response>\na.py\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_the_template_writes_the_tools_block_from_tools(tokenizers: dict[str, HFTokenizer]) -> None:
    tokenizer = tokenizers["qwen3"]
    _, prompts, _ = play(tokenizer)
    text = tokenizer.decode(prompts[0])
    assert text.startswith("<|im_start|>system\nYou fix bugs.\n\n# Tools\n")
    schema = json.dumps(TOOLS[0], ensure_ascii=False)  # the template's tojson: keys as given
    assert f"<tools>\n{schema}\n" in text
