"""Whether each SGLang endpoint answers: the state, the pure decisions, and the probe.

An engine that stops answering (a crashed, hung or SIGSTOPped server) used to stall a run in
silence: no generate timeout, requests waiting up to 900 s (issue 28). The client now

* bounds each /generate by what the request can take (`generate_timeout_s`: the tokens it may
  generate times a per-token bound, plus slack for queueing and prefill);
* probes every endpoint (`probe_endpoint`, GET /health) in the background and counts every
  answer and failure of its own calls (`EndpointHealth`);
* calls an endpoint *down* once it has not answered for `unresponsive_after_s`: a warning says
  so (at most one per `warning_interval_s`), requests go to another endpoint when one
  answers, and a line says when it is back;
* calls the engine *gone* once every endpoint has been down for `outage_s` (`engine_gone`):
  its calls then raise `EngineGoneError` and the run ends with the resume command.

`probe_endpoints` is also the check a run can make before it starts (a few seconds).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass

from rollout.engines.sglang.config import SGLangEngineConfig
from rollout.engines.sglang.transport import EngineTransportError, HTTPTransport

__all__ = [
    "EndpointHealth",
    "EndpointProbe",
    "engine_gone",
    "generate_timeout_s",
    "outage_s",
    "probe_endpoint",
    "probe_endpoints",
]


def generate_timeout_s(max_new_tokens: int, config: SGLangEngineConfig) -> float:
    """The wall-clock limit of one /generate attempt: `max_new_tokens` at the slowest decode
    the config allows, plus slack for queueing and prefill, never above `request_timeout_s`."""
    derived = config.generate_timeout_slack_s + max_new_tokens * config.generate_timeout_per_token_s
    return min(config.request_timeout_s, derived)


@dataclass(slots=True)
class EndpointHealth:
    """What the client knows of one endpoint's answers (times on the loop's clock)."""

    url: str
    failing_since_s: float | None = None  # the first failure since the last answer
    last_error: str = ""
    down: bool = False  # declared down (warned); cleared by an answer
    warned_s: float = -math.inf
    unwarned: int = 0  # warnings held back by the rate limit

    def answered(self) -> float | None:
        """An answer came: returns how long the endpoint had been failing (None if it was not)."""
        since, self.failing_since_s = self.failing_since_s, None
        self.last_error = ""
        self.down = False
        return since

    def failed(self, now_s: float, error: str) -> None:
        if self.failing_since_s is None:
            self.failing_since_s = now_s
        self.last_error = error

    def silent_for_s(self, now_s: float) -> float:
        """How long it has been failing (0 while it answers)."""
        return 0.0 if self.failing_since_s is None else now_s - self.failing_since_s

    def should_be_down(self, now_s: float, unresponsive_after_s: float) -> bool:
        return self.failing_since_s is not None and self.silent_for_s(now_s) >= unresponsive_after_s

    def warning_due(self, now_s: float, interval_s: float) -> bool:
        """Whether a warning may be logged now (and count it); else count one held back."""
        if now_s - self.warned_s < interval_s:
            self.unwarned += 1
            return False
        self.warned_s = now_s
        return True


def outage_s(healths: Sequence[EndpointHealth], now_s: float) -> float:
    """How long no endpoint has answered: since the last of them began failing (0 while any
    answers)."""
    if not healths or any(health.failing_since_s is None for health in healths):
        return 0.0
    return min(health.silent_for_s(now_s) for health in healths)


def engine_gone(healths: Sequence[EndpointHealth], now_s: float, limit_s: float) -> bool:
    """Whether every endpoint has failed for at least `limit_s`: the engine is gone."""
    return bool(healths) and outage_s(healths, now_s) >= limit_s


@dataclass(frozen=True, slots=True)
class EndpointProbe:
    """One probe's outcome: `error` is None when the endpoint answered below 500; `answered`
    says whether it answered HTTP at all (a server still starting may answer 503)."""

    url: str
    error: str | None
    seconds: float
    answered: bool = True


async def probe_endpoint(transport: HTTPTransport, url: str, timeout_s: float) -> EndpointProbe:
    """GET `url`/health within `timeout_s`. Any HTTP answer below 500 counts as alive (an old
    server without /health answers 404 and is still there); no answer, or a 5xx, does not."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        reply = await transport.request("GET", url + "/health", timeout_s=timeout_s)
    except EngineTransportError as exc:
        return EndpointProbe(url, str(exc), loop.time() - started, answered=False)
    error = None if reply.status < 500 else f"/health answered {reply.status}"
    return EndpointProbe(url, error, loop.time() - started)


async def probe_endpoints(
    config: SGLangEngineConfig, *, timeout_s: float | None = None
) -> tuple[EndpointProbe, ...]:
    """Probe every endpoint of `config` at once (at most `timeout_s`, default the config's
    `probe_timeout_s`): what a run checks before it starts, in seconds, not minutes."""
    limit = config.probe_timeout_s if timeout_s is None else timeout_s
    transport = HTTPTransport(connect_timeout_s=min(config.connect_timeout_s, limit))
    try:
        return tuple(
            await asyncio.gather(
                *(probe_endpoint(transport, url, limit) for url in config.endpoints)
            )
        )
    finally:
        await transport.aclose()
