"""`daiku convert` carries a Karpenter v1 EC2NodeClass's capacityReservationSelectorTerms."""

from __future__ import annotations

from daiku_cli.conversion import convert


def test_capacity_reservation_selector_terms_are_carried_as_written() -> None:
    terms = [{"id": "cr-0123456789abcdef0"}, {"tags": {"team": "ml"}, "ownerID": "123456789012"}]
    document = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "gpu"},
        "spec": {
            "role": "KarpenterNodeRole",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c1"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c1"}}],
            "capacityReservationSelectorTerms": terms,
        },
    }
    result = convert([document], cluster_name="c1")
    (node_class,) = result.objects
    assert node_class["apiVersion"] == "daiku.dev/v1"
    assert node_class["spec"]["capacityReservationSelectorTerms"] == terms
    assert not [w for w in result.warnings if "capacityReservation" in str(w)]
