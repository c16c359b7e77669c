"""The agentkv plugin's pure parts: which sessions are pinned, and reading hint envelopes."""

from __future__ import annotations

import pytest

from kvcache.hints import HintKind
from kvcache.sglang_plugin.hints import SessionHint, session_hints
from kvcache.sglang_plugin.pins import Pin, SessionPins, Unpin


def pins(budget: int = 100, ttl_s: float = 60.0) -> SessionPins:
    return SessionPins(high_priority_min=1, budget_tokens=budget, ttl_s=ttl_s)


def test_a_high_turn_pins_its_node_and_a_low_turn_unpins() -> None:
    table = pins()
    assert table.turn_ended("a", 1, node=7, tokens=30, now_s=0) == [Pin("a", 7, 30)]
    assert table.turn_ended("a", 0, node=9, tokens=40, now_s=1) == [Unpin("a")]
    assert table.pinned == {}


def test_the_newest_turn_replaces_the_sessions_pin_and_refreshes_its_age() -> None:
    table = pins()
    table.turn_ended("a", 1, node=7, tokens=30, now_s=0)
    table.turn_ended("b", 1, node=8, tokens=30, now_s=1)
    assert table.turn_ended("a", 1, node=9, tokens=50, now_s=2) == [Pin("a", 9, 50)]
    assert list(table.pinned) == ["b", "a"] and table.pinned_tokens == 80


def test_over_budget_the_least_recently_pinned_other_sessions_go_first() -> None:
    table = pins(budget=100)
    table.turn_ended("a", 1, node=1, tokens=40, now_s=0)
    table.turn_ended("b", 1, node=2, tokens=40, now_s=1)
    actions = table.turn_ended("c", 1, node=3, tokens=50, now_s=2)
    assert actions == [Unpin("a"), Pin("c", 3, 50)] and set(table.pinned) == {"b", "c"}


def test_a_context_longer_than_the_budget_is_never_pinned() -> None:
    table = pins(budget=10)
    assert table.turn_ended("a", 1, node=1, tokens=11, now_s=0) == []


def test_close_and_a_low_priority_release_and_a_high_one_waits_for_the_turn() -> None:
    table = pins()
    table.turn_ended("a", 1, node=1, tokens=5, now_s=0)
    table.turn_ended("b", 1, node=2, tokens=5, now_s=0)
    assert table.close("a") == [Unpin("a")] and table.close("a") == []
    assert table.set_priority("b", 1) == [] and table.set_priority("b", 0) == [Unpin("b")]


def test_pins_not_renewed_within_the_ttl_expire() -> None:
    table = pins(ttl_s=10)
    table.turn_ended("a", 1, node=1, tokens=5, now_s=0)
    table.turn_ended("b", 1, node=2, tokens=5, now_s=8)
    assert table.expire(now_s=12) == [Unpin("a")] and list(table.pinned) == ["b"]


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="ttl_s > 0"):
        SessionPins(high_priority_min=1, budget_tokens=10, ttl_s=0)


def test_our_hints_are_read_from_an_envelope_and_everything_else_is_skipped() -> None:
    envelope = {
        "protocol_version": "0.1",
        "message_id": "m",
        "actions": [
            {"action_id": "1", "action_type": "close", "action_version": "1",
             "payload": {"session_id": "a"}},
            {"action_id": "2", "action_type": "set_priority", "action_version": "1",
             "payload": {"session_id": "b", "priority": 1}},
            {"action_id": "3", "action_type": "pin", "action_version": "1", "payload": {}},
            {"action_id": "4", "action_type": "close", "action_version": "1", "payload": None},
        ],
    }  # fmt: skip
    assert session_hints(envelope) == [
        SessionHint(HintKind.CLOSE, "a", 0),
        SessionHint(HintKind.SET_PRIORITY, "b", 1),
    ]
    assert session_hints(None) == []
