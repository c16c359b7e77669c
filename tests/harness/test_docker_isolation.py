"""Bad actions inside a Docker sandbox are contained and the sandbox keeps working."""

from __future__ import annotations

import io
import logging
from collections.abc import AsyncIterator

import docker
import pytest

from harness.errors import SandboxDeadError, SandboxError
from harness.sandbox import ContainerLimits, ExecLimits
from harness.sandbox import docker as docker_sandbox
from harness.sandbox.docker import DockerSandbox, storage_quota_supported
from harness.sandbox.limits import AGENT_USER_LABEL

pytestmark = pytest.mark.docker

LIMITS = ContainerLimits(memory_mb=256, pids=64, cpus=1.0)
EXEC = ExecLimits(kill_grace_s=1, host_grace_s=3)


@pytest.fixture
async def box(docker_client: docker.DockerClient, base_image: str) -> AsyncIterator[DockerSandbox]:
    sandbox = await DockerSandbox.create(docker_client, base_image, limits=LIMITS, exec_limits=EXEC)
    yield sandbox
    await sandbox.aclose()


async def _still_works(box: DockerSandbox) -> None:
    result = await box.exec("echo alive", timeout_s=10)
    assert result.ok and result.output == "alive\n"


async def test_foreground_fork_bomb_hits_the_pids_limit(box: DockerSandbox) -> None:
    result = await box.exec(":(){ :|: & };: ; sleep 2", timeout_s=5)
    assert (
        "fork" in result.output.lower()
        or "resource temporarily unavailable" in result.output.lower()
    )
    await _still_works(box)


async def test_memory_bomb_is_killed_by_the_memory_limit(box: DockerSandbox) -> None:
    bomb = "python3 -c 'x = []\nwhile True: x.append(bytearray(10**7))'"
    result = await box.exec(bomb, timeout_s=30)
    assert result.exit_code == 137 and not result.timed_out
    await _still_works(box)


async def test_network_is_unreachable(box: DockerSandbox) -> None:
    probe = "python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 80), timeout=3)'"
    result = await box.exec(probe, timeout_s=15)
    assert result.exit_code != 0 and "unreachable" in result.output.lower()


async def test_capabilities_are_dropped(box: DockerSandbox) -> None:
    result = await box.exec("grep CapEff /proc/self/status", timeout_s=10)
    assert result.output.split()[-1] == "0000000000000000"


async def test_removed_container_raises_sandbox_dead(
    box: DockerSandbox, docker_client: docker.DockerClient
) -> None:
    docker_client.containers.get(box.container_id).remove(force=True)
    assert not await box.is_alive()
    with pytest.raises(SandboxDeadError):
        await box.exec("true", timeout_s=5)


async def test_files_under_tmp_are_the_files_bash_sees_and_obey_the_tmpfs_cap(
    docker_client: docker.DockerClient, base_image: str
) -> None:
    """Fault 10: the copy API wrote `/tmp/x` under the tmpfs mount, where bash could not see it
    and the tmpfs size cap did not apply."""
    limits = ContainerLimits(memory_mb=256, pids=64, cpus=1.0, tmpfs_mb=1)
    sandbox = await DockerSandbox.create(docker_client, base_image, limits=limits, exec_limits=EXEC)
    try:
        await sandbox.write_file("/tmp/sub/x.txt", b"from the editor")
        seen = await sandbox.exec("cat /tmp/sub/x.txt", timeout_s=10)
        assert seen.output == "from the editor"
        await sandbox.exec("printf 'from bash' > /tmp/y.txt", timeout_s=10)
        assert await sandbox.read_file("/tmp/y.txt") == b"from bash"
        with pytest.raises(FileNotFoundError):
            await sandbox.read_file("/tmp/missing.txt")
        with pytest.raises(SandboxError, match=r"[Nn]o space"):
            await sandbox.write_file("/tmp/big.bin", b"x" * 3_000_000)
        leftovers = await sandbox.exec("ls -A /var/tmp/.conductor-io | wc -l", timeout_s=10)
        assert leftovers.output.strip() == "0"  # no staging copy is left behind
    finally:
        await sandbox.aclose()


async def test_a_file_larger_than_the_limit_cannot_be_written(
    docker_client: docker.DockerClient, base_image: str
) -> None:
    """Fault 11: 3 GB written in a container took 3 GB of host disk."""
    limits = ContainerLimits(memory_mb=256, pids=64, cpus=1.0, max_file_mb=2, max_open_files=128)
    sandbox = await DockerSandbox.create(docker_client, base_image, limits=limits, exec_limits=EXEC)
    try:
        wrote = await sandbox.exec(
            "head -c 5000000 /dev/zero > big.bin; echo rc=$?; stat -c %s big.bin", timeout_s=20
        )
        # (stdout and stderr are separate streams: bash's message may land on either side)
        assert "rc=0" not in wrote.output and str(2 * 1024 * 1024) in wrote.output.split()
        files = await sandbox.exec("ulimit -n", timeout_s=10)
        assert files.output.strip() == "128"
    finally:
        await sandbox.aclose()


async def test_a_disk_quota_caps_all_writes_or_falls_back_to_the_per_file_cap(
    docker_client: docker.DockerClient,
    base_image: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where the storage driver takes `--storage-opt size`, three 20 MB files do not fit a
    32 MiB layer; where it refuses (overlay2 on ext4, as on these machines), the container
    still starts, that is logged, and `max_file_mb` caps each file."""
    limits = ContainerLimits(memory_mb=256, pids=64, cpus=1.0, disk_mb=32, max_file_mb=24)
    monkeypatch.setattr(docker_sandbox, "_QUOTA_SUPPORT", {})  # ask the daemon afresh
    with caplog.at_level(logging.INFO, logger="harness.sandbox.docker"):
        sandbox = await DockerSandbox.create(
            docker_client, base_image, limits=limits, exec_limits=EXEC
        )
    try:
        supported = storage_quota_supported(docker_client)
        assert supported is not None  # the start asked the daemon
        wrote = await sandbox.exec(
            "for i in 1 2 3; do head -c 20000000 /dev/zero > /var/tmp/f$i || exit 1; done; "
            "head -c 30000000 /dev/zero > /var/tmp/big; stat -c %s /var/tmp/big",
            timeout_s=30,
        )
        if supported:
            assert wrote.exit_code == 1 and "No space left" in wrote.output, wrote.output
        else:
            assert "offers no disk quota" in caplog.text
            # stat's size line; bash's "File size limit exceeded" may come before or after it
            assert str(24 * 1024 * 1024) in wrote.output.split(), wrote.output
    finally:
        await sandbox.aclose()


async def test_an_unavailable_runtime_is_a_clear_sandbox_error(
    docker_client: docker.DockerClient, base_image: str
) -> None:
    limits = ContainerLimits(runtime="no-such-runtime")
    with pytest.raises(SandboxError, match=r"(?i)runtime"):
        await DockerSandbox.create(docker_client, base_image, limits=limits)


async def test_pid_1_is_docker_init_and_it_and_the_keepalive_run_as_nobody(
    box: DockerSandbox,
) -> None:
    """Issue 28: the README said `--init`, but PID 1 was the `sh` loop (HostConfig.Init unset)."""
    init = await box.exec("tr '\\0' ' ' < /proc/1/cmdline; echo; stat -c %u /proc/1", timeout_s=10)
    cmdline, owner = init.output.splitlines()
    assert "docker-init" in cmdline and owner == "65534"
    assert (await box.exec("id -u", timeout_s=10)).output.strip() == "0"  # commands: root


async def test_kill_minus_one_by_root_ends_its_own_processes_not_the_container(
    box: DockerSandbox,
) -> None:
    """Without CAP_KILL, root cannot signal nobody's init and keepalive: the agent's own
    `kill -9 -1` is its failure, never an infra error."""
    await box.exec("sleep 300 >/dev/null 2>&1 &", timeout_s=10)
    await box.exec("kill -9 -1; true", timeout_s=10)
    assert await box.is_alive()
    await _still_works(box)


async def test_orphans_are_reaped_by_init(box: DockerSandbox) -> None:
    await box.exec("(sleep 0.2 &) ; (true &) ; exit 0", timeout_s=10)
    await box.exec("sleep 1", timeout_s=10)
    zombies = await box.exec(
        "for f in /proc/[0-9]*/status; do grep -q '^State:.*Z' $f && echo z; done; true",
        timeout_s=10,
    )
    assert zombies.output.strip() == ""


def test_a_keepalive_user_equal_to_the_command_user_is_refused() -> None:
    with pytest.raises(ValueError, match="could then kill the keepalive"):
        ContainerLimits(user="1000:1000", keepalive_user="1000:1000")
    with pytest.raises(ValueError, match="could then kill the keepalive"):
        ContainerLimits(keepalive_user="0:0")


@pytest.fixture(scope="module")
def agent_user_image(docker_client: docker.DockerClient, base_image: str) -> str:
    """The base image with /testbed handed to 1000 and the label that says so, as the SWE task
    images `conductor run` builds."""
    dockerfile = (
        f"FROM {base_image}\nRUN chown -R 1000:1000 /testbed\n"
        f'LABEL {AGENT_USER_LABEL}="1000:1000"\n'
    )
    tag = "aio-conductor/test-agent-user:1"
    docker_client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True)
    return tag


@pytest.mark.parametrize(("labelled", "uid"), [(True, "1000"), (False, "0")])
async def test_by_default_commands_run_as_the_images_agent_user_else_root(
    docker_client: docker.DockerClient,
    base_image: str,
    agent_user_image: str,
    labelled: bool,
    uid: str,
) -> None:
    image = agent_user_image if labelled else base_image
    box = await DockerSandbox.create(docker_client, image, limits=LIMITS, exec_limits=EXEC)
    try:
        assert (await box.exec("id -u", timeout_s=10)).output.strip() == uid
        await box.write_file("made.txt", b"x")  # the workdir is the user's
        assert (await box.exec("stat -c %u made.txt", timeout_s=10)).output.strip() == uid
    finally:
        await box.aclose()
