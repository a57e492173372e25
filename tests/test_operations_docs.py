"""The Grafana dashboard and the alerting rules in docs/operating/ name only metrics the
server exposes, and `promtool check rules` accepts the rules (when Prometheus's tools are
installed: the Debian `prometheus` package, which .ci/run installs)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

import volthub.metrics as metrics

OPERATIONS = Path(__file__).resolve().parent.parent / "docs" / "operating"
# Read at scrape time from the database, not kept in the registry (volthub.http.observe.MetricsScrape).
SAMPLED_AT_SCRAPE = {"volthub_webhook_outbox_pending", "volthub_webhook_outbox_oldest_age_seconds"}
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def exposed_names() -> set[str]:
    assert metrics.HTTP_REQUESTS is not None  # the families are registered on import
    names = set(SAMPLED_AT_SCRAPE) | {"up"}
    for family in REGISTRY.collect():
        names.add(family.name)
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ("",)))
        names.update(sample.name for sample in family.samples)
    return names


def named_metrics(text: str) -> set[str]:
    return set(re.findall(r"\b((?:volthub|process|python)_[a-z_]+)\b", text)) | (
        {"up"} if re.search(r"\bup\{", text) else set()
    )


def test_the_dashboard_and_the_rules_name_only_exposed_metrics() -> None:
    dashboard = json.loads((OPERATIONS / "grafana-dashboard.json").read_text())
    expressions = " ".join(target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", ()))
    rules = (OPERATIONS / "alerts.yml").read_text()
    exposed = exposed_names()
    for text in (expressions, rules):
        unknown = named_metrics(text) - exposed
        assert not unknown, unknown
    covered = named_metrics(expressions)
    for family in (
        "volthub_events_lag_seconds_bucket",
        "volthub_webhook_outbox_oldest_age_seconds",
        "volthub_db_query_errors_total",
    ):
        assert family in covered


def test_promtool_accepts_the_alerting_rules() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian package prometheus)")
    result = subprocess.run(
        [promtool, "check", "rules", str(OPERATIONS / "alerts.yml")], capture_output=True, timeout=60
    )
    assert result.returncode == 0, (result.stdout + result.stderr).decode()
    for alert in ("WebhookOutboxStale", "EventsLagHigh", "ServiceRestarting", "High5xxRate", "DatabaseErrors"):
        assert f"Volthub{alert}" in (OPERATIONS / "alerts.yml").read_text()
