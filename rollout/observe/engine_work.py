"""`EngineWork`: the tokens a set of trajectories asked the engine to compute, counted once.

Read off a trajectory's turn spans (its prompt, then per turn the generated tokens and the
observation, prefilled on top), so it is exact for what really ran and
knows nothing of caching or recomputation (what samples sharing a prompt spare is
`rollout.observe.prompt_sharing`'s). A turn's first generated token is sampled by the forward
that prefills the turn's input (the prompt, or the observation before it), as engines do
(SGLang, and the simulated engine's `finish_chunk`); only the turn's later tokens are decode
steps, each reading the context before it. `rollout.simulation.lower_bound` turns it into a floor of
engine time.
"""

from __future__ import annotations

from dataclasses import dataclass

from rollout.core.types import Trajectory

__all__ = ["EngineWork", "trajectory_work"]


@dataclass(frozen=True, slots=True)
class EngineWork:
    """What a set of samples asks of the engine, summed."""

    decode_tokens: int = 0  # tokens of decode steps: every generated token but each turn's first
    decode_context_tokens: int = 0  # Σ L over decoded tokens (the context each one reads)
    prefill_tokens: int = 0
    prefill_attention: float = 0.0  # Σ n(p + n/2) over prefilled spans
    longest_decode_tokens: int = 0  # of one sample (it decodes one token per step)
    # Σ over decoded tokens of the prompt part other samples share (a prefix cache holds it
    # once; `rollout.observe.prompt_sharing`); 0 from `trajectory_work`, which sees one sample
    decode_shared_context_tokens: int = 0

    def __add__(self, other: EngineWork) -> EngineWork:
        return EngineWork(
            self.decode_tokens + other.decode_tokens,
            self.decode_context_tokens + other.decode_context_tokens,
            self.prefill_tokens + other.prefill_tokens,
            self.prefill_attention + other.prefill_attention,
            max(self.longest_decode_tokens, other.longest_decode_tokens),
            self.decode_shared_context_tokens + other.decode_shared_context_tokens,
        )


def _prefill_units(new_tokens: int, prefix_tokens: int) -> float:
    """`n(p + n/2)`, as `rollout.engines.sim.cost_model.prefill_attention_units` counts it (not
    imported: that would load the whole simulated engine into every run's summary)."""
    return new_tokens * (prefix_tokens + new_tokens / 2)


def trajectory_work(trajectory: Trajectory) -> EngineWork:
    """The engine work of one trajectory (see the module docstring)."""
    prompt = trajectory.prompt_tokens
    decode_tokens = decode_context = 0
    prefill_tokens, attention = prompt, _prefill_units(prompt, 0)
    for turn in trajectory.turns:
        # the first token comes with the input's prefill; decode steps make the other n - 1,
        # reading contexts gen_start + 1 .. gen_end - 1
        n = max(0, turn.gen_end - turn.gen_start - 1)
        decode_tokens += n
        decode_context += n * turn.gen_start + n * (n + 1) // 2
        m = turn.obs_end - turn.obs_start
        if m > 0:
            prefill_tokens += m
            attention += _prefill_units(m, turn.obs_start)
    return EngineWork(decode_tokens, decode_context, prefill_tokens, attention, decode_tokens)
