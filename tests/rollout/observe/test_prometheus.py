"""Spec for the live Prometheus health endpoint: scraped over real HTTP."""

from __future__ import annotations

import math
import socket
import urllib.request

import pytest

from rollout.core.classes import PriorityClass
from rollout.core.scheduler_events import SampleAdmitted, StartGeneration
from rollout.observe.prometheus import HealthExporter
from rollout.observe.report import render_health


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


def test_step_fill_gauges_are_nan_until_an_engine_reports_its_steps() -> None:
    exp = HealthExporter()
    port = _free_port()
    exp.serve(port)
    try:
        exp.batch(requested_s=0.0, ready_s=1.0)
        before = _scrape(port)
        exp.tracker.engine_steps({"steps": 2, "mean_fill": 0.5, "p99_fill": 0.75})
        exp.batch(requested_s=1.0, ready_s=2.0)
        after = _scrape(port)
    finally:
        exp.close()
    assert math.isnan(before["conductor_engine_step_fill_mean"])  # n/a (an SGLang server)
    assert after["conductor_engine_step_fill_mean"] == 0.5
    assert after["conductor_engine_step_fill_p99"] == 0.75


def test_the_report_says_n_a_without_step_figures_and_shows_them_with() -> None:
    assert "| engine step fill (tokens / budget) | n/a |" in render_health(
        {"engine_step_fill": None}
    )
    fill = {
        "steps": 3,
        "mean_fill": 0.5,
        "p99_fill": 0.9,
        "decode": {"steps": 3, "mean_fill": 0.5, "p99_fill": 0.9, "budget_tokens": 32},
    }
    text = render_health({"engine_step_fill": fill})
    assert "| engine step fill, mean / p99 (3 steps) | 0.500 / 0.900 |" in text
    assert "decode steps vs 32 tokens" in text


def test_held_sample_seconds_are_a_counter_by_reason_read_from_the_conductor() -> None:
    totals = {"kv_room": 4.0}
    exp = HealthExporter()
    port = _free_port()
    exp.serve(port)
    try:
        exp.watch({}, {}, held=lambda: dict(totals))
        first = _scrape(port)
        totals.update(kv_room=10.0, slot=1.5)
        exp.batch(requested_s=0.0, ready_s=1.0)  # a step refreshes every figure
        second = _scrape(port)
    finally:
        exp.close()
    assert first['conductor_held_sample_seconds_total{reason="kv_room"}'] == 4.0
    assert first['conductor_held_sample_seconds_total{reason="live_set"}'] == 0.0  # from the start
    assert second['conductor_held_sample_seconds_total{reason="kv_room"}'] == 10.0
    assert second['conductor_held_sample_seconds_total{reason="slot"}'] == 1.5
