import pytest

from harness.events import EventBus, EventRecorder, Phase, StepEvent


def test_event_that_ends_before_it_starts_is_rejected() -> None:
    with pytest.raises(ValueError, match="ends before it starts"):
        StepEvent(Phase.ACT, start_s=2.0, end_s=1.0)


def test_bus_delivers_events_in_order_to_every_subscriber() -> None:
    bus, first, second = EventBus(), EventRecorder(), EventRecorder()
    bus.subscribe(first)
    bus.subscribe(second)
    events = [StepEvent(Phase.GEN, 0.0, 1.0, "s1"), StepEvent(Phase.ACT, 1.0, 3.0, "s1")]
    for event in events:
        bus.emit(event)
    assert first.events == events and second.events == events
    assert first.of_phase(Phase.ACT)[0].duration_s == 2.0


def test_unsubscribed_subscriber_receives_nothing_more() -> None:
    bus, recorder = EventBus(), EventRecorder()
    unsubscribe = bus.subscribe(recorder)
    unsubscribe()
    bus.emit(StepEvent(Phase.GEN, 0.0, 1.0))
    assert recorder.events == []


def test_bus_listens_only_while_it_has_a_subscriber() -> None:
    bus = EventBus()
    assert not bus.listening
    unsubscribe = bus.subscribe(EventRecorder())
    assert bus.listening
    unsubscribe()
    assert not bus.listening


def test_event_serialises_to_plain_dict() -> None:
    event = StepEvent(Phase.ACT, 0.5, 1.5, "s", "g", {"exit_code": 0})
    assert event.to_dict() == {
        "phase": "act", "start_s": 0.5, "end_s": 1.5, "sample_id": "s", "group_id": "g",
        "data": {"exit_code": 0},
    }  # fmt: skip
