"""LiveKVBudget: one more sample may go live only while the live contexts fit the budget."""

from __future__ import annotations

import pytest

from rollout.core.live_gate import LiveKVBudget


def test_the_first_sample_always_fits_even_when_it_alone_exceeds_the_budget() -> None:
    budget = LiveKVBudget(budget_tokens=10, prior_first_tokens=50)
    assert budget.fits()
    budget.admit("a")
    budget.update("a", 5000)
    assert not budget.fits()
    budget.leave("a")
    assert budget.fits() and budget.live == 0 and budget.live_tokens == 0


def test_a_newcomer_is_counted_at_the_prior_until_a_first_context_is_reported() -> None:
    budget = LiveKVBudget(budget_tokens=1000, prior_first_tokens=400)
    budget.admit("a")
    assert budget.live_tokens == 400 and budget.fits()  # 400 + 400 <= 1000
    budget.admit("b")
    assert not budget.fits()  # 800 + 400 > 1000


@pytest.mark.parametrize(("budget_tokens", "fits"), [(600, True), (599, False)])
def test_after_reports_a_newcomer_counts_as_the_mean_first_context(
    budget_tokens: int, fits: bool
) -> None:
    budget = LiveKVBudget(budget_tokens=budget_tokens)
    budget.admit("a")
    budget.update("a", 100)
    budget.admit("b")
    budget.update("b", 300)  # live 400; the mean first context is (100 + 300) / 2 = 200
    assert budget.fits() is fits


def test_only_a_samples_first_report_feeds_the_first_context_mean() -> None:
    budget = LiveKVBudget(budget_tokens=10_000)
    budget.admit("a")
    budget.update("a", 100)
    budget.update("a", 900)  # a later turn: the live total grows, the mean does not
    budget.admit("b")
    assert budget.live_tokens == 900 + 100


def test_updates_of_samples_that_are_not_live_are_ignored() -> None:
    budget = LiveKVBudget(budget_tokens=1000)
    budget.update("ghost", 500)
    budget.leave("ghost")
    assert budget.live == 0 and budget.live_tokens == 0


def test_budget_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        LiveKVBudget(budget_tokens=0)


def test_a_newcomer_estimate_from_the_caller_replaces_the_mean_first_context() -> None:
    estimate: list[float | None] = [None]
    budget = LiveKVBudget(
        budget_tokens=1000, prior_first_tokens=100, newcomer_tokens=lambda: estimate[0]
    )
    budget.admit("a")
    assert budget.live_tokens == 100  # no estimate yet: the prior
    estimate[0] = 950.0
    assert not budget.fits()  # 100 + 950 > 1000
    budget.admit("b")
    assert budget.live_tokens == 100 + 950
