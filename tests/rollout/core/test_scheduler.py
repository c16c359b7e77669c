"""Spec of the rollout scheduler: slot order, preemption, KV throttling, engines.

Sample names say what they are: `int_hi` was interrupted and belongs to a critical group,
`env_lo` is back from its tool in a low-priority group, `new_lo` has not generated yet.
Groups whose name starts with "H" are critical unless a test says otherwise.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from types import MappingProxyType

import pytest

from rollout.core.config import SchedulerConfig
from rollout.core.priority import PriorityAssignment
from rollout.core.scheduler import (
    ActFinished,
    ActStarted,
    Decision,
    EngineAdded,
    EngineLoad,
    EnginePaused,
    EngineResumed,
    EngineStatsUpdated,
    GenerationAborted,
    GenerationFinished,
    GenerationProgress,
    Preempt,
    PrioritiesChanged,
    PriorityChanged,
    QueueLevel,
    RolloutScheduler,
    SampleAdmitted,
    SampleFinished,
    SchedulerEvent,
    StartGeneration,
    queue_level,
)
from rollout.core.types import SampleState
from rollout.errors import IllegalTransitionError, SchedulerError


def stats(slots: int, headroom: float = 1.0) -> EngineLoad:
    return EngineLoad(max_running_requests=slots, kv_headroom=headroom)


class World:
    """A scheduler plus a clock that ticks one second per event, and a log of decisions."""

    def __init__(
        self,
        slots: int = 4,
        engines: Iterable[str] = ("e0",),
        watermark: float = 0.0,
        preemption: bool = True,
        payoff: bool = True,
    ) -> None:
        config = SchedulerConfig(
            low_priority_kv_watermark=watermark, preemption=preemption, preemption_payoff=payoff
        )
        self.scheduler = RolloutScheduler(config)
        self.now_s = 0.0
        for engine in engines:
            self.do(EngineAdded(engine, stats(slots)))

    def do(self, event: SchedulerEvent) -> tuple[Decision, ...]:
        self.now_s += 1.0
        return self.scheduler.handle(_at(event, self.now_s))

    def prioritize(
        self, critical: Iterable[str], ranks: Iterable[str] = ()
    ) -> tuple[Decision, ...]:
        """Make `critical` the critical groups; `ranks` lists groups most urgent first."""
        assignment = PriorityAssignment(
            critical=frozenset(critical),
            ranks=MappingProxyType({group: rank for rank, group in enumerate(ranks)}),
        )
        return self.do(PrioritiesChanged(assignment))

    def admit(self, sample_id: str, group_id: str | None = None) -> tuple[Decision, ...]:
        return self.do(SampleAdmitted(sample_id, group_id or _group_of(sample_id)))

    def to_tool_and_back(self, sample_id: str) -> tuple[Decision, ...]:
        self.do(GenerationFinished(sample_id))
        self.do(ActStarted(sample_id))
        return self.do(ActFinished(sample_id))


def _at(event: SchedulerEvent, now_s: float) -> SchedulerEvent:
    fields = {name: getattr(event, name) for name in event.__dataclass_fields__}
    fields["now_s"] = now_s
    return type(event)(**fields)


def _group_of(sample_id: str) -> str:
    """`int_hi` → group `H_int_hi`, `new_lo` → `L_new_lo`: one group per sample by default."""
    return ("H_" if sample_id.endswith("hi") else "L_") + sample_id


def starts(decisions: Iterable[Decision]) -> list[str]:
    return [d.sample_id for d in decisions if isinstance(d, StartGeneration)]


def preempts(decisions: Iterable[Decision]) -> list[Preempt]:
    return [d for d in decisions if isinstance(d, Preempt)]


KIND_ORDER = ["int_hi", "env_hi", "new_hi", "int_lo", "env_lo", "new_lo"]


def park(samples: list[str]) -> World:
    """Put each sample into the waiting kind its name says, on a paused engine with 1 slot."""
    world = World(slots=len(samples) + 1)
    world.prioritize({_group_of(s) for s in samples if s.endswith("hi")})
    generating = [s for s in samples if s.startswith(("int", "env"))]
    for sample_id in generating:
        world.admit(sample_id)
    for sample_id in generating:
        if sample_id.startswith("env"):
            world.do(GenerationFinished(sample_id))
    world.do(EnginePaused("e0"))
    for sample_id in samples:
        if sample_id.startswith("int"):
            world.do(GenerationAborted(sample_id, partial_tokens=3))
        elif sample_id.startswith("env"):
            world.do(ActStarted(sample_id))
            world.do(ActFinished(sample_id))
        else:
            world.admit(sample_id)
    world.do(EngineStatsUpdated("e0", stats(1)))
    return world


# -- the five-level order ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "new", "high", "level"),
    [
        (SampleState.INTERRUPTED, False, True, QueueLevel.INTERRUPTED_HIGH),
        (SampleState.PREEMPTED, False, True, QueueLevel.INTERRUPTED_HIGH),
        (SampleState.WAIT_GEN, False, True, QueueLevel.BACK_FROM_ENV_HIGH),
        (SampleState.WAIT_GEN, True, True, QueueLevel.BACK_FROM_ENV_HIGH),
        (SampleState.INTERRUPTED, False, False, QueueLevel.INTERRUPTED_LOW),
        (SampleState.PREEMPTED, False, False, QueueLevel.INTERRUPTED_LOW),
        (SampleState.WAIT_GEN, False, False, QueueLevel.BACK_FROM_ENV_LOW),
        (SampleState.WAIT_GEN, True, False, QueueLevel.NEW_LOW),
    ],
)
def test_queue_level_table(state: SampleState, new: bool, high: bool, level: QueueLevel) -> None:
    assert queue_level(state, new=new, high=high) is level


def test_free_slots_are_filled_in_the_five_level_order() -> None:
    world = park(KIND_ORDER)
    world.do(EngineStatsUpdated("e0", stats(len(KIND_ORDER))))
    assert starts(world.do(EngineResumed("e0"))) == KIND_ORDER


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (a, b)
        for i, a in enumerate(KIND_ORDER)
        for b in KIND_ORDER[i + 1 :]
        if (a, b) != ("env_hi", "new_hi")
    ],
)
def test_the_higher_level_gets_the_only_free_slot(first: str, second: str) -> None:
    world = park([second, first])  # parked in reverse so arrival order cannot explain the result
    assert starts(world.do(EngineResumed("e0"))) == [first]


@pytest.mark.parametrize("arrival", [["new_hi", "env_hi"], ["env_hi", "new_hi"]])
def test_new_sample_of_a_critical_group_ranks_with_samples_back_from_env(
    arrival: list[str],
) -> None:
    world = park(arrival)  # same level, so the earlier arrival goes first
    assert starts(world.do(EngineResumed("e0"))) == arrival[:1]


def test_samples_of_one_level_are_served_first_come_first_served() -> None:
    world = World(slots=1)
    world.admit("blocker_lo")
    for sample_id in ("b_lo", "a_lo", "c_lo"):
        world.admit(sample_id)
    assert world.scheduler.waiting_order() == ("b_lo", "a_lo", "c_lo")


# -- preemption -------------------------------------------------------------------------------


def full_of_low(slots: int = 2, **kwargs: object) -> World:
    world = World(slots=slots, **kwargs)  # type: ignore[arg-type]
    for index in range(slots):
        world.admit(f"run{index}_lo")
    return world


def test_low_priority_generation_is_preempted_when_a_critical_sample_waits() -> None:
    world = full_of_low()
    world.prioritize({"H_new_hi"})
    decisions = world.admit("new_hi")
    assert [p.for_sample_id for p in preempts(decisions)] == ["new_hi"]


def test_every_preemption_carries_a_reason() -> None:
    world = full_of_low()
    world.prioritize({"H_new_hi"})
    (preempt,) = preempts(world.admit("new_hi"))
    assert "new_hi" in preempt.reason and preempt.engine == "e0"


def test_no_preemption_when_a_slot_is_free() -> None:
    world = World(slots=2)
    world.admit("run0_lo")
    world.prioritize({"H_new_hi"})
    decisions = world.admit("new_hi")
    assert (starts(decisions), preempts(decisions)) == (["new_hi"], [])


def test_high_priority_generation_is_never_preempted() -> None:
    world = World(slots=1)
    world.prioritize({"H_run_hi", "H_new_hi"})
    world.admit("run_hi")
    assert preempts(world.admit("new_hi")) == []


def test_victim_is_the_low_sample_with_fewest_tokens_in_its_turn() -> None:
    world = full_of_low(slots=3)
    for sample_id, tokens in (("run0_lo", 40), ("run1_lo", 7), ("run2_lo", 90)):
        world.do(GenerationProgress(sample_id, segment_tokens=tokens))
    world.prioritize({"H_new_hi"})
    assert [p.sample_id for p in preempts(world.admit("new_hi"))] == ["run1_lo"]


def test_tokens_kept_from_an_earlier_abort_count_as_work_of_the_turn() -> None:
    world = full_of_low(slots=2)
    world.do(EnginePaused("e0"))
    world.do(GenerationAborted("run0_lo", partial_tokens=50))
    world.do(GenerationAborted("run1_lo", partial_tokens=0))
    world.do(EngineResumed("e0"))  # both resume; run0 already has 50 tokens in this turn
    world.do(GenerationProgress("run0_lo", segment_tokens=5))
    world.do(GenerationProgress("run1_lo", segment_tokens=20))
    world.prioritize({"H_new_hi"})
    assert [p.sample_id for p in preempts(world.admit("new_hi"))] == ["run1_lo"]


def test_without_progress_reports_the_most_recently_started_low_sample_is_the_victim() -> None:
    world = full_of_low(slots=3)  # run2 started last
    world.prioritize({"H_new_hi"})
    assert [p.sample_id for p in preempts(world.admit("new_hi"))] == ["run2_lo"]


def test_victim_ties_are_broken_by_the_lowest_priority_group() -> None:
    world = World(slots=2)
    world.do(EnginePaused("e0"))
    world.admit("x_lo", "L_cheap")
    world.admit("y_lo", "L_costly")
    world.prioritize({"H_new_hi"}, ranks=["H_new_hi", "L_cheap", "L_costly"])
    world.do(EngineResumed("e0"))  # both start at the same instant with no tokens
    assert [p.sample_id for p in preempts(world.admit("new_hi"))] == ["y_lo"]


def test_one_waiting_critical_sample_preempts_only_one_generation() -> None:
    world = full_of_low(slots=3)
    world.prioritize({"H_new_hi"})
    world.admit("new_hi")
    later = world.do(EngineStatsUpdated("e0", stats(3)))  # the abort has not come back yet
    assert preempts(later) == []


def test_two_waiting_critical_samples_preempt_two_generations() -> None:
    world = full_of_low(slots=3)
    world.do(EnginePaused("e0"))
    world.prioritize({"H_a_hi", "H_b_hi"})
    world.admit("a_hi")
    world.admit("b_hi")
    world.do(EngineStatsUpdated("e0", stats(3)))
    assert len(preempts(world.do(EngineResumed("e0")))) == 2


def test_preempted_sample_is_requeued_and_the_critical_sample_takes_its_slot() -> None:
    world = full_of_low()
    world.prioritize({"H_new_hi"})
    (preempt,) = preempts(world.admit("new_hi"))
    decisions = world.do(GenerationAborted(preempt.sample_id, partial_tokens=12))
    assert starts(decisions) == ["new_hi"]
    assert world.scheduler.state_of(preempt.sample_id) is SampleState.PREEMPTED


def test_preempted_sample_resumes_with_its_partial_output_when_a_slot_frees() -> None:
    world = full_of_low()
    world.prioritize({"H_new_hi"})
    (preempt,) = preempts(world.admit("new_hi"))
    world.do(GenerationAborted(preempt.sample_id, partial_tokens=12))
    other = next(s for s in ("run0_lo", "run1_lo") if s != preempt.sample_id)
    decisions = world.do(GenerationFinished(other, episode_done=True))
    (start,) = [d for d in decisions if isinstance(d, StartGeneration)]
    assert (start.sample_id, start.resume) == (preempt.sample_id, True)
    assert world.scheduler.sample(preempt.sample_id).preemptions == 1


def test_preemption_can_be_switched_off() -> None:
    world = full_of_low(preemption=False)
    world.prioritize({"H_new_hi"})
    assert preempts(world.admit("new_hi")) == []


@pytest.mark.parametrize(
    ("tokens_per_turn", "payoff", "preempted"),
    [(200, True, True), (2, True, False), (2, False, True)],
)
def test_a_slot_is_preempted_only_where_waiting_for_one_would_cost_more(
    tokens_per_turn: int, payoff: bool, preempted: bool
) -> None:
    # Each event is a second: run0 holds its slot 2 s for `tokens_per_turn` tokens. With two
    # slots a slot frees every 1 s; at 2 tokens per turn a forward step takes 1 s, so freeing
    # one by force gains no more than the victim's extra forward costs (slot_turnover.py).
    world = World(slots=2, payoff=payoff)
    world.admit("run0_lo")
    world.admit("run1_lo")
    world.do(GenerationFinished("run0_lo", context_tokens=tokens_per_turn))
    world.admit("run2_lo")  # the slots are full again
    world.prioritize({"H_new_hi"})
    assert bool(preempts(world.admit("new_hi"))) is preempted


def test_preemption_only_targets_the_engine_the_critical_sample_is_sticky_to() -> None:
    world = World(slots=1, engines=("e0", "e1"))
    world.prioritize({"H_back_hi"})
    world.admit("back_hi")  # starts on e0 (first engine with the most free slots)
    world.admit("other_lo")  # takes e1
    world.do(GenerationFinished("back_hi"))
    world.admit("squatter_lo")  # takes e0 while back_hi runs its tool
    world.do(ActStarted("back_hi"))
    decisions = world.do(ActFinished("back_hi"))
    assert [p.sample_id for p in preempts(decisions)] == ["squatter_lo"]


def test_nothing_is_preempted_on_a_paused_engine() -> None:
    world = full_of_low()
    world.do(EnginePaused("e0"))
    world.prioritize({"H_new_hi"})
    assert preempts(world.admit("new_hi")) == []


# -- KV watermark throttling ------------------------------------------------------------------


def test_low_priority_sample_is_not_started_when_kv_headroom_is_at_the_watermark() -> None:
    world = World(watermark=0.2)
    world.do(EngineStatsUpdated("e0", stats(4, headroom=0.2)))
    assert starts(world.admit("new_lo")) == []


def test_high_priority_sample_is_started_regardless_of_kv_headroom() -> None:
    world = World(watermark=0.2)
    world.do(EngineStatsUpdated("e0", stats(4, headroom=0.0)))
    world.prioritize({"H_new_hi"})
    assert starts(world.admit("new_hi")) == ["new_hi"]


def test_throttled_low_sample_starts_once_headroom_recovers() -> None:
    world = World(watermark=0.2)
    world.do(EngineStatsUpdated("e0", stats(4, headroom=0.1)))
    world.admit("new_lo")
    assert starts(world.do(EngineStatsUpdated("e0", stats(4, headroom=0.5)))) == ["new_lo"]


def test_throttling_low_work_does_not_block_high_work_behind_it() -> None:
    world = World(watermark=0.2)
    world.do(EngineStatsUpdated("e0", stats(4, headroom=0.1)))
    world.admit("env_lo")
    world.prioritize({"H_new_hi"})
    assert starts(world.admit("new_hi")) == ["new_hi"]


# -- engines ----------------------------------------------------------------------------------


def test_sample_sticks_to_the_engine_of_its_first_generation() -> None:
    world = World(slots=2, engines=("e0", "e1"))
    world.admit("a_lo")
    first = world.scheduler.engine_of("a_lo")
    world.do(GenerationFinished("a_lo"))
    world.admit("b_lo", "L_b")  # the other engine now has more free slots than before
    world.do(ActStarted("a_lo"))
    decisions = world.do(ActFinished("a_lo"))
    assert [(d.sample_id, d.engine) for d in decisions if isinstance(d, StartGeneration)] == [
        ("a_lo", first)
    ]


def test_new_sample_goes_to_the_engine_of_its_siblings() -> None:
    world = World(slots=3, engines=("e0", "e1"))
    world.admit("s0_lo", "L_g")
    world.admit("other_lo", "L_x")
    sibling_engine = world.scheduler.engine_of("s0_lo")
    world.admit("s1_lo", "L_g")
    assert world.scheduler.engine_of("s1_lo") == sibling_engine


def test_new_sample_without_siblings_goes_to_the_engine_with_most_free_slots() -> None:
    world = World(slots=3, engines=("e0", "e1"))
    world.admit("a_lo")
    busy = world.scheduler.engine_of("a_lo")
    world.admit("b_lo")
    assert world.scheduler.engine_of("b_lo") != busy


def test_paused_engine_starts_nothing() -> None:
    world = World()
    world.do(EnginePaused("e0"))
    assert starts(world.admit("new_lo")) == []


def test_generation_aborted_by_a_weight_update_is_interrupted() -> None:
    world = World()
    world.admit("a_lo")
    world.do(EnginePaused("e0"))
    world.do(GenerationAborted("a_lo", partial_tokens=4))
    assert world.scheduler.state_of("a_lo") is SampleState.INTERRUPTED
    assert starts(world.do(EngineResumed("e0"))) == ["a_lo"]


# -- priorities and act slots -----------------------------------------------------------------


def test_priority_change_is_reported_for_every_live_sample_of_a_group_that_flips() -> None:
    world = World()
    world.admit("a_lo", "G")
    world.admit("b_lo", "G")
    world.admit("c_lo", "OTHER")
    decisions = world.prioritize({"G"})
    assert [d for d in decisions if isinstance(d, PriorityChanged)] == [
        PriorityChanged("a_lo", True),
        PriorityChanged("b_lo", True),
    ]


def test_act_slot_key_puts_critical_samples_first() -> None:
    world = World()
    world.prioritize({"H_a_hi"})
    for sample_id in ("b_lo", "a_hi"):
        world.admit(sample_id)
        world.do(GenerationFinished(sample_id))
    keys = {s: world.scheduler.act_slot_key(s) for s in ("b_lo", "a_hi")}
    assert sorted(keys, key=keys.__getitem__) == ["a_hi", "b_lo"]


# -- contract violations ----------------------------------------------------------------------


def test_event_for_an_unknown_sample_raises() -> None:
    with pytest.raises(SchedulerError, match="SampleAdmitted"):
        World().do(GenerationFinished("ghost"))


def test_event_for_an_unknown_engine_raises() -> None:
    with pytest.raises(SchedulerError, match="EngineAdded"):
        World().do(EnginePaused("nope"))


def test_generation_finished_for_a_sample_that_is_not_generating_raises() -> None:
    world = World()
    world.admit("a_lo")
    world.do(GenerationFinished("a_lo"))
    with pytest.raises(SchedulerError, match="wait_act"):
        world.do(GenerationFinished("a_lo"))


def test_act_started_twice_is_an_illegal_transition() -> None:
    world = World()
    world.admit("a_lo")
    world.do(GenerationFinished("a_lo"))
    world.do(ActStarted("a_lo"))
    with pytest.raises(IllegalTransitionError):
        world.do(ActStarted("a_lo"))


def test_finished_sample_releases_its_slot_and_is_forgotten() -> None:
    world = World(slots=1)
    world.admit("a_lo")
    world.admit("b_lo")
    decisions = world.do(SampleFinished("a_lo"))
    assert starts(decisions) == ["b_lo"]
    with pytest.raises(SchedulerError):
        world.scheduler.state_of("a_lo")


# -- invariants under random event sequences --------------------------------------------------


class Driver:
    """Carries out decisions like a shell would and fires random events back."""

    def __init__(self, seed: int, engines: tuple[str, ...], slots: int, watermark: float) -> None:
        self.rng = random.Random(seed)
        self.world = World(slots=slots, engines=engines, watermark=watermark)
        self.watermark = watermark
        self.engines = engines
        self.slots = dict.fromkeys(engines, slots)
        self.headroom = dict.fromkeys(engines, 1.0)
        self.paused: set[str] = set()
        self.running: dict[str, str] = {}  # sample -> engine
        self.to_abort: set[str] = set()
        self.in_tool: set[str] = set()
        self.acting: set[str] = set()
        self.critical: set[str] = set()
        self.next_sample = 0

    def apply(self, event: SchedulerEvent) -> None:
        decisions = self.world.do(event)
        for decision in decisions:
            if isinstance(decision, StartGeneration):
                high = decision.high
                assert high == (
                    self.world.scheduler.sample(decision.sample_id).group_id in self.critical
                )
                assert decision.engine not in self.paused
                if not high and self.watermark > 0:
                    assert self.headroom[decision.engine] > self.watermark
                self.running[decision.sample_id] = decision.engine
                on_engine = sum(1 for e in self.running.values() if e == decision.engine)
                assert on_engine <= self.slots[decision.engine]
            elif isinstance(decision, Preempt):
                assert decision.reason and decision.sample_id in self.running
                assert self.world.scheduler.sample(decision.sample_id).group_id not in self.critical
                self.to_abort.add(decision.sample_id)

    def step(self) -> None:
        rng = self.rng
        roll = rng.random()
        if roll < 0.2:
            group = f"G{rng.randint(0, 5)}"
            self.apply(SampleAdmitted(f"s{self.next_sample}", group))
            self.next_sample += 1
        elif roll < 0.4 and self.running:
            sample = rng.choice(sorted(self.running))
            del self.running[sample]
            self.to_abort.discard(sample)
            done = rng.random() < 0.2
            if not done:
                self.in_tool.add(sample)
            self.apply(GenerationFinished(sample, episode_done=done))
        elif roll < 0.5 and self.to_abort:
            sample = sorted(self.to_abort)[0]
            self.to_abort.discard(sample)
            del self.running[sample]
            self.apply(GenerationAborted(sample, partial_tokens=rng.randint(0, 9)))
        elif roll < 0.6 and self.in_tool:
            sample = rng.choice(sorted(self.in_tool))
            self.in_tool.discard(sample)
            self.acting.add(sample)
            self.apply(ActStarted(sample))
        elif roll < 0.7 and self.acting:
            sample = rng.choice(sorted(self.acting))
            self.acting.discard(sample)
            self.apply(ActFinished(sample))
        elif roll < 0.8:
            engine = rng.choice(self.engines)
            self.headroom[engine] = rng.choice([0.0, 0.1, 0.3, 0.9])
            self.apply(EngineStatsUpdated(engine, stats(self.slots[engine], self.headroom[engine])))
        elif roll < 0.9:
            self.critical = {f"G{i}" for i in range(6) if rng.random() < 0.4}
            assignment = PriorityAssignment(critical=frozenset(self.critical))
            self.apply(PrioritiesChanged(assignment))
        elif roll < 0.95:
            engine = rng.choice(self.engines)
            if engine in self.paused:
                self.paused.discard(engine)
                self.apply(EngineResumed(engine))
            else:
                self.paused.add(engine)
                self.apply(EnginePaused(engine))
                for sample in sorted(s for s, e in self.running.items() if e == engine):
                    del self.running[sample]
                    self.to_abort.discard(sample)
                    self.apply(GenerationAborted(sample, partial_tokens=1))
        elif self.running:
            sample = rng.choice(sorted(self.running))
            self.apply(GenerationProgress(sample, segment_tokens=rng.randint(0, 50)))


@pytest.mark.parametrize("seed", range(12))
def test_random_runs_respect_slots_throttle_and_priority(seed: int) -> None:
    driver = Driver(seed, engines=("e0", "e1"), slots=3, watermark=0.2)
    for _ in range(600):
        driver.step()
    assert driver.next_sample > 0


@pytest.mark.parametrize("seed", range(12))
def test_a_waiting_critical_sample_never_coexists_with_an_unchallenged_low_generation(
    seed: int,
) -> None:
    driver = Driver(seed, engines=("e0",), slots=3, watermark=0.0)
    scheduler = driver.world.scheduler
    for _ in range(600):
        driver.step()
        if "e0" in driver.paused:
            continue
        waiting_high = [
            s for s in scheduler.waiting_order() if scheduler.sample(s).group_id in driver.critical
        ]
        low_unchallenged = [
            s
            for s in driver.running
            if scheduler.sample(s).group_id not in driver.critical and s not in driver.to_abort
        ]
        assert not (waiting_high and low_unchallenged and len(driver.to_abort) < len(waiting_high))
