"""A claim opened for one domain of a zone spread must target a type the pod can use there:
the pod's own node term (here: spot only) decides, not only the NodePool's requirements."""

from __future__ import annotations

from scheduler_svc.core import (
    InstanceType,
    LabelSelector,
    Node,
    Offering,
    Resources,
    TopologySpreadConstraint,
)
from scheduler_svc.core.requirements import LABEL_CAPACITY_TYPE, LABEL_ZONE
from tests.scheduler_svc.core.builders import GIB, pod, run

SHAPE = Resources(4000, 16 * GIB, 110)


def test_a_spot_pod_goes_to_the_zone_only_another_type_offers_as_spot() -> None:
    """A spot-only web pod spread over zones (maxSkew 1); zone-a already runs a web pod, so
    the new one must go to zone-b (b=0 -> 1, skew 1 with a=1). "cheap" is spot in zone-a only
    (on-demand in a and b); "other" is spot in a and b. Only a spot "other" in zone-b holds the
    pod within its constraints, and without "cheap" in the catalog that is where it goes; the
    cheaper type being in the catalog must not leave it waiting."""
    cheap = InstanceType(
        "cheap",
        SHAPE,
        SHAPE,
        {},
        (
            Offering("zone-a", "spot", 0.01),
            Offering("zone-a", "on-demand", 0.1),
            Offering("zone-b", "on-demand", 0.1),
        ),
    )
    other = InstanceType(
        "other",
        SHAPE,
        SHAPE,
        {},
        (Offering("zone-a", "spot", 0.05), Offering("zone-b", "spot", 0.05)),
    )
    spread = TopologySpreadConstraint(
        LABEL_ZONE, 1, label_selector=LabelSelector.of({"app": "web"})
    )
    web = pod(
        "web-0",
        1,
        1,
        labels={"app": "web"},
        topology_spread=(spread,),
        node_selector={LABEL_CAPACITY_TYPE: "spot"},
    )
    running = pod("old", 0.2, 0.1, labels={"app": "web"})
    full_a = Node(
        "n-a",
        {LABEL_ZONE: "zone-a", LABEL_CAPACITY_TYPE: "spot", "kubernetes.io/arch": "amd64"},
        allocatable=Resources(500, GIB, 110),
        pods=(running,),
    )

    result = run([web], [cheap, other], nodes=(full_a,))

    assert result.unschedulable == ()
    assert [
        (c.offerings[0].instance_type, c.offerings[0].zone, c.offerings[0].capacity_type)
        for c in result.new_claims
    ] == [("other", "zone-b", "spot")]
