"""SGLang 0.5.23's HTTP shapes, both ways: request bodies from our records, records from replies.

Pure (no I/O): the client and the SGLang-compatible server of the simulator share these, and
tests pin them without a server. Sources: `sglang/srt/entrypoints/http_server.py` and
`managers/io_struct.py` of the 0.5.23 wheel (shared/reference/sglang.md §1).

* `/generate`: token ids in (`input_ids`), `return_logprob` on, special tokens kept and stop
  tokens not trimmed, so the reply's `output_ids` are exactly the sampled tokens;
  `meta_info.output_token_logprobs` is a list of `[logprob, token_id, text]`;
  `meta_info.finish_reason` is `{"type": "stop" | "length" | "abort", ...}`;
  `meta_info.weight_versions` (when a weight update fell inside the request) lists
  `{"version", "start", "end"}` spans over the output tokens.
* `kv_hints`: the versioned envelope `{protocol_version, message_id, actions: [{action_id,
  action_type, action_version, payload}]}` (`managers/kv_hints.py`); our actions carry the
  rollout's session hints.
* `/server_info` (or the deprecated `/get_server_info`): the resolved server args at the top
  level plus `internal_states` (one per DP rank) with `memory_usage.token_capacity` and
  `effective_max_running_requests_per_dp`.
* `/metrics`: Prometheus text; the `sglang:*` gauges give load and KV use.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rollout.engines.base import (
    EngineError,
    FinishReason,
    GenerateRequest,
    GenerateResult,
    KVHint,
    KVHintKind,
)

__all__ = [
    "KV_HINTS_ACTION_VERSION",
    "KV_HINTS_PROTOCOL_VERSION",
    "EngineProtocolError",
    "ServerInfo",
    "ServerLoad",
    "generate_body",
    "kv_hints_envelope",
    "parse_generate",
    "parse_kv_hints_envelope",
    "parse_metrics",
    "parse_server_info",
    "parse_version",
]

KV_HINTS_PROTOCOL_VERSION = "0.1"  # the envelope version SGLang 0.5.23 was specified against
KV_HINTS_ACTION_VERSION = "1"  # of our action types (the KVHintKind values)


class EngineProtocolError(EngineError):
    """A server's reply does not have SGLang's shape (missing field, counts that disagree)."""


# -- /generate ---------------------------------------------------------------------------------


def generate_body(
    request: GenerateRequest, *, wire_rid: str, hints: Sequence[KVHint] | None = None
) -> dict[str, Any]:
    """The /generate JSON body of `request`, sent under `wire_rid` (unique, never a prefix of
    another rid: SGLang matches aborts by prefix), carrying `hints` (default: the request's)."""
    sampling = request.sampling
    body: dict[str, Any] = {
        "rid": wire_rid,
        "input_ids": list(request.input_ids),
        "sampling_params": {
            "max_new_tokens": sampling.max_new_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "stop_token_ids": list(sampling.stop_token_ids),
            "skip_special_tokens": False,
            "no_stop_trim": True,
        },
        "return_logprob": True,
        "stream": False,
        "priority": request.priority,
    }
    if request.session_id:
        body["session_id"] = request.session_id
    if request.cache_namespace:  # SGLang keys the radix tree by it: no prefix shared across keys
        body["extra_key"] = request.cache_namespace
    hints = request.kv_hints if hints is None else hints
    if hints:
        body["kv_hints"] = kv_hints_envelope(hints, message_id=wire_rid)
    return body


def parse_generate(
    body: Any, *, rid: str, prompt_tokens: int, version_of: Mapping[str, int] | None = None
) -> GenerateResult:
    """A /generate reply as a `GenerateResult` for our `rid`.

    `version_of` maps the server's weight-version strings to policy versions (the client
    sets them as str(int)); a version missing from it must parse as an integer. Raises
    `EngineProtocolError` on any shape violation.
    """
    if not isinstance(body, Mapping):
        raise EngineProtocolError(f"request {rid}: the reply is not a JSON object: {body!r:.200}")
    meta = _field(body, "meta_info", Mapping, rid)
    output_ids = _int_list(_field(body, "output_ids", list, rid), "output_ids", rid)
    finish = _finish_reason(meta.get("finish_reason"), rid)
    logprob_rows = meta.get("output_token_logprobs")
    if logprob_rows is None:
        if output_ids:
            raise EngineProtocolError(
                f"request {rid}: meta_info has no output_token_logprobs; the request must set "
                "return_logprob (behaviour logprobs are required for RL)"
            )
        logprob_rows = []
    logprobs = _logprobs(logprob_rows, output_ids, rid)
    reported_prompt = meta.get("prompt_tokens", prompt_tokens)
    if reported_prompt != prompt_tokens:
        raise EngineProtocolError(
            f"request {rid}: sent {prompt_tokens} prompt tokens, the server counted "
            f"{reported_prompt}"
        )
    version = parse_version(meta.get("weight_version", "0"), version_of, rid)
    spans = meta.get("weight_versions")
    return GenerateResult(
        rid=rid,
        output_ids=tuple(output_ids),
        output_logprobs=logprobs,
        finish_reason=finish,
        prompt_tokens=prompt_tokens,
        cached_tokens=_non_negative_int(meta.get("cached_tokens", 0), "cached_tokens", rid),
        weight_version=version,
        num_retractions=_non_negative_int(meta.get("num_retractions", 0), "num_retractions", rid),
        queued_s=_queue_time(meta.get("queue_time"), rid),
        output_versions=_span_versions(spans, len(output_ids), version_of, rid),
    )


def parse_version(value: Any, version_of: Mapping[str, int] | None, rid: str) -> int:
    """A weight-version string of the server as a policy version (`version_of` first)."""
    text = str(value)
    if version_of is not None and text in version_of:
        return version_of[text]
    if text in ("", "default", "None"):
        return 0  # a server that never had its version set serves the initial policy
    try:
        version = int(text)
    except ValueError:
        raise EngineProtocolError(
            f"request {rid}: weight version {text!r} is not a policy version; let the client "
            "set versions (it tags each weight update with str(version))"
        ) from None
    if version < 0:
        raise EngineProtocolError(f"request {rid}: negative weight version {version}")
    return version


def _field(body: Mapping[str, Any], name: str, kind: type, rid: str) -> Any:
    value = body.get(name)
    if not isinstance(value, kind):
        raise EngineProtocolError(
            f"request {rid}: the reply's {name!r} is {type(value).__name__}, not "
            f"{kind.__name__}: {str(value)[:200]}"
        )
    return value


def _int_list(values: list[Any], name: str, rid: str) -> list[int]:
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise EngineProtocolError(f"request {rid}: {name} holds a value that is not a token id")
    return values


def _finish_reason(value: Any, rid: str) -> FinishReason:
    kind = value.get("type") if isinstance(value, Mapping) else None
    try:
        return FinishReason(str(kind))
    except ValueError:
        raise EngineProtocolError(
            f"request {rid}: finish_reason {value!r} has no type stop, length or abort (a "
            "request that has not finished cannot be a non-streaming reply)"
        ) from None


def _logprobs(rows: Any, output_ids: Sequence[int], rid: str) -> tuple[float, ...]:
    if not isinstance(rows, list) or len(rows) != len(output_ids):
        count = len(rows) if isinstance(rows, list) else type(rows).__name__
        raise EngineProtocolError(
            f"request {rid}: {len(output_ids)} output ids but {count} output_token_logprobs"
        )
    logprobs = []
    for index, (row, token) in enumerate(zip(rows, output_ids, strict=True)):
        if not isinstance(row, list | tuple) or len(row) < 2:
            raise EngineProtocolError(
                f"request {rid}: output_token_logprobs[{index}] is {row!r}, not "
                "[logprob, token_id, text]"
            )
        logprob, row_token = row[0], row[1]
        if row_token != token:
            raise EngineProtocolError(
                f"request {rid}: output_token_logprobs[{index}] is for token {row_token}, "
                f"output_ids[{index}] is {token}"
            )
        if not isinstance(logprob, int | float) or math.isnan(logprob) or logprob > 0:
            raise EngineProtocolError(
                f"request {rid}: output_token_logprobs[{index}] has logprob {logprob!r}"
            )
        logprobs.append(float(logprob))
    return tuple(logprobs)


def _non_negative_int(value: Any, name: str, rid: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise EngineProtocolError(f"request {rid}: meta_info.{name} is {value!r}")
    return value


def _queue_time(value: Any, rid: str) -> float:
    if value is None:
        return 0.0
    if not isinstance(value, int | float) or value < 0 or math.isnan(value):
        raise EngineProtocolError(f"request {rid}: meta_info.queue_time is {value!r}")
    return float(value)


def _span_versions(
    spans: Any, outputs: int, version_of: Mapping[str, int] | None, rid: str
) -> tuple[int, ...]:
    """Per-token versions from `weight_versions` spans; () when one version made every token."""
    if spans is None or outputs == 0:
        return ()
    if not isinstance(spans, list) or not spans:
        raise EngineProtocolError(f"request {rid}: meta_info.weight_versions is {spans!r}")
    versions: list[int] = []
    for span in spans:
        if not isinstance(span, Mapping) or span.get("start") != len(versions):
            raise EngineProtocolError(
                f"request {rid}: weight_versions spans {spans!r} do not tile the output"
            )
        end = span.get("end")
        if not isinstance(end, int) or end < len(versions) or end > outputs:
            raise EngineProtocolError(f"request {rid}: weight_versions span {span!r} is invalid")
        versions.extend(
            [parse_version(span.get("version"), version_of, rid)] * (end - len(versions))
        )
    if len(versions) != outputs:
        raise EngineProtocolError(
            f"request {rid}: weight_versions cover {len(versions)} of {outputs} output tokens"
        )
    return () if len(set(versions)) == 1 else tuple(versions)


# -- kv_hints ----------------------------------------------------------------------------------


def kv_hints_envelope(hints: Sequence[KVHint], *, message_id: str) -> dict[str, Any]:
    """SGLang's versioned KV-hint envelope carrying `hints` as actions, in order."""
    return {
        "protocol_version": KV_HINTS_PROTOCOL_VERSION,
        "message_id": message_id,
        "actions": [
            {
                "action_id": f"{message_id}:{index}",
                "action_type": str(hint.kind),
                "action_version": KV_HINTS_ACTION_VERSION,
                "payload": {
                    "session_id": hint.session_id,
                    "priority": hint.priority,
                    "expected_s": hint.expected_s,
                },
            }
            for index, hint in enumerate(hints)
        ],
    }


def parse_kv_hints_envelope(envelope: Any) -> tuple[KVHint, ...]:
    """The session hints of an envelope; actions of other types are skipped, as SGLang's
    consumers do. Raises ValueError on a malformed envelope or one of our actions."""
    if not isinstance(envelope, Mapping) or not isinstance(envelope.get("actions", []), list):
        raise ValueError(f"malformed kv_hints envelope: {envelope!r:.200}")
    if not isinstance(envelope.get("protocol_version"), str) or not isinstance(
        envelope.get("message_id"), str
    ):
        raise ValueError("a kv_hints envelope needs string protocol_version and message_id")
    kinds = {kind.value for kind in KVHintKind}
    hints = []
    for action in envelope.get("actions", []):
        if not isinstance(action, Mapping) or action.get("action_type") not in kinds:
            continue
        payload = action.get("payload")
        if not isinstance(payload, Mapping) or not isinstance(payload.get("session_id"), str):
            raise ValueError(f"kv hint action {action!r:.200} has no session_id payload")
        expected = payload.get("expected_s")
        hints.append(
            KVHint(
                kind=KVHintKind(action["action_type"]),
                session_id=payload["session_id"],
                priority=int(payload.get("priority", 0)),
                expected_s=None if expected is None else float(expected),
            )
        )
    return tuple(hints)


# -- /server_info and /metrics -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What start-up checks and capacity need from one server's /server_info."""

    max_running_requests: int
    max_total_tokens: int
    page_size: int
    priority_scheduling: bool
    radix_cache: bool
    radix_cache_backend: str
    kv_hints_endpoint: bool
    version: str


def parse_server_info(info: Any, *, where: str) -> ServerInfo:
    """`/server_info` as `ServerInfo` (capacity summed over DP ranks). Raises
    `EngineProtocolError` when it lacks the capacity fields."""
    if not isinstance(info, Mapping):
        raise EngineProtocolError(f"{where}: /server_info is not a JSON object")
    states = info.get("internal_states") or [{}]
    if not isinstance(states, list) or not all(isinstance(s, Mapping) for s in states):
        raise EngineProtocolError(f"{where}: /server_info internal_states is {states!r:.200}")
    capacity = 0
    running = 0
    for state in states:
        usage = state.get("memory_usage") or {}
        tokens = usage.get("token_capacity", state.get("max_total_num_tokens"))
        if not isinstance(tokens, int) or tokens <= 0:
            raise EngineProtocolError(
                f"{where}: /server_info has no KV capacity (internal_states[].memory_usage."
                "token_capacity); is it an SGLang server?"
            )
        capacity += tokens
        slots = state.get("effective_max_running_requests_per_dp", info.get("max_running_requests"))
        if not isinstance(slots, int) or slots <= 0:
            raise EngineProtocolError(
                f"{where}: /server_info does not say max_running_requests; start the server "
                "with --max-running-requests"
            )
        running += slots
    page = info.get("page_size") or 1
    return ServerInfo(
        max_running_requests=running,
        max_total_tokens=capacity,
        page_size=int(page),
        priority_scheduling=bool(info.get("enable_priority_scheduling", False)),
        radix_cache=not bool(info.get("disable_radix_cache", False)),
        radix_cache_backend=str(info.get("radix_cache_backend") or "default"),
        kv_hints_endpoint=bool(info.get("agentkv_kv_hints_endpoint", False)),
        version=str(info.get("version", "")),
    )


@dataclass(frozen=True, slots=True)
class ServerLoad:
    """One server's load from /metrics (Prometheus text; absent gauges are None)."""

    running_requests: int | None = None
    queued_requests: int | None = None
    token_usage: float | None = None  # fraction of the KV pool in use
    used_tokens: int | None = None
    evictable_tokens: int | None = None
    cache_hit_rate: float | None = None


_GAUGES = {
    "sglang:num_running_reqs": "running_requests",
    "sglang:num_queue_reqs": "queued_requests",
    "sglang:token_usage": "token_usage",
    "sglang:kv_used_tokens": "used_tokens",
    "sglang:kv_evictable_tokens": "evictable_tokens",
    "sglang:cache_hit_rate": "cache_hit_rate",
}
_FRACTIONS = {"token_usage", "cache_hit_rate"}  # averaged over label sets, the rest summed


def parse_metrics(text: str) -> ServerLoad:
    """The `sglang:*` gauges of a /metrics page over its label sets (one per DP rank): counts
    summed, fractions averaged."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_part, _, value_part = line.rpartition(" ")
        field_name = _GAUGES.get(name_part.split("{", 1)[0])
        if field_name is None:
            continue
        try:
            value = float(value_part)
        except ValueError:
            continue
        if math.isnan(value):
            continue
        sums[field_name] = sums.get(field_name, 0.0) + value
        counts[field_name] = counts.get(field_name, 0) + 1
    values: dict[str, Any] = {
        name: (total / counts[name] if name in _FRACTIONS else round(total))
        for name, total in sums.items()
    }
    return ServerLoad(**values)
