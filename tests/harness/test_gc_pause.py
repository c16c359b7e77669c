"""`paused_gc`: automatic collection off inside, the previous state restored after."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from harness.gc_pause import paused_gc


@pytest.fixture(autouse=True)
def _gc_enabled_around_each_test() -> Iterator[None]:
    gc.enable()
    yield
    gc.enable()


def test_collection_is_off_inside_and_back_on_after_even_on_error() -> None:
    with pytest.raises(RuntimeError), paused_gc():
        assert not gc.isenabled()
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_an_inner_pause_leaves_the_outer_one_in_place() -> None:
    with paused_gc():
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_disabled_pause_changes_nothing_and_a_disabled_collector_stays_off() -> None:
    with paused_gc(enabled=False):
        assert gc.isenabled()
    gc.disable()
    with paused_gc():
        pass
    assert not gc.isenabled()
