"""``topology.k8s.aws/zone-id`` in pod and NodePool requirements and in topology terms (issue
19): Karpenter's AWS provider carries the zone id on every offering and node
(aws/karpenter-provider-aws pkg/cloudprovider/suite_test.go "should return availability zone ID
as a label on the nodeClaim"; test/suites/scheduling "should support well-known labels for zone
id selection"), so a pod may select or spread by it.
"""

from __future__ import annotations

from dataclasses import replace

from scheduler_svc.core import (
    InstanceType,
    LabelSelector,
    Node,
    NodePool,
    Operator,
    Requirement,
    Resources,
    SchedulingInput,
    TopologySpreadConstraint,
)
from scheduler_svc.core.requirements import LABEL_ZONE
from scheduler_svc.core.zone_ids import zone_ids

from .builders import instance_type, pod, run, zone_of

ZONE_ID = "topology.k8s.aws/zone-id"
IDS = {"zone-a": "use1-az6", "zone-b": "use1-az1", "zone-c": "use1-az2"}


def _types(ids: dict[str, str] = IDS) -> list[InstanceType]:
    plain = instance_type("m5.large", 2, 8, 0.096)
    offerings = tuple(replace(o, zone_id=ids.get(o.zone, "")) for o in plain.offerings)
    return [replace(plain, offerings=offerings)]


def test_a_zone_id_selector_pins_the_zone_carrying_that_id() -> None:
    """nodeSelector zone-id=use1-az2 launches in zone-c, whose offerings carry that id; In over
    two ids in required node affinity allows exactly their zones."""
    pinned = pod("pinned", 0.5, 0.5, node_selector={ZONE_ID: "use1-az2"})
    either = pod(
        "either",
        0.5,
        0.5,
        required_node_affinity=((Requirement(ZONE_ID, Operator.IN, ("use1-az1", "use1-az6")),),),
    )

    result = run([pinned, either], _types())

    assert result.unschedulable == ()
    assert zone_of(result, "default/pinned") == "zone-c"
    assert zone_of(result, "default/either") in ("zone-a", "zone-b")


def test_a_nodepool_excluding_a_zone_id_keeps_out_of_that_zone() -> None:
    """A NodePool with zone-id NotIn [use1-az6, use1-az1] launches only in zone-c."""
    pool = NodePool(
        "default", requirements=(Requirement(ZONE_ID, Operator.NOT_IN, ("use1-az6", "use1-az1")),)
    )

    result = run([pod("p", 0.5, 0.5)], _types(), (pool,))

    assert zone_of(result, "default/p") == "zone-c"


def test_a_spread_over_zone_ids_spreads_over_the_zones() -> None:
    """Three replicas spread (maxSkew 1) over zone-id land in three zones, as a spread over the
    zone would: each zone has one id."""
    spread = TopologySpreadConstraint(ZONE_ID, 1, label_selector=LabelSelector.of({"app": "web"}))
    pods = [
        pod(f"web-{i}", 0.5, 0.5, labels={"app": "web"}, topology_spread=(spread,))
        for i in range(3)
    ]

    result = run(pods, _types())

    assert result.unschedulable == ()
    assert sorted(zone_of(result, p.key) for p in pods) == ["zone-a", "zone-b", "zone-c"]


def test_a_zone_id_selector_matches_nothing_when_no_offering_carries_ids() -> None:
    """A catalog without zone ids: no node would carry the label, so the pod is unschedulable
    rather than placed on a node kube-scheduler would refuse."""
    pinned = pod("pinned", 0.5, 0.5, node_selector={ZONE_ID: "use1-az2"})

    result = run([pinned], _types({}))

    assert [u.pod for u in result.unschedulable] == ["default/pinned"]


def test_zone_ids_are_also_read_from_nodes_and_the_catalog_wins() -> None:
    """A node labelled with its zone and zone id tells a problem without a catalog (a
    consolidation's delete simulation) the ids of the zones it has nodes in; where a node and
    the catalog disagree, the catalog's offering says it."""
    room = Resources(2000, 8 << 30)
    nodes = (
        Node("d", {LABEL_ZONE: "zone-d", ZONE_ID: "use1-az9"}, allocatable=room),
        Node("b", {LABEL_ZONE: "zone-b", ZONE_ID: "use1-az5"}, allocatable=room),
        Node("no-id", {LABEL_ZONE: "zone-e"}, allocatable=room),
    )
    without_catalog = SchedulingInput(pods=(), nodepools=(), instance_types=(), nodes=nodes)
    assert zone_ids(without_catalog) == {"zone-d": "use1-az9", "zone-b": "use1-az5"}
    with_catalog = replace(without_catalog, instance_types=tuple(_types()))
    assert zone_ids(with_catalog) == {**IDS, "zone-d": "use1-az9"}
