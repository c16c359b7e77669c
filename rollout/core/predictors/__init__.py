"""Remaining-length predictors behind one `LengthPredictor` protocol, and how to evaluate them.

`MlpPredictor` and `context_features` are loaded on first use, so the pure scheduling cores
that import this package for its types do not pay for importing torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rollout.core.predictors.base import (
    FinishedSample,
    LengthPredictor,
    RemainingWork,
    SampleContext,
    labelled_examples,
)
from rollout.core.predictors.evaluation import (
    PredictorReport,
    evaluate_predictor,
    kendall_tau,
    mean_absolute_error,
    spearman_rho,
)
from rollout.core.predictors.factory import build_predictor
from rollout.core.predictors.oracle import ConstantPredictor, OraclePredictor, TruthFn
from rollout.core.predictors.sibling import SiblingPredictor

if TYPE_CHECKING:
    from rollout.core.predictors.mlp import MlpPredictor, context_features

__all__ = [
    "ConstantPredictor",
    "FinishedSample",
    "LengthPredictor",
    "MlpPredictor",
    "OraclePredictor",
    "PredictorReport",
    "RemainingWork",
    "SampleContext",
    "SiblingPredictor",
    "TruthFn",
    "build_predictor",
    "context_features",
    "evaluate_predictor",
    "kendall_tau",
    "labelled_examples",
    "mean_absolute_error",
    "spearman_rho",
]

_TORCH_NAMES = frozenset({"MlpPredictor", "context_features"})


def __getattr__(name: str) -> object:
    if name in _TORCH_NAMES:
        from rollout.core.predictors import mlp  # deferred: importing torch takes seconds

        return getattr(mlp, name)
    raise AttributeError(f"module 'rollout.core.predictors' has no attribute {name!r}")
