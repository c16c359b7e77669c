"""verl: a conductor batch as the `DataProto` verl's trainer takes from its agent loop.

Call it from a replacement `AgentLoopManager.generate_sequences` (verl documents that class as
replaceable). Run: `.venv/bin/python examples/trainers/verl_dataproto.py` (needs verl).
"""

from simulated_batch import first_batch

from rollout.trajectories.adapters import to_verl_batch

batch = first_batch()
proto = to_verl_batch(batch.groups, pad_token_id=0).to_dataproto()
print(f"verl DataProto: {len(proto)} rows, input_ids {tuple(proto.batch['input_ids'].shape)}")
print("groups (uid):", len(set(proto.non_tensor_batch["uid"])))
