"""Remaining-length prediction from sibling statistics, with a global prior as fallback.

The samples of one group share a prompt, so the finished ones are the best predictor of the
rest (Seer, arXiv 2511.14617, uses finished siblings the same way; perf-model.md §7). Model:
a sample's total turns T is log-normal around its group's level, ``log T = μ_g + ε`` with
``ε ~ N(0, σ_w²)`` and ``μ_g ~ N(μ_0, σ_b²)`` across groups. μ_0, σ_w and σ_b are estimated
from recently finished samples of all groups (the prior; configured values until there are
enough).

* The siblings that finish first are the *short* ones, so the m finished of K are read as the
  m smallest order statistics of the group: ``log T_(k) ≈ μ_g + σ_w·z_k`` with Blom's
  ``z_k = Φ⁻¹((k − 0.375) / (K + 0.25))``. That gives a censoring-aware estimate of μ_g, which
  is pooled with μ_0 by precision (m/σ_w² against 1/σ_b²).
* The sample has already done `turns_done` = j turns, so the answer is the median of
  ``T − j`` given ``T > j`` — the median, not the mean, because it minimises absolute error
  and the log-normal mean is dominated by its tail — at least `min_remaining_turns`.

Remaining tokens are remaining turns × the sample's own tokens per turn (else its finished
siblings', else the prior's).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from rollout.core.config import SiblingPredictorConfig
from rollout.core.predictors.base import FinishedSample, RemainingWork, SampleContext

__all__ = ["SiblingPredictor"]

_STANDARD_NORMAL = NormalDist()
_SQRT2 = math.sqrt(2.0)


def _phi(x: float) -> float:
    """The standard normal CDF, as `NormalDist().cdf` computes it (the same float) without
    its method call: it runs 50 times per prediction, at every turn boundary."""
    return 0.5 * (1.0 + math.erf(x / _SQRT2))


@dataclass(frozen=True, slots=True)
class _Prior:
    mu: float  # mean log total turns over groups
    sigma_within: float
    sigma_between: float


class SiblingPredictor:
    """Censoring-aware sibling statistics over a sliding global prior; see the module docstring."""

    def __init__(self, config: SiblingPredictorConfig) -> None:
        self._config = config
        self._window = _WindowMoments(config.prior_window)
        self._prior: _Prior | None = None

    def observe(self, finished: FinishedSample) -> None:
        self._window.add(finished.group_id, max(1, finished.total_turns), finished.total_gen_tokens)
        self._prior = None

    def predict(self, context: SampleContext) -> RemainingWork:
        config = self._config
        prior = self._fit_prior()
        level_mu, level_sd = prior.mu, prior.sigma_between
        siblings = sorted(max(1, total) for total in context.sibling_turns)
        if len(siblings) >= config.min_siblings:
            group_size = max(context.group_size, len(siblings) + 1)
            level_mu, level_sd = _pool_with_siblings(prior, siblings, group_size)
        turns = _expected_remaining(level_mu, level_sd, prior.sigma_within, context.turns_done)
        turns = max(turns, config.min_remaining_turns)
        return RemainingWork(turns=turns, gen_tokens=turns * self._tokens_per_turn(context))

    def _fit_prior(self) -> _Prior:
        if self._prior is None:
            self._prior = _fit_prior(self._window, self._config)
        return self._prior

    def _tokens_per_turn(self, context: SampleContext) -> float:
        own = context.mean_gen_tokens_per_turn
        if own is not None:
            return own
        siblings = _ratio(context.sibling_gen_tokens, context.sibling_turns)
        if siblings is not None:
            return siblings
        window = self._window
        if window.turns > 0:
            return window.gen_tokens / window.turns
        return self._config.prior_tokens_per_turn


class _WindowMoments:
    """Running sums over the last `size` finished samples (a sliding window), kept per group
    too, so refitting the prior after each finished sample is O(1), not O(window)."""

    def __init__(self, size: int) -> None:
        self._samples: deque[tuple[str, float, int, int]] = deque()
        self._size = size
        self._groups: dict[str, list[float]] = {}  # group -> [count, Σ log T, Σ (log T)²]
        self.count = 0
        self.log_sum = 0.0
        self.log_square_sum = 0.0
        self.within_ss = 0.0  # Σ over groups of Σ (log T − group mean)²
        self.within_dof = 0  # Σ over groups of (count − 1)
        self.turns = 0
        self.gen_tokens = 0

    def add(self, group_id: str, turns: int, gen_tokens: int) -> None:
        if len(self._samples) == self._size:
            self._update(*self._samples.popleft(), sign=-1)
        log_turns = math.log(turns)
        self._samples.append((group_id, log_turns, turns, gen_tokens))
        self._update(group_id, log_turns, turns, gen_tokens, sign=1)

    def _update(
        self, group_id: str, log_turns: float, turns: int, tokens: int, *, sign: int
    ) -> None:
        self.count += sign
        self.log_sum += sign * log_turns
        self.log_square_sum += sign * log_turns * log_turns
        self.turns += sign * turns
        self.gen_tokens += sign * tokens
        moments = self._groups.setdefault(group_id, [0.0, 0.0, 0.0])
        self.within_ss -= _group_ss(moments)
        self.within_dof -= max(0, int(moments[0]) - 1)
        moments[0] += sign
        moments[1] += sign * log_turns
        moments[2] += sign * log_turns * log_turns
        if moments[0] == 0:
            del self._groups[group_id]
            return
        self.within_ss += _group_ss(moments)
        self.within_dof += max(0, int(moments[0]) - 1)


def _group_ss(moments: list[float]) -> float:
    """Σ (x − mean)² of one group from its count, Σx and Σx² (0 for fewer than two)."""
    count, total, squares = moments
    return max(0.0, squares - total * total / count) if count > 1 else 0.0


def _fit_prior(window: _WindowMoments, config: SiblingPredictorConfig) -> _Prior:
    """Method-of-moments fit of (μ_0, σ_w, σ_b); configured values where data are too few."""
    default = _Prior(
        mu=math.log(config.prior_turns),
        sigma_within=config.prior_log_sigma_within,
        sigma_between=config.prior_log_sigma_between,
    )
    if window.count < config.min_prior_samples:
        return default
    mu = window.log_sum / window.count
    total_var = max(0.0, window.log_square_sum / window.count - mu * mu)
    if window.within_dof == 0:
        return _Prior(mu, default.sigma_within, default.sigma_between)
    within_var = window.within_ss / window.within_dof
    floor = config.min_log_sigma**2
    return _Prior(
        mu=mu,
        sigma_within=math.sqrt(max(floor, within_var)),
        sigma_between=math.sqrt(max(floor, total_var - within_var)),
    )


def _pool_with_siblings(
    prior: _Prior, siblings: Sequence[int], group_size: int
) -> tuple[float, float]:
    """Posterior mean and sd of the group level μ_g given its m shortest members."""
    m = len(siblings)
    z = [_STANDARD_NORMAL.inv_cdf((k - 0.375) / (group_size + 0.25)) for k in range(1, m + 1)]
    mu_siblings = (
        sum(math.log(t) - prior.sigma_within * zk for t, zk in zip(siblings, z, strict=True)) / m
    )
    precision_prior = 1.0 / prior.sigma_between**2
    precision_siblings = m / prior.sigma_within**2
    precision = precision_prior + precision_siblings
    mu = (precision_prior * prior.mu + precision_siblings * mu_siblings) / precision
    return mu, 1.0 / math.sqrt(precision)


def _expected_remaining(level_mu: float, level_sd: float, sigma_within: float, done: int) -> float:
    """E[T − done | T > done] with log T ~ N(μ_g, σ_w²), μ_g ~ N(level_mu, level_sd²).

    Surviving `done` turns is evidence about the group level too (a long-lived sample is likely
    in a long group), so the level is integrated on a grid weighted by that survival.
    """
    if done <= 0:
        return math.exp(level_mu + (level_sd**2 + sigma_within**2) / 2.0)
    log_done = math.log(done)
    total_weight = 0.0
    total_mean = 0.0
    for z, prior_weight in _LEVEL_GRID:
        mu = level_mu + level_sd * z
        a = (log_done - mu) / sigma_within
        survival = 1.0 - _phi(a)
        if survival <= 0.0:
            continue
        # E[T | T > done] of a log-normal: exp(μ + σ²/2) Φ(σ − a) / (1 − Φ(a)).
        tail_mean = math.exp(mu + sigma_within**2 / 2.0) * _phi(sigma_within - a)
        total_weight += prior_weight * survival
        total_mean += prior_weight * tail_mean
    if total_weight <= 0.0:
        return 0.0
    return max(0.0, total_mean / total_weight - done)


def _level_grid(points: int, span: float) -> tuple[tuple[float, float], ...]:
    """Standard-normal grid points and weights for integrating over the group level."""
    step = 2.0 * span / (points - 1)
    nodes = [-span + i * step for i in range(points)]
    weights = [math.exp(-0.5 * z * z) for z in nodes]
    norm = sum(weights)
    return tuple((z, w / norm) for z, w in zip(nodes, weights, strict=True))


_LEVEL_GRID = _level_grid(points=25, span=4.0)


def _ratio(numerators: Sequence[int], denominators: Sequence[int]) -> float | None:
    total = sum(denominators)
    return sum(numerators) / total if total > 0 else None
