"""scripts/simulator_cost.py: a run's digest repeats exactly and tells different runs apart."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "simulator_cost.py"
CONFIG = REPO_ROOT / "configs" / "simulate" / "short_context.yaml"
TINY = ["steps=2", "groups_per_step=2", "group_size=2", "trainer.train_time_s=1"]


def _output(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(CONFIG), *TINY, *args],
        capture_output=True, text=True, timeout=300, cwd=REPO_ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def _digests_in(output: str) -> dict[str, str]:
    return dict(re.findall(r"seed 0 (\S+) +CPU +[\d.]+ s .* digest ([0-9a-f]{16})", output))


def _digests(*args: str) -> dict[str, str]:
    return _digests_in(_output(*args))


def test_a_run_repeats_its_digest_and_another_policy_has_its_own() -> None:
    first = _digests("policies=[conductor,traj_async]")
    again = _digests("policies=[conductor,traj_async]", "--policies", "conductor")
    assert set(first) == {"conductor", "traj_async"}
    assert again == {"conductor": first["conductor"]}
    assert first["conductor"] != first["traj_async"]


@pytest.mark.parametrize("named", ["nonesuch", "conductor,nonesuch"])
def test_a_policy_the_config_lacks_is_an_error(named: str) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(CONFIG), *TINY, "--policies", named],
        capture_output=True, text=True, timeout=300, cwd=REPO_ROOT,
    )  # fmt: skip
    assert done.returncode == 2 and "nonesuch" in done.stderr
    assert "digest" not in done.stdout  # nothing ran


def test_engine_time_is_printed_per_run_and_changes_no_digest() -> None:
    output = _output("policies=[conductor,sync]", "--engine")
    lines = re.findall(
        r"engine busy ([\d,.]+) s, prefill ([\d.]+)% of it \| decode steps ([\d,]+), batch "
        r"([\d.]+) \| prefilled ([\d,]+) tokens, recomputed ([\d,]+)",
        output,
    )
    assert len(lines) == 2  # one per run
    for busy, prefill_pct, steps, batch, prefilled, recomputed in lines:
        assert float(busy.replace(",", "")) > 0 and int(steps.replace(",", "")) > 0
        assert 0 < float(prefill_pct) < 100 and float(batch) >= 1
        assert int(prefilled.replace(",", "")) >= int(recomputed.replace(",", ""))
    assert _digests_in(output) == _digests("policies=[conductor,sync]")
