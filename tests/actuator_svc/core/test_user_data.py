"""User data: a nodeadm NodeConfig carrying the claim's labels and taints, readable back."""

from email import message_from_string

from actuator_svc.core.user_data import (
    ClusterEndpoint,
    NodeRegistration,
    Taint,
    read_node_registration,
    render_user_data,
)


def test_labels_and_taints_round_trip() -> None:
    """What render_user_data writes, read_node_registration reads back unchanged."""
    registration = NodeRegistration(
        labels={"team": "web", "daiku.dev/nodepool": "default"},
        taints=(Taint("gpu", "true", "NoSchedule"), Taint("startup", "", "NoExecute")),
    )
    text = render_user_data(ClusterEndpoint(name="demo"), registration, "#!/bin/bash\necho hi\n")
    message = message_from_string(text)
    # The MIME tree's leaves, in order (walk() types every part as a Message; get_payload does not).
    kinds = [p.get_content_type() for p in message.walk() if not p.is_multipart()]
    assert kinds == ["text/x-shellscript", "application/node.eks.aws"]
    back = read_node_registration(text)
    assert dict(back.labels) == dict(registration.labels)
    assert back.taints == registration.taints
