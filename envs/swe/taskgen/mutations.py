"""Inject one precisely located bug into Python source by editing its text.

A `MutationTarget` names a file, a function (qualified name, e.g. `Interval.overlaps`; empty for
the whole module), a `MutationKind` and an occurrence index: the n-th site of that kind in the
function, counted in source order. The site is found with the stdlib `ast` and `tokenize`
modules, and the mutation replaces only the characters of that site, so comments and formatting
survive and the reverse diff (the gold patch) is one or two lines long.

Kinds (the SWE-smith-style procedural bugs):

=====================  ===========================================================================
`flip_comparison`      `<` -> `>`, `<=` -> `>=`, `==` -> `!=`, `in` -> `not in`, `is` -> `is not`
`boundary_shift`       off by one at a boundary: `<` <-> `<=`, `>` <-> `>=`
`constant_shift`       off by one in a literal: an int `n` -> `n + 1`
`remove_if`            removed condition: an `if` statement without `else` is deleted with its body
`drop_operand`         removed condition: one operand of an `and` / `or` is deleted
`swap_arguments`       the first two positional arguments of a call are swapped
`wrong_default`        a parameter default of the target function is replaced
`invert_boolean`       `not x` -> `x`, `True` <-> `False`
`arithmetic_operator`  `+` <-> `-`, `*` <-> `/`, `//` -> `/`, `%` -> `//`, `**` -> `*`, also in `+=`
`wrong_return`         the value of a `return` statement is replaced (default: `None`)
=====================  ===========================================================================

`replacement` overrides the default new text where a kind allows it: an operator for the operator
kinds, an int literal for `constant_shift`, an expression for `wrong_default` and `wrong_return`,
and `"i,j"` (argument indices) for `swap_arguments`.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Mapping
from dataclasses import dataclass

from envs.swe.taskgen.mutation_sites import MutationError, MutationKind, candidates, parse_source
from envs.swe.taskgen.source_text import apply_edits, qualified_functions

__all__ = [
    "Mutation",
    "MutationError",
    "MutationKind",
    "MutationSite",
    "MutationTarget",
    "apply_mutation",
    "find_sites",
    "function_names",
    "mutate_source",
]


@dataclass(frozen=True, slots=True)
class MutationTarget:
    """Where and how to inject a bug.

    `path` is the file relative to the repository root (POSIX separators); `function` is a
    qualified name (`Class.method`, `outer.inner`) or `""` for the whole module; `occurrence`
    counts sites of `kind` inside that scope in source order, from 0.
    """

    path: str
    function: str
    kind: MutationKind
    occurrence: int = 0
    replacement: str | None = None


@dataclass(frozen=True, slots=True)
class MutationSite:
    """One place a mutation of `kind` could be applied (what `find_sites` lists)."""

    kind: MutationKind
    occurrence: int
    line: int
    column: int
    original: str
    default_replacement: str

    def describe(self) -> str:
        """A one-line summary, e.g. `#0 line 12:15  '<' -> '<='`."""
        return (
            f"#{self.occurrence} line {self.line}:{self.column}  "
            f"{_one_line(self.original)!r} -> {_one_line(self.default_replacement)!r}"
        )


@dataclass(frozen=True, slots=True)
class Mutation:
    """The result of applying a `MutationTarget` to one source text."""

    target: MutationTarget
    original_source: str
    mutated_source: str
    line: int
    before: str
    after: str

    def describe(self) -> str:
        """Where the bug is and what changed, for logs (never for problem statements)."""
        return (
            f"{self.target.kind} in {self.target.path}:{self.line} "
            f"({self.target.function or '<module>'}): "
            f"{_one_line(self.before)!r} -> {_one_line(self.after)!r}"
        )


def function_names(source: str) -> list[str]:
    """Qualified names of every function and method in `source`, in source order."""
    return list(qualified_functions(ast.parse(source)))


def find_sites(source: str, function: str, kind: MutationKind) -> tuple[MutationSite, ...]:
    """Every site of `kind` in `function` (qualified name, `""` = module), in source order."""
    return tuple(
        MutationSite(
            kind=kind,
            occurrence=index,
            line=candidate.line,
            column=candidate.column,
            original=candidate.original,
            default_replacement=candidate.default,
        )
        for index, candidate in enumerate(candidates(parse_source(source), function, kind))
    )


def mutate_source(source: str, target: MutationTarget) -> Mutation:
    """Apply `target` to `source` and return the mutated text.

    Raises:
        MutationError: the function or occurrence does not exist, the replacement is not
            allowed for the kind, or the result does not parse or parses to the same tree.
    """
    found = candidates(parse_source(source), target.function, target.kind)
    if not 0 <= target.occurrence < len(found):
        listing = "; ".join(
            f"#{index} line {candidate.line}" for index, candidate in enumerate(found)
        )
        raise MutationError(
            f"{target.path}: {target.function or '<module>'} has {len(found)} "
            f"{target.kind} site(s) ({listing or 'none'}), so occurrence {target.occurrence} "
            f"does not exist; list them with `python -m envs.swe.taskgen sites`"
        )
    candidate = found[target.occurrence]
    after = candidate.default if target.replacement is None else target.replacement
    edits = candidate.make_edits(target.replacement)
    mutated = apply_edits(source, edits)
    _check_changed_semantics(source, mutated, target)
    return Mutation(
        target=target,
        original_source=source,
        mutated_source=mutated,
        line=candidate.line,
        before=candidate.original,
        after=after,
    )


def apply_mutation(files: Mapping[str, str], target: MutationTarget) -> Mutation:
    """Apply `target` to the file it names in a snapshot (path -> text)."""
    if target.path not in files:
        close = difflib.get_close_matches(target.path, list(files), n=3)
        raise MutationError(
            f"mutation target file {target.path!r} is not in the project"
            + (f"; did you mean {', '.join(close)}?" if close else "")
        )
    return mutate_source(files[target.path], target)


def _check_changed_semantics(source: str, mutated: str, target: MutationTarget) -> None:
    try:
        mutated_tree = ast.parse(mutated)
    except SyntaxError as exc:
        raise MutationError(
            f"{target.path}: the {target.kind} mutation #{target.occurrence} in "
            f"{target.function or '<module>'} gives invalid Python "
            f"({exc.msg} at line {exc.lineno}); choose another site or replacement"
        ) from exc
    if ast.dump(mutated_tree) == ast.dump(ast.parse(source)):
        raise MutationError(
            f"{target.path}: the {target.kind} mutation #{target.occurrence} does not change the "
            "program; choose another site or replacement"
        )


def _one_line(text: str) -> str:
    return " ".join(text.split()) if "\n" in text else text
