"""Validated configuration of the SGLang HTTP client (`configs/engine/sglang.yaml`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from foundation.config import FrozenConfig

__all__ = ["SGLangEngineConfig"]


class SGLangEngineConfig(FrozenConfig):
    """One logical engine over one or more SGLang servers (or one sglang-router URL)."""

    name: str = Field(default="sglang", min_length=1, description="Engine name in the rollout.")
    endpoints: tuple[str, ...] = Field(
        default=("http://127.0.0.1:30000",),
        min_length=1,
        description="Base URLs of the SGLang servers (scheme, host, port); several are routed "
        "by session, sticky with load-aware spill-over.",
    )
    engine_per_endpoint: bool = Field(
        default=False,
        description="Each endpoint is an engine of its own for the scheduler (data-parallel "
        "ranks, named <name>-<index>): a sample is placed on one and stays, its group's "
        "samples prefer it, KV is accounted per server and `scheduler.critical_spread` spreads "
        "critical work over them. false: one engine whose client routes sessions over the "
        "endpoints by load.",
    )
    router: bool = Field(
        default=False,
        description="The one endpoint is an sglang-router: it routes and balances itself, so "
        "the client sends every request there and reads capacity from it alone.",
    )
    request_timeout_s: float = Field(
        default=900.0,
        gt=0.0,
        description="Upper bound of the wall-clock limit of one /generate attempt, queueing "
        "included; past its limit an attempt counts as failed (aborted on the server, then "
        "retried) (s).",
    )
    generate_timeout_per_token_s: float = Field(
        default=0.2,
        gt=0.0,
        description="The slowest decode a request may see, per token it may generate: one "
        "attempt's limit is generate_timeout_slack_s + max_new_tokens x this (capped at "
        "request_timeout_s), so a hung server is noticed in minutes, not 15 (s/token).",
    )
    generate_timeout_slack_s: float = Field(
        default=120.0,
        gt=0.0,
        description="Time an attempt may spend beyond decoding: queueing behind other "
        "requests and prefilling a long context (s).",
    )
    probe_timeout_s: float = Field(
        default=3.0,
        gt=0.0,
        description="Limit of one liveness probe (GET /health), in the background and before a "
        "run starts (s).",
    )
    probe_interval_s: float = Field(
        default=2.0, gt=0.0, description="Time between two liveness probes of an endpoint (s)."
    )
    unresponsive_after_s: float = Field(
        default=10.0,
        gt=0.0,
        description="An endpoint that has answered nothing (probes nor calls) for this long is "
        "down: a warning says so, and its requests move to another endpoint when one answers "
        "(s).",
    )
    outage_s: float = Field(
        default=120.0,
        gt=0.0,
        description="When no endpoint has answered for this long, the engine is gone: its "
        "calls raise EngineGoneError and the run ends, resumable from its last checkpoint (s).",
    )
    warning_interval_s: float = Field(
        default=30.0,
        ge=0.0,
        description="At most one 'not answering' warning per endpoint per this long (s).",
    )
    control_timeout_s: float = Field(
        default=30.0,
        gt=0.0,
        description="Limit of a control call: abort, pause, continue, flush, info, metrics (s).",
    )
    weight_update_timeout_s: float = Field(
        default=600.0, gt=0.0, description="Limit of one weight-update call (s)."
    )
    connect_timeout_s: float = Field(
        default=5.0, gt=0.0, description="Limit of opening a TCP connection (s)."
    )
    startup_timeout_s: float = Field(
        default=60.0,
        ge=0.0,
        description="How long start-up keeps retrying a server that does not answer yet (s).",
    )
    max_attempts: int = Field(
        default=4,
        ge=1,
        description="Attempts per call on a transport error or a 5xx answer; a /generate that "
        "is retried starts over (its first attempt is aborted), so a turn is never duplicated.",
    )
    backoff_initial_s: float = Field(
        default=0.2, ge=0.0, description="Wait before the first retry (s)."
    )
    backoff_multiplier: float = Field(
        default=2.0, ge=1.0, description="Each further retry waits this many times longer."
    )
    backoff_max_s: float = Field(default=5.0, ge=0.0, description="Longest wait between tries (s).")
    poll_interval_s: float = Field(
        default=0.5,
        gt=0.0,
        description="Period of the background poll of /server_info and /metrics that `stats()` "
        "reads (it never calls the server itself) (s).",
    )
    pause_mode: Literal["abort", "retract", "in_place"] = Field(
        default="abort",
        description="/pause_generation mode for weight updates. abort: requests in flight come "
        "back with their partial output (kept, with the version that made it) and the rollout "
        "layer resumes them; retract: the server requeues them and recomputes their KV; "
        "in_place: the server freezes them with their KV. The last two keep the requests in the "
        "server and their tokens get per-token versions from meta_info.weight_versions.",
    )
    flush_cache_on_weight_update: bool = Field(
        default=True,
        description="Flush the prefix cache after new weights (KV of old weights is stale); an "
        "in_place pause cannot flush while requests are frozen, so it skips the flush.",
    )
    spill_margin: float = Field(
        default=0.25,
        ge=0.0,
        description="Sticky routing: a session leaves its endpoint when that endpoint's load "
        "(running + queued over max running) exceeds the least-loaded one's by more than this "
        "(pure stickiness can lock one server into KV thrash) (fraction).",
    )
    require_priority_scheduling: bool = Field(
        default=True,
        description="Refuse a server started without --enable-priority-scheduling (the "
        "rollout's critical-group priorities would be ignored inside the engine).",
    )
    require_radix_cache: bool = Field(
        default=True,
        description="Refuse a server with --disable-radix-cache (every turn would re-prefill "
        "its whole context).",
    )
    kv_hints: Literal["auto", "endpoint", "next_request", "off"] = Field(
        default="auto",
        description="Where out-of-band KV hints (tool_wait, tool_done, close) go: 'endpoint' "
        "POSTs them to the server's /kv_hints (served by serve-sim and the agentkv plugin), "
        "'next_request' attaches them to the session's next /generate, 'auto' picks endpoint "
        "when the server advertises it, 'off' drops them.",
    )

    @field_validator("endpoints")
    @classmethod
    def _urls(cls, endpoints: tuple[str, ...]) -> tuple[str, ...]:
        cleaned = []
        for url in endpoints:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"endpoint {url!r} must start with http:// or https://")
            cleaned.append(url.rstrip("/"))
        if len(set(cleaned)) != len(cleaned):
            raise ValueError(f"endpoints repeat: {list(endpoints)}")
        return tuple(cleaned)

    @model_validator(mode="after")
    def _one_routing(self) -> SGLangEngineConfig:
        if self.router and self.engine_per_endpoint:
            raise ValueError(
                "router: true routes inside sglang-router, engine_per_endpoint: true places "
                "samples on each server from the scheduler; choose one"
            )
        return self

    def per_endpoint(self) -> tuple[SGLangEngineConfig, ...]:
        """The configs of the engines this one stands for: one per endpoint with
        `engine_per_endpoint`, else itself."""
        if not self.engine_per_endpoint:
            return (self,)
        return tuple(
            self.model_copy(update={"name": f"{self.name}-{index}", "endpoints": (url,)})
            for index, url in enumerate(self.endpoints)
        )
