"""The action-level agent loop: one sample's episode, driven by the scheduler's decisions.

A sample holds a generation slot only while it generates and an act slot only while its tool
runs (DESIGN.md §3). One `AgentLoop.run()` plays one attempt of one sample::

    start env ─► SampleAdmitted
    ┌─► wait for StartGeneration (pre_gen) ─► generate ─► ABORT? ─► GenerationAborted ─┐
    │        ▲                                                                          │
    │        └──────────── resume from prompt + partial output ◄───────────────────────┘
    │   GenerationFinished ─► tool_wait hint ─► ActStarted ─► act (pre_act, act) ─► tool_done
    └── ActFinished ◄── append observation ◄── turn boundary (priorities recomputed)

The loop reports every transition to its `LoopHost` (the conductor), which feeds the pure
scheduler and hands back `GenerationTicket`s. The trajectory keeps the engine's exact ids,
logprobs and per-token policy versions. An `EngineError` or an infrastructure failure ends the
attempt with `infra_error` set (the conductor retries the sample), except `EngineGoneError`
(no endpoint answers any more), which ends the run; a cancellation leaves the scheduler
cleanly and releases the env.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.events import Phase, StepEvent
from rollout.core.scheduler_events import (
    ActFinished,
    ActStarted,
    GenerationAborted,
    GenerationFinished,
    SampleAdmitted,
    SampleFinished,
    SchedulerEvent,
)
from rollout.core.types import SampleProgress, Trajectory, Turn
from rollout.engines.base import (
    EngineError,
    EngineGoneError,
    FinishReason,
    GenerateRequest,
    GenerateResult,
    KVHint,
    KVHintKind,
    SamplingParams,
)
from rollout.runtime.config import AgentLoopConfig
from rollout.runtime.env_session import (
    ActOutcome,
    EnvSession,
    EnvSessionError,
    SampleRef,
    SessionFactory,
)
from rollout.runtime.loop_host import GenerationTicket, LoopHost
from rollout.trajectories.builder import TrajectoryBuilder
from rollout.trajectories.tokenizer import Span

__all__ = ["AgentLoop"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _TurnStats:
    span: Span = field(default_factory=lambda: Span(0, 0))
    finish_reason: FinishReason = FinishReason.STOP
    pre_gen_s: float = 0.0
    gen_s: float = 0.0
    preemptions: int = 0
    interruptions: int = 0


class AgentLoop:
    """Plays one attempt of one sample; see the module docstring. Not reusable."""

    def __init__(
        self, sample: SampleRef, sessions: SessionFactory, host: LoopHost, config: AgentLoopConfig
    ) -> None:
        self._sample = sample
        self._sessions = sessions
        self._session: EnvSession | None = None
        self._host = host
        self._config = config
        self._record = TrajectoryBuilder(())
        self._env_init_s = 0.0
        self._in_scheduler = False
        self._engine_name: str | None = None
        self._computed_prefix = 0  # tokens whose KV the engine has computed for this sample
        self._prefix_version = 0  # the policy version that computed them
        self._truncation: str | None = None  # why the conductor ends it early (a deadline)
        self._act_task: asyncio.Future[ActOutcome] | None = None  # the tool call running
        self._in_flight: GenerationTicket | None = None  # the generation now in the engine
        self._waiting_ticket = False
        self._reward = 0.0  # the env's reward after the latest action (a truncation keeps it)
        self._deadline_s: float | None = None  # the deadline of the latest request sent
        self._cut = asyncio.Event()  # set by `truncate` (ends a hold)

    async def run(self) -> Trajectory:
        """Run the episode; returns its trajectory (with `infra_error` if the attempt failed)."""
        try:
            started_s = self._now()
            try:
                self._session = await self._sessions.open(self._sample)
                prompt = await self._session.start()
            except EnvSessionError as exc:
                data = {"message": str(exc), "cause": "env_start_failed"}
                self._emit(Phase.INFRA_ERROR, started_s, data)
                return self._result(infra_error=f"env_start_failed: {exc}")
            self._record = TrajectoryBuilder(prompt)
            self._env_init_s = self._now() - started_s
            self._report(
                SampleAdmitted(
                    self._sample.sample_id,
                    self._group_id,
                    self._now(),
                    context_tokens=self._record.length,
                    priority_class=self._sample.priority_class,
                    source=self._sample.group.source,
                )
            )
            self._in_scheduler = True
            try:
                return await self._episode()
            except EngineGoneError:
                raise  # no sample can generate: the run ends (not retried sample by sample)
            except EngineError as exc:
                data = {"message": str(exc), "cause": "engine_error"}
                self._emit(Phase.INFRA_ERROR, self._now(), data)
                return self._result(infra_error=f"engine_error: {exc}")
        finally:
            self._leave_scheduler(SampleFinished(self._sample.sample_id, self._now()))
            await self._hint(KVHintKind.CLOSE)
            if self._session is not None:
                await self._session.close()

    @property
    def session_id(self) -> str | None:
        """The engine session of this attempt, once its env is open."""
        return None if self._session is None else self._session.session_id

    def set_priority(self, high: bool) -> None:
        """The sample's group changed class: re-prioritize its env's act slots."""
        if self._session is not None:
            self._session.set_priority(high)

    @property
    def waiting_for_generation(self) -> bool:
        """Whether the loop waits for a generation ticket right now."""
        return self._waiting_ticket

    @property
    def truncation_reason(self) -> str | None:
        """Why `truncate` was called (None: it was not)."""
        return self._truncation

    @property
    def generation_in_flight(self) -> GenerationTicket | None:
        """The ticket of the generation now in the engine, if any."""
        return self._in_flight

    async def truncate(self, reason: str = "deadline", *, cut_tool_call: bool = False) -> None:
        """End the episode at its current turn (`truncated`, `truncation_reason=reason`, the
        reward the env gave so far). A generation in flight is aborted and its partial output
        kept as the last turn; a tool call runs to its end and no generation follows, or, with
        `cut_tool_call`, is cancelled (the turn keeps no observation). A loop waiting for a
        ticket must be handed one (any) by its host to notice. Idempotent."""
        if self._truncation is not None:
            return
        self._truncation = reason
        self._cut.set()
        during = self._doing()
        data = {"reason": reason, "during": during, "turns": len(self._record.turns)}
        if during == "act":
            data["cut_tool_call"] = cut_tool_call
        self._emit(Phase.TRUNCATE, self._now(), data)
        act = self._act_task
        if cut_tool_call and act is not None and not act.done():
            act.cancel()
        ticket = self._in_flight
        if ticket is not None:
            with contextlib.suppress(EngineError, OSError):
                await self._host.engine(ticket.engine).abort(ticket.rid)

    def _doing(self) -> str:
        """What the loop is doing now: gen, act, pre_gen (waiting for a slot) or other."""
        if self._in_flight is not None:
            return "gen"
        if self._act_task is not None:
            return "act"
        return "pre_gen" if self._waiting_ticket else "other"

    # -- the episode -----------------------------------------------------------------------

    async def _episode(self) -> Trajectory:
        sample_id = self._sample.sample_id
        while True:
            if self._truncation is not None:  # truncated in a tool call: no next generation
                return self._truncated()
            turn = await self._generate_turn()
            if self._truncation is not None:  # cut at this turn: keep what it generated
                if turn.span.end > turn.span.start:
                    self._record_turn(turn, ActOutcome())
                return self._truncated()
            self._report(
                GenerationFinished(sample_id, now_s=self._now(), context_tokens=self._record.length)
            )
            outcome = await self._act(turn)
            if outcome is None:  # its tool call was cut by a truncation
                self._record_turn(turn, ActOutcome())
                return self._truncated()
            self._record_turn(turn, outcome)
            ending = self._ending(outcome)
            if ending is not None:
                self._leave_scheduler(ActFinished(sample_id, episode_done=True, now_s=self._now()))
                return ending
            self._report(
                ActFinished(sample_id, now_s=self._now(), context_tokens=self._record.length)
            )
            self._host.turn_boundary(
                SampleProgress(
                    sample_id=sample_id,
                    group_id=self._group_id,
                    turns_done=len(self._record.turns),
                    gen_tokens=self._record.generated_tokens,
                    context_tokens=self._record.length,
                    obs_tokens=self._record.observation_tokens,
                )
            )

    def _truncated(self) -> Trajectory:
        return self._result(reward=self._reward, truncated=True, truncation_reason=self._truncation)

    def _ending(self, outcome: ActOutcome) -> Trajectory | None:
        """The finished trajectory if this action ended the episode, else None."""
        if outcome.infra_error is not None:
            cause = outcome.infra_error.split(":", 1)[0].strip() or "env_infra_error"
            self._emit(
                Phase.INFRA_ERROR, self._now(), {"message": outcome.infra_error, "cause": cause}
            )
            return self._result(infra_error=outcome.infra_error)
        if outcome.done:
            return self._result(
                reward=outcome.reward,
                terminated=outcome.terminated,
                truncated=outcome.truncated,
                truncation_reason=outcome.truncation_reason,
                extra_info=outcome.trajectory_info,
            )
        if len(self._record.turns) >= self._config.max_turns:
            return self._result(reward=0.0, truncated=True, truncation_reason="max_turns")
        if self._record.length >= self._config.max_context_tokens - 1:
            return self._result(reward=0.0, truncated=True, truncation_reason="max_context_tokens")
        return None

    async def _generate_turn(self) -> _TurnStats:
        """Generate one model turn, across preemptions and weight-update interruptions."""
        self._record.open_turn()
        turn = _TurnStats()
        while True:
            waited_from_s = self._now()
            self._waiting_ticket = True
            try:
                ticket = await self._host.next_generation(self._sample.sample_id)
            finally:
                self._waiting_ticket = False
            if self._truncation is not None:  # truncated while waiting: no generation
                turn.span = self._record.end_turn()
                return turn
            began_s = self._now()
            turn.pre_gen_s += began_s - waited_from_s
            data = {"engine": ticket.engine, "resume": ticket.resume, "high": ticket.high}
            self._emit(Phase.PRE_GEN, waited_from_s, data, end_s=began_s)
            result = await self._generate(ticket)
            ended_s = self._now()
            # Time queued inside the engine is a wait for a slot too (T_pre_gen), whichever
            # layer did the queueing: it is counted as such for every policy alike.
            forward_from_s = min(ended_s, began_s + result.queued_s)
            if forward_from_s > began_s:
                turn.pre_gen_s += forward_from_s - began_s
                self._emit(
                    Phase.PRE_GEN, began_s, {**data, "in_engine": True}, end_s=forward_from_s
                )
            turn.gen_s += ended_s - forward_from_s
            self._record.append_generated(
                result.output_ids, result.output_logprobs, result.token_versions()
            )
            self._emit(Phase.GEN, forward_from_s, {**data, **_result_data(result)}, end_s=ended_s)
            if result.finish_reason is not FinishReason.ABORT or self._truncation is not None:
                turn.finish_reason = result.finish_reason
                turn.span = self._record.end_turn()
                return turn
            partial = len(result.output_ids)
            if not ticket.abort_requested and self._deadline_passed(ended_s):
                ticket.abort_requested = True  # the engine enforced the request's deadline
                ticket.abort_reason = "deadline: request deadline passed"
            if ticket.abort_requested:
                turn.preemptions += 1
                phase, why = Phase.PREEMPT, {"reason": ticket.abort_reason}
            else:
                turn.interruptions += 1
                phase, why = Phase.INTERRUPT, {"reason": "engine paused (weight update)"}
            held = ticket.hold is not None and not ticket.hold.is_set()
            data = {"partial_tokens": partial, **why, **({"held": True} if held else {})}
            self._emit(phase, ended_s, data, end_s=ended_s)
            if held and ticket.hold is not None:
                await self._held(ticket.hold)
                turn.pre_gen_s += self._now() - ended_s
                self._emit(Phase.PRE_GEN, ended_s, {"engine": ticket.engine, "held": True})
                if self._truncation is not None:  # its group was chosen after all: cut here
                    turn.finish_reason = result.finish_reason
                    turn.span = self._record.end_turn()
                    return turn
            self._report(GenerationAborted(self._sample.sample_id, partial, self._now()))

    def _deadline_passed(self, now_s: float) -> bool:
        deadline_s = self._deadline_s
        return deadline_s is not None and now_s >= deadline_s

    async def _held(self, hold: asyncio.Event) -> None:
        """Wait until `hold` lifts or the loop is truncated (a cancelled generation that cannot
        help this step waits here, its slot kept, instead of starting again at once)."""
        waits = [asyncio.ensure_future(hold.wait()), asyncio.ensure_future(self._cut.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()

    async def _generate(self, ticket: GenerationTicket) -> GenerateResult:
        """One `generate` call that resumes the open turn from prompt + partial output."""
        config = self._config
        budget = min(
            config.max_new_tokens - self._record.turn_tokens,
            config.max_context_tokens - self._record.length,
        )
        if budget <= 0:
            return self._no_call(ticket, FinishReason.LENGTH)
        if ticket.abort_requested or self._truncation is not None:  # before the request left
            return self._no_call(ticket, FinishReason.ABORT)
        priority = config.high_priority if ticket.high else config.low_priority
        opening = self._host.kv_hints and self._engine_name is None
        request = GenerateRequest(
            rid=ticket.rid,
            input_ids=self._record.token_ids,
            sampling=SamplingParams(
                max_new_tokens=budget,
                temperature=config.temperature,
                top_p=config.top_p,
                stop_token_ids=self._env.stop_token_ids,
            ),
            session_id=self._env.session_id,
            priority=priority,
            kv_hints=(
                (KVHint(KVHintKind.OPEN, self._env.session_id, priority),) if opening else ()
            ),
            # 'v<policy version>' under version_isolation: namespace (a host without one: shared)
            cache_namespace=getattr(self._host, "cache_namespace", ""),
            # when it can no longer help the step waiting under a budget (a host without: none)
            deadline_s=getattr(self._host, "request_deadline_s", None),
        )
        self._deadline_s = request.deadline_s
        version = self._host_policy_version()
        self._engine_name = ticket.engine
        self._in_flight = ticket
        try:
            result = await self._call_engine(ticket.engine, request)
        finally:
            self._in_flight = None
        self._host.generation_done(
            ticket.engine,
            request,
            result,
            computed_prefix_tokens=self._computed_prefix,
            sample_id=self._sample.sample_id,
            prefix_from_older_weights=self._computed_prefix > 0 and self._prefix_version < version,
        )
        # The last sampled token has no KV yet; everything before it has been computed once,
        # by the weights of the request's start (an update in between aborts it).
        self._computed_prefix = len(request.input_ids) + len(result.output_ids) - 1
        self._prefix_version = version
        return result

    def _host_policy_version(self) -> int:
        """The policy version the engines serve now (a host without versions: always 0)."""
        version = getattr(self._host, "policy_version", 0)
        return version if isinstance(version, int) else 0

    async def _call_engine(self, name: str, request: GenerateRequest) -> GenerateResult:
        """`generate`, with the hung-engine watchdog; any failure becomes an `EngineError`
        (which ends this attempt, to be retried), never an exception that ends the run."""
        engine = self._host.engine(name)
        limit = self._config.generate_timeout_s
        try:
            async with asyncio.timeout(limit):
                return await engine.generate(request)
        except TimeoutError:
            log.warning(
                "engine %s gave no answer to %s in %g s; aborting it", name, request.rid, limit
            )
            with contextlib.suppress(EngineError, OSError):
                await engine.abort(request.rid)
            raise EngineError(
                f"engine {name!r} gave no answer to {request.rid} within {limit:g} s (hung?)"
            ) from None
        except OSError as exc:  # a client that leaks ConnectionResetError and the like
            raise EngineError(f"engine {name!r} failed on {request.rid}: {exc!r}") from exc

    async def _act(self, turn: _TurnStats) -> ActOutcome | None:
        """Run the turn's tool call, telling the KV manager how long the session will wait;
        None when a truncation cut the call (`truncate(cut_tool_call=True)`)."""
        ids = self._record.token_slice(turn.span.start, turn.span.end)
        tool = self._env.peek_tool(ids)
        expected_s = self._host.expected_tool_s(tool)
        if await self._hint(KVHintKind.TOOL_WAIT, expected_s=expected_s):
            self._host.tool_wait_hinted(
                self._sample.sample_id,
                self._engine_name or "",
                high=self._host.is_critical(self._group_id),
                tool=tool,
                expected_s=expected_s,
            )
        self._report(ActStarted(self._sample.sample_id, self._now()))
        act = asyncio.ensure_future(self._env.act(ids, high=self._host.is_critical(self._group_id)))
        self._act_task = act
        try:
            outcome = await act
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self._truncation is None or (current is not None and current.cancelling()):
                raise  # the loop itself is being cancelled
            return None
        finally:
            self._act_task = None
        self._reward = outcome.reward
        self._host.tool_observed(outcome.tool_name or tool, outcome.act_s)
        if not outcome.done:
            await self._hint(KVHintKind.TOOL_DONE)
        return outcome

    def _record_turn(self, turn: _TurnStats, outcome: ActOutcome) -> None:
        observation = self._record.append_observation(outcome.observation_ids)
        has_observation = observation.end > observation.start
        self._record.add_turn(
            Turn(
                index=len(self._record.turns),
                gen_start=turn.span.start,
                gen_end=turn.span.end,
                obs_start=observation.start if has_observation else 0,
                obs_end=observation.end if has_observation else 0,
                finish_reason=str(turn.finish_reason),
                tool_name=outcome.tool_name,
                tool_result=outcome.tool_result,
                pre_gen_s=turn.pre_gen_s,
                gen_s=turn.gen_s,
                pre_act_s=outcome.pre_act_s,
                act_s=outcome.act_s,
                preemptions=turn.preemptions,
                interruptions=turn.interruptions,
            )
        )

    # -- helpers ---------------------------------------------------------------------------

    @property
    def _env(self) -> EnvSession:
        if self._session is None:
            raise EnvSessionError("the sample's env is not open yet")
        return self._session

    @property
    def _group_id(self) -> str:
        return self._sample.group.group_id

    def _now(self) -> float:
        return self._host.clock.now()

    def _report(self, event: SchedulerEvent) -> None:
        self._host.report(event)

    def _leave_scheduler(self, event: SchedulerEvent) -> None:
        """Report the event that ends the sample in the scheduler, once."""
        if self._in_scheduler:
            self._in_scheduler = False
            self._host.report(event)

    def _no_call(self, ticket: GenerationTicket, reason: FinishReason) -> GenerateResult:
        return GenerateResult(ticket.rid, (), (), reason, prompt_tokens=self._record.length)

    async def _hint(self, kind: KVHintKind, expected_s: float | None = None) -> bool:
        """Best effort: a lost hint costs cache efficiency, never correctness. True if sent."""
        if not self._host.kv_hints or self._engine_name is None:
            return False
        config = self._config
        high = self._host.is_critical(self._group_id)
        priority = config.high_priority if high else config.low_priority
        hint = KVHint(kind, self._env.session_id, priority, expected_s)
        try:
            await self._host.engine(self._engine_name).send_kv_hints([hint])
        except EngineError as exc:
            log.warning("KV hint %s for %s was lost: %s", kind, self._sample.sample_id, exc)
            return False
        return True

    def _emit(
        self, phase: Phase, start_s: float, data: dict[str, Any], *, end_s: float | None = None
    ) -> None:
        if not self._host.bus.listening:
            return
        end = self._now() if end_s is None else end_s
        self._host.bus.emit(
            StepEvent(phase, start_s, end, self._sample.sample_id, self._group_id, data)
        )

    def _result(
        self,
        *,
        reward: float | None = None,
        terminated: bool = False,
        truncated: bool = False,
        infra_error: str | None = None,
        truncation_reason: str | None = None,
        extra_info: Mapping[str, Any] | None = None,
    ) -> Trajectory:
        sample, group = self._sample, self._sample.group
        return self._record.build(
            sample_id=sample.sample_id,
            group_id=group.group_id,
            prompt_index=group.prompt_index,
            sample_index=sample.index,
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            infra_error=infra_error,
            env_init_s=self._env_init_s,
            admitted_step=group.admitted_step,
            attempt=group.attempt,
            info={
                "session_id": self.session_id,
                "retry": sample.retry,
                "engine": self._engine_name,
                "truncation_reason": truncation_reason,
                **(extra_info or {}),
            },
        )


def _result_data(result: GenerateResult) -> dict[str, Any]:
    return {
        "tokens": len(result.output_ids),
        "prompt_tokens": result.prompt_tokens,
        "cached_tokens": result.cached_tokens,
        "finish_reason": str(result.finish_reason),
        "weight_version": result.weight_version,
    }
