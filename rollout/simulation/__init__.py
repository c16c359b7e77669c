"""Virtual-time studies: the parts that stand in for the world when nothing real runs.

* `vtime`: an asyncio loop whose clock jumps to the next timer.
* `workload/`: seeded synthetic workloads (hidden per-sample scripts, simulated envs).
* `sessions`: token-level env sessions over the workload.
* `env_fleet`, `placement`: simulated env nodes (start and act slots) and where an env goes.
* `engine_figures`: each simulated engine's busy fraction and KV occupancy in a cluster run.
* `setup`: the simulated side of a run for one policy (engines, KV backends, envs).
* `lower_bound`, `serving_model`: the engine-time floor under T_next and its serving model.
* `calibration/`: GPU micro-benchmarks that fit the sim engine's cost model.
* `config`: the simulated cluster's settings.
* `simulator_speed`, `kv_bench`: `python -m` benchmarks of the simulator's own speed and of the
  simulated engine's KV backends.

The simulated *engine* itself is `rollout.engines.sim`; the scripted agent and the simulated
trainer, which `conductor run` uses too, are `rollout.standins`.
"""
