"""The jobs the `conductor` command runs, wired from the layers below.

* `config`: `SimulateConfig` and `RunConfig`, the two top-level config files.
* `policies`: the rollout policies and baselines as presets of the conductor's flags.
* `simulation`: one simulated run of one policy (`conductor simulate`).
* `swe_run`: scripted SWE agents on real sandboxes (`conductor run`).
"""
