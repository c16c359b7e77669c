"""The jobs the `conductor` command runs: their plans and the one assembly they share.

* `config`: `SimulateConfig` and `RunConfig`, the top-level config files.
* `plan`, `simulation_plan`, `run_plan`: every setting resolved once, with its origin, in one
  documented order (`effective_config.yaml`); what the plan owns has one home.
* `policies`, `env_sources`: the registries of rollout policies and of env source kinds
  (engine backends: `rollout.engines.registry`).
* `assembly`: the one recipe every rollout is built with (recorder, sink, conductor, health,
  trainer).
* `simulation`: one simulated run of one policy (`conductor simulate`, `bench rollout`).
* `run_job`: SWE (and other) rollouts on real sandboxes (`conductor run`).
* `bench_rollout`, `scheduler_bench`, `engine_bench`: the benchmarks.
* `serve_sim`, `serve_sglang`: SGLang's HTTP API, simulated or a real server's launch.
* `checkpoint`, `run_health`, `summary`: resume, live health metrics, the headline numbers.
"""
