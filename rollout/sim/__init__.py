"""Simulation only: the parts that stand in for the world in virtual-time studies.

* `vtime`: an asyncio loop whose clock jumps to the next timer.
* `workload/`: seeded synthetic workloads (hidden per-sample scripts, simulated envs).
* `sessions`: token-level env sessions over the workload.
* `scripted_agent`: a scripted SWE agent that plays the model inside the simulated engine.
* `trainer`: a trainer that consumes batches and publishes weights, learning nothing.
* `setup`: the simulated side of a run for one policy (engine, KV backend, envs).
* `config`: the simulated trainer's and the scripted agent's settings.
* `engine_bench`, `kv_bench`: `python -m` benchmarks of the simulated engine and its KV backends.

The simulated *engine* itself is `rollout.engines.sim`.
"""
