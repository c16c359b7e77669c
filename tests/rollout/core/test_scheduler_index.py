"""Spec of the scheduler's incremental indexes (`rollout.core.scheduler_index`)."""

from __future__ import annotations

import random

import pytest

from rollout.core.scheduler_index import SeqQueue, VictimHeap


def test_a_seq_queue_yields_in_sequence_order_whatever_the_order_of_arrival() -> None:
    queue: SeqQueue[str] = SeqQueue()
    for seq in (5, 1, 9, 3):
        queue.add(seq, f"s{seq}")
    assert [item for _, item in queue.items()] == ["s1", "s3", "s5", "s9"]


def test_a_seq_queue_iteration_survives_removing_what_it_yielded() -> None:
    """Dispatch starts (removes) samples while it walks the queue."""
    queue: SeqQueue[int] = SeqQueue()
    for seq in range(6):
        queue.add(seq, seq)
    seen = []
    for seq, item in queue.items():
        seen.append(item)
        if seq % 2 == 0:
            queue.remove(seq)
    assert (seen, [item for _, item in queue.items()]) == ([0, 1, 2, 3, 4, 5], [1, 3, 5])


def test_a_seq_queue_refuses_a_sequence_number_twice() -> None:
    queue: SeqQueue[str] = SeqQueue()
    queue.add(1, "a")
    with pytest.raises(ValueError, match="already queued"):
        queue.add(1, "b")


def test_a_victim_heap_finds_the_smallest_primary_key_and_everything_tied_on_it() -> None:
    heap: VictimHeap[str] = VictimHeap()
    heap.add("a", (3, -1.0), "a")
    heap.add("b", (1, -2.0), "b")
    heap.add("c", (1, -2.0), "c")
    heap.add("d", (1, -1.0), "d")
    primary = heap.min_primary()
    assert (primary, sorted(heap.tied((1, -2.0)))) == ((1, -2.0), ["b", "c"])
    assert len(heap) == 4  # looking does not take anything out


def test_a_victim_heap_forgets_discarded_and_rekeyed_entries() -> None:
    heap: VictimHeap[str] = VictimHeap()
    heap.add("a", (1, 0.0), "a")
    heap.add("b", (2, 0.0), "b")
    heap.discard("a")
    assert heap.min_primary() == (2, 0.0)
    heap.add("b", (5, 0.0), "b")  # re-keyed: the old key no longer counts
    heap.add("c", (4, 0.0), "c")
    assert (heap.min_primary(), heap.tied((4, 0.0)), len(heap)) == ((4, 0.0), ["c"], 2)


def test_a_victim_heap_agrees_with_a_sort_after_random_changes() -> None:
    rng = random.Random(3)
    heap: VictimHeap[str] = VictimHeap()
    live: dict[str, tuple[int, float]] = {}
    for _ in range(2_000):
        sample_id = f"s{rng.randrange(40)}"
        if rng.random() < 0.3:
            heap.discard(sample_id)
            live.pop(sample_id, None)
        else:
            key = (rng.randrange(5), -float(rng.randrange(3)))
            heap.add(sample_id, key, sample_id)
            live[sample_id] = key
        expected = min(live.values(), default=None)
        assert heap.min_primary() == expected
        if expected is not None:
            tied = sorted(s for s, key in live.items() if key == expected)
            assert sorted(heap.tied(expected)) == tied
