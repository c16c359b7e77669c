"""A small byte-level BPE tokenizer with a ChatML chat template, built locally and saved the way
`transformers` saves a model's tokenizer (no hub downloads exist here)."""

from __future__ import annotations

from pathlib import Path

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Like templates that drop the reasoning of earlier assistant turns (Qwen3's does): not
# append-only once a message follows a turn that reasoned.
STRIPS_EARLIER_REASONING = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['role'] == 'assistant' and not loop.last %}{{ m['content'].split('</think>')[-1] }}"
    "{% else %}{{ m['content'] }}{% endif %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Qwen's tokenizers add these as single (non-special) tokens: text the model writes with them
# encodes to them too.
QWEN_ADDED_TOKENS = (
    "<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>",
)  # fmt: skip
CORPUS = [
    "def main(): print('hello world')",
    "fix the bug in the parser and run the tests",
    "ls -la /testbed && git diff",
    '<tool_call>{"name": "bash", "arguments": {"command": "pytest -q"}}</tool_call>',
    "I think the answer is 42.",
]


def trl_chat_template(name: str) -> str:
    """A chat template the TRL wheel ships (`trl/chat_templates/<name>.jinja`), e.g. `qwen3`
    or its prefix-preserving `qwen3_training`."""
    from importlib.resources import files

    return (files("trl") / "chat_templates" / f"{name}.jinja").read_text(encoding="utf-8")


def save_local_tokenizer(
    directory: Path, chat_template: str | None = CHATML, added_tokens: tuple[str, ...] = ()
) -> Path:
    """Train a tiny BPE on `CORPUS`, save it with `chat_template` (and `added_tokens`, as
    Qwen's `<think>`...) under `directory`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(CORPUS * 20, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|endoftext|>",
        pad_token="<|pad|>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>"],
    )
    if added_tokens:
        fast.add_tokens(list(added_tokens))
    if chat_template is not None:
        fast.chat_template = chat_template
    directory.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(directory))
    return directory
