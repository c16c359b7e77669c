"""Where each kind of bug can go in a function, and the text edit that injects it.

`candidates(text, function, kind)` lists the sites of one `MutationKind` inside a function (or
the whole module) in source order; each site knows the text it covers, its default new text
and how to build the edit for a given replacement. `envs.swe.taskgen.mutations` applies them.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum

from envs.swe.taskgen.source_text import SourceText, TextEdit, apply_edits, qualified_functions

__all__ = ["Candidate", "MutationError", "MutationKind", "candidates", "parse_source"]


class MutationKind(StrEnum):
    """The kinds of bug the engine can inject (table: `envs.swe.taskgen.mutations`)."""

    FLIP_COMPARISON = "flip_comparison"
    BOUNDARY_SHIFT = "boundary_shift"
    CONSTANT_SHIFT = "constant_shift"
    REMOVE_IF = "remove_if"
    DROP_OPERAND = "drop_operand"
    SWAP_ARGUMENTS = "swap_arguments"
    WRONG_DEFAULT = "wrong_default"
    INVERT_BOOLEAN = "invert_boolean"
    ARITHMETIC_OPERATOR = "arithmetic_operator"
    WRONG_RETURN = "wrong_return"


class MutationError(ValueError):
    """A mutation target does not resolve to exactly one site, or the result is not valid."""


_FLIPPED_COMPARISON: dict[type[ast.cmpop], str] = {
    ast.Lt: ">",
    ast.Gt: "<",
    ast.LtE: ">=",
    ast.GtE: "<=",
    ast.Eq: "!=",
    ast.NotEq: "==",
    ast.In: "not in",
    ast.NotIn: "in",
    ast.Is: "is not",
    ast.IsNot: "is",
}
_SHIFTED_BOUNDARY: dict[type[ast.cmpop], str] = {
    ast.Lt: "<=",
    ast.LtE: "<",
    ast.Gt: ">=",
    ast.GtE: ">",
}
_CHANGED_ARITHMETIC: dict[type[ast.operator], str] = {
    ast.Add: "-",
    ast.Sub: "+",
    ast.Mult: "/",
    ast.Div: "*",
    ast.FloorDiv: "/",
    ast.Mod: "//",
    ast.Pow: "*",
}
_COMPARISON_OPERATORS = frozenset(_FLIPPED_COMPARISON.values())
_ARITHMETIC_OPERATORS = frozenset({"+", "-", "*", "/", "//", "%", "**"})


def parse_source(source: str) -> SourceText:
    """The source as a `SourceText`; a source that does not parse is a `MutationError`."""
    try:
        return SourceText(source)
    except ValueError as exc:
        raise MutationError(str(exc)) from exc


@dataclass(frozen=True, slots=True)
class Candidate:
    """One site: its offset, line/column, the text it covers and how to edit it."""

    position: int
    line: int
    column: int
    original: str
    default: str
    make_edits: Callable[[str | None], tuple[TextEdit, ...]]


def _scope(text: SourceText, function: str) -> ast.AST:
    if not function:
        return text.tree
    functions = qualified_functions(text.tree)
    if function not in functions:
        close = difflib.get_close_matches(function, list(functions), n=3)
        hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(functions)}"
        raise MutationError(f"function {function!r} is not defined in the file; {hint}")
    return functions[function]


def candidates(text: SourceText, function: str, kind: MutationKind) -> list[Candidate]:
    """The sites of `kind` in `function` (qualified name; `""`: the module), in source order."""
    scope = _scope(text, function)
    finder = _FINDERS[kind]
    found = list(finder(text, scope))
    return sorted(found, key=lambda candidate: candidate.position)


def _candidate(
    text: SourceText,
    start: int,
    end: int,
    default: str,
    make_edits: Callable[[str | None], tuple[TextEdit, ...]],
) -> Candidate:
    line, column = text.position(start)
    return Candidate(start, line, column, text.text[start:end], default, make_edits)


def _replace(
    start: int, end: int, default: str, allowed: frozenset[str]
) -> Callable[[str | None], tuple[TextEdit, ...]]:
    def make_edits(replacement: str | None) -> tuple[TextEdit, ...]:
        new_text = default if replacement is None else replacement
        if new_text not in allowed:
            raise MutationError(
                f"replacement {new_text!r} is not allowed here; use one of {sorted(allowed)}"
            )
        return (TextEdit(start, end, new_text),)

    return make_edits


def _fixed(edits: tuple[TextEdit, ...]) -> Callable[[str | None], tuple[TextEdit, ...]]:
    def make_edits(replacement: str | None) -> tuple[TextEdit, ...]:
        if replacement is not None:
            raise MutationError("this mutation kind takes no replacement; remove it from the spec")
        return edits

    return make_edits


def _nodes(
    scope: ast.AST, node_type: type[ast.AST] | tuple[type[ast.AST], ...]
) -> Iterator[ast.AST]:
    return (node for node in ast.walk(scope) if isinstance(node, node_type))


def _comparison_sites(
    text: SourceText,
    scope: ast.AST,
    table: Mapping[type[ast.cmpop], str],
    allowed: frozenset[str] | None,
) -> Iterator[Candidate]:
    """Comparison operators found in `table`; `allowed` replacements (None: no replacement)."""
    for node in _nodes(scope, ast.Compare):
        assert isinstance(node, ast.Compare)
        operands = [node.left, *node.comparators]
        for index, operator in enumerate(node.ops):
            if type(operator) not in table:
                continue
            tokens = text.operator_tokens(
                text.span(operands[index])[1], text.span(operands[index + 1])[0]
            )
            if not tokens:
                raise MutationError(f"cannot find the comparison operator at line {node.lineno}")
            start, end = tokens[0].start, tokens[-1].end
            default = table[type(operator)]
            make_edits = (
                _fixed((TextEdit(start, end, default),))
                if allowed is None
                else _replace(start, end, default, allowed)
            )
            yield _candidate(text, start, end, default, make_edits)


def _flip_comparison(text: SourceText, scope: ast.AST) -> Iterator[Candidate]:
    return _comparison_sites(text, scope, _FLIPPED_COMPARISON, _COMPARISON_OPERATORS)


def _boundary_shift(text: SourceText, scope: ast.AST) -> Iterator[Candidate]:
    return _comparison_sites(text, scope, _SHIFTED_BOUNDARY, None)


def _constant_shift(text: SourceText, scope: ast.AST) -> Iterator[Candidate]:
    for node in _nodes(scope, ast.Constant):
        assert isinstance(node, ast.Constant)
        if type(node.value) is not int:
            continue
        start, end = text.span(node)
        default = str(node.value + 1)

        def make_edits(
            replacement: str | None, start: int = start, end: int = end, default: str = default
        ) -> tuple[TextEdit, ...]:
            new_text = default if replacement is None else replacement
            if not re.fullmatch(r"\d+", new_text):
                raise MutationError(
                    f"constant_shift replacement {new_text!r} must be an int literal"
                )
            return (TextEdit(start, end, new_text),)

        yield _candidate(text, start, end, default, make_edits)


def _remove_if(text: SourceText, scope: ast.AST) -> Iterator[Candidate]:
    sole_statements = {
        id(body[0])
        for node in ast.walk(scope)
        for field in ("body", "orelse", "finalbody")
        if isinstance(body := getattr(node, field, None), list) and len(body) == 1
    }
    for node in _nodes(scope, ast.If):
        assert isinstance(node, ast.If)
        start, end = text.span(node)
        keyword = text.token_at(start)
        if node.orelse or keyword is None or keyword.text != "if":
            continue  # `if` with `else`/`elif`, or itself an `elif`
        line_start, _ = text.line_bounds(node.lineno)
        _, line_end = text.line_bounds(node.end_lineno or node.lineno)
        indent = text.text[line_start:start]
        trailing = text.text[end:line_end].strip()
        if indent.strip() or (trailing and not trailing.startswith("#")):
            continue  # shares a line with other code, which removing whole lines would delete
        new_text = f"{indent}pass\n" if id(node) in sole_statements else ""
        yield _candidate(text, start, end, "", _fixed((TextEdit(line_start, line_end, new_text),)))


def _drop_operand(text: SourceText, scope: ast.AST) -> Iterator[Candidate]:
    for node in _nodes(scope, ast.BoolOp):
        assert isinstance(node, ast.BoolOp)
        spans = [text.expanded_span(value) for value in node.values]
        for index, (start, end) in enumerate(spans):
            if index < len(spans) - 1:
                cut = (start, spans[index + 1][0])
            else:
                cut = (spans[index - 1][1], end)
            yield _candidate(text, start, end, "", _fixed((TextEdit(*cut, ""),)))


def _swap_arguments(text: SourceText, scope: ast.AST) -> Iterator[Candidate]:
    for node in _nodes(scope, ast.Call):
        assert isinstance(node, ast.Call)
        if len(node.args) < 2 or any(isinstance(arg, ast.Starred) for arg in node.args):
            continue
        spans = [text.expanded_span(arg) for arg in node.args]

        def make_edits(
            replacement: str | None, spans: list[tuple[int, int]] = spans
        ) -> tuple[TextEdit, ...]:
            first, second = 0, 1
            if replacement is not None:
                match = re.fullmatch(r"\s*(\d+)\s*,\s*(\d+)\s*", replacement)
                if match is None:
                    raise MutationError(f"swap_arguments replacement {replacement!r} must be 'i,j'")
                first, second = int(match.group(1)), int(match.group(2))
            if first == second or max(first, second) >= len(spans):
                raise MutationError(
                    f"cannot swap arguments {first} and {second} of a call with {len(spans)}"
                )
            (a_start, a_end), (b_start, b_end) = spans[first], spans[second]
            a_text, b_text = text.text[a_start:a_end], text.text[b_start:b_end]
            return (TextEdit(a_start, a_end, b_text), TextEdit(b_start, b_end, a_text))

        start, end = text.span(node)
        swapped = apply_edits(text.text, make_edits(None))[start:end]  # same length: a swap
        yield _candidate(text, start, end, swapped, make_edits)


def _wrong_default(text: SourceText, scope: ast.AST) -> Iterator[Candidate]:
    if not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
        raise MutationError("wrong_default needs a function; set `function` in the target")
    defaults = [*scope.args.defaults, *(d for d in scope.args.kw_defaults if d is not None)]
    for node in defaults:
        start, end = text.expanded_span(node)
        default = _default_replacement(node)
        yield _candidate(
            text, start, end, default or "<replacement required>", _expression(start, end, default)
        )


def _invert_boolean(text: SourceText, scope: ast.AST) -> Iterator[Candidate]:
    for node in ast.walk(scope):
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            start, _ = text.span(node)
            operand_start, _ = text.expanded_span(node.operand)
            yield _candidate(
                text, start, operand_start, "", _fixed((TextEdit(start, operand_start, ""),))
            )
        elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
            start, end = text.span(node)
            flipped = str(not node.value)
            yield _candidate(text, start, end, flipped, _fixed((TextEdit(start, end, flipped),)))


def _arithmetic_operator(text: SourceText, scope: ast.AST) -> Iterator[Candidate]:
    for node in ast.walk(scope):
        if isinstance(node, ast.BinOp):
            left, right, operator, suffix = node.left, node.right, node.op, ""
        elif isinstance(node, ast.AugAssign):
            left, right, operator, suffix = node.target, node.value, node.op, "="
        else:
            continue
        if type(operator) not in _CHANGED_ARITHMETIC:
            continue
        tokens = text.operator_tokens(text.span(left)[1], text.span(right)[0])
        if len(tokens) != 1:
            raise MutationError(f"cannot find the arithmetic operator at line {node.lineno}")
        start, end = tokens[0].start, tokens[0].end
        default = _CHANGED_ARITHMETIC[type(operator)] + suffix
        allowed = frozenset(op + suffix for op in _ARITHMETIC_OPERATORS)
        yield _candidate(text, start, end, default, _replace(start, end, default, allowed))


def _wrong_return(text: SourceText, scope: ast.AST) -> Iterator[Candidate]:
    for node in _nodes(scope, ast.Return):
        assert isinstance(node, ast.Return)
        if node.value is None:
            continue
        start, end = text.expanded_span(node.value)
        is_none = isinstance(node.value, ast.Constant) and node.value.value is None
        default = "" if is_none else "None"
        yield _candidate(
            text, start, end, default or "<replacement required>", _expression(start, end, default)
        )


def _default_replacement(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return str(not node.value)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return str(node.value + 1)
    return ""


def _expression(start: int, end: int, default: str) -> Callable[[str | None], tuple[TextEdit, ...]]:
    def make_edits(replacement: str | None) -> tuple[TextEdit, ...]:
        new_text = default if replacement is None else replacement
        if not new_text:
            raise MutationError(
                "this site has no default replacement; give `replacement` in the spec"
            )
        try:
            ast.parse(new_text, mode="eval")
        except SyntaxError as exc:
            raise MutationError(f"replacement {new_text!r} is not a Python expression") from exc
        return (TextEdit(start, end, new_text),)

    return make_edits


_FINDERS: dict[MutationKind, Callable[[SourceText, ast.AST], Iterator[Candidate]]] = {
    MutationKind.FLIP_COMPARISON: _flip_comparison,
    MutationKind.BOUNDARY_SHIFT: _boundary_shift,
    MutationKind.CONSTANT_SHIFT: _constant_shift,
    MutationKind.REMOVE_IF: _remove_if,
    MutationKind.DROP_OPERAND: _drop_operand,
    MutationKind.SWAP_ARGUMENTS: _swap_arguments,
    MutationKind.WRONG_DEFAULT: _wrong_default,
    MutationKind.INVERT_BOOLEAN: _invert_boolean,
    MutationKind.ARITHMETIC_OPERATOR: _arithmetic_operator,
    MutationKind.WRONG_RETURN: _wrong_return,
}
