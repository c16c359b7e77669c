"""SkyRL's own `GeneratorOutput` fields and `validate_generator_output` (skyrl 0.4 and
skyrl-train 0.3, installed in `.venv-skyrl` by `make venv-skyrl`: SkyRL needs Python >= 3.12)
on the adapter's output, from a batch in which a sample was lost to an infrastructure error.
Without `.venv-skyrl` these tests skip; with CONDUCTOR_REQUIRE_SKYRL=1 (CI) they fail."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from rollout.core.types import Trajectory
from rollout.trajectories.adapters import SKYRL_GENERATOR_OUTPUT_KEYS, to_skyrl_output
from tests.paths import REPO_ROOT
from tests.rollout.trajectory_factory import make_group, make_trajectory

SKYRL_PYTHON = REPO_ROOT / ".venv-skyrl" / "bin" / "python"
REQUIRE_SKYRL = os.environ.get("CONDUCTOR_REQUIRE_SKYRL") == "1"
CHECK = Path(__file__).with_name("skyrl_check.py")

pytestmark = pytest.mark.skyrl


def skyrl_python() -> Path:
    if not SKYRL_PYTHON.exists():
        if REQUIRE_SKYRL:
            pytest.fail("CONDUCTOR_REQUIRE_SKYRL=1 but there is no .venv-skyrl")
        pytest.skip("no .venv-skyrl; run `make venv-skyrl`")
    return SKYRL_PYTHON


def groups_with_a_lost_sample() -> list[list[Trajectory]]:
    """Two prompts, three samples each: six asked for, one lost to an infrastructure error."""
    first = make_group("p0", [1.0, 0.0, 1.0], turns=3)
    second = make_group("p1", [0.0, 1.0, 1.0], turns=2, version=4)
    second[2] = replace(
        make_trajectory("p1", 2, reward=None, infra_error="agent_sandbox_dead", turns=1),
        group_id="p1",
    )
    return [first, second]


def check(output: dict[str, Any], num_prompts: int) -> dict[str, Any]:
    """SkyRL's verdict on `output` (run in .venv-skyrl)."""
    plain = dict(output)
    plain["trajectory_ids"] = [
        [tid.instance_id, tid.repetition_id] for tid in output["trajectory_ids"]
    ]
    done = subprocess.run(
        [str(skyrl_python()), str(CHECK)],
        input=json.dumps({"num_prompts": num_prompts, "output": plain}),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout))


def test_the_output_has_exactly_skyrls_fields() -> None:
    verdict = check(to_skyrl_output(groups_with_a_lost_sample(), pad_token_id=0), 6)
    assert verdict["skyrl_keys"] == list(SKYRL_GENERATOR_OUTPUT_KEYS)


def test_skyrls_validator_passes_on_a_batch_that_lost_a_sample_to_an_infra_error() -> None:
    verdict = check(to_skyrl_output(groups_with_a_lost_sample(), pad_token_id=0), 6)
    assert verdict["skyrl"] == "passed" and verdict["skyrl_train"] == "passed"


def test_the_validator_refuses_a_batch_with_the_lost_sample_dropped() -> None:
    """What the adapter did before: one row fewer than SkyRL asked for (the check can fail)."""
    output = to_skyrl_output(groups_with_a_lost_sample(), pad_token_id=0)
    kept = [i for i, reason in enumerate(output["stop_reasons"]) if reason != "infra_error"]
    dropped = {
        key: [value[i] for i in kept] if isinstance(value, list) else value
        for key, value in output.items()
    }
    verdict = check(dropped, 6)
    assert "Mismatch between prompts (6) and responses (5)" in verdict["skyrl"]
