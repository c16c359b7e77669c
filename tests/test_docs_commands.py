"""Every `conductor ...` command the README and docs/ show is a command that exists, with options
that exist; every concrete `run`, `simulate` and `bench rollout` command resolves to a plan
(its config files, overrides, policies and task sources all check out), without running it."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from rollout.cli.app import app
from rollout.jobs.run_plan import plan_run
from rollout.jobs.simulation_plan import plan_simulation
from tests.paths import REPO_ROOT

DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
DEFAULT_RUN = REPO_ROOT / "configs" / "run" / "default.yaml"
DEFAULT_SIMULATE = REPO_ROOT / "configs" / "simulate" / "swe_like.yaml"
# A word in capitals, an ellipsis, a shell variable, <...> or [...], or a file of the reader's
# own (path/to/, my_..., /models/): a synopsis or an example to adapt, not a command to plan.
PLACEHOLDER = re.compile(
    r"\b[A-Z][A-Z_0-9]*\b|…|\.\.\.|\$|<[^>]*>|\[[A-Za-z ]+\]|path/to/|\bmy_|/models/"
)


def _commands() -> Iterator[tuple[str, str]]:
    for path in DOCS:
        text = path.read_text()
        for found in re.finditer(r"`((?:\.venv/bin/)?conductor [^`]+)`", text):
            yield path.name, " ".join(found.group(1).split())
        for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
            joined = block.replace("\\\n", " ")
            for line in joined.splitlines():
                line = line.strip().removeprefix("$ ").split("  #")[0].strip()
                if line.startswith(("conductor ", ".venv/bin/conductor ")):
                    yield path.name, " ".join(line.split())


COMMANDS = sorted(set(_commands()))


def _words(command: str) -> list[str]:
    command = command.removeprefix(".venv/bin/")
    try:
        words = shlex.split(command)
    except ValueError:  # an unbalanced quote in a synopsis
        words = command.split()
    return words[1:]  # without `conductor`


def _subcommand(words: list[str]) -> list[str]:
    """The leading words that name a (sub)command: stop at an argument or an option."""
    path: list[str] = []
    for word in words:
        if word.startswith("-") or "=" in word or "/" in word or "." in word or word == "|":
            break
        if path and path[0] not in ("bench", "envs", "images", "calibrate", "trace", "workload"):
            break
        if len(path) == 2:
            break
        path.append(word)
    return path


def test_the_docs_show_commands() -> None:
    assert len(COMMANDS) > 30


@pytest.mark.parametrize(("doc", "command"), COMMANDS)
def test_every_command_in_the_docs_exists_with_its_options(doc: str, command: str) -> None:
    words = _words(command)
    path = _subcommand(words)
    result = CliRunner().invoke(app, [*path, "--help"], terminal_width=200)
    assert result.exit_code == 0, f"{doc}: `{command}`: no such command {path}: {result.output}"
    ours = words[: words.index("--")] if "--" in words else words  # then: SGLang's own
    for option in (word.split("=")[0] for word in ours if word.startswith("--")):
        assert option in result.output, f"{doc}: `{command}`: {path} has no option {option}"


def _concrete(command: str) -> bool:
    return not PLACEHOLDER.search(command.split(" --", 1)[0])


PLANNED = [
    (doc, command)
    for doc, command in COMMANDS
    if _concrete(command)
    and _subcommand(_words(command))[:2] in (["run"], ["simulate"], ["bench", "rollout"])
    and "--resume" not in command
]


def test_some_concrete_commands_are_planned() -> None:
    assert len(PLANNED) >= 8


@pytest.mark.parametrize(("doc", "command"), PLANNED)
def test_every_concrete_run_and_simulate_command_resolves_to_a_plan(
    doc: str, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO_ROOT)
    words = _words(command)
    path = _subcommand(words)
    rest = words[len(path) :]
    arguments: list[str] = []
    skip = False
    for word in rest:  # options and their values are the CLI's, not the plan's
        if skip:
            skip = False
            continue
        if word.startswith("--"):
            skip = "=" not in word and word not in ("--no-report", "--report")
            continue
        arguments.append(word)
    config = None
    if arguments and "=" not in arguments[0].split("/")[0]:
        config = REPO_ROOT / arguments.pop(0)
    if path == ["run"]:
        plan_run(config or DEFAULT_RUN, arguments)
    else:
        plan_simulation(config or DEFAULT_SIMULATE, arguments)
