"""Sticky session routing with load-aware spill-over."""

from __future__ import annotations

import pytest

from rollout.engines.sglang.routing import EndpointLoad, StickyRouter


def loads(*in_flight: int, slots: int = 10) -> list[EndpointLoad]:
    return [EndpointLoad(n, slots) for n in in_flight]


def test_a_new_session_goes_to_the_least_loaded_endpoint() -> None:
    router = StickyRouter(3, spill_margin=0.25)
    assert router.route("s", loads(5, 1, 3)) == 1


def test_a_session_stays_on_its_endpoint_while_the_load_gap_is_within_the_margin() -> None:
    router = StickyRouter(2, spill_margin=0.25)
    assert router.route("s", loads(0, 1)) == 0
    assert router.route("s", loads(3, 1)) == 0  # 0.3 <= 0.1 + 0.25


def test_a_session_spills_to_a_clearly_less_loaded_endpoint_and_stays_there() -> None:
    router = StickyRouter(2, spill_margin=0.25)
    router.route("s", loads(0, 1))
    assert router.route("s", loads(6, 1)) == 1  # 0.6 > 0.1 + 0.25
    assert router.route("s", loads(2, 3)) == 1
    assert router.home_of("s") == 1


def test_a_forgotten_session_is_routed_afresh() -> None:
    router = StickyRouter(2, spill_margin=1.0)
    router.route("s", loads(0, 1))
    router.forget("s")
    assert router.route("s", loads(4, 0)) == 1


def test_requests_without_a_session_are_balanced_and_remembered_nowhere() -> None:
    router = StickyRouter(2, spill_margin=0.25)
    assert router.route("", loads(2, 1)) == 1
    assert router.home_of("") is None


def test_the_number_of_loads_must_match_the_endpoints() -> None:
    with pytest.raises(ValueError, match="expected 2"):
        StickyRouter(2, spill_margin=0.1).route("s", loads(1))
