"""Page keys: one key per whole page standing for the whole prefix, carried by sequences that
know them (the trajectory record, prefix views, joined prompt + output)."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcache.page_keys import (
    AppendOnlyPageKeys,
    TokenPrefix,
    TokenSnapshot,
    continue_page_keys,
    page_keys,
)
from kvcache.tree import RadixTree
from rollout.engines.sim.kv import JoinedTokens
from rollout.trajectories.builder import TrajectoryBuilder

PAGE = 4


def fresh(tokens: tuple[int, ...], n_pages: int) -> list[int]:
    return list(page_keys(tokens, PAGE, n_pages))


def test_a_key_stands_for_the_whole_prefix_not_just_its_page() -> None:
    first = fresh((1, 2, 3, 4, 9, 9, 9, 9), 2)
    second = fresh((5, 2, 3, 4, 9, 9, 9, 9), 2)
    assert first[1] != second[1]  # same second page, different history


def test_keys_are_deterministic_and_ignore_the_partial_last_page() -> None:
    assert fresh((1, 2, 3, 4, 5, 6), 1) == fresh((1, 2, 3, 4), 1)
    with pytest.raises(ValueError, match="do not fit"):
        fresh((1, 2, 3, 4, 5, 6), 2)


def test_a_new_edge_continues_its_parents_chain() -> None:
    tokens = tuple(range(12))
    whole = fresh(tokens, 3)
    assert continue_page_keys(tokens[4:], PAGE, whole[0]) == whole[1:]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 5), max_size=9), min_size=1, max_size=6))
def test_a_growing_record_hands_out_the_keys_of_each_snapshot(chunks: list[list[int]]) -> None:
    record: list[int] = []
    memo = AppendOnlyPageKeys(record)
    for chunk in chunks:
        record.extend(chunk)
        snapshot = TokenSnapshot(record, memo)
        n_pages = len(snapshot) // PAGE
        assert list(snapshot.page_keys(PAGE, n_pages)[:n_pages]) == fresh(tuple(record), n_pages)
        assert snapshot == tuple(record) and type(snapshot[0:2]) is tuple


def test_a_snapshot_is_frozen_although_its_record_grows() -> None:
    record = [1, 2, 3]
    snapshot = TokenSnapshot(record)
    record.extend([4, 5])
    assert (len(snapshot), list(snapshot), snapshot[-1], snapshot[1:]) == (3, [1, 2, 3], 3, (2, 3))
    reflected = (1, 2, 3).__eq__(snapshot) is NotImplemented  # Python then asks the snapshot
    assert snapshot == (1, 2, 3) and reflected and snapshot != (1, 2, 3, 4)
    assert hash(snapshot) == hash((1, 2, 3))
    assert (snapshot + (4,), (0,) + snapshot) == ((1, 2, 3, 4), (0, 1, 2, 3))  # noqa: RUF005
    with pytest.raises(IndexError):
        snapshot[3]


def test_the_trajectory_record_sends_snapshots_that_carry_their_keys() -> None:
    builder = TrajectoryBuilder(tuple(range(10)))
    builder.open_turn()
    builder.append_generated((7, 7, 7), (-0.1, -0.2, -0.3), 0)
    ids = builder.token_ids
    assert ids == (*range(10), 7, 7, 7)
    assert list(page_keys(ids, PAGE, 3)[:3]) == fresh(tuple(ids), 3)
    assert pickle.loads(pickle.dumps(ids)) == ids  # no memo travels; the copy hashes itself


def test_prefix_views_and_joined_sequences_agree_with_plain_tuples() -> None:
    record = list(range(20))
    base = TokenSnapshot(record, AppendOnlyPageKeys(record))
    view = TokenPrefix(base, 13)
    assert (len(view), view[-1], tuple(view[2:30])) == (13, 12, tuple(range(2, 13)))
    assert list(page_keys(view, PAGE, 3)[:3]) == fresh(tuple(range(13)), 3)
    with pytest.raises(ValueError, match="do not fit"):
        page_keys(view, PAGE, 4)
    joined = JoinedTokens(tuple(range(10)), tuple(range(10, 19)))
    assert list(page_keys(joined, PAGE, 4)[:4]) == fresh(tuple(range(19)), 4)
    assert list(page_keys(joined, PAGE, 2)[:2]) == fresh(tuple(range(19)), 2)


def test_walks_find_the_same_prefix_with_carried_or_computed_keys() -> None:
    tree = RadixTree(PAGE)
    tree.add_child(tree.root, tuple(range(8)))
    plain = (*range(6), 99, 98, 97)
    record = list(plain)
    keyed = TokenSnapshot(record, AppendOnlyPageKeys(record))
    for tokens in (plain, keyed):
        (step,) = tree.walk(tokens)
        assert step.matched_tokens == 4  # the second page differs
