"""Simulation only: the parts that stand in for the world in virtual-time studies.

* `vtime`: an asyncio loop whose clock jumps to the next timer.
* `workload/`: seeded synthetic workloads (hidden per-sample scripts, simulated envs).
* `sessions`: token-level env sessions over the workload.
* `env_fleet`, `placement`: simulated env nodes (start and act slots) and where an env goes.
* `engine_figures`: each simulated engine's busy fraction and KV occupancy in a cluster run.
* `scripted_agent`: a scripted SWE agent that plays the model inside the simulated engine.
* `trainer`: a trainer that consumes batches and publishes weights, learning nothing.
* `setup`: the simulated side of a run for one policy (engines, KV backends, envs).
* `config`: the simulated trainer's, the scripted agent's and the cluster's settings.
* `engine_bench`, `kv_bench`: `python -m` benchmarks of the simulated engine and its KV backends.

The simulated *engine* itself is `rollout.engines.sim`.
"""
