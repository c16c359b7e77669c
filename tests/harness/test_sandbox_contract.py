"""The Sandbox contract, run against both backends (Docker tests need a real engine)."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable

import docker
import pytest

from harness.errors import SandboxDeadError
from harness.sandbox import ContainerLimits, ExecLimits, LocalSandbox, Sandbox
from harness.sandbox.docker import DockerSandbox

FAST_LIMITS = ExecLimits(
    kill_grace_s=1, host_grace_s=3, output_head_bytes=1000, output_tail_bytes=1000
)


SandboxMaker = Callable[[ExecLimits], Awaitable[Sandbox]]


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def make_sandbox(request: pytest.FixtureRequest) -> SandboxMaker:
    """Makes sandboxes of the backend the test is parametrized with."""

    async def make(exec_limits: ExecLimits) -> Sandbox:
        if request.param == "local":
            return LocalSandbox(limits=exec_limits)
        client: docker.DockerClient = request.getfixturevalue("docker_client")
        image: str = request.getfixturevalue("base_image")
        limits = ContainerLimits(memory_mb=256, pids=64, cpus=1.0)
        return await DockerSandbox.create(client, image, limits=limits, exec_limits=exec_limits)

    return make


@pytest.fixture
async def sandbox(make_sandbox: SandboxMaker) -> AsyncIterator[Sandbox]:
    box = await make_sandbox(FAST_LIMITS)
    yield box
    await box.aclose()


async def test_exec_returns_exit_code_and_interleaved_output(sandbox: Sandbox) -> None:
    result = await sandbox.exec("echo out; echo err >&2; exit 3", timeout_s=10)
    assert result.exit_code == 3
    assert "out" in result.output and "err" in result.output
    assert not result.timed_out


async def test_commands_run_in_the_workdir(sandbox: Sandbox) -> None:
    await sandbox.write_file("marker.txt", b"here")
    result = await sandbox.exec("cat marker.txt", timeout_s=10)
    assert result.output == "here"


async def test_hung_command_is_killed_at_its_timeout(sandbox: Sandbox) -> None:
    result = await sandbox.exec("sleep 60", timeout_s=1)
    assert result.timed_out and result.exit_code in (124, 137)
    assert result.duration_s < 10


async def test_command_that_exits_124_by_itself_is_not_a_timeout(sandbox: Sandbox) -> None:
    result = await sandbox.exec("exit 124", timeout_s=10)
    assert result.exit_code == 124 and not result.timed_out


async def test_background_jobs_do_not_outlive_their_command(sandbox: Sandbox) -> None:
    # A duration of its own: a local sandbox sees every process on the host, other tests' too.
    sleep = f"sleep 3{secrets.randbelow(10**6):06d}"
    started = await sandbox.exec(f"{sleep} & echo started", timeout_s=10)
    assert started.ok and started.output == "started\n"  # returns at once, not at the deadline
    result = await sandbox.exec("ps -eo args 2>/dev/null || cat /proc/[0-9]*/cmdline", timeout_s=10)
    assert sleep not in result.output.replace("\0", " ")


async def test_a_process_that_leaves_its_group_does_not_outlive_its_command(
    sandbox: Sandbox,
) -> None:
    """Fault 9: `setsid` put a process in a new session, out of reach of the group kill."""
    tag = secrets.token_hex(4)
    # `[e]scapee-…` matches the escapee's argv but not the grep's own command line.
    count = f"grep -ls '[e]scapee-{tag}' /proc/[0-9]*/cmdline 2>/dev/null | wc -l"
    started = await sandbox.exec(
        f"setsid bash -c 'exec -a escapee-{tag} sleep 300' > /dev/null 2>&1 < /dev/null & "
        f"sleep 0.5; {count}",
        timeout_s=10,
    )
    assert int(started.output.strip()) >= 1, started.output  # it ran, in its own session
    survivors = await sandbox.exec(count, timeout_s=10)
    assert survivors.output.strip() == "0"


async def test_huge_output_is_capped_head_and_tail_with_a_note(sandbox: Sandbox) -> None:
    result = await sandbox.exec(
        "echo FIRST; head -c 50000000 /dev/zero | tr '\\0' x; echo; echo LAST", timeout_s=60
    )
    assert result.truncated and result.output_bytes > 50_000_000
    assert result.output.startswith("FIRST") and result.output.rstrip().endswith("LAST")
    assert "bytes elided" in result.output and len(result.output) < 3000


async def test_a_command_printing_past_the_output_limit_is_stopped_at_the_source(
    make_sandbox: SandboxMaker,
) -> None:
    """Fault 11's other half: `yes` would be read until its timeout (gigabytes); it is killed
    once it passes `max_output_mb`, and nothing of it survives."""
    limits = FAST_LIMITS.model_copy(update={"max_output_mb": 1})
    box = await make_sandbox(limits)
    try:
        flood = f"conductor-flood-{secrets.token_hex(4)}"  # its own: other tests' run beside
        result = await box.exec(f"echo FIRST; yes {flood}", timeout_s=120)
        assert result.output_limited and result.truncated and not result.timed_out
        assert result.duration_s < 60 and result.output_bytes < 64 * 2**20
        assert result.output.startswith("FIRST") and "printed more than 1 MiB" in result.output
        after = await box.exec(
            f"grep -ls '[{flood[0]}]{flood[1:]}' /proc/[0-9]*/cmdline | wc -l", timeout_s=10
        )
        assert after.output.strip() == "0"
        assert not (await box.exec("echo quiet", timeout_s=10)).output_limited
    finally:
        await box.aclose()


async def test_invalid_utf8_output_is_decoded_with_replacement(sandbox: Sandbox) -> None:
    result = await sandbox.exec("printf '\\xff\\xfeok'", timeout_s=10)
    assert result.output.endswith("ok") and "\ufffd" in result.output


async def test_files_round_trip_and_parents_are_created(sandbox: Sandbox) -> None:
    payload = "naïve ✓\n".encode() + bytes(range(256))
    await sandbox.write_file(f"{sandbox.workdir}/deep/dir/file.bin", payload)
    assert await sandbox.read_file("deep/dir/file.bin") == payload


async def test_rewriting_a_file_keeps_its_mode(sandbox: Sandbox) -> None:
    await sandbox.write_file("run.sh", b"#!/bin/sh\necho one\n")
    assert (await sandbox.exec("chmod 754 run.sh && ./run.sh", timeout_s=10)).output == "one\n"
    await sandbox.write_file("run.sh", b"#!/bin/sh\necho two\n")  # an editor's rewrite
    result = await sandbox.exec("./run.sh && stat -c %a run.sh", timeout_s=10)
    assert result.output == "two\n754\n"


async def test_a_new_file_is_0644_and_its_existing_directories_keep_their_modes(
    sandbox: Sandbox,
) -> None:
    await sandbox.exec("mkdir -p shared && chmod 1777 shared", timeout_s=10)
    await sandbox.write_file("shared/new.txt", b"x")
    result = await sandbox.exec("stat -c %a shared shared/new.txt", timeout_s=10)
    assert result.output.split() == ["1777", "644"]


async def test_reading_a_missing_file_raises_file_not_found(sandbox: Sandbox) -> None:
    with pytest.raises(FileNotFoundError):
        await sandbox.read_file("no/such/file")


async def test_closed_sandbox_is_dead_and_close_is_idempotent(sandbox: Sandbox) -> None:
    await sandbox.aclose()
    await sandbox.aclose()
    assert not await sandbox.is_alive()
    with pytest.raises(SandboxDeadError):
        await sandbox.exec("true", timeout_s=5)
