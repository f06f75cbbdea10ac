"""Pods binding the same host port never share a node: a node with room for several of them
takes one, and the rest go to other nodes."""

from __future__ import annotations

from scheduler_svc.core import HostPort, Node, Resources

from .builders import GIB, instance_type, pod, run


def test_an_existing_node_with_room_for_two_takes_one_pod_per_host_port() -> None:
    """Two 0.5-cpu pods bind host port 8080; the existing node has 4 cpu free, room for both.
    It takes one (the other's port would clash), and the other gets a new claim."""
    node = Node("n1", {"kubernetes.io/arch": "amd64"}, allocatable=Resources(4000, 8 * GIB, 110))
    pods = [pod(f"proxy-{i}", 0.5, 0.5, host_ports=(HostPort(8080),)) for i in range(2)]

    result = run(pods, [instance_type("m", 2, 4, 0.1)], nodes=(node,))

    assert [(e.node, len(e.pods)) for e in result.existing_placements] == [("n1", 1)]
    assert [len(c.pods) for c in result.new_claims] == [1]
