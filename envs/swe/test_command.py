"""Recognise a pytest test command, so the grader can run it through its pinned launcher.

Pure parsing. A command the grader can harden is a plain word list (no shell operators, no
expansions): optional `NAME=value` assignments, then `python… -m pytest ARGS` or
`pytest ARGS` (`py.test`, `pytest-3`). Anything else runs as written, with fewer defences
(`docs/swe.md` says which).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

__all__ = ["PytestCommand", "parse_pytest_command"]

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON = re.compile(r"^python(?:\d+(?:\.\d+)*)?$")
_PYTEST_SCRIPTS = frozenset({"pytest", "py.test", "pytest-3", "py.test-3"})
_EXPANSIONS = re.compile(r"[`$\n]")
_OPERATOR_CHARS = frozenset(";&|<>()")


@dataclass(frozen=True, slots=True)
class PytestCommand:
    """A pytest invocation split into its parts.

    `interpreter` is the Python that runs pytest (`python3`, `/opt/env/bin/python`), or None
    when the command names the `pytest` script (`script`): the grader then runs the interpreter
    of that script's `#!` line.
    """

    env: tuple[tuple[str, str], ...]
    interpreter: str | None
    script: str | None
    args: tuple[str, ...]


def parse_pytest_command(command: str) -> PytestCommand | None:
    """The parts of a pytest command, or None when it is not a plain pytest invocation."""
    if _EXPANSIONS.search(command):
        return None
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:
        return None
    if any(word and set(word) <= _OPERATOR_CHARS for word in words):
        return None  # an unquoted shell operator: a pipeline or a list, not one command
    env: list[tuple[str, str]] = []
    while words and _ASSIGNMENT.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env.append((name, value))
    if not words:
        return None
    program = words[0].rsplit("/", 1)[-1]
    if _PYTHON.match(program) and words[1:3] in (["-m", "pytest"], ["-m", "py.test"]):
        return PytestCommand(tuple(env), words[0], None, tuple(words[3:]))
    if program in _PYTEST_SCRIPTS:
        return PytestCommand(tuple(env), None, words[0], tuple(words[1:]))
    return None
