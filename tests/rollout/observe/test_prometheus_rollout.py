"""The live /metrics page of `conductor run --metrics-port N`: engines, the KV cache manager and
the env pool, read by Prometheus' own text parser, and the naming rules (`_total` on counters,
base units in names, cumulative figures as counters, never rates as gauges)."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from rollout.cli.app import app
from rollout.cli.run import DEFAULT_RUN_CONFIG
from tests.paths import REPO_ROOT
from tests.rollout.cli.test_cli_run import SPANS_TASK, TINY_RUN
from tests.rollout.jobs.test_run_health import _free_port

UNITS = ("_seconds", "_bytes", "_tokens", "_requests", "_sandboxes", "_sessions")


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A page scraped once the run has generated tokens and handed out an env."""
    tmp_path = tmp_path_factory.mktemp("runs")
    port = _free_port()
    args = ["run", str(DEFAULT_RUN_CONFIG), *TINY_RUN, "steps=1", f"task_ids=[{SPANS_TASK}]"]
    pages: list[str] = []
    done = threading.Event()

    def scrape() -> None:  # the run keeps the main thread (signal handlers)
        while not done.is_set() and not pages:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    page = r.read().decode()
            except OSError:
                time.sleep(0.02)
                continue
            samples = {s.name: s.value for f in text_string_to_metric_families(page)
                       for s in f.samples}  # fmt: skip
            generated = [v for n, v in samples.items() if "generated_tokens_total" in n]
            if (
                generated
                and generated[0] > 0
                and samples.get("conductor_env_acquire_seconds_count")
            ):
                pages.append(page)
            time.sleep(0.05)

    scraper = threading.Thread(target=scrape)
    scraper.start()
    try:
        result = CliRunner().invoke(
            app, [*args, "--out", str(tmp_path), "--no-report", "--metrics-port", str(port)]
        )
    finally:
        done.set()
        scraper.join(timeout=10)
    assert result.exit_code == 0, result.output
    assert pages, "no page with generated tokens and an env acquire was scraped during the run"
    return pages[0]


def sample_names(page: str) -> set[str]:
    return {s.name for family in text_string_to_metric_families(page) for s in family.samples}


def test_a_run_exports_its_engines_kv_manager_and_env_pool(page: str) -> None:
    families = {family.name: family for family in text_string_to_metric_families(page)}
    engine = families["conductor_engine_running_requests"]
    assert engine.type == "gauge" and {s.labels["engine"] for s in engine.samples}
    tiers = {s.labels["tier"] for s in families["conductor_engine_kv_capacity_tokens"].samples}
    assert "device" in tiers
    assert families["conductor_engine_generated_tokens"].type == "counter"
    assert families["conductor_kv_recomputed_tokens"].type == "counter"
    assert families["conductor_kv_offloads"].type == "counter"
    states = {s.labels["state"] for s in families["conductor_env_pool_sandboxes"].samples}
    assert states == {"warm", "leased", "starting"}
    acquire = families["conductor_env_acquire_seconds"]
    assert acquire.type == "histogram"
    count = sum(s.value for s in acquire.samples if s.name.endswith("_count"))
    assert count >= 1  # every sample asked the pool for its env once
    assert families["conductor_samples_finished"].type == "counter"


def test_the_names_follow_prometheus_rules(page: str) -> None:
    for family in text_string_to_metric_families(page):
        assert family.name.startswith("conductor_"), family.name
        if family.type == "counter":
            assert all(s.name.endswith(("_total", "_created")) for s in family.samples), family.name
        if family.type == "gauge":  # a rate is rate() of a counter, never a gauge
            assert "rate_per" not in family.name and not family.name.endswith("_per_s")
        if family.type in ("counter", "histogram") and family.name.startswith(
            ("conductor_engine_", "conductor_kv_", "conductor_env_")
        ):
            assert family.name.endswith((*UNITS, "_offloads", "_prefetches", "_starts",
                                         "_hits", "_dead")), family.name  # fmt: skip


def test_every_series_of_the_grafana_dashboard_is_exported(page: str) -> None:
    """docs/grafana-dashboard.json queries only what a run serves."""
    dashboard = json.loads((REPO_ROOT / "docs" / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", ())]
    queried = {name for expr in exprs for name in re.findall(r"\bconductor_[a-z_]+", expr)}
    served = sample_names(page)
    assert len(queried) > 20 and queried <= served, sorted(queried - served)
