"""slime: the conductor's samples as `Sample` records (`Sample.from_dict` reads each one).

Use them from the rollout function slime's `--rollout-function-path` names.
Run: `.venv/bin/python examples/trainers/slime_samples.py`.
"""

from simulated_batch import first_batch

from rollout.trajectories.adapters import to_slime_samples

# Pass decode=your_tokenizer.decode to fill `prompt` and `response` (the simulated workload's
# ids belong to no real tokenizer, so they stay empty here).
samples = to_slime_samples(first_batch().groups)
first = samples[0]
print(
    f"slime Samples: {len(samples)}; the first has {len(first['tokens'])} tokens, "
    f"{first['response_length']} in its response, status {first['status']}"
)
