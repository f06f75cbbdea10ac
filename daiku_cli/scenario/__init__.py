"""Scenarios for `daiku up`: parsing, the default scenario, what the cluster looks like
(settled or not), the run's report and the text of the live view. Pure: no I/O, no clock."""

from daiku_cli.scenario.defaults import default_objects, default_scenario, default_steps
from daiku_cli.scenario.model import (
    ApplyStep,
    DeleteStep,
    ObjectRef,
    ScaleStep,
    Scenario,
    ScenarioError,
    SleepStep,
    Step,
    WaitUntilSettledStep,
    merge_objects,
    object_identity,
    parse_scenario,
)
from daiku_cli.scenario.observe import ClusterSnapshot, PriceBook, snapshot_from_objects
from daiku_cli.scenario.report import RunEvent, RunRecorder, format_time

__all__ = [
    "ApplyStep",
    "ClusterSnapshot",
    "DeleteStep",
    "ObjectRef",
    "PriceBook",
    "RunEvent",
    "RunRecorder",
    "ScaleStep",
    "Scenario",
    "ScenarioError",
    "SleepStep",
    "Step",
    "WaitUntilSettledStep",
    "default_objects",
    "default_scenario",
    "default_steps",
    "format_time",
    "merge_objects",
    "object_identity",
    "parse_scenario",
    "snapshot_from_objects",
]
