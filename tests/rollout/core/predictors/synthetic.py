"""A synthetic agent workload whose remaining length is correlated with context features.

Each group has a latent difficulty that scales the number of turns of all its samples (so
siblings are informative); a sample's observation size also lengthens it (so its own context
is informative); generation rate varies per sample. Every turn takes a random time (decode plus
a log-normal tool call), and the siblings visible in a context are those that finished before
that turn boundary in this virtual time — the short ones first, as in a real rollout.
"""

from __future__ import annotations

import math
import random

from rollout.core.predictors.base import (
    FinishedSample,
    RemainingWork,
    SampleContext,
    labelled_examples,
)

PROMPT_TOKENS = 4000


def synthetic_groups(seed: int, groups: int, group_size: int = 8) -> list[list[FinishedSample]]:
    rng = random.Random(seed)
    result: list[list[FinishedSample]] = []
    for g in range(groups):
        group_id = f"g{g}"
        difficulty = math.exp(rng.gauss(math.log(12.0), 0.6))
        plans = []
        for i in range(group_size):
            obs_per_turn = 300.0 * math.exp(rng.gauss(0.0, 0.5))
            turns = max(
                1,
                round(difficulty * math.exp(rng.gauss(0.0, 0.25)) * (obs_per_turn / 300.0) ** 0.5),
            )
            gen_rate = 150.0 * math.exp(rng.gauss(0.0, 0.4))
            gen = [max(1, round(gen_rate * math.exp(rng.gauss(0.0, 0.3)))) for _ in range(turns)]
            obs = [
                max(1, round(obs_per_turn * math.exp(rng.gauss(0.0, 0.3)))) for _ in range(turns)
            ]
            plans.append((f"{group_id}-s{i}", turns, gen, obs))
        ends: dict[str, float] = {}
        boundaries: dict[str, list[float]] = {}
        for sample_id, _, gen, _ in plans:
            clock = 0.0
            times = []
            for tokens in gen:
                times.append(clock)
                clock += tokens * 0.03 + 3.0 * math.exp(rng.gauss(0.0, 0.7))
            boundaries[sample_id] = times
            ends[sample_id] = clock
        samples = []
        for sample_id, turns, gen, obs in plans:
            contexts = []
            for done in range(turns):
                now = boundaries[sample_id][done]
                siblings = [p for p in plans if p[0] != sample_id and ends[p[0]] <= now]
                contexts.append(
                    SampleContext(
                        sample_id=sample_id,
                        group_id=group_id,
                        turns_done=done,
                        gen_tokens=sum(gen[:done]),
                        context_tokens=PROMPT_TOKENS + sum(gen[:done]) + sum(obs[:done]),
                        obs_tokens=sum(obs[:done]),
                        group_size=group_size,
                        sibling_turns=tuple(p[1] for p in siblings),
                        sibling_gen_tokens=tuple(sum(p[2]) for p in siblings),
                    )
                )
            samples.append(
                FinishedSample(sample_id, group_id, turns, sum(gen), contexts=tuple(contexts))
            )
        result.append(samples)
    return result


def held_out_examples(
    groups: list[list[FinishedSample]], limit: int, seed: int = 0
) -> list[tuple[SampleContext, RemainingWork]]:
    examples = [pair for group in groups for sample in group for pair in labelled_examples(sample)]
    random.Random(seed).shuffle(examples)
    return examples[:limit]


def finishing_order(groups: list[list[FinishedSample]]) -> list[FinishedSample]:
    """All samples, group by group, shortest first (roughly the order they finish in)."""
    return [s for group in groups for s in sorted(group, key=lambda s: s.total_turns)]
