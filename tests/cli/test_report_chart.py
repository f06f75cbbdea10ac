"""Pictures of a run: the report's timeline, `daiku report`, and the page drawn in Chromium."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from typer.testing import CliRunner

from daiku_cli.main import app
from daiku_cli.scenario import RunRecorder, snapshot_from_objects
from daiku_cli.scenario.chart import (
    COST_SERIES,
    DISRUPTION_SERIES,
    LAUNCH_SERIES,
    PENDING_SERIES,
    RUNNING_SERIES,
    nodes_series_name,
    render_html,
)
from daiku_cli.up import report_text
from tests.cli.test_scenario_observe import PRICES, T0, claim, node, pod

CHROMIUM = "/usr/bin/chromium"
# As root, with no network: the flags Chromium needs to start and not reach for Google's hosts.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def a_run() -> dict[str, Any]:
    """Two pods wait, a spot node launches and takes them, then the node is disrupted."""
    recorder = RunRecorder()
    recorder.observe(
        snapshot_from_objects(pods=[pod("a"), pod("b")], nodes=[], claims=[], prices=PRICES),
        T0,
    )
    recorder.observe(
        snapshot_from_objects(
            pods=[pod("a"), pod("b")], nodes=[], claims=[claim("c1", "Launched")], prices=PRICES
        ),
        T0 + timedelta(seconds=1),
    )
    running = snapshot_from_objects(
        pods=[pod("a", "node-a", "Running"), pod("b", "node-a", "Running")],
        nodes=[node("node-a")],
        claims=[claim("c1", "Launched", "Registered", "Initialized")],
        prices=PRICES,
    )
    recorder.observe(running, T0 + timedelta(seconds=2))
    recorder.observe(running, T0 + timedelta(seconds=3))
    recorder.observe_kube_events(
        [
            {
                "metadata": {"uid": "e1"},
                "involvedObject": {"kind": "NodeClaim", "name": "c1"},
                "reason": "Disrupting",
                "message": "Underutilized: replacing with a cheaper node",
                "lastTimestamp": "2026-11-25T22:00:04Z",
            }
        ]
    )
    recorder.observe(
        snapshot_from_objects(pods=[], nodes=[], claims=[], prices=PRICES),
        T0 + timedelta(seconds=5),
    )
    run: dict[str, Any] = json.loads(json.dumps(recorder.report()))
    return run


def test_the_timeline_keeps_each_change_of_pods_nodes_and_cost() -> None:
    timeline = a_run()["timeline"]

    assert [
        (s["pendingPods"], s["runningPods"], s["nodes"], s["hourlyCost"]) for s in timeline
    ] == [
        (2, 0, {}, 0),
        (2, 0, {}, 0.04),
        (0, 2, {"spot": 1}, 0.04),
        (0, 0, {}, 0),
    ]
    assert timeline[2]["time"] == "2026-11-25T22:00:02.000Z"


def test_the_page_carries_its_chart_library_and_every_series() -> None:
    page = render_html(a_run())

    # Nothing is fetched: no script or stylesheet comes from elsewhere (plotly.js is inline).
    assert re.findall(r"<(?:script|link)\b[^>]*\b(?:src|href)=", page) == []
    assert "Plotly.newPlot" in page
    assert len(page) > 1_000_000, "plotly.js itself is written into the page"
    for series in (PENDING_SERIES, RUNNING_SERIES, nodes_series_name("spot"), COST_SERIES):
        assert json.dumps(series) in page
    assert json.dumps(LAUNCH_SERIES) in page
    assert json.dumps(DISRUPTION_SERIES) in page


def test_up_writes_a_chart_for_an_html_name_and_json_otherwise(tmp_path: Path) -> None:
    run = a_run()

    assert report_text(run, tmp_path / "run.HTML").lstrip().lower().startswith("<!doctype html")
    assert json.loads(report_text(run, tmp_path / "run.json")) == run


def test_daiku_report_draws_a_json_report(tmp_path: Path) -> None:
    source = tmp_path / "run.json"
    source.write_text(json.dumps(a_run()))
    page = tmp_path / "run.html"

    result = CliRunner().invoke(app, ["report", str(source), "-o", str(page)])

    assert result.exit_code == 0, result.output
    assert json.dumps(RUNNING_SERIES) in page.read_text()


@pytest.mark.parametrize(
    ("content", "expected"),
    [("{not json", "not JSON"), ('{"pods": []}', "no timeline[]")],
)
def test_daiku_report_refuses_what_is_not_a_report(
    tmp_path: Path, content: str, expected: str
) -> None:
    source = tmp_path / "run.json"
    source.write_text(content)

    result = CliRunner().invoke(app, ["report", str(source), "-o", str(tmp_path / "x.html")])

    assert result.exit_code == 2
    assert expected in result.output
    assert not (tmp_path / "x.html").exists()


def chromium(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    assert shutil.which(CHROMIUM), "Debian's chromium is needed (make test installs it as root)"
    profile = cwd / "profile"
    return subprocess.run(
        [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        cwd=cwd,
        capture_output=True,
        timeout=120,
        check=True,
    )


def test_headless_chromium_draws_every_series_of_the_page(tmp_path: Path) -> None:
    """The page renders offline: Plotly drew its SVG with a legend entry per series, and the
    screenshot is a picture, not a blank page."""
    page = tmp_path / "run.html"
    page.write_text(render_html(a_run()))

    dom = chromium("--virtual-time-budget=10000", "--dump-dom", page.as_uri(), cwd=tmp_path)
    chromium(
        "--virtual-time-budget=10000",
        "--window-size=1200,900",
        f"--screenshot={tmp_path / 'shot.png'}",
        page.as_uri(),
        cwd=tmp_path,
    )

    rendered = dom.stdout.decode()
    assert 'class="main-svg"' in rendered
    legend = set(_legend_texts(rendered))
    assert {PENDING_SERIES, RUNNING_SERIES, nodes_series_name("spot"), COST_SERIES} <= legend
    assert {LAUNCH_SERIES, DISRUPTION_SERIES} <= legend
    picture = Image.open(io.BytesIO((tmp_path / "shot.png").read_bytes())).convert("RGB")
    assert picture.size == (1200, 900)
    colors = picture.getcolors(maxcolors=1 << 20) or []
    assert len(colors) > 50, "the screenshot is (nearly) one colour: nothing was drawn"


def _legend_texts(dom: str) -> list[str]:
    marker = 'class="legendtext"'
    texts = []
    for chunk in dom.split(marker)[1:]:
        text = chunk.split(">", 1)[1].split("<", 1)[0]
        texts.append(text.replace("&amp;", "&"))
    return texts
