"""The asyncio shell that carries out the core's decisions: one run's conductor and its parts.

* `conductor`: owns a run (admission, engines, env sessions, the sink) and streams batches.
* `agent_loop`: one sample's episode, action by action.
* `dispatch`: feeds the pure scheduler and carries out its decisions.
* `loop_host`: the seam between an agent loop and its conductor.
* `live_gate`: new samples wait, oldest first, until the live contexts fit the KV budget.
* `env_session`, `pool_sessions`: a sample's env in token ids; text envs leased from the pool.
* `config`: the policy flags, the agent loop's and the conductor's settings.
"""
