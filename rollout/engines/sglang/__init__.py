"""The SGLang engine: the `Engine` protocol over SGLang's HTTP API (0.5.23).

* `client`: `SGLangEngine` (generation, abort, pause, weights, polled stats, routing).
* `config`: `SGLangEngineConfig` (`configs/engine/sglang.yaml`).
* `wire`: the request and reply shapes, pure (shared with the simulator's HTTP server).
* `routing`: sticky session routing with load-aware spill-over, pure.
* `transport`: one HTTP call, errors mapped to `EngineTransportError`.
* `liveness`: endpoint health, the derived generate timeout, `probe_endpoints` (a check a run
  can make before it starts).
"""

from rollout.engines.sglang.client import (
    TOKENIZER_PROBE,
    EngineStartupError,
    SGLangEngine,
    WeightLoad,
    backoff_delays,
    connect_sglang_engines,
)
from rollout.engines.sglang.config import SGLangEngineConfig
from rollout.engines.sglang.liveness import EndpointProbe, probe_endpoints
from rollout.engines.sglang.transport import EngineTransportError
from rollout.engines.sglang.wire import EngineProtocolError

__all__ = [
    "TOKENIZER_PROBE",
    "EndpointProbe",
    "EngineProtocolError",
    "EngineStartupError",
    "EngineTransportError",
    "SGLangEngine",
    "SGLangEngineConfig",
    "WeightLoad",
    "backoff_delays",
    "connect_sglang_engines",
    "probe_endpoints",
]
