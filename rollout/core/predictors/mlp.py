"""A tiny MLP, trained online on CPU, that predicts remaining turns and tokens from context.

Features are log-scaled counts of what the sample has done (turns, generated, context and
observation tokens, its rates), sibling statistics, and the fallback predictor's own answer, so
the network learns a correction to sibling statistics rather than starting from nothing. Targets
are log1p(remaining turns) and log1p(remaining tokens) under squared error; heavy-tailed
lengths make the log scale the stable choice. Until `min_examples` labelled contexts have been
seen, and between training rounds, predictions come from the fallback or the last trained net.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from rollout.core.config import MlpPredictorConfig
from rollout.core.predictors.base import (
    FinishedSample,
    LengthPredictor,
    RemainingWork,
    SampleContext,
    labelled_examples,
)

__all__ = ["MlpPredictor", "context_features"]

_FEATURES = 14


def context_features(context: SampleContext, fallback: RemainingWork) -> list[float]:
    """The MLP's input vector for `context` (log-scaled; the fallback's prediction included)."""
    sib_turns = context.sibling_turns
    sib_tokens = context.sibling_gen_tokens
    finished = len(sib_turns)
    ahead = sum(1 for total in sib_turns if total > context.turns_done)
    return [
        math.log1p(context.turns_done),
        math.log1p(context.gen_tokens),
        math.log1p(context.context_tokens),
        math.log1p(context.obs_tokens),
        math.log1p(context.mean_gen_tokens_per_turn or 0.0),
        math.log1p(context.mean_obs_tokens_per_turn or 0.0),
        finished / max(1, context.group_size),
        1.0 if finished else 0.0,
        math.log1p(sum(sib_turns) / finished) if finished else 0.0,
        math.log1p(max(sib_turns)) if finished else 0.0,
        math.log1p(sum(sib_tokens) / finished) if finished else 0.0,
        ahead / finished if finished else 0.0,
        math.log1p(fallback.turns),
        math.log1p(fallback.gen_tokens),
    ]


class MlpPredictor:
    """Online MLP over `context_features`; see the module docstring."""

    def __init__(self, config: MlpPredictorConfig, fallback: LengthPredictor) -> None:
        self._config = config
        self._fallback = fallback
        self._features: deque[list[float]] = deque(maxlen=config.buffer_size)
        self._targets: deque[tuple[float, float]] = deque(maxlen=config.buffer_size)
        self._since_training = 0
        self._trained = False
        self._generator = torch.Generator().manual_seed(config.seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)  # seeds weight init only; the global RNG is restored
            self._net = _build_net(config)
        self._optimizer = torch.optim.Adam(self._net.parameters(), lr=config.learning_rate)
        self._feature_mean = torch.zeros(_FEATURES)
        self._feature_std = torch.ones(_FEATURES)

    @property
    def trained(self) -> bool:
        """True once the MLP has had a training round and answers instead of the fallback."""
        return self._trained

    def predict(self, context: SampleContext) -> RemainingWork:
        fallback = self._fallback.predict(context)
        if not self._trained:
            return fallback
        features = torch.tensor([context_features(context, fallback)], dtype=torch.float32)
        with _torch_threads(self._config.torch_threads), torch.no_grad():
            output = self._net((features - self._feature_mean) / self._feature_std)[0]
        turns, tokens = (max(0.0, math.expm1(float(value))) for value in output)
        return RemainingWork(turns=turns, gen_tokens=tokens)

    def observe(self, finished: FinishedSample) -> None:
        for context, truth in labelled_examples(finished):
            fallback = self._fallback.predict(context)
            self._features.append(context_features(context, fallback))
            self._targets.append((math.log1p(truth.turns), math.log1p(truth.gen_tokens)))
            self._since_training += 1
        # The fallback learns after the examples were featurized with what it knew then.
        self._fallback.observe(finished)
        config = self._config
        if (
            len(self._features) >= config.min_examples
            and self._since_training >= config.train_every
        ):
            with _torch_threads(config.torch_threads):
                self._train_round()

    def _train_round(self) -> None:
        config = self._config
        features = torch.tensor(list(self._features), dtype=torch.float32)
        targets = torch.tensor(list(self._targets), dtype=torch.float32)
        self._feature_mean = features.mean(dim=0)
        spread = features.std(dim=0) if len(features) > 1 else torch.ones(_FEATURES)
        self._feature_std = spread.clamp_min(1e-3)  # a constant feature must not divide by 0
        inputs = (features - self._feature_mean) / self._feature_std
        loss_fn = nn.MSELoss()
        self._net.train()
        for _ in range(config.train_steps):
            batch = torch.randint(
                len(inputs), (min(config.batch_size, len(inputs)),), generator=self._generator
            )
            self._optimizer.zero_grad()
            loss = loss_fn(self._net(inputs[batch]), targets[batch])
            loss.backward()
            self._optimizer.step()
        self._net.eval()
        self._since_training = 0
        self._trained = True


@contextmanager
def _torch_threads(count: int) -> Iterator[None]:
    """Run with `count` intra-op threads, restoring the previous setting (0: leave it alone)."""
    if count == 0:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _build_net(config: MlpPredictorConfig) -> nn.Sequential:
    layers: list[nn.Module] = []
    width_in = _FEATURES
    for _ in range(config.hidden_layers):
        layers += [nn.Linear(width_in, config.hidden_units), nn.ReLU()]
        width_in = config.hidden_units
    layers.append(nn.Linear(width_in, 2))
    return nn.Sequential(*layers)
