"""Map `ast` nodes of a Python source to character offsets, so edits can touch only their text.

`ast` gives node positions as (line, UTF-8 byte column); `tokenize` gives operator tokens as
(line, character column). `SourceText` turns both into absolute character offsets, widens a
node's span to the parentheses that wrap it, and finds the operator between two operands.
"""

from __future__ import annotations

import ast
import bisect
import io
import re
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["SourceText", "TextEdit", "Token", "apply_edits", "qualified_functions"]

_LAYOUT_TOKENS = frozenset(
    {tokenize.NL, tokenize.COMMENT, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
)
_PARENTHESES = frozenset({"(", ")"})

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True, slots=True)
class TextEdit:
    """Replace characters `[start, end)` of a source text with `new_text`."""

    start: int
    end: int
    new_text: str


@dataclass(frozen=True, slots=True)
class Token:
    """A significant token (no layout or comments) with absolute character offsets."""

    kind: int
    text: str
    start: int
    end: int


def apply_edits(source: str, edits: Sequence[TextEdit]) -> str:
    """Apply non-overlapping edits to `source`, given in any order.

    Raises:
        ValueError: two edits overlap.
    """
    result = source
    next_start = len(source)
    for edit in sorted(edits, key=lambda edit: (edit.start, edit.end), reverse=True):
        if edit.end > next_start:
            raise ValueError(f"edits overlap at offset {edit.start}; give disjoint edits")
        result = result[: edit.start] + edit.new_text + result[edit.end :]
        next_start = edit.start
    return result


def qualified_functions(tree: ast.AST) -> dict[str, FunctionNode]:
    """Every function in `tree` by qualified name (`Class.method`, `outer.inner`), source order."""
    found: dict[str, FunctionNode] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                found[prefix + child.name] = child
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


class SourceText:
    """A source text with its AST, its significant tokens and offset arithmetic between them.

    Raises:
        ValueError: the text uses CR line endings or does not parse.
    """

    def __init__(self, text: str) -> None:
        if "\r" in text:
            raise ValueError("sources with CR line endings are not supported; convert to LF")
        try:
            self.tree = ast.parse(text)
        except SyntaxError as exc:
            raise ValueError(f"source does not parse: {exc}") from exc
        self.text = text
        self._line_starts = [0, *(match.end() for match in re.finditer("\n", text))]
        self._lines = text.split("\n")
        self.tokens = [
            Token(token.type, token.string, self._offset(*token.start), self._offset(*token.end))
            for token in tokenize.generate_tokens(io.StringIO(text).readline)
            if token.type not in _LAYOUT_TOKENS
        ]
        self._token_starts = [token.start for token in self.tokens]
        self._token_ends = [token.end for token in self.tokens]

    def node_offset(self, line: int, byte_column: int) -> int:
        """The character offset of an `ast` position (ast columns count UTF-8 bytes)."""
        line_bytes = self._lines[line - 1].encode("utf-8")
        return self._line_starts[line - 1] + len(line_bytes[:byte_column].decode("utf-8"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        """The `[start, end)` character offsets of a node with a position."""
        start = self.node_offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        end = self.node_offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        return start, end

    def expanded_span(self, node: ast.AST) -> tuple[int, int]:
        """The node's span widened to the parentheses that wrap exactly this node, if any.

        Only use it for nodes that cannot be the sole argument of a call (an operand of
        `and`/`or`, one of several call arguments, a default or a return value): there the
        call's own parentheses would look the same.
        """
        start, end = self.span(node)
        while True:
            before, after = self.token_before(start), self.token_at(end)
            if before is None or after is None or (before.text, after.text) != ("(", ")"):
                return start, end
            start, end = before.start, after.end

    def operator_tokens(self, start: int, end: int) -> list[Token]:
        """The operator tokens between two operands, parentheses and comments excluded."""
        low = bisect.bisect_left(self._token_starts, start)
        high = bisect.bisect_right(self._token_ends, end)
        return [
            token
            for token in self.tokens[low:high]
            if token.text not in _PARENTHESES and token.kind in {tokenize.OP, tokenize.NAME}
        ]

    def token_at(self, offset: int) -> Token | None:
        """The first token that starts at or after `offset`."""
        index = bisect.bisect_left(self._token_starts, offset)
        return self.tokens[index] if index < len(self.tokens) else None

    def token_before(self, offset: int) -> Token | None:
        """The last token that ends at or before `offset`."""
        index = bisect.bisect_right(self._token_ends, offset)
        return self.tokens[index - 1] if index > 0 else None

    def position(self, offset: int) -> tuple[int, int]:
        """The 1-based line and 0-based character column of an offset."""
        line_index = bisect.bisect_right(self._line_starts, offset) - 1
        return line_index + 1, offset - self._line_starts[line_index]

    def line_bounds(self, line: int) -> tuple[int, int]:
        """Offsets of the first character of `line` and of the character after its newline."""
        start = self._line_starts[line - 1]
        end = self._line_starts[line] if line < len(self._line_starts) else len(self.text)
        return start, end

    def _offset(self, line: int, char_column: int) -> int:
        if line > len(self._line_starts):  # tokenize's ENDMARKER sits past the last line
            return len(self.text)
        return self._line_starts[line - 1] + char_column
