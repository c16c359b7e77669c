"""The simulator's env sessions: token-level simulated envs of a `SyntheticWorkload`.

* `SimEnvSession` wraps a token-level `rollout.simulation.workload.SimEnv`; ids pass straight
  through (the `EnvSession` contract is in `rollout.runtime.env_session`).
* `SimWorkloadSessions` opens them, one per sample attempt (virtual-time studies), on the node
  of a `SimEnvFleet` when one is given: its start and act slots then queue the env in virtual
  time (without one, every env starts and acts at once).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from foundation.clock import Clock
from harness.events import EventBus, Phase, StepEvent
from rollout.core.predictors.base import RemainingWork, SampleContext
from rollout.core.types import sample_index_of
from rollout.runtime.env_session import ActOutcome, SampleRef
from rollout.simulation.env_fleet import SimEnvFleet, SimEnvNode
from rollout.simulation.workload import SampleScript, ScriptedTokenModel, SimEnv, SyntheticWorkload

__all__ = ["SimEnvSession", "SimWorkloadSessions"]


class SimEnvSession:
    """A token-level simulated env; ids go straight through (see the module docstring).

    With a `fleet` node, `start` holds one of its start slots and `act` one of its act slots
    (the wait is the turn's pre_act time); `close` gives the env back to the fleet.
    """

    def __init__(
        self,
        env: SimEnv,
        sample: SampleRef,
        *,
        stop_token_ids: tuple[int, ...],
        bus: EventBus,
        clock: Clock,
        fleet: tuple[SimEnvFleet, SimEnvNode] | None = None,
    ) -> None:
        self._env = env
        self._sample = sample
        self._stop_token_ids = stop_token_ids
        self._bus = bus
        self._clock = clock
        self._fleet = fleet
        self._acts = 0

    @property
    def session_id(self) -> str:
        return self._env.session_id

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return self._stop_token_ids

    async def start(self) -> tuple[int, ...]:
        started_s = self._clock.now()
        if self._fleet is None:
            prompt = await self._env.reset()
            self._emit(Phase.ENV_INIT, started_s, {"warm": True})
            return tuple(prompt)
        node = self._fleet[1]
        async with node.starting():
            prompt = await self._env.reset()
        data = {"warm": node.config.start_s == 0, "node": node.index}
        self._emit(Phase.ENV_INIT, started_s, data)
        return tuple(prompt)

    def peek_tool(self, generated_ids: Sequence[int]) -> str | None:
        """The tool this turn calls: a real loop parses it from the text; here the script says."""
        turns = self._env.script.turns
        return turns[self._acts].tool if self._acts < len(turns) else None

    async def act(self, generated_ids: Sequence[int], *, high: bool) -> ActOutcome:
        self._acts += 1
        queued_s = self._clock.now()
        if self._fleet is None:
            observation, done, reward, info = await self._env.step(generated_ids)
            act_data: dict[str, Any] = {"tool": info.get("tool")}
            started_s = queued_s
        else:
            node = self._fleet[1]
            async with node.acting(high=high):
                started_s = self._clock.now()
                observation, done, reward, info = await self._env.step(generated_ids)
            act_data = {"tool": info.get("tool"), "node": node.index}
        ended_s = self._clock.now()
        self._emit(Phase.PRE_ACT, queued_s, {}, end_s=started_s)
        self._emit(Phase.ACT, started_s, act_data, end_s=ended_s)
        truncated = bool(done and info.get("truncated"))
        if done:
            self._emit(Phase.REWARD, ended_s, {"reward": reward, "infra_error": None})
        return ActOutcome(
            observation_ids=tuple(observation),
            done=done,
            reward=reward,
            terminated=done and not truncated,
            truncated=truncated,
            tool_name=info.get("tool"),
            pre_act_s=started_s - queued_s,
            act_s=ended_s - started_s,
            info=info,
        )

    def set_priority(self, high: bool) -> None:
        """A queued tool call keeps the class it asked with; the next `act` passes the new one."""

    async def close(self) -> None:
        """Give the env back to its fleet node (idempotent); nothing else to release."""
        fleet, self._fleet = self._fleet, None
        if fleet is not None:
            fleet[0].release(fleet[1])

    def _emit(
        self, phase: Phase, start_s: float, data: dict[str, Any], end_s: float | None = None
    ) -> None:
        if not self._bus.listening:
            return
        end = self._clock.now() if end_s is None else end_s
        sample = self._sample
        self._bus.emit(
            StepEvent(phase, start_s, end, sample.sample_id, sample.group.group_id, data)
        )


class SimWorkloadSessions:
    """Simulated envs of `workload`; `token_model` must be the one the engine plays.

    With a `fleet`, each opened env is placed on one of its nodes (see `SimEnvFleet`). Each
    admitted group gets the next workload group index in first-seen order, so a group
    re-admitted after a restart (same group id) replays the same scripts, and two groups of
    the same prompt never share sessions.
    """

    def __init__(
        self,
        workload: SyntheticWorkload,
        token_model: ScriptedTokenModel,
        *,
        bus: EventBus,
        clock: Clock,
        fleet: SimEnvFleet | None = None,
    ) -> None:
        self._workload = workload
        self._token_model = token_model
        self._bus = bus
        self._clock = clock
        self._fleet = fleet
        self._group_index: dict[str, int] = {}
        self._scripts: dict[str, SampleScript] = {}

    def group_index(self, group_id: str) -> int:
        """The workload group a conductor group plays (KeyError if none of it opened)."""
        return self._group_index[group_id]

    async def open(self, sample: SampleRef) -> SimEnvSession:
        group_index = self._group_index.setdefault(sample.group.group_id, len(self._group_index))
        env = self._workload.make_env(group_index, sample.index)
        self._token_model.forget(env.session_id)  # a retry replays the script from turn 0
        self._scripts[sample.sample_id] = env.script
        fleet = self._fleet
        return SimEnvSession(
            env,
            sample,
            stop_token_ids=(self._workload.config.eos_token_id,),
            bus=self._bus,
            clock=self._clock,
            fleet=None if fleet is None else (fleet, fleet.place()),
        )

    def prewarm(self, prompt_indices: Sequence[int]) -> None:
        """Simulated envs need no warm-up (their reset time is in the script)."""

    def truth(self, context: SampleContext, *, assign: bool = False) -> RemainingWork:
        """The true remaining work of a sample (for the oracle predictor).

        A sample whose env has not opened yet (the scheduler predicts a whole group when it
        admits it) plays its group's workload group once a sibling opened; with `assign`, its
        group takes the next workload group now, as its first opening would have (the two
        orders agree whenever groups open in the order they are admitted). Without it, an
        unknown group is a KeyError (a mixed run asks each source in turn)."""
        script = self._scripts.get(context.sample_id)
        if script is None:
            group_id = context.group_id
            if group_id not in self._group_index and not assign:
                raise KeyError(f"sample {context.sample_id} has no open session")
            group_index = self._group_index.setdefault(group_id, len(self._group_index))
            script = self._workload.group(group_index)[sample_index_of(context.sample_id)]
        rest = script.turns[context.turns_done :]
        return RemainingWork(
            turns=float(len(rest)), gen_tokens=float(sum(turn.output_tokens for turn in rest))
        )
