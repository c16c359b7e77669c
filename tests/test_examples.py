"""Every Python snippet in the README is a whole `examples/` file, and every example runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import docker
import pytest

from tests.paths import EXAMPLES, REPO_ROOT

README = REPO_ROOT / "README.md"
SNIPPET = re.compile(r"```python\n(.*?)```", re.S)


def _readme_snippets() -> list[str]:
    return SNIPPET.findall(README.read_text())


def _run(example: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(example)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"{example.name} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_readme_has_snippets() -> None:
    assert len(_readme_snippets()) >= 3


@pytest.mark.parametrize("snippet", _readme_snippets(), ids=lambda s: s.splitlines()[0][:40])
def test_each_readme_snippet_is_a_whole_example_file_the_readme_links(snippet: str) -> None:
    matches = [path for path in EXAMPLES.glob("*.py") if path.read_text() == snippet]
    assert matches, "a README snippet is not the text of any examples/*.py file"
    assert f"examples/{matches[0].name}" in README.read_text()


def test_the_batch_stream_example_trains_on_complete_batches() -> None:
    output = _run(EXAMPLES / "batch_stream.py")
    assert re.findall(r"^step (\d+): (\d+) rows", output, re.M) == [("1", "32"), ("2", "32")]


@pytest.mark.docker
def test_the_env_pool_example_grades_its_episode(docker_client: docker.DockerClient) -> None:
    output = _run(EXAMPLES / "env_pool.py")
    assert "graded: reward 1 | reward 1.0, terminated: True, truncated: False" in output


@pytest.mark.docker
def test_the_new_env_example_runs_a_step_in_a_sandbox(docker_client: docker.DockerClient) -> None:
    assert _run(EXAMPLES / "my_env.py").startswith("'hello\\n' 1.0")


def test_the_trainer_adapters_example_feeds_every_trainer_the_same_samples() -> None:
    output = _run(EXAMPLES / "trainer_adapters.py")
    rows = re.search(r"^verl: \{'prompts': \((\d+), ", output, re.M)
    assert rows is not None, output
    count = rows.group(1)
    assert f"skyrl: {count} responses" in output and f"slime: {count} samples" in output
    assert f"trl: {count} completions" in output and f"hf: {count} rows" in output


@pytest.mark.parametrize(
    ("example", "says"),
    [
        ("verl_dataproto.py", r"verl DataProto: \d+ rows"),
        ("skyrl_generator.py", r"SkyRL GeneratorOutput: \d+ responses"),
        ("slime_samples.py", r"slime Samples: \d+; the first has \d+ tokens"),
        ("trl_grpo.py", r"TRL GRPOTrainer step done; reward \d"),
        ("hf_dataset.py", r"Hugging Face dataset: \d+ rows"),
    ],
)
def test_each_trainer_example_feeds_its_trainer(example: str, says: str) -> None:
    assert re.search(says, _run(EXAMPLES / "trainers" / example)), example
