"""The token model of `conductor serve-sim`: scripted SWE agents where a prompt is an SWE task,
filler text elsewhere.

Over HTTP nobody registers a session's task with the scripted agent, so this model reads the
first prompt of each session: a prompt that contains a shipped task's problem statement makes the
session that task's scripted agent (real tool calls, decoded by the env's parser); any other
prompt (a smoke test, SGLang's HTTP kits) gets seeded filler words. Both resume an aborted turn
exactly where it stopped when the caller sends prompt + partial output again.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from envs.swe.tasks import SWETask
from rollout.engines.base import FinishReason, GenerateRequest, TokenIds
from rollout.engines.sim.token_model import TokenModel, TurnPlan, unfinished_rest
from rollout.standins.scripted_agent import ScriptedSWEAgent
from rollout.trajectories.tokenizer import Tokenizer

__all__ = ["FillerTokenModel", "ServingTokenModel"]

_WORDS = (
    "the", "rollout", "engine", "samples", "tokens", "while", "tools", "run", "in", "their",
    "sandboxes", "and", "critical", "groups", "finish", "first", "so", "training", "steps",
    "never", "wait", "long", "for", "a", "batch", "of", "trajectories",
)  # fmt: skip


class FillerTokenModel:
    """Seeded filler text: with stop tokens a reply of half to all of `max_new_tokens` that ends
    with the first stop token; without (SGLang's `ignore_eos`) exactly `max_new_tokens`."""

    def __init__(self, tokenizer: Tokenizer, *, seed: int, min_logprob: float) -> None:
        self._tokenizer = tokenizer
        self._seed = seed
        self._min_logprob = min_logprob
        self._rest: dict[tuple[int, ...], TurnPlan] = {}  # prompt + partial -> what is left
        self._planned: dict[str, TurnPlan] = {}

    def plan(self, request: GenerateRequest) -> TurnPlan:
        key = _resume_key(request.input_ids)
        plan = self._rest.pop(key, None) or self._fresh(request)
        self._planned[request.rid] = plan
        return plan

    def on_finish(
        self, request: GenerateRequest, produced_tokens: int, reason: FinishReason
    ) -> None:
        plan = self._planned.pop(request.rid, None)
        rest = None if plan is None else unfinished_rest(plan, produced_tokens, reason)
        if rest is not None and plan is not None:
            resumed = (*request.input_ids, *plan.output_ids[:produced_tokens])
            self._rest[_resume_key(resumed)] = rest

    def _fresh(self, request: GenerateRequest) -> TurnPlan:
        rng = random.Random(f"{self._seed}/{len(request.input_ids)}/{request.input_ids[-1]}")
        budget = request.sampling.max_new_tokens
        stops = request.sampling.stop_token_ids
        length = budget if not stops else rng.randint(max(1, budget // 2), budget)
        ids: list[int] = []
        while len(ids) < length:
            ids.extend(self._tokenizer.encode(rng.choice(_WORDS) + " "))
        ids = ids[: length - 1 if stops else length]
        if stops:
            ids.append(stops[0])
        logprobs = tuple(rng.uniform(self._min_logprob, 0.0) for _ in ids)
        return TurnPlan(tuple(ids), logprobs, ends_with_stop=bool(stops))


class ServingTokenModel:
    """Routes each session to the scripted SWE agent or the filler (see the module docstring)."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        agent: ScriptedSWEAgent,
        tasks: Sequence[SWETask],
        filler: FillerTokenModel,
    ) -> None:
        self._tokenizer = tokenizer
        self._agent = agent
        self._tasks = tuple(tasks)
        self._filler = filler
        self._session_model: dict[str, TokenModel] = {}  # decided at the session's first turn
        self._owner: dict[str, TokenModel] = {}

    @property
    def agent(self) -> ScriptedSWEAgent:
        """The scripted SWE agent (its `script(session_id)` is what a session was told to do)."""
        return self._agent

    def plan(self, request: GenerateRequest) -> TurnPlan:
        model = self._model_for(request)
        self._owner[request.rid] = model
        return model.plan(request)

    def on_finish(
        self, request: GenerateRequest, produced_tokens: int, reason: FinishReason
    ) -> None:
        model = self._owner.pop(request.rid, self._filler)
        model.on_finish(request, produced_tokens, reason)

    def _model_for(self, request: GenerateRequest) -> TokenModel:
        session = request.session_id
        if not session:
            return self._filler
        model = self._session_model.get(session)
        if model is None:
            model = self._filler
            text = self._tokenizer.decode(list(request.input_ids))
            for task in self._tasks:
                statement = task.problem_statement.strip()
                if statement and statement in text:
                    self._agent.register(session, task, session)
                    model = self._agent
                    break
            self._session_model[session] = model
        return model


def _resume_key(ids: TokenIds | Sequence[int]) -> tuple[int, ...]:
    """A prompt's identity for resuming its aborted turn: its length and last 64 ids."""
    return (len(ids), *ids[-64:])
