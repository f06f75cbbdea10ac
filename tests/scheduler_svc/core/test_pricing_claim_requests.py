"""What a new NodeClaim says its pods request (``NodeClaimPlan.requests``, from
``Pricing._resources``): cpu, memory, pod count, ephemeral storage and extended resources
summed over the pods it holds."""

from __future__ import annotations

from scheduler_svc.core import Pod, Resources
from tests.scheduler_svc.core.builders import GIB, instance_type, run

GPU = "nvidia.com/gpu"


def test_a_claims_requests_sum_its_pods_in_every_resource() -> None:
    """Two pods (1 cpu, 2 GiB, 1 GiB scratch; the second also one GPU) on one GPU node: the
    claim requests 2 cpu, 4 GiB, 2 pods, 2 GiB of ephemeral storage and 1 GPU."""
    node = instance_type("g", 8, 32, 1.0, gpus=1)
    plain = Resources(1000, 2 * GIB, 0, 1 * GIB)
    with_gpu = Resources(1000, 2 * GIB, 0, 1 * GIB, ((GPU, 1),))
    result = run([Pod("a", containers=(plain,)), Pod("b", containers=(with_gpu,))], [node])
    [claim] = result.new_claims
    assert claim.requests == Resources(2000, 4 * GIB, 2, 2 * GIB, ((GPU, 1),))


def test_a_claim_without_extended_requests_lists_none() -> None:
    """A claim whose pods ask no extended resource lists none (no zero entries)."""
    node = instance_type("g", 8, 32, 1.0, gpus=1)
    result = run([Pod("a", containers=(Resources(500, 1 * GIB),))], [node])
    [claim] = result.new_claims
    assert claim.requests == Resources(500, 1 * GIB, 1, 0, ())
