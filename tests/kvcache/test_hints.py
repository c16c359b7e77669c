"""The session-hint protocol and its dispatch from engine-level hints."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kvcache import HintKind, KVSessionHints, Priority, apply_hint
from kvcache.types import KVDecision
from rollout.engines.base import KVHint, KVHintKind
from tests.kvcache.helpers import path_on_device, run_turn, spec_policy


def test_hint_kinds_match_the_engine_protocol_value_for_value() -> None:
    assert [kind.value for kind in HintKind] == [kind.value for kind in KVHintKind]


@pytest.mark.parametrize("policy_name", ["priority", "lru"])
def test_both_policies_receive_session_hints(policy_name: str) -> None:
    assert isinstance(spec_policy(policy=policy_name), KVSessionHints)


@dataclass
class Recorder:
    calls: list[tuple[object, ...]]

    def open(self, session_id: str, priority: Priority, now_s: float) -> tuple[KVDecision, ...]:
        self.calls.append(("open", session_id, priority, now_s))
        return ()

    def set_priority(
        self, session_id: str, priority: Priority, now_s: float
    ) -> tuple[KVDecision, ...]:
        self.calls.append(("set_priority", session_id, priority, now_s))
        return ()

    def tool_wait(
        self, session_id: str, expected_s: float | None, now_s: float
    ) -> tuple[KVDecision, ...]:
        self.calls.append(("tool_wait", session_id, expected_s, now_s))
        return ()

    def tool_done(self, session_id: str, now_s: float) -> tuple[KVDecision, ...]:
        self.calls.append(("tool_done", session_id, now_s))
        return ()

    def close(self, session_id: str, now_s: float) -> tuple[KVDecision, ...]:
        self.calls.append(("close", session_id, now_s))
        return ()


@pytest.mark.parametrize(
    ("hint", "expected"),
    [
        (KVHint(KVHintKind.OPEN, "s", priority=5), ("open", "s", Priority.HIGH, 1.0)),
        (KVHint(KVHintKind.OPEN, "s", priority=0), ("open", "s", Priority.LOW, 1.0)),
        (KVHint(KVHintKind.SET_PRIORITY, "s", 1), ("set_priority", "s", Priority.HIGH, 1.0)),
        (KVHint(KVHintKind.TOOL_WAIT, "s", expected_s=3.0), ("tool_wait", "s", 3.0, 1.0)),
        (KVHint(KVHintKind.TOOL_DONE, "s"), ("tool_done", "s", 1.0)),
        (KVHint(KVHintKind.CLOSE, "s"), ("close", "s", 1.0)),
    ],
)
def test_apply_hint_dispatches_each_kind_with_its_priority_mapped(
    hint: KVHint, expected: tuple[object, ...]
) -> None:
    recorder = Recorder([])
    apply_hint(recorder, hint, 1.0, high_priority_min=1)
    assert recorder.calls == [expected]


def test_an_unknown_hint_kind_names_the_known_ones() -> None:
    @dataclass
    class Odd:
        kind: str = "pin"
        session_id: str = "s"
        priority: int = 0
        expected_s: float | None = None

    with pytest.raises(ValueError, match="tool_wait"):
        apply_hint(Recorder([]), Odd(), 0.0, high_priority_min=1)


def test_engine_hints_drive_a_policy_end_to_end() -> None:
    policy = spec_policy()
    apply_hint(policy, KVHint(KVHintKind.OPEN, "a", priority=0), 0.0, high_priority_min=1)
    run_turn(policy, [1, 2, 3, 4], 0.0, session_id="a")
    decisions = apply_hint(
        policy, KVHint(KVHintKind.TOOL_WAIT, "a", expected_s=60.0), 1.0, high_priority_min=1
    )
    assert len(decisions) == 1 and not path_on_device(policy, [1, 2, 3, 4])


def test_a_negative_tool_duration_is_refused() -> None:
    policy = spec_policy()
    policy.open("a", Priority.LOW, 0.0)
    with pytest.raises(ValueError, match="non-negative"):
        policy.tool_wait("a", -1.0, 0.0)
