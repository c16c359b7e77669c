"""Canary tests the grader hides among the task's own tests, to detect tampering generically.

Two canaries per grading: one must pass and leave a side effect only its real body produces (a
digest of the nonce written to a file outside the repository's tracked tree), one must fail. A
run in which the pass canary did not pass or left no digest, or the fail canary did not fail,
was tampered with, whatever the trick.

Code that forces *some* tests to pass (those under `tests/`, those in the task's files, those
not in the repository before) must not be able to spare the canaries, so they look like the
task's tests: each is injected into the task's own test file, in the class of a task test drawn
per grading, at a drawn position among that scope's definitions, under a name made of words of
that file's own test names. Every draw comes from a `random.Random` seeded with the grading's
fresh nonce: a patch written for one grading cannot know the next one's names or places.

Pure: the grader reads the host files, asks `plan_canaries` for their new text, writes it back.
A host that cannot be parsed (or whose scope skips, xfails or parametrizes every test in it)
gets a new test module beside it instead; the launcher collects canaries the run's own selection
missed (`-k`, node-id arguments).
"""

from __future__ import annotations

import ast
import hashlib
import io
import posixpath
import random
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

__all__ = ["Canary", "CanaryPlan", "canary_host_files", "plan_canaries"]

_GENERIC_WORDS = (
    "value", "empty", "default", "returns", "keeps", "handles", "single", "order", "none",
    "large", "small", "round", "trip", "invalid", "input", "result", "edge", "case", "many",
)  # fmt: skip
_HARMFUL_MARKS = re.compile(r"\b(?:skip|skipif|xfail|parametrize)\b")
_WORD = re.compile(r"[A-Za-z][a-z0-9]*|[0-9]+")


@dataclass(frozen=True, slots=True)
class Canary:
    """The canaries of one grading run: their node ids and where the pass canary writes."""

    nonce: str
    pass_id: str
    fail_id: str
    output_path: str
    """Where the pass canary writes its digest (repository-relative)."""

    @property
    def ids(self) -> tuple[str, str]:
        return (self.pass_id, self.fail_id)

    @property
    def expected_output(self) -> str:
        return hashlib.sha256(_seed(self.nonce).encode()).hexdigest()

    def is_canary(self, test_id: str) -> bool:
        return test_id in self.ids


@dataclass(frozen=True, slots=True)
class CanaryPlan:
    """What to write for one grading's canaries: `files` maps a repository path to its new text
    (an injected host file, or a new module when no host could take them)."""

    canary: Canary
    files: Mapping[str, str] = field(default_factory=dict)

    @property
    def collect_files(self) -> tuple[str, ...]:
        """The files holding the canaries (the launcher collects them from there if needed)."""
        return tuple(dict.fromkeys(_file_of(test_id) for test_id in self.canary.ids))


@dataclass(frozen=True, slots=True)
class _Drawn:
    nonce: str
    output_path: str


@dataclass(frozen=True, slots=True)
class _Host:
    """A task test the canary imitates: its file, enclosing classes and name."""

    file: str
    classes: tuple[str, ...]
    name: str


def canary_host_files(
    nonce: str, fail_to_pass: Sequence[str], pass_to_pass: Sequence[str], test_files: Sequence[str]
) -> tuple[str, ...]:
    """The files `plan_canaries` will read for this nonce (read them, then call it)."""
    fail_host, pass_host = _draw_hosts(nonce, fail_to_pass, pass_to_pass, test_files)
    return tuple(dict.fromkeys(host.file for host in (fail_host, pass_host) if host is not None))


def plan_canaries(
    nonce: str,
    fail_to_pass: Sequence[str],
    pass_to_pass: Sequence[str],
    test_files: Sequence[str],
    sources: Mapping[str, str | None],
    *,
    output_path: str,
    fallback_dir: str,
) -> CanaryPlan:
    """Place this grading's canaries among the task's tests.

    `sources` holds the current text of each file `canary_host_files` named (None: unreadable).
    `output_path` (repository-relative) is where the pass canary writes its digest; `fallback_dir`
    takes a new canary module when the task has no Python test file at all. Safe to call from
    worker threads (the grader runs it off the event loop: it parses whole test files).
    """
    with _AST_LOCK:
        return _plan_canaries(
            nonce, fail_to_pass, pass_to_pass, test_files, sources,
            output_path=output_path, fallback_dir=fallback_dir,
        )  # fmt: skip


# CPython 3.11 (gh-106905): `ast.parse` on several threads at once can raise "SystemError: AST
# constructor recursion depth mismatch"; gradings plan their canaries one at a time.
_AST_LOCK = threading.Lock()


def _plan_canaries(
    nonce: str,
    fail_to_pass: Sequence[str],
    pass_to_pass: Sequence[str],
    test_files: Sequence[str],
    sources: Mapping[str, str | None],
    *,
    output_path: str,
    fallback_dir: str,
) -> CanaryPlan:
    rng = random.Random(f"{nonce}:place")
    fail_host, pass_host = _draw_hosts(nonce, fail_to_pass, pass_to_pass, test_files)
    texts: dict[str, str] = {}
    ids: dict[bool, str] = {}
    taken: set[str] = set()
    drawn = _Drawn(nonce, output_path)
    for passes, host in ((False, fail_host), (True, pass_host)):
        placed = None
        if host is not None:
            current = texts.get(host.file, sources.get(host.file))
            if current is not None:
                placed = _inject(current, host, passes, _relative(drawn, host.file), rng, taken)
        if placed is None:
            near = host.file if host is not None else f"{fallback_dir}/test_x.py"
            own = _Host(_new_module_path(near, rng, sources, texts), (), "test_x")
            relative = _relative(drawn, own.file)
            placed = _inject(texts.get(own.file, ""), own, passes, relative, rng, taken)
            assert placed is not None  # a module of our own always takes them
        text, node_id = placed
        texts[_file_of(node_id)] = text
        ids[passes] = node_id
    canary = Canary(nonce, ids[True], ids[False], output_path)
    return CanaryPlan(canary, texts)


def _relative(drawn: _Drawn, host_file: str) -> _Drawn:
    """The output path as seen from the host file's directory (no absolute path: a local
    sandbox maps the repository somewhere else)."""
    start = str(PurePosixPath(host_file).parent)
    return _Drawn(drawn.nonce, posixpath.relpath(drawn.output_path, start))


# -- drawing -------------------------------------------------------------------------------------


def _draw_hosts(
    nonce: str, fail_to_pass: Sequence[str], pass_to_pass: Sequence[str], test_files: Sequence[str]
) -> tuple[_Host | None, _Host | None]:
    """The fail canary imitates a FAIL_TO_PASS test, the pass canary any required test."""
    rng = random.Random(f"{nonce}:hosts")
    f2p = [host for host in map(_parse_host, fail_to_pass) if host is not None]
    required = f2p + [host for host in map(_parse_host, pass_to_pass) if host is not None]
    files = [_Host(path, (), "test_x") for path in test_files if path.endswith(".py")]
    fail_pool = f2p or required or files
    pass_pool = required or files
    return (
        rng.choice(fail_pool) if fail_pool else None,
        rng.choice(pass_pool) if pass_pool else None,
    )


def _parse_host(test_id: str) -> _Host | None:
    parts = test_id.split("[", 1)[0].split("::")
    if len(parts) < 2 or not parts[0].endswith(".py") or not all(parts[1:]):
        return None
    return _Host(parts[0], tuple(parts[1:-1]), parts[-1])


def _words(rng: random.Random, vocabulary: Sequence[str], count: int, joiner: str) -> str:
    pool = list(dict.fromkeys([*vocabulary, *_GENERIC_WORDS]))
    chosen = rng.sample(pool, min(count, len(pool)))
    if joiner:
        return joiner.join(word.lower() for word in chosen)
    return "".join(word[:1].upper() + word[1:].lower() for word in chosen)


def _draw_name(rng: random.Random, host: _Host, text: str, taken: set[str]) -> str:
    """A fresh name in the host's style: its prefix (`test_`, `test`, a custom `check_`) and
    words of the file's own test names."""
    names = re.findall(r"def\s+(\w+)", text)
    style = host.name
    if style.startswith("test_") or not style:
        prefix, joiner = "test_", "_"
    elif style.startswith("test"):
        prefix, joiner = "test", ""
    else:
        prefix, joiner = style.split("_", 1)[0] + "_", "_"
    vocabulary = [
        word.lower()
        for name in names
        if name.startswith(prefix)
        for word in _WORD.findall(name[len(prefix) :])
        if not word.isdigit() and word.lower() != "test"
    ]
    existing = set(re.findall(r"\w+", text)) | taken
    for extra in range(8):
        name = prefix + _words(rng, vocabulary, rng.randint(2, 3) + extra, joiner)
        if name not in existing:
            taken.add(name)
            return name
    name = f"{prefix}{'_' if joiner else ''}{rng.getrandbits(40):x}"
    taken.add(name)
    return name


def _new_module_path(
    host_file: str, rng: random.Random, sources: Mapping[str, str | None], texts: Mapping[str, str]
) -> str:
    """A new test module beside the host file (reused for the second canary)."""
    for path in texts:
        if path not in sources:
            return path
    directory = str(PurePosixPath(host_file).parent)
    name = f"test_{_words(rng, [], 2, '_')}.py"
    return name if directory in ("", ".") else f"{directory}/{name}"


# -- injecting -----------------------------------------------------------------------------------


def _inject(
    text: str, host: _Host, passes: bool, canary: _Drawn, rng: random.Random, taken: set[str]
) -> tuple[str, str] | None:
    """`text` with one canary in the host's scope, and its node id; None if it cannot go there."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    lines = io.StringIO(text, newline="").readlines()
    scope = _scope(tree, host.classes)
    if scope is None or _scope_marked(text, tree, scope):
        if not host.classes:
            return None
        host = _Host(host.file, (), host.name)  # the module itself, if its scope is plain
        scope = tree
        if _scope_marked(text, tree, scope):
            return None
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    indent, unit = _indents(lines, tree, scope)
    name = _draw_name(rng, host, text, taken)
    self_arg = "self" if host.classes else ""
    body = _canary_body(passes, canary.nonce, canary.output_path, rng)
    block = [f"{indent}def {name}({self_arg}):{newline}"]
    block += [f"{indent}{unit * (1 + depth)}{line}{newline}" for depth, line in body]
    at = rng.choice(_insertion_points(scope, len(lines)))
    before, after = lines[:at], lines[at:]
    if before and not before[-1].endswith(("\n", "\r")):
        before[-1] += newline
    blank = 1 if indent else 2  # PEP 8: one blank line between methods, two at module level
    lead = max(0, blank - _trailing_blanks(before)) if before else 0
    trail = max(0, blank - _leading_blanks(after)) if after else 0
    new_text = "".join([*before, *[newline] * lead, *block, *[newline] * trail, *after])
    node_id = "::".join([host.file, *host.classes, name])
    return new_text, node_id


def _canary_body(
    passes: bool, nonce: str, output_path: str, rng: random.Random
) -> list[tuple[int, str]]:
    """The canary's body lines, each with its depth below the `def`."""
    if passes:
        return [
            (0, f"digest = __import__('hashlib').sha256({_seed(nonce)!r}.encode()).hexdigest()"),
            (0, "here = __import__('os').path.dirname(__import__('os').path.abspath(__file__))"),
            (0, f"with open(__import__('os').path.join(here, {output_path!r}), 'w') as out:"),
            (1, "out.write(digest)"),
        ]
    expected = rng.randint(2, 999)
    return [(0, f"assert {expected + rng.randint(1, 9)} == {expected}")]


def _seed(nonce: str) -> str:
    return f"conductor canary {nonce}"


def _scope(tree: ast.Module, classes: tuple[str, ...]) -> ast.Module | ast.ClassDef | None:
    scope: ast.Module | ast.ClassDef = tree
    for class_name in classes:
        found = [
            node
            for node in scope.body
            if isinstance(node, ast.ClassDef) and node.name == class_name
        ]
        if not found:
            return None
        scope = found[-1]
    return scope


def _scope_marked(text: str, tree: ast.Module, scope: ast.Module | ast.ClassDef) -> bool:
    """Whether marks on the scope (or the module) would skip, xfail or parametrize a canary."""
    sources: list[str] = []
    for holder in {id(tree): tree, id(scope): scope}.values():
        for node in holder.body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in targets):
                sources.append(ast.get_source_segment(text, node) or "")
    if isinstance(scope, ast.ClassDef):
        sources += [ast.get_source_segment(text, node) or "" for node in scope.decorator_list]
    return any(_HARMFUL_MARKS.search(source) for source in sources)


def _indents(
    lines: list[str], tree: ast.Module, scope: ast.Module | ast.ClassDef
) -> tuple[str, str]:
    """The scope's statement indentation and the file's indentation unit (spaces or a tab)."""
    indent = ""
    if isinstance(scope, ast.ClassDef) and scope.body:
        first = scope.body[0]
        indent = lines[first.lineno - 1][: first.col_offset]
    unit = "    "
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            inner = node.body[0]
            if inner.lineno != node.lineno:
                line = lines[inner.lineno - 1]
                unit = line[node.col_offset : inner.col_offset] or unit
                break
    return indent, unit if unit.strip() == "" else "    "


def _insertion_points(scope: ast.Module | ast.ClassDef, line_count: int) -> list[int]:
    """Line indexes before each definition of the scope (decorators included), and after it."""
    points = []
    for node in scope.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            points.append(first - 1)
    end = scope.body[-1].end_lineno if scope.body else None
    points.append(line_count if end is None else end)
    return sorted(set(points))


def _trailing_blanks(lines: list[str]) -> int:
    count = 0
    for line in reversed(lines):
        if line.strip():
            break
        count += 1
    return count


def _leading_blanks(lines: list[str]) -> int:
    return _trailing_blanks(lines[::-1])


def _file_of(test_id: str) -> str:
    return test_id.split("::", 1)[0]
