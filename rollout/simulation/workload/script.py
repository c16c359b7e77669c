"""Hidden per-sample scripts: how many turns a trajectory takes, and each turn's lengths and tool.

A group's samples share the prompt, and their turn counts and verbosity are correlated through
group-level deviates (GRPO siblings behave alike; perf-model §5.5). Scripts are pure functions of
(config, seed, group index): the same inputs always give the same scripts. A workload with
`drift` lengthens a group's turns and outputs by its training step (`DriftConfig`); without it
nothing is scaled and every draw is what it always was.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from rollout.simulation.workload.config import WorkloadConfig
from rollout.simulation.workload.corpus import TokenCorpus
from rollout.simulation.workload.distributions import (
    correlated_normal,
    derive_seed,
    draw_length,
    draw_tool,
    length_at,
)

__all__ = ["SUBMIT_TOOL", "SampleScript", "TurnScript", "draw_group", "session_id_of"]

SUBMIT_TOOL = "submit"  # the last turn: the trajectory ends and the final tests run


@dataclass(frozen=True, slots=True)
class TurnScript:
    """One model turn and the tool call that answers it."""

    output_tokens: int
    observation_tokens: int  # 0 on the submit turn
    tool: str
    tool_latency_s: float  # the final evaluation's duration on the submit turn


@dataclass(frozen=True, slots=True)
class SampleScript:
    """Everything the simulation decides in advance about one sample (hidden from the rollout)."""

    session_id: str
    group_index: int
    sample_index: int
    seed: int
    prompt_ids: tuple[int, ...]
    turns: tuple[TurnScript, ...]
    reset_s: float
    reward: float
    truncated: bool  # the context limit cut the trajectory short (reward 0)

    @property
    def total_output_tokens(self) -> int:
        return sum(turn.output_tokens for turn in self.turns)


def session_id_of(workload: str, group_index: int, sample_index: int) -> str:
    """The session id of a sample: stable, readable and unique within a workload."""
    return f"{workload}/g{group_index}/s{sample_index}"


def draw_group(
    config: WorkloadConfig, seed: int, group_index: int, corpus: TokenCorpus
) -> tuple[SampleScript, ...]:
    """The scripts of one group's `group_size` samples."""
    rng = random.Random(derive_seed(seed, "group", group_index))
    prompt_len = round(draw_length(config.prompt_tokens, rng))
    prompt_ids = corpus.ids(rng.randrange(corpus.size), prompt_len)
    turns_z = rng.gauss(0.0, 1.0)
    verbosity_z = rng.gauss(0.0, 1.0)
    mean, kappa = config.success_rate, config.success_concentration
    success_p = mean if mean in (0.0, 1.0) else rng.betavariate(mean * kappa, (1.0 - mean) * kappa)
    drift = (1.0, 1.0)
    if config.drift is not None:
        drift = config.drift.factors(group_index // config.groups_per_step)
    return tuple(
        _draw_sample(
            config, seed, group_index, k, prompt_ids, turns_z, verbosity_z, success_p, drift
        )
        for k in range(config.group_size)
    )


def _draw_sample(
    config: WorkloadConfig,
    seed: int,
    group_index: int,
    sample_index: int,
    prompt_ids: tuple[int, ...],
    group_turns_z: float,
    group_verbosity_z: float,
    success_p: float,
    drift: tuple[float, float],
) -> SampleScript:
    sample_seed = derive_seed(seed, "sample", group_index, sample_index)
    rng = random.Random(sample_seed)
    rho = config.sibling_correlation
    turns_factor, output_factor = drift
    turns_drawn = length_at(config.turns, correlated_normal(group_turns_z, rng, rho))
    planned = max(1, round(_scaled(turns_drawn, turns_factor, config.turns.max)))
    verbosity = correlated_normal(group_verbosity_z, rng, rho)
    share = config.sample_variance_share
    turns: list[TurnScript] = []
    context = len(prompt_ids)
    truncated = False
    for index in range(planned):
        drawn = draw_length(config.output_tokens, rng, verbosity, share)
        output = max(1, round(_scaled(drawn, output_factor, config.output_tokens.max)))
        last = index == planned - 1
        observation = 0 if last else max(1, round(draw_length(config.observation_tokens, rng)))
        if not last and context + output + observation > config.max_context_tokens:
            last, observation, truncated = True, 0, True
        if last:
            turns.append(TurnScript(output, 0, SUBMIT_TOOL, draw_length(config.final_eval_s, rng)))
            break
        tool = draw_tool(config.tools, rng)
        turns.append(TurnScript(output, observation, tool.name, draw_length(tool.latency_s, rng)))
        context += output + observation
    reward = 0.0 if truncated else float(rng.random() < success_p)
    return SampleScript(
        session_id=session_id_of(config.name, group_index, sample_index),
        group_index=group_index,
        sample_index=sample_index,
        seed=sample_seed,
        prompt_ids=prompt_ids,
        turns=tuple(turns),
        reset_s=draw_length(config.reset_s, rng),
        reward=reward,
        truncated=truncated,
    )


def _scaled(value: float, factor: float, cap: float) -> float:
    """`value` times a drift `factor`, still within its clip `cap`; factor 1 returns `value`
    itself (no drift changes no draw)."""
    return value if factor == 1.0 else min(cap, value * factor)
