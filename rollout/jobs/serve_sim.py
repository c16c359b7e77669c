"""`conductor serve-sim`: the simulated engine behind SGLang's HTTP API, on a local port.

The engine is the in-process simulator (continuous batching on the cost model, the `kvcache`
policy or LRU, priority scheduling), paced in wall-clock time; its model is the scripted SWE
agent for prompts of the shipped SWE tasks and seeded filler text otherwise
(`rollout.simulation.serving_model`). Point `SGLangEngine` (or SGLang's own HTTP test kits) at it.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from envs.swe.tasks import load_shipped_tasks
from foundation.config import ConfigRef, FrozenConfig
from rollout.engines.sim import ServedModelConfig, SimEngineConfig, build_sim_engine
from rollout.engines.sim.http_server import RequestDeadlines, ServedIdentity, SimSGLangServer
from rollout.simulation.serving_model import FillerTokenModel, ServingTokenModel
from rollout.standins.config import ScriptedPolicyConfig
from rollout.standins.scripted_agent import ScriptedSWEAgent
from rollout.trajectories.hf_tokenizer import HFTokenizer
from rollout.trajectories.tokenizer import ByteTokenizer, ChatTemplate, Tokenizer

__all__ = [
    "ServeSimConfig",
    "SimServerParts",
    "TokenizerCodec",
    "build_sim_server",
    "serve_forever",
    "served_tokenizer",
    "spawn_serve_sim",
]


class ServeSimConfig(FrozenConfig):
    """`conductor serve-sim` (`configs/serve_sim/default.yaml`)."""

    host: str = Field(default="127.0.0.1", description="Interface to listen on.")
    port: int = Field(default=30000, ge=0, le=65535, description="Port; 0 picks a free one.")
    served_model_name: str = Field(default="sim-qwen3-8b", description="Name in /v1/models.")
    model: ConfigRef = Field(description="Served model and cost model (configs/model/*.yaml).")
    engine: ConfigRef = Field(description="Simulated engine (configs/engine/sim.yaml).")
    scripted: ScriptedPolicyConfig = Field(default_factory=ScriptedPolicyConfig)
    filler_seed: int = Field(default=0, description="Seed of the filler text for other prompts.")
    tokenizer_path: str = Field(
        default="",
        description="Local directory of a tokenizer (transformers format) the served 'model' "
        "uses; empty: the byte tokenizer (clients must tokenize the same way).",
    )
    waiting_timeout_s: float = Field(
        default=0.0,
        ge=0.0,
        description="A request waiting for admission longer is aborted and answered 503 "
        "(SGLang's SGLANG_REQ_WAITING_TIMEOUT); 0 = no limit (s).",
    )
    running_timeout_s: float = Field(
        default=0.0,
        ge=0.0,
        description="A request running longer is aborted and answered 503 (SGLang's "
        "SGLANG_REQ_RUNNING_TIMEOUT); 0 = no limit (s).",
    )


class TokenizerCodec:
    """A rollout `Tokenizer` as the server's text codec (specials: ids without text bytes)."""

    def __init__(self, tokenizer: Tokenizer, special_ids: frozenset[int]) -> None:
        self._tokenizer = tokenizer
        self._special_ids = special_ids
        self._template = ChatTemplate()

    @property
    def eos_token_id(self) -> int:
        return self._tokenizer.eos_token_id

    def encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text)

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool) -> str:
        if skip_special_tokens:
            ids = [i for i in ids if i not in self._special_ids]
        return self._tokenizer.decode(ids)

    def chat_prompt(self, messages: Sequence[Mapping[str, Any]]) -> str:
        t = self._template
        parts = [
            f"{t.start_token}{m.get('role', 'user')}{t.separator}{m.get('content') or ''}"
            f"{t.end_token}{t.separator}"
            for m in messages
        ]
        return "".join(parts) + f"{t.start_token}{t.assistant_role}{t.separator}"


@dataclass(frozen=True, slots=True)
class SimServerParts:
    """The server, its engine's config and its model (tests read the scripts it played)."""

    server: SimSGLangServer
    engine_config: SimEngineConfig
    token_model: ServingTokenModel


def build_sim_server(
    config: ServeSimConfig, base_dir: Path, *, server_args: Mapping[str, Any] | None = None
) -> SimServerParts:
    """The server and its engine; call on the loop that will serve (the engine lives there).
    `server_args`: more /server_info fields to report (e.g. to test a client's checks)."""
    model = config.model.load(ServedModelConfig, base_dir)
    engine_config = config.engine.load(SimEngineConfig, base_dir).model_copy(
        update={"flush_cache_on_weight_update": False}  # the weight-update request decides
    )
    tokenizer, specials = served_tokenizer(config.tokenizer_path)
    agent = ScriptedSWEAgent(tokenizer, config.scripted)
    filler = FillerTokenModel(
        tokenizer, seed=config.filler_seed, min_logprob=config.scripted.min_logprob
    )
    token_model = ServingTokenModel(tokenizer, agent, load_shipped_tasks(), filler)
    engine = build_sim_engine(engine_config, model, token_model)
    identity = ServedIdentity(
        model_path=f"sim/{model.name}",
        served_model_name=config.served_model_name,
        max_context_tokens=model.max_context_tokens,
        server_args=dict(server_args or {}),
    )
    deadlines = RequestDeadlines(config.waiting_timeout_s, config.running_timeout_s)
    server = SimSGLangServer(engine, TokenizerCodec(tokenizer, specials), identity, deadlines)
    return SimServerParts(server, engine_config, token_model)


def spawn_serve_sim(
    overrides: Sequence[str] = (), *, config: Path | None = None
) -> tuple[str, subprocess.Popen[bytes]]:
    """`conductor serve-sim` in a process of its own on a free local port: its URL and process
    (the caller waits for it to answer, and terminates it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    argv = [sys.executable, "-m", "rollout.cli", "serve-sim"]
    if config is not None:
        argv.append(str(config))
    process = subprocess.Popen(
        [*argv, f"port={port}", *overrides], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    return f"http://127.0.0.1:{port}", process


def served_tokenizer(path: str) -> tuple[Tokenizer, frozenset[int]]:
    """The tokenizer at `path` (or the byte tokenizer) and its special ids."""
    if path:
        tokenizer = HFTokenizer(path)
        return tokenizer, tokenizer.special_ids
    byte_tokenizer = ByteTokenizer()
    return byte_tokenizer, frozenset(range(256, byte_tokenizer.vocab_size))  # bytes are 0..255


async def serve_forever(
    config: ServeSimConfig, base_dir: Path, *, on_ready: Callable[[int], None] | None = None
) -> None:
    """Serve until cancelled (Ctrl-C); `on_ready(port)` once it listens."""
    parts = build_sim_server(config, base_dir)
    port = await parts.server.start(config.host, config.port)
    if on_ready is not None:
        on_ready(port)
    try:
        await asyncio.Event().wait()
    finally:
        await parts.server.stop()
        await parts.server.engine.aclose()
