"""SIGTERM / SIGINT stop a command within seconds, even while a task holds the event loop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys, time
    from rollout.cli.shutdown import Interrupted, run_until_signal

    HOLD = sys.argv[1] == "hold"

    async def main():
        print("started", flush=True)
        if HOLD:  # agent-sized work on the loop thread: no await for 60 s
            end = time.monotonic() + 60
            while time.monotonic() < end:
                pass
        try:
            await asyncio.sleep(60)
        finally:
            print("cleaned up", flush=True)

    try:
        run_until_signal(main, lambda signum: print("stopping", flush=True),
                         stop_timeout_s=float(sys.argv[2]))
    except Interrupted as stopped:
        print(stopped, flush=True)
        sys.exit(stopped.exit_code)
    """
)


def _start(mode: str, stop_timeout_s: float) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", _SCRIPT, mode, str(stop_timeout_s)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "started"
    return process


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_a_responsive_run_cleanly(signum: int) -> None:
    process = _start("wait", stop_timeout_s=30)
    time.sleep(0.3)
    process.send_signal(signum)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 128 + signum
    assert "stopping" in output and "cleaned up" in output
    assert f"stopped by {signal.Signals(signum).name}" in output


def test_a_signal_stops_a_run_whose_loop_is_held_within_the_stop_timeout() -> None:
    """Issue 28: while an editor call held the loop, two SIGTERMs were ignored for minutes."""
    process = _start("hold", stop_timeout_s=2)
    time.sleep(0.5)
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=30)
    took = time.monotonic() - sent
    assert process.returncode == 128 + signal.SIGTERM
    assert took < 5, f"exit took {took:.1f} s"
    assert "did not finish within 2 s" in output


def test_a_second_signal_exits_at_once_even_while_the_loop_is_held() -> None:
    process = _start("hold", stop_timeout_s=60)
    time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    sent = time.monotonic()
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=30)
    assert process.returncode == 128 + signal.SIGINT
    assert time.monotonic() - sent < 3
