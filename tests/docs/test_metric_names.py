"""Every metric the README and docs name is one the services' /metrics really serves, with the
labels it really has (counters end in `_total` there)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from actuator_svc.metrics import ActuatorMetrics
from scheduler_svc.metrics import SchedulerMetrics

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "deploy").rglob("*.md")),
    *sorted((ROOT / "charts").rglob("*.md")),
]
# `name`, `name{label,label}` (a signature: every label) or `name{label="value"}` (a selector).
MENTION = re.compile(r"\b(daiku_(?:scheduler|actuator)_[a-z_]+)(?:\{([^}]*)\})?")


def _metric_objects(registry: CollectorRegistry) -> Iterator[MetricWrapperBase]:
    for owner in (SchedulerMetrics(registry), ActuatorMetrics(registry)):
        yield from (m for m in vars(owner).values() if isinstance(m, MetricWrapperBase))


def _served() -> dict[str, frozenset[str]]:
    """Every name the /metrics text carries (x_total, x_bucket, gauges, histogram families)
    and its label names, scraped the way the services serve it: generate_latest on their
    registries, with one child per labelled metric so its labels appear."""
    registry = CollectorRegistry()
    for metric in _metric_objects(registry):
        # labelnames is only readable privately; a child makes the labels show in the text.
        if label_names := metric._labelnames:
            metric.labels(*(f"example-{name}" for name in label_names))
    served: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            labels = set(sample.labels) - {"le"}
            served.setdefault(sample.name, set()).update(labels)
            if family.type == "histogram":  # docs name a histogram by its family name
                served.setdefault(family.name, set()).update(labels)
    return {name: frozenset(labels) for name, labels in served.items()}


def _mentions() -> list[tuple[str, str, str | None]]:
    return [
        (path.relative_to(ROOT).as_posix(), match.group(1), match.group(2))
        for path in DOCUMENTS
        if path.exists()
        for match in MENTION.finditer(path.read_text(encoding="utf-8"))
    ]


def test_served_names_include_counters_total_suffix() -> None:
    """The scrape this test compares against is the real exposition: a counter is served as
    x_total with its labels, never as the bare x."""
    served = _served()
    assert served["daiku_scheduler_evictions_total"] == {"result"}
    assert "daiku_scheduler_evictions" not in served


def test_every_metric_the_docs_name_is_served_with_the_labels_they_say() -> None:
    """Each daiku_* metric in README.md, docs/, deploy/ and charts/ Markdown is a name /metrics
    serves; a label list names all its labels, a selector only labels it has."""
    served = _served()
    mentions = _mentions()
    assert mentions, "no metric mentioned: the pattern no longer matches the docs"
    wrong = []
    for where, name, label_text in mentions:
        if name not in served:
            wrong.append(f"{where}: {name} is not served")
            continue
        if label_text is None:
            continue
        parts = [part.strip() for part in label_text.split(",") if part.strip()]
        named = {part.split("=", 1)[0].strip() for part in parts}
        is_signature = all("=" not in part for part in parts)
        if not named <= served[name] or (is_signature and named != served[name]):
            wrong.append(f"{where}: {name}{{{label_text}}}: its labels are {sorted(served[name])}")
    assert not wrong, "\n".join(wrong)
