"""A floor under T_next: the engine time the consumed samples need, whatever the policy.

Every token of a consumed sample must be decoded or prefilled once (`EngineWork`, read off the
trajectories; a turn's first generated token is sampled by the prefill of its input, so it
costs no decode step; a prompt prefix that several samples share is prefilled once,
`rollout.observe.prompt_sharing`). Summed over a run, the cost
model (`rollout.engines.sim.cost_model.step_time_s`) gives a time no schedule can beat:

* each forward costs at least `t_fix + max(t_weights, tokens·b_c)`, and the decode steps are at
  least ``max(decode tokens / slots, Σ L' / KV pool, one sample's decode tokens)`` (a step holds
  at most `slots` requests and the pool's tokens of context, and decodes one token of a sample),
  where `L'` is a decoded token's context less the prompt part other samples share (the prefix
  cache holds that part once for all of them, so only `L'` is the sample's own in the pool),
  so the fixed part is at least that many steps times
  `t_fix + t_weights`, or all tokens times `b_c` if that is larger;
* on top, every token pays `b_tok`, every decoded token `c_dec·L` for the context it reads, and
  every prefilled chunk `c_pf·n(p + n/2)`, counted once (no recomputation, every prefix cached).

That is the floor of an engine that mixes prefill chunks into decode forwards
(`--enable-mixed-chunk`): prefill then rides on the decode steps, and only `tokens·b_c` can
outgrow them. An engine without it (`max_prefill_tokens` given: SGLang's default, and the
simulated engine's, `mixed_chunk: false`) runs prefill as forwards of their own, each of at most
`max_prefill_tokens`, while every decode waits: the fixed part is then the decode steps'
`D·t_fix + max(D·t_weights, decode tokens·b_c)` plus the prefill steps'
`S·t_fix + max(S·t_weights, prefill tokens·b_c)`, `S` at least prefill tokens ÷
`max_prefill_tokens`. Still a floor of that engine (each term bounds a sum of its steps), and
a tighter one: on the KV-tight 32B-like cells prefill is about a quarter of the engine's time,
which the mixed floor counts as free.

With `engines` identical engines working in parallel, a step round still decodes one token of
a sample and at most `engines × slots` requests and `engines × pool` tokens of context, while
the per-token costs split over the engines: the floor is the same sum with the step bound taken
over the whole cluster and the per-token parts (and `tokens·b_c`) divided by `engines`.

Tool time, queueing and stragglers are left out (they can overlap with other samples' decoding),
so the floor is loose by design: it says how much of a policy's T_next is engine work at all. A
run's mean T_next (batch completion times over steps) is at least this floor divided by its
steps. Pure arithmetic; SIMULATED like everything it bounds.
"""

from __future__ import annotations

from rollout.engines.sim.cost_model import CostModelConfig
from rollout.observe.engine_work import EngineWork
from rollout.simulation.workload import SampleScript

__all__ = ["engine_floor_s", "script_tokens", "work_terms_s"]


def script_tokens(script: SampleScript) -> int:
    """A sample's planned final context (prompt, outputs and observations of its script)."""
    return len(script.prompt_ids) + sum(
        t.output_tokens + t.observation_tokens for t in script.turns
    )


def engine_floor_s(
    work: EngineWork,
    cost: CostModelConfig,
    *,
    kv_pool_tokens: int,
    slots: int,
    engines: int = 1,
    max_prefill_tokens: int | None = None,
) -> float:
    """Seconds of engine time `work` needs at least on `engines` engines of `slots` slots and
    `kv_pool_tokens` each; `max_prefill_tokens`: prefill runs in forwards of its own of at most
    that many tokens (no mixed chunks), None: it may ride on decode forwards (see the module
    docstring)."""
    if engines < 1:
        raise ValueError(f"the floor needs at least one engine, got {engines}")
    tokens = work.decode_tokens + work.prefill_tokens
    if tokens == 0:
        return 0.0
    decode_steps = max(
        work.decode_tokens / max(1, slots * engines),
        (work.decode_context_tokens - work.decode_shared_context_tokens)
        / max(1, kv_pool_tokens * engines),
        work.longest_decode_tokens,
    )
    if max_prefill_tokens is None:
        fixed = max(decode_steps * (cost.t_fix_s + cost.t_weights_s), tokens * cost.b_c_s / engines)
    else:
        prefill_steps = work.prefill_tokens / (max_prefill_tokens * engines)
        fixed = _forwards_s(cost, decode_steps, work.decode_tokens / engines) + _forwards_s(
            cost, prefill_steps, work.prefill_tokens / engines
        )
    # Term by term (x / 1 == x exactly), so one engine gives the single-engine sum bit for bit.
    per_token, kv_reads, prefill_attention = work_terms_s(work, cost, engines)
    return fixed + per_token + kv_reads + prefill_attention


def work_terms_s(
    work: EngineWork, cost: CostModelConfig, engines: int = 1
) -> tuple[float, float, float]:
    """The parts of `work`'s engine time that grow with its tokens, split over `engines`:
    every token's `b_tok`, each decoded token's KV read `c_dec·L`, and each prefilled
    chunk's attention `c_pf·n(p + n/2)` (the same for any schedule that computes `work`)."""
    tokens = work.decode_tokens + work.prefill_tokens
    return (
        cost.b_tok_s * tokens / engines,
        cost.c_dec_s * work.decode_context_tokens / engines,
        cost.c_pf_s * work.prefill_attention / engines,
    )


def _forwards_s(cost: CostModelConfig, steps: float, tokens: float) -> float:
    """The fixed part of `steps` forwards computing `tokens` in all: each pays `t_fix` and at
    least `t_weights` or its tokens' `b_c` (Σ max ≥ max Σ)."""
    return steps * cost.t_fix_s + max(steps * cost.t_weights_s, tokens * cost.b_c_s)
