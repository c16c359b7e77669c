"""The jobs the `conductor` command runs, wired from the layers below.

* `config`: `SimulateConfig` and `RunConfig`, the two top-level config files.
* `policies`: the rollout policies and baselines as presets of the conductor's flags.
* `simulation`: one simulated run of one policy (`conductor simulate`).
* `swe_run`: SWE rollouts on real sandboxes (`conductor run`).
* `serve_sim`, `serve_sglang`: SGLang's HTTP API, simulated or a real server's launch.
* `engine_bench`: the SGLang client's overhead against the in-process engine.
* `summary`: the headline numbers of a finished job's conductor.
"""
