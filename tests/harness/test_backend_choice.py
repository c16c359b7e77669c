"""`auto` is Docker or an error that says what to do: never a silent fall back to the host."""

from __future__ import annotations

import pytest

from harness.backends import LocalBackend
from harness.errors import SandboxError
from harness.standalone import ALLOW_HOST_SANDBOX_ENV, make_backend

NOWHERE = "unix:///tmp/conductor-no-daemon-here.sock"


def test_auto_without_docker_refuses_to_run_commands_on_the_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOCKER_HOST", NOWHERE)
    monkeypatch.delenv(ALLOW_HOST_SANDBOX_ENV, raising=False)
    with pytest.raises(SandboxError, match=r"NOT isolated.*CONDUCTOR_ALLOW_HOST_SANDBOX=1"):
        make_backend("auto")


def test_auto_falls_back_to_the_host_only_when_opted_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", NOWHERE)
    monkeypatch.setenv(ALLOW_HOST_SANDBOX_ENV, "1")
    assert isinstance(make_backend("auto"), LocalBackend)


def test_an_explicit_local_backend_needs_no_opt_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ALLOW_HOST_SANDBOX_ENV, raising=False)
    assert isinstance(make_backend("local"), LocalBackend)


def test_docker_without_docker_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", NOWHERE)
    monkeypatch.setenv(ALLOW_HOST_SANDBOX_ENV, "1")
    with pytest.raises(SandboxError):
        make_backend("docker")
