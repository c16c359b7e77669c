"""Offline training: the conductor's samples as a Hugging Face dataset on disk.

Run: `.venv/bin/python examples/trainers/hf_dataset.py` (needs datasets).
"""

import tempfile

import datasets
from simulated_batch import first_batch

from rollout.trajectories.adapters import to_hf_dataset

dataset = to_hf_dataset(first_batch().groups)
with tempfile.TemporaryDirectory() as out:
    dataset.save_to_disk(out)  # or .push_to_hub(...), .to_parquet(...)
    loaded = datasets.load_from_disk(out)
print(f"Hugging Face dataset: {loaded.num_rows} rows, features {sorted(loaded.features)}")
