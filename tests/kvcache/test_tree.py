"""The page-aligned radix tree: matching, splitting and growth."""

from __future__ import annotations

import pytest

from kvcache.tree import RadixTree, TreeNode, diverging_paths


def grow(tree: RadixTree, tokens: tuple[int, ...]) -> None:
    """Add `tokens` the way the cache does: walk, split at the divergence, append the rest."""
    node = tree.root
    offset = 0
    for step in tree.walk(tokens):
        node = step.node
        if step.matched_tokens < node.tokens:
            node = tree.split(node, step.matched_tokens)
        offset += step.matched_tokens
    if offset < len(tokens):
        tree.add_child(node, tokens[offset:])


def test_only_whole_pages_are_kept_of_a_sequence() -> None:
    assert RadixTree(page_size=4).aligned_length(10) == 8


def test_walk_matches_whole_pages_only() -> None:
    tree = RadixTree(page_size=2)
    grow(tree, (1, 2, 3, 4))
    steps = tree.walk((1, 2, 3, 9))
    assert [step.matched_tokens for step in steps] == [2]


def test_divergence_inside_a_node_splits_it_at_the_page_boundary() -> None:
    tree = RadixTree(page_size=2)
    grow(tree, (1, 2, 3, 4))
    grow(tree, (1, 2, 5, 6))
    (upper,) = tree.root.children.values()
    assert upper.key == (1, 2)
    assert sorted(child.key for child in upper.children.values()) == [(3, 4), (5, 6)]


def test_split_keeps_the_lower_node_identity() -> None:
    tree = RadixTree(page_size=1)
    grow(tree, (1, 2, 3))
    (node,) = tree.root.children.values()
    upper = tree.split(node, 1)
    assert node.key == (2, 3) and node.parent is upper and upper.key == (1,)


def test_split_copies_refs_and_residency_to_the_upper_node() -> None:
    tree = RadixTree(page_size=1)
    grow(tree, (1, 2))
    (node,) = tree.root.children.values()
    node.on_device, node.high_ref, node.lock_ref = True, 2, 1
    upper = tree.split(node, 1)
    assert (upper.on_device, upper.high_ref, upper.lock_ref, upper.device_children) == (
        True,
        2,
        1,
        1,
    )


def test_split_point_must_be_whole_pages_inside_the_node() -> None:
    tree = RadixTree(page_size=2)
    grow(tree, (1, 2, 3, 4))
    (node,) = tree.root.children.values()
    with pytest.raises(ValueError, match="whole number of pages"):
        tree.split(node, 1)


def test_a_sibling_with_the_same_first_page_is_rejected() -> None:
    tree = RadixTree(page_size=1)
    grow(tree, (1, 2))
    with pytest.raises(ValueError, match="walk and split"):
        tree.add_child(tree.root, (1, 3))


def test_path_tokens_spell_the_root_to_node_sequence() -> None:
    tree = RadixTree(page_size=1)
    grow(tree, (1, 2, 3))
    grow(tree, (1, 2, 4))
    leaf = tree.walk((1, 2, 4))[-1].node
    assert tree.path_tokens(leaf) == (1, 2, 4)


def test_unlinking_a_node_with_children_is_refused() -> None:
    tree = RadixTree(page_size=1)
    grow(tree, (1, 2))
    grow(tree, (1, 3))
    (upper,) = tree.root.children.values()
    with pytest.raises(ValueError, match="leaf-up"):
        tree.unlink(upper)


def leaf_of(tree: RadixTree, tokens: tuple[int, ...]) -> TreeNode:
    steps = tree.walk(tokens)
    assert sum(step.matched_tokens for step in steps) == len(tokens)
    return steps[-1].node


def test_diverging_paths_are_the_nodes_below_the_common_ancestor() -> None:
    tree = RadixTree(page_size=2)
    grow(tree, (1, 2, 3, 4, 5, 6))
    grow(tree, (1, 2, 3, 4, 7, 8))
    grow(tree, (9, 9))
    old, new = leaf_of(tree, (1, 2, 3, 4, 5, 6)), leaf_of(tree, (1, 2, 3, 4, 7, 8))
    assert diverging_paths(old, new) == ([old], [new])
    longer = leaf_of(tree, (1, 2, 3, 4))
    assert diverging_paths(longer, old) == ([], [old])  # a context that grew: only the new node
    assert diverging_paths(old, old) == ([], [])
    other = leaf_of(tree, (9, 9))
    old_only, new_only = diverging_paths(old, other)
    assert new_only == [other]
    assert [node.key for node in old_only] == [(5, 6), (1, 2, 3, 4)]  # bottom-up, root excluded


def test_a_walk_can_start_below_a_node_known_to_hold_the_prefix() -> None:
    tree = RadixTree(page_size=2)
    grow(tree, (1, 2, 3, 4, 5, 6))
    grow(tree, (1, 2, 9, 9))  # splits off a (1, 2) node
    top = leaf_of(tree, (1, 2))
    tokens = (1, 2, 3, 4, 5, 6)
    assert [step.node.key for step in tree.walk(tokens, start=top, offset=2)] == [(3, 4, 5, 6)]
    assert tree.depth_tokens(top) == 2
    assert sum(step.matched_tokens for step in tree.walk(tokens, 4)) == 4  # `end` cuts the walk
