"""Exact token-level trajectories, from the first prompt token to the trainer's tensors.

* `tokenizer`: tokenizers and the append-only chat prompt builder.
* `builder`: one sample's append-only token record while its episode runs.
* `sink`, `writers`: whole groups, persisted crash-safe (JSONL, Parquet) and queued.
* `batch`, `trainer_api`: what `Conductor.batches()` yields, GRPO advantages, padded tensors.
"""
