"""Build the configured length predictor."""

from __future__ import annotations

from rollout.core.config import PredictorConfig
from rollout.core.predictors.base import LengthPredictor, RemainingWork
from rollout.core.predictors.oracle import ConstantPredictor, OraclePredictor, TruthFn
from rollout.core.predictors.sibling import SiblingPredictor

__all__ = ["build_predictor"]


def build_predictor(config: PredictorConfig, truth: TruthFn | None = None) -> LengthPredictor:
    """The predictor `config.kind` names; `truth` is needed by (and only used by) the oracle."""
    if config.kind == "sibling":
        return SiblingPredictor(config.sibling)
    if config.kind == "mlp":
        from rollout.core.predictors.mlp import (
            MlpPredictor,  # deferred: importing torch takes seconds
        )

        return MlpPredictor(config.mlp, fallback=SiblingPredictor(config.sibling))
    if config.kind == "constant":
        turns = config.sibling.prior_turns
        return ConstantPredictor(
            RemainingWork(turns=turns, gen_tokens=turns * config.sibling.prior_tokens_per_turn)
        )
    if truth is None:
        raise ValueError(
            "predictor.kind=oracle needs the true remaining work: pass truth=... (the simulator "
            "provides it); choose sibling or mlp for real runs"
        )
    return OraclePredictor(truth, config.oracle)
