"""`ScriptedTokenModel`: the synthetic `TokenModel` that writes each turn as the script says.

Turn k of a session produces `script.turns[k].output_tokens` tokens, the last being a stop token.
An aborted turn is resumed where it stopped when the caller resubmits prompt + partial output
(SGLang-style partial rollout), so aborts do not change a trajectory. Sessions without a script
get lengths drawn from the workload's output distribution. Content is sliced from a
`TokenCorpus` at offsets drawn per (session, turn): deterministic for a seed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from rollout.engines.base import FinishReason, GenerateRequest
from rollout.engines.sim.token_model import TurnPlan, unfinished_rest
from rollout.simulation.workload.book import ScriptBook
from rollout.simulation.workload.config import WorkloadConfig
from rollout.simulation.workload.corpus import TokenCorpus
from rollout.simulation.workload.distributions import derive_seed, draw_length

__all__ = ["RoutedTokenModel", "ScriptedTokenModel"]


@dataclass(slots=True)
class _Session:
    turns_done: int = 0
    last_plan: TurnPlan | None = None
    pending: TurnPlan | None = None  # the unfinished rest of an aborted turn
    pending_input_tokens: int = -1  # the resubmission that continues it has this many tokens


class ScriptedTokenModel:
    """Plans turns from a `ScriptBook` (see module docstring)."""

    def __init__(
        self, config: WorkloadConfig, book: ScriptBook, corpus: TokenCorpus, seed: int
    ) -> None:
        self._config = config
        self._book = book
        self._corpus = corpus
        self._seed = seed
        self._sessions: dict[str, _Session] = {}

    def plan(self, request: GenerateRequest) -> TurnPlan:
        key = request.session_id or request.rid
        session = self._sessions.setdefault(key, _Session())
        pending = session.pending
        session.pending = None
        if pending is not None and len(request.input_ids) == session.pending_input_tokens:
            plan = pending
        else:
            plan = self._new_turn(request, key, session.turns_done)
        session.last_plan = plan
        return plan

    def on_finish(
        self, request: GenerateRequest, produced_tokens: int, reason: FinishReason
    ) -> None:
        session = self._sessions.get(request.session_id or request.rid)
        if session is None or session.last_plan is None:
            return
        rest = unfinished_rest(session.last_plan, produced_tokens, reason)
        if rest is not None:
            session.pending = rest
            session.pending_input_tokens = len(request.input_ids) + produced_tokens
        else:
            session.turns_done += 1

    def forget(self, session_id: str) -> None:
        """Drop a finished session's state."""
        self._sessions.pop(session_id, None)

    def knows(self, session_id: str) -> bool:
        """Whether a script of this model's workload is registered under `session_id`."""
        return self._book.get(session_id) is not None

    def _new_turn(self, request: GenerateRequest, key: str, turn: int) -> TurnPlan:
        rng = random.Random(derive_seed(self._seed, "turn", key, turn))
        script = self._book.get(key)
        if script is not None and turn < len(script.turns):
            length = script.turns[turn].output_tokens
        else:
            length = max(1, round(draw_length(self._config.output_tokens, rng)))
        stops = request.sampling.stop_token_ids
        stop = stops[0] if stops else self._config.eos_token_id
        offset = rng.randrange(self._corpus.size)
        ids = (*self._corpus.ids(offset, length - 1), stop)
        logprobs = self._corpus.logprobs(offset, length)
        return TurnPlan(ids, logprobs, ends_with_stop=True)


class RoutedTokenModel:
    """Several workloads' token models behind one engine (a mixed run's task sources).

    A session goes to the first model whose script book holds it (each `SyntheticWorkload`
    registers its env's script when it makes the env), else to the first model; the choice is
    kept for the session's life, so aborted turns resume in the model that planned them.
    Session ids must not repeat across the workloads (their names prefix them).
    """

    def __init__(self, models: Sequence[ScriptedTokenModel]) -> None:
        if not models:
            raise ValueError("a routed token model needs at least one model")
        self._models = tuple(models)
        self._routes: dict[str, ScriptedTokenModel] = {}

    def plan(self, request: GenerateRequest) -> TurnPlan:
        return self._model(request.session_id or request.rid).plan(request)

    def on_finish(
        self, request: GenerateRequest, produced_tokens: int, reason: FinishReason
    ) -> None:
        self._model(request.session_id or request.rid).on_finish(request, produced_tokens, reason)

    def forget(self, session_id: str) -> None:
        """Drop a session's state in every model."""
        self._routes.pop(session_id, None)
        for model in self._models:
            model.forget(session_id)

    def _model(self, key: str) -> ScriptedTokenModel:
        model = self._routes.get(key)
        if model is None:
            model = next((m for m in self._models if m.knows(key)), self._models[0])
            self._routes[key] = model
        return model
