"""A consolidation in waves (decision 0021) at the edges: the controller marks each replacement
with the deferred NodeClaims it holds room for and until when; the converter reads the marks
back as the candidate's hold; the decision counts as a multi-node consolidation."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from scheduler_svc.core.disruption import (
    ROOM_HELD_FOR_ANNOTATION,
    ROOM_HELD_UNTIL_ANNOTATION,
    DisruptionDecision,
    DisruptionReason,
)
from scheduler_svc.disruption.controller import DisruptionController
from scheduler_svc.kube.convert_disruption import claim_facts_from_k8s
from scheduler_svc.metrics import SchedulerMetrics
from scheduler_svc.state.cluster import ClusterMirror

NOW = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)
WAVE = DisruptionDecision(
    reason=DisruptionReason.UNDERUTILIZED,
    nodes=("m0",),
    nodeclaims=("default-m0",),
    replacements=(),
    message="Underutilized: replace m0, m1, x0 ... in waves",
    decided_at=NOW,
    old_price_per_hour=0.2781,
    new_price_per_hour=0.2491,
    needs_validation=True,
    deferred=("m1", "x0"),
    deferred_nodeclaims=("default-m1", "default-x0"),
    room_held_until=NOW + timedelta(seconds=615),
)


class RecordingWriter:
    def __init__(self) -> None:
        self.patches: list[tuple[str, Mapping[str, Any]]] = []

    async def patch_nodeclaim(self, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        self.patches.append((name, patch))
        return {}


def controller(writer: RecordingWriter, metrics: SchedulerMetrics) -> DisruptionController:
    return DisruptionController(
        mirror=ClusterMirror(),
        writer=writer,  # type: ignore[arg-type]
        metrics=metrics,
        clock=lambda: NOW,
    )


async def test_a_replacement_of_a_wave_is_marked_with_the_deferred_claims_and_the_end() -> None:
    writer = RecordingWriter()
    await controller(writer, SchedulerMetrics())._hold_room("default-r0", WAVE)
    assert writer.patches == [
        (
            "default-r0",
            {
                "metadata": {
                    "annotations": {
                        ROOM_HELD_FOR_ANNOTATION: "default-m1,default-x0",
                        ROOM_HELD_UNTIL_ANNOTATION: "2026-11-26T09:10:15Z",
                    }
                }
            },
        )
    ]


def test_the_marks_read_back_as_the_candidates_hold() -> None:
    claim = {
        "metadata": {
            "name": "default-r0",
            "annotations": {
                ROOM_HELD_FOR_ANNOTATION: "default-m1,default-x0",
                ROOM_HELD_UNTIL_ANNOTATION: "2026-11-26T09:10:15Z",
            },
        }
    }
    facts = claim_facts_from_k8s(claim)
    assert facts.room_held_for == frozenset({"default-m1", "default-x0"})
    assert facts.room_held_until == NOW + timedelta(seconds=615)
    plain = claim_facts_from_k8s({"metadata": {"name": "default-r1"}})
    assert (plain.room_held_for, plain.room_held_until) == (frozenset(), None)


def test_a_wave_of_one_node_counts_as_a_multi_node_consolidation() -> None:
    metrics = SchedulerMetrics()
    controller(RecordingWriter(), metrics)._record(WAVE, "disrupted")
    labels = {"consolidation_type": "multi", "decision": "delete", "outcome": "disrupted"}
    assert (
        metrics.registry.get_sample_value("daiku_scheduler_consolidation_decisions_total", labels)
        == 1.0
    )
