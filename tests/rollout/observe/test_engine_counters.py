"""`EngineCounters.count`: recomputed tokens are KV the engine computed again, nothing else."""

from __future__ import annotations

from rollout.engines.base import FinishReason, GenerateRequest, GenerateResult, SamplingParams
from rollout.observe.timeseries import EngineCounters

PAGE = 64


def _request(prompt_tokens: int) -> GenerateRequest:
    return GenerateRequest(
        rid="r", input_ids=tuple(range(prompt_tokens)), sampling=SamplingParams(max_new_tokens=8)
    )


def _result(prompt_tokens: int, cached: int, output: int, reason: FinishReason) -> GenerateResult:
    return GenerateResult(
        rid="r",
        output_ids=tuple(range(output)),
        output_logprobs=(0.0,) * output,
        finish_reason=reason,
        prompt_tokens=prompt_tokens,
        cached_tokens=cached,
    )


def test_a_turn_that_finds_less_than_the_sample_computed_counts_the_lost_pages() -> None:
    counters = EngineCounters()
    counters.count(
        _request(1000),
        _result(1000, cached=320, output=5, reason=FinishReason.STOP),
        computed_prefix_tokens=900,
        page_tokens=PAGE,
    )
    assert counters.recomputed_tokens == 896 - 320  # whole pages of the 900 computed


def test_a_request_aborted_before_any_output_counts_no_recompute() -> None:
    counters = EngineCounters()
    counters.count(
        _request(1000),
        _result(1000, cached=0, output=0, reason=FinishReason.ABORT),
        computed_prefix_tokens=900,
        page_tokens=PAGE,
    )
    assert counters.recomputed_tokens == 0
    assert counters.prompt_tokens == 1000  # still a request the engine was sent


def test_a_loss_behind_an_abort_is_counted_once_by_the_request_that_recomputes_it() -> None:
    counters = EngineCounters()
    for cached, output, reason in ((0, 0, FinishReason.ABORT), (512, 4, FinishReason.STOP)):
        counters.count(
            _request(1000),
            _result(1000, cached=cached, output=output, reason=reason),
            computed_prefix_tokens=900,
            page_tokens=PAGE,
        )
    assert counters.recomputed_tokens == 896 - 512


def test_an_abort_after_some_output_still_counts_what_it_recomputed() -> None:
    counters = EngineCounters()
    counters.count(
        _request(1000),
        _result(1000, cached=128, output=3, reason=FinishReason.ABORT),
        computed_prefix_tokens=900,
        page_tokens=PAGE,
    )
    assert counters.recomputed_tokens == 896 - 128


def test_what_older_weights_computed_is_counted_apart_within_the_recompute() -> None:
    counters = EngineCounters()
    for older in (True, False):
        counters.count(
            _request(1000),
            _result(1000, cached=128, output=3, reason=FinishReason.STOP),
            computed_prefix_tokens=900,
            page_tokens=PAGE,
            prefix_from_older_weights=older,
        )
    assert counters.recomputed_tokens == 2 * (896 - 128)
    assert counters.recomputed_after_update_tokens == 896 - 128
