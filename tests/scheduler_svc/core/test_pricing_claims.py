"""What a NodeClaim is written with and what it counts against its NodePool
(``Pricing._claim_requirements``, ``Pricing._close_claim``): its requirements list the
instance types, zones and capacity types of its own offerings, and every claim counts as a
node against a ``nodes`` limit."""

from __future__ import annotations

from scheduler_svc.core import NodePool, NodePoolLimits
from scheduler_svc.core.requirements import LABEL_INSTANCE_TYPE
from tests.scheduler_svc.core.builders import instance_type, pod, run

ZONE = ("zone-a",)
SMALL = instance_type("s", 2, 8, 0.10, zones=ZONE)
MEDIUM = instance_type("m", 4, 16, 0.20, zones=ZONE)


def test_claims_of_one_pool_each_list_the_types_of_their_own_offerings() -> None:
    """Two claims of one NodePool (same requirements): the 3-cpu pod's fits only m (4 cpu),
    the 1.5-cpu pod's (left over: 3 + 1.5 cpu exceed m) fits s and m. Each claim's
    instance-type requirement names its own offerings' types, not the other claim's."""
    result = run([pod("big", 3), pod("small", 1.5)], [SMALL, MEDIUM])
    listed = {
        c.pods: next(r.values for r in c.requirements if r.key == LABEL_INSTANCE_TYPE)
        for c in result.new_claims
    }
    assert listed == {("default/big",): ("m",), ("default/small",): ("m", "s")}
    assert [c.instance_type for c in result.new_claims] == ["m", "s"]


def test_a_nodes_limit_counts_every_new_claim() -> None:
    """A NodePool limited to two nodes, three 1.5-cpu pods that need a 2-cpu node each: two
    claims, and the third pod waits with the limit as its reason."""
    pool = NodePool("default", limits=NodePoolLimits(nodes=2))
    result = run([pod(f"p-{i}", 1.5) for i in range(3)], [SMALL], [pool])
    assert [len(c.pods) for c in result.new_claims] == [1, 1]
    assert [(u.pod, u.reason) for u in result.unschedulable] == [
        ("default/p-2", "NodePool default limit nodes=2 reached")
    ]
