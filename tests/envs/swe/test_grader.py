"""The grader's I/O: the patch from the agent's sandbox, the tests in a fresh one (local)."""

from __future__ import annotations

from typing import Any

from envs.swe.config import GradingConfig
from envs.swe.grader import AgentPatch, Grader
from envs.swe.grading_log import parse_pytest_log
from envs.swe.grading_scripts import apply_method as _apply_method
from envs.swe.tasks import SWETask
from foundation.clock import ManualClock
from harness.errors import ImageNotFoundError, SandboxDeadError
from harness.sandbox.base import Sandbox
from harness.sandbox.local import LocalSandbox
from tests.envs.swe.tiny_task import OPS_FIXED, TEST_FILE, TinyTaskBed


def grader(bed: TinyTaskBed, **config: Any) -> Grader:
    return Grader(
        GradingConfig(**config),
        bed.grading_sandbox,
        clock=ManualClock(),
        parse_log=parse_pytest_log,
    )


async def extract(bed: TinyTaskBed, task: SWETask, sandbox: LocalSandbox) -> AgentPatch:
    patch = await grader(bed).extract_patch(sandbox, task)
    assert isinstance(patch, AgentPatch), patch
    return patch


async def test_the_patch_holds_source_changes_and_new_files(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    sandbox = bed.fresh_sandbox()
    (sandbox.root / "calc" / "ops.py").write_text(OPS_FIXED)
    (sandbox.root / "calc" / "extra.py").write_text("X = 1\n")
    patch = await extract(bed, tiny_task, sandbox)
    assert patch.changed_paths == ("calc/extra.py", "calc/ops.py")
    assert "+    return a + b" in patch.text and "+X = 1" in patch.text
    assert patch.discarded_paths == ()


async def test_changes_to_tests_and_conftest_are_left_out_of_the_patch(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    sandbox = bed.fresh_sandbox()
    (sandbox.root / "calc" / "ops.py").write_text(OPS_FIXED)
    (sandbox.root / TEST_FILE).write_text("def test_add():\n    pass\n")
    (sandbox.root / "conftest.py").write_text("print('hi')\n")
    patch = await extract(bed, tiny_task, sandbox)
    assert set(patch.discarded_paths) == {TEST_FILE, "conftest.py"}
    assert "tests/test_ops.py" not in patch.text and "conftest" not in patch.text
    assert "calc/ops.py" in patch.text


async def test_committed_changes_are_in_the_patch_too(bed: TinyTaskBed, tiny_task: SWETask) -> None:
    sandbox = bed.fresh_sandbox()
    (sandbox.root / "calc" / "ops.py").write_text(OPS_FIXED)
    await sandbox.exec("git -c user.name=a -c user.email=a@b commit -qam fix", timeout_s=30)
    patch = await extract(bed, tiny_task, sandbox)
    assert "+    return a + b" in patch.text


async def test_an_unchanged_repo_gives_an_empty_patch(bed: TinyTaskBed, tiny_task: SWETask) -> None:
    patch = await extract(bed, tiny_task, bed.fresh_sandbox())
    assert patch.diff == b"" and patch.changed_paths == ()


async def test_a_patch_over_the_size_limit_is_not_graded(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    sandbox = bed.fresh_sandbox()
    (sandbox.root / "big.txt").write_text("z\n" * 5000)
    patch = await grader(bed, max_patch_bytes=1000).extract_patch(sandbox, tiny_task)
    assert isinstance(patch, AgentPatch) and patch.too_large
    report = await grader(bed, max_patch_bytes=1000).grade(tiny_task, patch)
    assert report.invalid_reason == "patch_too_large" and bed.graded_in == []


async def test_the_gold_patch_resolves_the_task_in_a_fresh_sandbox(
    bed: TinyTaskBed, tiny_task: SWETask, gold_patch: str
) -> None:
    report = await grader(bed).grade(tiny_task, AgentPatch(gold_patch.encode()))
    assert report.resolved, report.log_tail
    assert report.apply_method == "git_apply" and report.hardened and not report.tampered
    assert report.pristine_config
    assert report.test_exit_code == 1  # the fail canary failed, as it must
    assert report.second_verdict is not None and report.second_verdict["resolved"]
    # two verdicts, each in its own fresh sandbox, both closed after
    assert len(bed.graded_in) == 2
    assert not any([await sandbox.is_alive() for sandbox in bed.graded_in])


async def test_without_the_second_verdict_one_sandbox_grades(
    bed: TinyTaskBed, tiny_task: SWETask, gold_patch: str
) -> None:
    report = await grader(bed, second_verdict=False).grade(
        tiny_task, AgentPatch(gold_patch.encode())
    )
    assert report.resolved and report.second_verdict is None and len(bed.graded_in) == 1


async def test_an_unresolved_first_verdict_costs_no_second_sandbox(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    report = await grader(bed).grade(tiny_task, AgentPatch(b""))
    assert not report.resolved and report.second_verdict is None and len(bed.graded_in) == 1


async def test_an_empty_patch_does_not_resolve_the_task(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    report = await grader(bed).grade(tiny_task, AgentPatch(b""))
    assert not report.resolved and report.infra_error is None
    assert report.f2p_failed == (tiny_task.FAIL_TO_PASS[0],) and report.test_exit_code == 1


async def test_a_patch_that_does_not_apply_gives_reward_0(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    bogus = b"--- a/calc/ops.py\n+++ b/calc/ops.py\n@@ -40,1 +40,1 @@\n-nothing here\n+x\n"
    report = await grader(bed).grade(tiny_task, AgentPatch(bogus))
    assert report.invalid_reason == "patch_apply_failed" and report.infra_error is None


async def test_a_missing_image_is_an_infra_error(bed: TinyTaskBed, tiny_task: SWETask) -> None:
    async def no_image(task: object) -> Sandbox:
        raise ImageNotFoundError("image 'sweb.eval.tiny' does not exist here")

    config = GradingConfig()
    report = await Grader(config, no_image, clock=ManualClock(), parse_log=parse_pytest_log).grade(
        tiny_task, AgentPatch(b"")
    )
    assert report.infra_error is not None and report.infra_error.code == "image_missing"
    assert report.reward == 0.0 and report.invalid_reason is None


async def test_a_grading_sandbox_that_dies_is_an_infra_error(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    async def dying(task: object) -> Sandbox:
        sandbox = bed.fresh_sandbox()
        await sandbox.aclose()  # every later call raises SandboxDeadError
        return sandbox

    report = await Grader(
        GradingConfig(), dying, clock=ManualClock(), parse_log=parse_pytest_log
    ).grade(tiny_task, AgentPatch(b""))
    assert report.infra_error is not None and report.infra_error.code == "sandbox_error"


async def test_a_test_patch_that_does_not_apply_is_an_infra_error(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    broken = tiny_task.model_copy(update={"test_patch": tiny_task.test_patch.replace("mul", "MUL")})
    report = await grader(bed).grade(broken, AgentPatch(b""))
    assert report.infra_error is not None and report.infra_error.code == "test_patch_failed"


async def test_grading_past_its_deadline_is_an_infra_error(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    slow = tiny_task.model_copy(update={"test_cmd": "sleep 20; " + tiny_task.test_cmd})
    report = await grader(bed, grading_deadline_s=1.0).grade(slow, AgentPatch(b""))
    assert report.infra_error is not None and report.infra_error.code == "grading_timeout"


async def test_tests_killed_by_the_in_sandbox_timeout_give_reward_0(
    bed: TinyTaskBed, tiny_task: SWETask, gold_patch: str
) -> None:
    slow = tiny_task.model_copy(update={"test_cmd": "sleep 20; " + tiny_task.test_cmd})
    report = await grader(bed, test_timeout_s=0.5, kill_grace_s=0.5).grade(
        slow, AgentPatch(gold_patch.encode())
    )
    assert report.invalid_reason == "tests_timed_out" and report.infra_error is None


async def test_extracting_from_a_dead_sandbox_raises_sandbox_dead(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    sandbox = bed.fresh_sandbox()
    await sandbox.aclose()
    try:
        await grader(bed).extract_patch(sandbox, tiny_task)
    except SandboxDeadError:
        return
    raise AssertionError("extract_patch on a dead sandbox must raise SandboxDeadError")


async def test_test_changes_smuggled_into_a_patch_are_reverted_before_the_tests_run(
    bed: TinyTaskBed, tiny_task: SWETask, gold_patch: str
) -> None:
    forged = (
        "diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/conftest.py\n@@ -0,0 +1 @@\n+raise SystemExit('conftest ran')\n"
    )
    report = await grader(bed).grade(tiny_task, AgentPatch((gold_patch + forged).encode()))
    assert report.resolved, report.log_tail
    assert report.discarded_paths == ("conftest.py",)


async def test_repository_diff_settings_cannot_hide_or_forge_the_patch(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    sandbox = bed.fresh_sandbox()
    (sandbox.root / "calc" / "ops.py").write_text(OPS_FIXED)
    (sandbox.root / ".gitattributes").write_text("*.py diff=forge\n")
    await sandbox.exec(
        "git config diff.forge.command 'echo forged; true' && git config diff.noprefix true",
        timeout_s=30,
    )
    patch = await extract(bed, tiny_task, sandbox)
    assert "forged" not in patch.text
    assert "--- a/calc/ops.py" in patch.text and "+    return a + b" in patch.text


def test_the_apply_method_is_found_when_git_stderr_shares_its_line() -> None:
    # Seen on Docker: stdout and stderr arrive as separate streams, so the script's marker can
    # land in the middle of git's own "Checking patch ..." line.
    interleaved = (
        "Checking patch moneta/money.py...APPLY_METHOD=git_apply\n\n"
        "Applied patch moneta/money.py cleanly.\n"
    )
    assert _apply_method(interleaved) == "git_apply"
    assert _apply_method("error: patch failed\nAPPLY_METHOD=patch_fuzz\n") == "patch_fuzz"
    assert _apply_method("error: patch failed: a.py:3\n") is None
