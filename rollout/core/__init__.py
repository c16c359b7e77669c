"""The pure decision core: what to admit, whom to run, who is critical (no I/O, clock, asyncio).

Events in, decisions out, so the same code runs under the asyncio shell (`rollout.runtime`) and
in virtual time (`rollout.simulation`), and a test needs neither an event loop nor an engine.

* `types`: the sample state machine, groups, turns and exact-token trajectories.
* `config`: the validated sections of `configs/rollout/default.yaml`.
* `admission`: the staleness bound (`async_factor`) and the checkpointable prompt cursor.
* `scheduler`, `scheduler_events`: generation slots, the five-level queue order, preemption.
* `priority`, `priority_keeper`: critical groups from closure cost and staleness.
* `live_gate`: whether one more sample fits the KV budget of the live contexts.
* `tool_latency`: expected tool time, for the `tool_wait` KV hint.
* `predictors/`: remaining-length predictors (sibling, MLP, oracle, constant).
"""
