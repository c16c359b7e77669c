"""The ast-based mutation engine: each kind, text preservation, and reversibility."""

from __future__ import annotations

import difflib
import subprocess
from pathlib import Path

import pytest

from envs.swe.taskgen.diffs import unified_diff
from envs.swe.taskgen.mutations import (
    MutationError,
    MutationKind,
    MutationTarget,
    find_sites,
    function_names,
    mutate_source,
)

SOURCE = '''\
"""A module with one of everything."""

LIMIT = 10  # module constant


def clamp(value, low=0, high=LIMIT, *, strict=False):
    """Clamp value."""  # a comment that must survive
    if value < low:  # below the range
        return low
    if (value) >= high and not strict:
        return high
    total = (value + 1) * 2
    total -= 3
    return max(low, min(value, high))


class Box:
    def holds(self, item):
        for group in self.groups:
            if item in group or item is None:
                return True
        return False
'''


def mutate(
    kind: MutationKind, function: str = "clamp", occurrence: int = 0, replacement: str | None = None
) -> str:
    target = MutationTarget("m.py", function, kind, occurrence, replacement)
    return mutate_source(SOURCE, target).mutated_source


def changed_lines(mutated: str) -> list[str]:
    """The -/+ lines of a zero-context diff between SOURCE and `mutated`."""
    diff = difflib.unified_diff(SOURCE.splitlines(), mutated.splitlines(), n=0, lineterm="")
    return [line for line in diff if line[:1] in "+-" and line[:3] not in {"+++", "---"}]


@pytest.mark.parametrize(
    "kind, occurrence, replacement, expected",
    [
        (
            MutationKind.FLIP_COMPARISON,
            0,
            None,
            ["-    if value < low:  # below the range", "+    if value > low:  # below the range"],
        ),
        (
            MutationKind.BOUNDARY_SHIFT,
            1,
            None,
            [
                "-    if (value) >= high and not strict:",
                "+    if (value) > high and not strict:",
            ],
        ),
        (
            MutationKind.CONSTANT_SHIFT,
            2,
            None,
            ["-    total = (value + 1) * 2", "+    total = (value + 1) * 3"],
        ),
        (
            MutationKind.CONSTANT_SHIFT,
            3,
            "0",
            ["-    total -= 3", "+    total -= 0"],
        ),
        (
            MutationKind.REMOVE_IF,
            0,
            None,
            ["-    if value < low:  # below the range", "-        return low"],
        ),
        (
            MutationKind.DROP_OPERAND,
            0,
            None,
            ["-    if (value) >= high and not strict:", "+    if not strict:"],
        ),
        (
            MutationKind.DROP_OPERAND,
            1,
            None,
            ["-    if (value) >= high and not strict:", "+    if (value) >= high:"],
        ),
        (
            MutationKind.SWAP_ARGUMENTS,
            1,
            None,
            [
                "-    return max(low, min(value, high))",
                "+    return max(low, min(high, value))",
            ],
        ),
        (
            MutationKind.WRONG_DEFAULT,
            0,
            None,
            [
                "-def clamp(value, low=0, high=LIMIT, *, strict=False):",
                "+def clamp(value, low=1, high=LIMIT, *, strict=False):",
            ],
        ),
        (
            MutationKind.WRONG_DEFAULT,
            1,
            "None",
            [
                "-def clamp(value, low=0, high=LIMIT, *, strict=False):",
                "+def clamp(value, low=0, high=None, *, strict=False):",
            ],
        ),
        (
            MutationKind.INVERT_BOOLEAN,
            1,
            None,
            [
                "-    if (value) >= high and not strict:",
                "+    if (value) >= high and strict:",
            ],
        ),
        (
            MutationKind.ARITHMETIC_OPERATOR,
            0,
            None,
            ["-    total = (value + 1) * 2", "+    total = (value - 1) * 2"],
        ),
        (
            MutationKind.ARITHMETIC_OPERATOR,
            2,
            None,
            ["-    total -= 3", "+    total += 3"],
        ),
        (
            MutationKind.WRONG_RETURN,
            2,
            None,
            ["-    return max(low, min(value, high))", "+    return None"],
        ),
    ],
)
def test_each_kind_changes_only_the_target_text(
    kind: MutationKind, occurrence: int, replacement: str | None, expected: list[str]
) -> None:
    assert changed_lines(mutate(kind, occurrence=occurrence, replacement=replacement)) == expected


def test_comments_and_docstrings_survive_a_mutation() -> None:
    mutated = mutate(MutationKind.FLIP_COMPARISON)
    assert '"""Clamp value."""  # a comment that must survive' in mutated
    assert "LIMIT = 10  # module constant" in mutated


def test_removing_the_only_statement_of_a_block_leaves_pass() -> None:
    mutated = mutate(MutationKind.REMOVE_IF, function="Box.holds")
    assert changed_lines(mutated) == [
        "-            if item in group or item is None:",
        "-                return True",
        "+            pass",
    ]


def test_elif_and_if_with_else_are_not_remove_if_sites() -> None:
    source = "def f(x):\n    if x:\n        a = 1\n    elif x > 1:\n        a = 2\n    return a\n"
    assert find_sites(source, "f", MutationKind.REMOVE_IF) == ()


def test_sites_are_counted_in_source_order() -> None:
    sites = find_sites(SOURCE, "clamp", MutationKind.CONSTANT_SHIFT)
    assert [(site.line, site.original) for site in sites] == [
        (6, "0"),
        (12, "1"),
        (12, "2"),
        (13, "3"),
    ]


def test_module_scope_covers_every_function() -> None:
    sites = find_sites(SOURCE, "", MutationKind.FLIP_COMPARISON)
    assert [site.original for site in sites] == ["<", ">=", "in", "is"]


def test_membership_and_identity_flip_to_their_negations() -> None:
    assert changed_lines(mutate(MutationKind.FLIP_COMPARISON, "Box.holds", 0))[1] == (
        "+            if item not in group or item is None:"
    )
    assert changed_lines(mutate(MutationKind.FLIP_COMPARISON, "Box.holds", 1))[1] == (
        "+            if item in group or item is not None:"
    )


def test_columns_are_right_after_multibyte_characters() -> None:
    source = 'def f(x):\n    return "é€" if x < 1 else "ü"\n'
    target = MutationTarget("m.py", "f", MutationKind.BOUNDARY_SHIFT)
    assert mutate_source(source, target).mutated_source == (
        'def f(x):\n    return "é€" if x <= 1 else "ü"\n'
    )


def test_function_names_are_qualified() -> None:
    assert function_names(SOURCE) == ["clamp", "Box.holds"]


def test_unknown_function_error_suggests_the_closest_name() -> None:
    with pytest.raises(MutationError, match="did you mean clamp"):
        mutate(MutationKind.REMOVE_IF, function="clamps")


def test_missing_occurrence_error_lists_the_sites() -> None:
    with pytest.raises(MutationError, match=r"has 2 remove_if site\(s\).*occurrence 7"):
        mutate(MutationKind.REMOVE_IF, occurrence=7)


def test_operator_replacement_must_be_an_operator_of_the_kind() -> None:
    with pytest.raises(MutationError, match="not allowed"):
        mutate(MutationKind.FLIP_COMPARISON, replacement="+")


@pytest.mark.parametrize("kind", [MutationKind.REMOVE_IF, MutationKind.BOUNDARY_SHIFT])
def test_kinds_without_replacement_reject_one(kind: MutationKind) -> None:
    with pytest.raises(MutationError, match="takes no replacement"):
        mutate(kind, replacement="==")


def test_non_numeric_default_needs_an_explicit_replacement() -> None:
    with pytest.raises(MutationError, match="replacement"):
        mutate(MutationKind.WRONG_DEFAULT, occurrence=1)


def test_mutation_that_does_not_change_the_program_is_rejected() -> None:
    with pytest.raises(MutationError, match="does not change"):
        mutate(MutationKind.FLIP_COMPARISON, replacement="<")


def test_wrong_default_needs_a_function_scope() -> None:
    with pytest.raises(MutationError, match="needs a function"):
        mutate(MutationKind.WRONG_DEFAULT, function="")


def test_reverse_diff_of_a_mutation_applies_with_git(tmp_path: Path) -> None:
    mutated = mutate(MutationKind.SWAP_ARGUMENTS)
    (tmp_path / "m.py").write_text(mutated, encoding="utf-8")
    gold = unified_diff({"m.py": mutated}, {"m.py": SOURCE})
    subprocess.run(["git", "apply", "-"], cwd=tmp_path, input=gold, text=True, check=True)
    assert (tmp_path / "m.py").read_text(encoding="utf-8") == SOURCE
