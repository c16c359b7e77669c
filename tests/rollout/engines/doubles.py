"""Test doubles for the sim engine: a token model with fixed lengths, small configs."""

from __future__ import annotations

from rollout.engines.base import FinishReason, GenerateRequest
from rollout.engines.sim import (
    CostModelConfig,
    GpuConfig,
    LRURadixKV,
    ServedModelConfig,
    SimEngine,
    SimEngineConfig,
    TurnPlan,
)

STOP = 7
COST = CostModelConfig(
    t_fix_s=0.0005, t_weights_s=0.0045, b_c_s=23e-6, b_tok_s=6e-6, c_dec_s=41e-9, c_pf_s=1.19e-9
)
MODEL = ServedModelConfig(
    name="test-model",
    weight_gib=1.0,
    kv_bytes_per_token=147_456,
    max_context_tokens=1_000_000,
    gpu=GpuConfig(name="test-gpu", memory_gib=16.0, mem_fraction_static=0.9, slack_gib=0.0),
    cost=COST,
)


class FixedTokens:
    """Plans `lengths[rid]` tokens (default `default`): ids 1_000_000·k + i, the last one STOP."""

    def __init__(self, lengths: dict[str, int] | None = None, default: int = 8) -> None:
        self.lengths = dict(lengths or {})
        self.default = default
        self.finished: list[tuple[str, int, FinishReason]] = []
        self._plans = 0

    def plan(self, request: GenerateRequest) -> TurnPlan:
        self._plans += 1
        count = self.lengths.get(request.rid, self.default)
        base = 1_000_000 * self._plans
        ids = (*range(base, base + count - 1), STOP)
        return TurnPlan(ids, tuple(-0.1 for _ in ids), ends_with_stop=True)

    def on_finish(
        self, request: GenerateRequest, produced_tokens: int, reason: FinishReason
    ) -> None:
        self.finished.append((request.rid, produced_tokens, reason))


def make_engine(
    tokens: FixedTokens,
    *,
    capacity_tokens: int = 1_000_000,
    host_tokens: int = 0,
    model: ServedModelConfig = MODEL,
    **config: object,
) -> SimEngine:
    engine_config = SimEngineConfig.model_validate(config)
    kv = LRURadixKV(
        capacity_tokens, engine_config.page_tokens, host_tokens, engine_config.host.write_policy
    )
    return SimEngine(engine_config, model, kv, tokens)


def prompt(start: int, length: int) -> tuple[int, ...]:
    return tuple(range(start, start + length))
