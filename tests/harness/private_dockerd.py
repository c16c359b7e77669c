"""A private Docker daemon for tests that restart or stop one: its own socket, data root, exec
root and network namespace, no bridge and no iptables changes, so the machine's own daemon is
never touched."""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

__all__ = ["PrivateDockerd", "running_private_dockerd"]


class PrivateDockerd:
    """Start with `start()`, restart with `restart()`, stop with `stop()`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.socket = root / "d.sock"
        self.url = f"unix://{self.socket}"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60) -> None:
        binary = shutil.which("dockerd")
        if binary is None:
            raise RuntimeError("no dockerd binary on PATH")
        self.root.mkdir(parents=True, exist_ok=True)
        log = (self.root / "dockerd.log").open("ab")
        # Its own network namespace: a daemon started with `--bridge none` deletes the host's
        # `docker0`, which would break the machine's own daemon.
        unshare = shutil.which("unshare")
        if unshare is None:
            raise RuntimeError("no unshare binary (util-linux) to give dockerd its own netns")
        self._process = subprocess.Popen(
            [
                unshare, "--net", "--",
                binary, "--host", self.url, "--data-root", str(self.root / "data"),
                "--exec-root", str(self.root / "exec"), "--pidfile", str(self.root / "d.pid"),
                "--bridge", "none", "--iptables=false", "--ip-masq=false",
            ],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"dockerd exited: see {self.root / 'dockerd.log'}")
            with contextlib.suppress(Exception):
                self.client().ping()
                return
            time.sleep(0.3)
        raise RuntimeError(f"dockerd did not answer within {timeout_s:g} s")

    def client(self) -> docker.DockerClient:
        return docker.DockerClient(base_url=self.url, version="1.41", timeout=60)

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def restart(self, down_s: float = 2.0) -> None:
        self.stop()
        time.sleep(down_s)
        self.start()

    def destroy(self) -> None:
        with contextlib.suppress(Exception):
            client = self.client()
            for container in client.containers.list(all=True):
                container.remove(force=True)
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def running_private_dockerd(root: Path) -> Iterator[PrivateDockerd]:
    """A started private daemon under `root`, destroyed afterwards; the test is skipped with the
    reason where this machine cannot run a second daemon."""
    daemon = PrivateDockerd(root)
    try:
        daemon.start()
    except RuntimeError as exc:
        daemon.destroy()
        pytest.skip(f"this machine cannot run a second Docker daemon: {exc}")
    try:
        yield daemon
    finally:
        daemon.destroy()
