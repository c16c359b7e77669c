"""Remove the tests that catch a bug from the repository the agent sees.

As in SWE-bench, the tests that fail on the bug arrive only with the task's `test_patch`. The
unit removed is the top-level definition (function or class) a test id names, together with
its decorators and the comment lines right above it; a test file left without tests is removed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping

__all__ = ["definitions_by_file", "hide_tests"]


def definitions_by_file(test_ids: Iterable[str]) -> dict[str, set[str]]:
    """Map each test file to the top-level names its ids use.

    `tests/test_a.py::test_x[1 2]` -> `{"tests/test_a.py": {"test_x"}}`;
    `tests/test_a.py::TestK::test_m` -> `{"tests/test_a.py": {"TestK"}}`.
    """
    by_file: dict[str, set[str]] = {}
    for test_id in test_ids:
        path, separator, rest = test_id.partition("::")
        if not separator or not rest:
            raise ValueError(f"test id {test_id!r} is not of the form path::name")
        name = rest.split("::", 1)[0].split("[", 1)[0]
        by_file.setdefault(path, set()).add(name)
    return by_file


def hide_tests(files: Mapping[str, str], test_ids: Iterable[str]) -> dict[str, str]:
    """A copy of the snapshot `files` without the definitions of `test_ids`.

    Raises:
        ValueError: a test id names a file or a top-level definition that does not exist.
    """
    result = dict(files)
    for path, names in sorted(definitions_by_file(test_ids).items()):
        if path not in files:
            raise ValueError(f"test file {path} is not in the snapshot")
        remaining = _remove_definitions(files[path], names, path)
        if _defines_tests(remaining):
            result[path] = remaining
        else:
            del result[path]
    return result


def _remove_definitions(source: str, names: set[str], path: str) -> str:
    lines = source.splitlines(keepends=True)
    tree = ast.parse(source)
    doomed: set[int] = set()  # 0-based line indexes
    found: set[str] = set()
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if node.name not in names:
            continue
        found.add(node.name)
        first = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)]) - 1
        last = (node.end_lineno or node.lineno) - 1
        while first > 0 and lines[first - 1].lstrip().startswith("#"):
            first -= 1  # a comment right above belongs to the definition
        while first > 0 and not lines[first - 1].strip():
            first -= 1  # and so do the blank lines that separate it from the code above
        doomed.update(range(first, last + 1))
    missing = names - found
    if missing:
        raise ValueError(f"{path} defines no top-level {', '.join(sorted(missing))}")
    return "".join(line for index, line in enumerate(lines) if index not in doomed)


def _defines_tests(source: str) -> bool:
    return any(
        (isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"))
        or (isinstance(node, ast.ClassDef) and node.name.startswith("Test"))
        for node in ast.parse(source).body
    )
