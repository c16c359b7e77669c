"""Stand-ins for the model and the trainer, so a whole run works with neither a GPU nor a trainer.

* `scripted_agent`: `ScriptedSWEAgent`, a token model that plays the model inside the simulated
  engine (real tool calls for the SWE tasks; scripts for other envs).
* `trainer`: `SimulatedTrainer`, consumes batches and publishes weights, learning nothing.
* `config`: their settings (`ScriptedPolicyConfig`, `TrainerSimConfig`).

`conductor run` uses both by default; `conductor simulate` uses the trainer. Replace the trainer
with your own loop over `Conductor.batches()` (examples/trainer_loop.py) and the scripted agent
with a served model (`engine_backend: sglang`).
"""
