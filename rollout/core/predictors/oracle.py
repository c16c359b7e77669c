"""Predictors for ablations: the (optionally blurred) truth, and a constant.

`OraclePredictor` asks a callback for the true remaining work — the simulator knows it — and can
blur it with a multiplicative log-normal error fixed per sample, so simulations can sweep
predictor quality (perf-model.md §7 suggests σ 0.5–1.0). `ConstantPredictor` says the same for
every sample: priorities then fall back to admission order (the "no predictor" ablation).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from rollout.core.config import OraclePredictorConfig
from rollout.core.predictors.base import FinishedSample, RemainingWork, SampleContext

__all__ = ["ConstantPredictor", "OraclePredictor", "TruthFn"]

TruthFn = Callable[[SampleContext], RemainingWork]
"""Returns the true remaining work of the sample in the context."""


class OraclePredictor:
    """The truth from `truth`, times ``exp(σ·z)`` with z ~ N(0, 1) drawn once per sample."""

    def __init__(self, truth: TruthFn, config: OraclePredictorConfig) -> None:
        self._truth = truth
        self._config = config

    def predict(self, context: SampleContext) -> RemainingWork:
        truth = self._truth(context)
        sigma = self._config.log_noise_sigma
        if sigma == 0.0:
            return truth
        # Seeding by (seed, sample) keeps one error per sample across calls and runs.
        z = random.Random(f"{self._config.seed}/{context.sample_id}").gauss(0.0, 1.0)
        factor = math.exp(sigma * z)
        return RemainingWork(turns=truth.turns * factor, gen_tokens=truth.gen_tokens * factor)

    def observe(self, finished: FinishedSample) -> None:
        """The oracle needs no learning."""


class ConstantPredictor:
    """Predicts the same remaining work for every sample."""

    def __init__(self, work: RemainingWork) -> None:
        self._work = work

    def predict(self, context: SampleContext) -> RemainingWork:
        return self._work

    def observe(self, finished: FinishedSample) -> None:
        """A constant does not learn."""
