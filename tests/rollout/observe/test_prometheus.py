"""Spec for the live Prometheus health endpoint: scraped over real HTTP."""

from __future__ import annotations

import socket
import urllib.request

import pytest

from rollout.core.classes import PriorityClass
from rollout.core.scheduler_events import SampleAdmitted, StartGeneration
from rollout.observe.prometheus import HealthExporter


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_scrape_reflects_fed_events() -> None:
    exp = HealthExporter()
    port = _free_port()
    exp.serve(port)
    try:
        exp.observe(SampleAdmitted("a", "g", now_s=0.0, priority_class=PriorityClass.HIGH))
        exp.observe(
            SampleAdmitted("b", "g", now_s=2.0),
            [StartGeneration(sample_id="a", engine="e0", high=True)],
        )
        exp.batch(requested_s=0.0, ready_s=3.0, deadline_s=1.0)
        m = _scrape(port)
    finally:
        exp.close()
    assert m["conductor_generation_starts_total"] == 1.0
    assert m['conductor_wait_seconds_count{priority_class="high"}'] == 1.0
    assert m['conductor_wait_seconds_sum{priority_class="high"}'] == 2.0
    assert m["conductor_deadline_misses_total"] == 1.0
    assert m["conductor_deadline_miss_rate"] == 1.0


def test_port_taken_is_a_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = int(s.getsockname()[1])
        with pytest.raises(RuntimeError, match="--metrics-port"):
            HealthExporter().serve(port)
