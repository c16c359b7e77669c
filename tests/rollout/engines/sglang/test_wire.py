"""SGLang 0.5.23's /generate, kv_hints, /server_info and /metrics shapes, both directions."""

from __future__ import annotations

from typing import Any

import pytest

from rollout.engines.base import (
    FinishReason,
    GenerateRequest,
    GenerateResult,
    KVHint,
    KVHintKind,
    SamplingParams,
)
from rollout.engines.sglang.wire import (
    EngineProtocolError,
    generate_body,
    kv_hints_envelope,
    parse_generate,
    parse_kv_hints_envelope,
    parse_metrics,
    parse_server_info,
)
from rollout.engines.sim.http_server import generate_reply

REQUEST = GenerateRequest(
    rid="a1",
    input_ids=(5, 6, 7),
    sampling=SamplingParams(max_new_tokens=16, temperature=0.7, top_p=0.9, stop_token_ids=(2,)),
    session_id="s1",
    priority=3,
    kv_hints=(KVHint(KVHintKind.OPEN, "s1", priority=3),),
)


def reply(output_ids: list[int], **meta: Any) -> dict[str, Any]:
    base = {
        "id": "a1",
        "finish_reason": {"type": "stop", "matched": 2},
        "prompt_tokens": 3,
        "weight_version": "0",
        "cached_tokens": 1,
        "num_retractions": 0,
        "output_token_logprobs": [[-0.5, token, None] for token in output_ids],
    }
    return {"text": "", "output_ids": output_ids, "meta_info": {**base, **meta}}


def test_a_generate_body_is_token_in_token_out_with_logprobs_priority_and_session() -> None:
    body = generate_body(REQUEST, wire_rid="a1")
    assert body["input_ids"] == [5, 6, 7] and body["rid"] == "a1"
    assert body["return_logprob"] is True and body["stream"] is False
    params = body["sampling_params"]
    assert params["skip_special_tokens"] is False and params["no_stop_trim"] is True
    assert params["stop_token_ids"] == [2] and params["max_new_tokens"] == 16
    assert body["priority"] == 3 and body["session_id"] == "s1"
    assert body["kv_hints"]["actions"][0]["action_type"] == "open"


def test_a_reply_becomes_a_result_with_one_logprob_per_token() -> None:
    result = parse_generate(reply([9, 2], queue_time=0.25), rid="a1", prompt_tokens=3)
    assert result.output_ids == (9, 2) and result.output_logprobs == (-0.5, -0.5)
    assert result.finish_reason is FinishReason.STOP
    assert (result.cached_tokens, result.queued_s, result.weight_version) == (1, 0.25, 0)
    assert result.output_versions == ()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"output_ids": [1]}, "meta_info"),
        (reply([9], output_token_logprobs=None), "return_logprob"),
        (reply([9, 2], output_token_logprobs=[[-0.5, 9, None]]), "2 output ids but 1"),
        (reply([9], output_token_logprobs=[[-0.5, 8, None]]), "for token 8"),
        (reply([9], output_token_logprobs=[[0.5, 9, None]]), "logprob 0.5"),
        (reply([9], finish_reason=None), "finish_reason"),
        (reply([9], prompt_tokens=4), "server counted 4"),
        (reply([9], weight_version="policy-a"), "not a policy version"),
        (reply(["x"]), "not a token id"),
        ("not json", "not a JSON object"),
    ],
)
def test_a_reply_of_the_wrong_shape_is_a_protocol_error(body: Any, message: str) -> None:
    with pytest.raises(EngineProtocolError, match=message):
        parse_generate(body, rid="a1", prompt_tokens=3)


def test_weight_version_spans_become_per_token_versions() -> None:
    spans = [{"version": "3", "start": 0, "end": 2}, {"version": "4", "start": 2, "end": 3}]
    result = parse_generate(reply([7, 8, 2], weight_version="4", weight_versions=spans),
                            rid="a1", prompt_tokens=3)  # fmt: skip
    assert result.output_versions == (3, 3, 4) and result.weight_version == 4


def test_spans_that_do_not_tile_the_output_are_rejected() -> None:
    spans = [{"version": "3", "start": 0, "end": 1}, {"version": "4", "start": 2, "end": 3}]
    with pytest.raises(EngineProtocolError, match="tile"):
        parse_generate(reply([7, 8, 2], weight_versions=spans), rid="a1", prompt_tokens=3)


def test_the_sim_servers_reply_parses_back_to_the_same_result() -> None:
    result = GenerateResult(
        rid="a1",
        output_ids=(7, 8, 2),
        output_logprobs=(-0.1, -0.2, -0.3),
        finish_reason=FinishReason.LENGTH,
        prompt_tokens=3,
        cached_tokens=2,
        weight_version=5,
        num_retractions=1,
        queued_s=0.5,
        output_versions=(4, 5, 5),
    )
    body = generate_reply(result, text="", return_logprob=True, version_name=str)
    assert parse_generate(body, rid="a1", prompt_tokens=3) == result


def test_kv_hint_envelopes_round_trip_and_skip_foreign_actions() -> None:
    hints = (
        KVHint(KVHintKind.TOOL_WAIT, "s1", priority=1, expected_s=2.5),
        KVHint(KVHintKind.CLOSE, "s2"),
    )
    envelope = kv_hints_envelope(hints, message_id="m1")
    assert envelope["protocol_version"] == "0.1" and envelope["message_id"] == "m1"
    envelope["actions"].append(
        {"action_id": "x", "action_type": "pin", "action_version": "1", "payload": {}}
    )
    assert parse_kv_hints_envelope(envelope) == hints


def test_a_malformed_envelope_is_rejected() -> None:
    with pytest.raises(ValueError, match="protocol_version"):
        parse_kv_hints_envelope({"actions": []})


def test_server_info_gives_capacity_summed_over_dp_ranks_and_the_flags() -> None:
    info = {
        "page_size": 64,
        "enable_priority_scheduling": True,
        "disable_radix_cache": False,
        "max_running_requests": 128,
        "internal_states": [
            {"memory_usage": {"token_capacity": 1000}, "effective_max_running_requests_per_dp": 48},
            {"memory_usage": {"token_capacity": 1500}, "effective_max_running_requests_per_dp": 48},
        ],
        "version": "0.5.23",
    }
    parsed = parse_server_info(info, where="x")
    assert (parsed.max_total_tokens, parsed.max_running_requests, parsed.page_size) == (
        2500,
        96,
        64,
    )
    assert parsed.priority_scheduling and parsed.radix_cache and not parsed.kv_hints_endpoint


def test_server_info_without_capacity_is_a_protocol_error() -> None:
    with pytest.raises(EngineProtocolError, match="KV capacity"):
        parse_server_info({"internal_states": [{}]}, where="x")


def test_metrics_sum_counts_and_average_fractions_over_label_sets() -> None:
    text = "\n".join(
        [
            "# HELP sglang:num_running_reqs The number of running requests.",
            "# TYPE sglang:num_running_reqs gauge",
            'sglang:num_running_reqs{model_name="m",dp="0"} 3.0',
            'sglang:num_running_reqs{model_name="m",dp="1"} 4.0',
            'sglang:token_usage{model_name="m",dp="0"} 0.2',
            'sglang:token_usage{model_name="m",dp="1"} 0.4',
            'sglang:num_queue_reqs{model_name="m"} 2',
            'sglang:gen_throughput{model_name="m"} 900.0',
        ]
    )
    load = parse_metrics(text)
    assert (load.running_requests, load.queued_requests) == (7, 2)
    assert load.token_usage == pytest.approx(0.3) and load.used_tokens is None
