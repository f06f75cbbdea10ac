"""proto <-> core conversion. Requests are validated here; errors name the field."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence, Sized
from datetime import datetime
from typing import Final

from google.protobuf.timestamp_pb2 import Timestamp

from actuator_svc.cloud.provider import CapacityReservation, Instance
from actuator_svc.core.allocatable import KubeletSettings, NodeResources
from actuator_svc.core.catalog import CatalogInstanceType
from actuator_svc.core.kube_names import label_key_problem, label_value_problem, subdomain_problem
from actuator_svc.core.kubelet import KubeletSettingError, kubelet_settings
from actuator_svc.core.launch_plan import (
    ON_DEMAND_ALLOCATION_STRATEGIES,
    SPOT_ALLOCATION_STRATEGIES,
)
from actuator_svc.core.launch_template import BlockDevice, MetadataOptions
from actuator_svc.core.node_class import (
    AL2023,
    AMI_FAMILIES,
    CapacityReservationTerm,
    ImageTerm,
    LaunchRequest,
    NodeClassSpec,
    SecurityGroupTerm,
    SubnetTerm,
)
from actuator_svc.core.offerings import (
    LAUNCHABLE_CAPACITY_TYPES,
    RESERVATION_DEFAULT,
    RESERVATION_TYPES,
    RESERVED,
    OfferingKey,
    PricedOffering,
)
from actuator_svc.core.tags import (
    MAX_TAGS_PER_RESOURCE,
    NAME_TAG,
    NODECLAIM_TAG,
    NODEPOOL_TAG,
    TagError,
    validate_user_tags,
)
from actuator_svc.core.user_data import Taint
from actuator_svc.errors import InvalidRequestError
from actuator_svc.interruption import InstanceEvent
from actuator_svc.launcher import LaunchAttempt, LaunchResult
from actuator_svc.node_class_resolver import NodeClassResolution
from daiku.actuator.v1 import actuator_pb2 as pb

# What a caller may send, checked before any cloud call (INVALID_ARGUMENT naming the field).
MAX_OFFERINGS: Final = 500
MAX_LABELS: Final = 100
MAX_TAINTS: Final = 50
MAX_SELECTOR_TERMS: Final = 30
# EC2 refuses user data over 16 KiB before base64; daiku's own part is added to the caller's.
MAX_USER_DATA_BYTES: Final = 16 * 1024
# Tags daiku adds: the four reserved ones and Name everywhere, and daiku.dev/nodeclass on the
# launch template, the resource with the most.
_DAIKU_TAGS: Final = 6
_OFFERING_TEXT = re.compile(r"^[a-z0-9][a-z0-9.-]{0,63}$")
# A Kubernetes uid is a UUID; any short id of these characters is taken.
_UID_TEXT = re.compile(r"^[A-Za-z0-9-]{1,128}$")
_RESERVATION_ID = re.compile(r"^cr-[0-9a-z]{1,32}$")
_TAINT_EFFECTS: Final = frozenset({"NoSchedule", "PreferNoSchedule", "NoExecute"})
_ALIAS_FAMILIES: Final = frozenset({"al2023"})
GIB: Final = 1024**3
MAX_BLOCK_DEVICES: Final = 50  # the EC2NodeClass CRD's maxItems
MAX_VOLUME_BYTES: Final = 64 * 1024 * GIB  # io2 Block Express; EC2 refuses the rest per type
_DEVICE_NAME = re.compile(r"^/dev/[a-z0-9]{1,32}$")
_VOLUME_TYPES: Final = frozenset({"standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"})
_IOPS_TYPES: Final = frozenset({"io1", "io2", "gp3"})
_KMS_KEY = re.compile(r"^[A-Za-z0-9:/_.\-]{1,2048}$")
_SNAPSHOT_ID = re.compile(r"^snap-[0-9a-f]{8,17}$")
_ENABLED: Final = frozenset({"enabled", "disabled"})
_TOKENS: Final = frozenset({"required", "optional"})
_EVENT_KINDS: Final = {
    "spot_interruption_warning": pb.CLOUD_EVENT_KIND_SPOT_INTERRUPTION_WARNING,
    "rebalance_recommendation": pb.CLOUD_EVENT_KIND_REBALANCE_RECOMMENDATION,
    "scheduled_change": pb.CLOUD_EVENT_KIND_SCHEDULED_CHANGE,
    "instance_state_change": pb.CLOUD_EVENT_KIND_INSTANCE_STATE_CHANGE,
}


def timestamp(epoch_seconds: float) -> Timestamp:
    """A protobuf Timestamp from epoch seconds."""
    stamp = Timestamp()
    stamp.FromNanoseconds(int(epoch_seconds * 1e9))
    return stamp


def _datetime_timestamp(value: datetime | None) -> Timestamp | None:
    return timestamp(value.timestamp()) if value is not None else None


def require_name(value: str, field: str) -> str:
    """A Kubernetes object name (DNS-1123 subdomain), else InvalidRequestError."""
    if not value:
        raise InvalidRequestError(field, "is required")
    if problem := subdomain_problem(value):
        # The value is echoed only when short: a name is not a secret, but a megabyte is noise.
        shown = repr(value) if len(value) <= 253 else f"{len(value)} characters"
        raise InvalidRequestError(field, f"{shown} is not a valid name: {problem}")
    return value


def _at_most(items: Sized, limit: int, field: str) -> None:
    count = len(items)
    if count > limit:
        raise InvalidRequestError(field, f"has {count} entries; at most {limit} are allowed")


def _labels(labels: Mapping[str, str], field: str) -> dict[str, str]:
    _at_most(labels, MAX_LABELS, field)
    for key, value in labels.items():
        if problem := label_key_problem(key):
            raise InvalidRequestError(f"{field}[{key[:80]!r}]", f"label key {problem}")
        if problem := label_value_problem(value):
            raise InvalidRequestError(f"{field}[{key!r}]", f"label value {problem}")
    return dict(labels)


def kubelet_from_proto(kubelet: pb.KubeletConfiguration, field: str) -> KubeletSettings:
    """Kubelet settings; InvalidRequestError names the bad setting."""
    try:
        return kubelet_settings(
            field=field,
            max_pods=kubelet.max_pods if kubelet.HasField("max_pods") else None,
            pods_per_core=kubelet.pods_per_core if kubelet.HasField("pods_per_core") else None,
            system_reserved=dict(kubelet.system_reserved),
            kube_reserved=dict(kubelet.kube_reserved),
            eviction_hard=dict(kubelet.eviction_hard),
        )
    except KubeletSettingError as exc:
        raise InvalidRequestError(exc.field, str(exc).split(": ", 1)[1]) from exc


def _tags(tags: Mapping[str, str], field: str) -> dict[str, str]:
    # EC2 allows 50 tags per resource, daiku's own included.
    room = MAX_TAGS_PER_RESOURCE - _DAIKU_TAGS + (1 if NAME_TAG in tags else 0)
    if len(tags) > room:
        raise InvalidRequestError(
            field,
            f"has {len(tags)} tags; at most {room} fit beside daiku's own "
            f"({MAX_TAGS_PER_RESOURCE} per EC2 resource)",
        )
    try:
        validate_user_tags(tags, field)
    except TagError as exc:
        raise InvalidRequestError(exc.field, str(exc).split(": ", 1)[1]) from exc
    return dict(tags)


def _taints(taints: Sequence[pb.Taint], field: str) -> tuple[Taint, ...]:
    result = []
    _at_most(taints, MAX_TAINTS, field)
    for i, taint in enumerate(taints):
        if not taint.key:
            raise InvalidRequestError(f"{field}[{i}].key", "is required")
        if problem := label_key_problem(taint.key):
            raise InvalidRequestError(f"{field}[{i}].key", problem)
        if problem := label_value_problem(taint.value):
            raise InvalidRequestError(f"{field}[{i}].value", problem)
        if taint.effect not in _TAINT_EFFECTS:
            raise InvalidRequestError(
                f"{field}[{i}].effect", f"{taint.effect!r} is not one of {sorted(_TAINT_EFFECTS)}"
            )
        result.append(Taint(taint.key, taint.value, taint.effect))
    return tuple(result)


def _check_node_class_limits(node_class: pb.NodeClass, field: str) -> None:
    if node_class.name and (problem := subdomain_problem(node_class.name)):
        raise InvalidRequestError(f"{field}.name", problem)
    for terms_field in (
        "subnet_selector_terms",
        "security_group_selector_terms",
        "ami_selector_terms",
        "capacity_reservation_selector_terms",
    ):
        _at_most(getattr(node_class, terms_field), MAX_SELECTOR_TERMS, f"{field}.{terms_field}")
    user_data_bytes = len(node_class.user_data.encode())
    if user_data_bytes > MAX_USER_DATA_BYTES:
        raise InvalidRequestError(
            f"{field}.user_data",
            f"is {user_data_bytes} bytes; EC2 allows {MAX_USER_DATA_BYTES} before base64",
        )


def _one_of(value: str, allowed: Collection[str], field: str) -> str:
    if value not in allowed:
        raise InvalidRequestError(field, f"{value[:64]!r} is not one of {sorted(allowed)}")
    return value


def _within(value: int, low: int, high: int, field: str, unit: str = "") -> int:
    """0 (EC2's default) or a value in [low, high]."""
    if value and not low <= value <= high:
        raise InvalidRequestError(field, f"{value} is outside {low}..{high}{unit} (or 0: default)")
    return value


def _block_devices(
    mappings: Sequence[pb.BlockDeviceMapping], field: str
) -> tuple[BlockDevice, ...]:
    """EBS mappings checked against EC2's rules, so a bad one never reaches CreateLaunchTemplate."""
    _at_most(mappings, MAX_BLOCK_DEVICES, field)
    devices = []
    for i, b in enumerate(mappings):
        where = f"{field}[{i}]"
        if not _DEVICE_NAME.match(b.device_name):
            raise InvalidRequestError(
                f"{where}.device_name", "must be a device path such as /dev/xvda"
            )
        volume_type = _one_of(b.volume_type or "gp3", _VOLUME_TYPES, f"{where}.volume_type")
        _within(b.volume_size_bytes, GIB, MAX_VOLUME_BYTES, f"{where}.volume_size_bytes", " bytes")
        if b.volume_size_bytes % GIB:
            raise InvalidRequestError(f"{where}.volume_size_bytes", "must be whole GiB")
        if b.iops and volume_type not in _IOPS_TYPES:
            raise InvalidRequestError(f"{where}.iops", f"only {sorted(_IOPS_TYPES)} take iops")
        _within(b.iops, 100, 256_000, f"{where}.iops")
        if b.throughput_mibps and volume_type != "gp3":
            raise InvalidRequestError(f"{where}.throughput_mibps", "only gp3 takes throughput")
        _within(b.throughput_mibps, 125, 2000, f"{where}.throughput_mibps", " MiB/s")
        if b.kms_key_id and not _KMS_KEY.match(b.kms_key_id):
            raise InvalidRequestError(f"{where}.kms_key_id", "must be a KMS key id, ARN or alias")
        if b.snapshot_id and not _SNAPSHOT_ID.match(b.snapshot_id):
            raise InvalidRequestError(f"{where}.snapshot_id", "must look like snap-0123abcd")
        devices.append(
            BlockDevice(
                device_name=b.device_name,
                volume_size_bytes=b.volume_size_bytes,
                volume_type=volume_type,
                iops=b.iops,
                throughput_mibps=b.throughput_mibps,
                encrypted=b.encrypted,
                kms_key_id=b.kms_key_id,
                delete_on_termination=b.delete_on_termination,
                snapshot_id=b.snapshot_id,
            )
        )
    return tuple(devices)


def _metadata_options(m: pb.MetadataOptions, field: str) -> MetadataOptions:
    """IMDS settings checked against EC2's values; empty fields keep Karpenter's defaults."""
    default = MetadataOptions()
    return MetadataOptions(
        http_endpoint=_one_of(
            m.http_endpoint or default.http_endpoint, _ENABLED, f"{field}.http_endpoint"
        ),
        http_protocol_ipv6=_one_of(
            m.http_protocol_ipv6 or default.http_protocol_ipv6,
            _ENABLED,
            f"{field}.http_protocol_ipv6",
        ),
        http_put_response_hop_limit=_within(
            m.http_put_response_hop_limit, 1, 64, f"{field}.http_put_response_hop_limit"
        )
        or default.http_put_response_hop_limit,
        http_tokens=_one_of(m.http_tokens or default.http_tokens, _TOKENS, f"{field}.http_tokens"),
    )


def _ami_family(node_class: pb.NodeClass, field: str) -> str:
    """The user-data format: AL2023 (nodeadm, the default and every alias's) or Custom (the
    node class's user data as is); daiku renders no other family's bootstrap."""
    family = node_class.ami_family or AL2023
    _one_of(family, AMI_FAMILIES, f"{field}.ami_family")
    for i, term in enumerate(node_class.ami_selector_terms):
        if term.alias and family != AL2023:
            raise InvalidRequestError(
                f"{field}.ami_selector_terms[{i}].alias",
                f"an alias selects EKS-optimized AL2023 images; ami_family is {family!r}",
            )
    return family


def node_class_from_proto(node_class: pb.NodeClass, field: str = "node_class") -> NodeClassSpec:
    """The node class; every selector list must be non-empty and each term must select."""
    _check_node_class_limits(node_class, field)
    subnets = []
    for i, s in enumerate(node_class.subnet_selector_terms):
        if not s.id and not s.tags:
            raise InvalidRequestError(f"{field}.subnet_selector_terms[{i}]", "needs id or tags")
        subnets.append(SubnetTerm(id=s.id, tags=dict(s.tags)))
    groups = []
    for i, g in enumerate(node_class.security_group_selector_terms):
        if not (g.id or g.name or g.tags):
            raise InvalidRequestError(
                f"{field}.security_group_selector_terms[{i}]", "needs id, name or tags"
            )
        groups.append(SecurityGroupTerm(id=g.id, name=g.name, tags=dict(g.tags)))
    images = []
    for i, a in enumerate(node_class.ami_selector_terms):
        if not (a.id or a.name or a.alias or a.tags):
            raise InvalidRequestError(
                f"{field}.ami_selector_terms[{i}]", "needs id, name, alias or tags"
            )
        if a.alias and a.alias.partition("@")[0] not in _ALIAS_FAMILIES:
            raise InvalidRequestError(
                f"{field}.ami_selector_terms[{i}].alias",
                f"{a.alias!r}: supported alias families are {sorted(_ALIAS_FAMILIES)} "
                "(e.g. al2023@latest)",
            )
        images.append(
            ImageTerm(id=a.id, name=a.name, alias=a.alias, owner=a.owner, tags=dict(a.tags))
        )
    for name, terms in (
        ("subnet_selector_terms", subnets),
        ("security_group_selector_terms", groups),
        ("ami_selector_terms", images),
    ):
        if not terms:
            raise InvalidRequestError(f"{field}.{name}", "needs at least one term")
    devices = _block_devices(node_class.block_device_mappings, f"{field}.block_device_mappings")
    metadata = (
        _metadata_options(node_class.metadata_options, f"{field}.metadata_options")
        if node_class.HasField("metadata_options")
        else MetadataOptions()
    )
    ami_family = _ami_family(node_class, field)
    return NodeClassSpec(
        name=node_class.name or "default",
        subnet_terms=tuple(subnets),
        security_group_terms=tuple(groups),
        image_terms=tuple(images),
        tags=_tags(node_class.tags, f"{field}.tags"),
        user_data=node_class.user_data,
        # Without IAM lookups, a role is used as the name of its instance profile (the name the
        # console and eksctl give it); an explicit instance_profile wins.
        instance_profile=node_class.instance_profile or node_class.role,
        block_devices=devices,
        metadata_options=metadata,
        associate_public_ip_address=node_class.associate_public_ip_address,
        ami_family=ami_family,
        capacity_reservation_terms=_reservation_terms(node_class, field),
        spot_allocation_strategy=_strategy(
            node_class.spot_allocation_strategy,
            SPOT_ALLOCATION_STRATEGIES,
            f"{field}.spot_allocation_strategy",
        ),
        on_demand_allocation_strategy=_strategy(
            node_class.on_demand_allocation_strategy,
            ON_DEMAND_ALLOCATION_STRATEGIES,
            f"{field}.on_demand_allocation_strategy",
        ),
    )


def _strategy(value: str, allowed: Collection[str], field: str) -> str:
    """An allocation strategy EC2 takes for that capacity type ("" for the default)."""
    return _one_of(value, allowed, field) if value else ""


def _reservation_terms(node_class: pb.NodeClass, field: str) -> tuple[CapacityReservationTerm, ...]:
    """Karpenter's rules: a term is an id alone, or tags with an optional owner."""
    terms = []
    for i, r in enumerate(node_class.capacity_reservation_selector_terms):
        where = f"{field}.capacity_reservation_selector_terms[{i}]"
        if not (r.id or r.tags):
            raise InvalidRequestError(where, "needs id or tags")
        if r.id and (r.tags or r.owner_id):
            raise InvalidRequestError(where, "id cannot be combined with tags or owner_id")
        if r.id and not _RESERVATION_ID.match(r.id):
            raise InvalidRequestError(f"{where}.id", f"{r.id!r} is not a cr-... id")
        terms.append(CapacityReservationTerm(id=r.id, owner_id=r.owner_id, tags=dict(r.tags)))
    return tuple(terms)


def launch_request_from_proto(request: pb.LaunchNodeClaimRequest) -> LaunchRequest:
    """A validated LaunchRequest; InvalidRequestError names the first bad field."""
    name = require_name(request.nodeclaim_name, "nodeclaim_name")
    pool = require_name(request.nodepool_name, "nodepool_name")
    if not request.offerings:
        raise InvalidRequestError("offerings", "needs at least one offering")
    _at_most(request.offerings, MAX_OFFERINGS, "offerings")
    offerings = []
    for i, o in enumerate(request.offerings):
        for attr in ("instance_type", "zone"):
            if not getattr(o, attr):
                raise InvalidRequestError(f"offerings[{i}].{attr}", "is required")
            if not _OFFERING_TEXT.match(getattr(o, attr)):
                raise InvalidRequestError(
                    f"offerings[{i}].{attr}", "may hold only a-z, 0-9, '.' and '-' (64 at most)"
                )
        if o.capacity_type not in LAUNCHABLE_CAPACITY_TYPES:
            raise InvalidRequestError(
                f"offerings[{i}].capacity_type",
                f"{o.capacity_type!r} is not one of {sorted(LAUNCHABLE_CAPACITY_TYPES)}",
            )
        offerings.append(_offering_key(o, f"offerings[{i}]"))
    if not request.HasField("node_class"):
        raise InvalidRequestError("node_class", "is required")
    return LaunchRequest(
        nodeclaim_name=name,
        nodepool_name=pool,
        offerings=tuple(offerings),
        node_class=node_class_from_proto(request.node_class),
        labels=_labels(request.labels, "labels"),
        taints=_taints(request.taints, "taints"),
        startup_taints=_taints(request.startup_taints, "startup_taints"),
        kubelet=kubelet_from_proto(request.kubelet, "kubelet"),
        nodeclaim_uid=_uid(request.nodeclaim_uid),
    )


def _uid(value: str) -> str:
    if value and not _UID_TEXT.match(value):
        shown = repr(value) if len(value) <= 128 else f"{len(value)} characters"
        raise InvalidRequestError(
            "nodeclaim_uid", f"{shown} may hold only a-z, A-Z, 0-9 and '-' (128 at most)"
        )
    return value


def _offering_key(o: pb.Offering, field: str) -> OfferingKey:
    """A launch offering; a reserved one names its reservation and the reservation's type."""
    if o.capacity_type != RESERVED:
        return OfferingKey(o.instance_type, o.zone, o.capacity_type)
    if not _RESERVATION_ID.match(o.capacity_reservation_id):
        raise InvalidRequestError(
            f"{field}.capacity_reservation_id",
            f"a reserved offering needs its reservation's cr-... id, got "
            f"{o.capacity_reservation_id!r}",
        )
    reservation_type = o.capacity_reservation_type or RESERVATION_DEFAULT
    _one_of(reservation_type, RESERVATION_TYPES, f"{field}.capacity_reservation_type")
    return OfferingKey(
        o.instance_type, o.zone, RESERVED, o.capacity_reservation_id, reservation_type
    )


def resources_to_proto(resources: NodeResources) -> pb.Resources:
    """Resources in base units."""
    return pb.Resources(
        cpu_millis=resources.cpu_millis,
        memory_bytes=resources.memory_bytes,
        pods=resources.pods,
        ephemeral_storage_bytes=resources.ephemeral_storage_bytes,
        extended_resources=dict(resources.extended),
    )


def offering_to_proto(offering: PricedOffering) -> pb.Offering:
    """A catalog offering."""
    message = pb.Offering(
        instance_type=offering.key.instance_type,
        zone=offering.key.zone,
        capacity_type=offering.key.capacity_type,
        price=offering.price_per_hour,
        available=offering.available,
        unavailable_reason=offering.unavailable_reason,
    )
    if not offering.available:
        message.unavailable_until.CopyFrom(timestamp(offering.unavailable_until_seconds))
    return message


def key_to_proto(key: OfferingKey) -> pb.Offering:
    """An offering named by its key only."""
    return pb.Offering(
        instance_type=key.instance_type,
        zone=key.zone,
        capacity_type=key.capacity_type,
        capacity_reservation_id=key.capacity_reservation_id,
        capacity_reservation_type=key.capacity_reservation_type,
    )


def instance_type_to_proto(item: CatalogInstanceType) -> pb.InstanceType:
    """One catalog entry."""
    return pb.InstanceType(
        name=item.name,
        capacity=resources_to_proto(item.capacity),
        allocatable=resources_to_proto(item.allocatable),
        labels=dict(item.labels),
        offerings=[offering_to_proto(o) for o in item.offerings],
    )


def attempt_to_proto(attempt: LaunchAttempt) -> pb.LaunchAttempt:
    """One CreateFleet call."""
    return pb.LaunchAttempt(
        start_time=timestamp(attempt.start_seconds),
        end_time=timestamp(attempt.end_seconds),
        offerings=[key_to_proto(k) for k in attempt.offerings],
        errors=[
            pb.OfferingError(
                offering=key_to_proto(e.offering) if e.offering else None,
                error_code=e.code,
                message=e.message,
            )
            for e in attempt.errors
        ],
    )


def launch_result_to_proto(result: LaunchResult) -> pb.LaunchNodeClaimResponse:
    """The launch response."""
    instance = result.instance
    return pb.LaunchNodeClaimResponse(
        provider_id=provider_id(instance.zone, instance.id),
        instance_id=instance.id,
        instance_type=instance.instance_type,
        zone=instance.zone,
        capacity_type=instance.capacity_type,
        price=result.price_per_hour,
        attempts=[attempt_to_proto(a) for a in result.attempts],
        image_id=instance.image_id,
        launch_time=_datetime_timestamp(instance.launch_time),
        subnet_id=instance.subnet_id,
        security_group_ids=list(instance.security_group_ids),
        capacity_reservation_id=instance.capacity_reservation_id,
        capacity_reservation_type=instance.capacity_reservation_type,
    )


def provider_id(zone: str, instance_id: str) -> str:
    """Kubernetes' providerID of an EC2 instance."""
    return f"aws:///{zone}/{instance_id}"


def nodeclaim_to_proto(instance: Instance) -> pb.NodeClaim:
    """An instance as a NodeClaim."""
    return pb.NodeClaim(
        nodeclaim_name=instance.tags.get(NODECLAIM_TAG, ""),
        nodepool_name=instance.tags.get(NODEPOOL_TAG, ""),
        provider_id=provider_id(instance.zone, instance.id),
        instance_id=instance.id,
        instance_type=instance.instance_type,
        zone=instance.zone,
        capacity_type=instance.capacity_type,
        state=instance.state,
        launch_time=_datetime_timestamp(instance.launch_time),
        image_id=instance.image_id,
        tags=dict(instance.tags),
        subnet_id=instance.subnet_id,
        security_group_ids=list(instance.security_group_ids),
        capacity_reservation_id=instance.capacity_reservation_id,
    )


def event_to_proto(item: InstanceEvent) -> pb.WatchCloudEventsResponse:
    """A cloud event."""
    event = item.event
    zone = item.offering.zone if item.offering else ""
    return pb.WatchCloudEventsResponse(
        id=event.id,
        kind=_EVENT_KINDS[event.kind.value],
        instance_id=event.instance_id,
        provider_id=provider_id(zone, event.instance_id) if zone else "",
        nodeclaim_name=item.nodeclaim_name,
        instance_state=event.instance_state,
        time=_datetime_timestamp(event.time),
        deadline=_datetime_timestamp(event.deadline),
        offering=key_to_proto(item.offering) if item.offering else None,
        ack_token=item.ack_token,
    )


# EC2's Architecture -> the kubernetes.io/arch value of nodes it runs.
_KUBE_ARCH = {"x86_64": "amd64", "arm64": "arm64"}


def resolution_to_proto(resolution: NodeClassResolution) -> pb.ResolveNodeClassResponse:
    """ResolveNodeClass's answer (Karpenter's EC2NodeClass status shapes)."""
    return pb.ResolveNodeClassResponse(
        subnets=[
            pb.ResolvedSubnet(id=s.id, zone=s.zone, zone_id=s.zone_id) for s in resolution.subnets
        ],
        security_groups=[
            pb.ResolvedSecurityGroup(id=g.id, name=g.name) for g in resolution.security_groups
        ],
        amis=[
            pb.ResolvedAmi(
                id=i.id,
                name=i.name,
                requirements=[
                    pb.NodeSelectorRequirement(
                        key="kubernetes.io/arch",
                        operator="In",
                        values=[_KUBE_ARCH.get(i.architecture, i.architecture)],
                    )
                ],
            )
            for i in resolution.images
        ],
        capacity_reservations=[_reservation_to_proto(r) for r in resolution.reservations],
    )


def _reservation_to_proto(r: CapacityReservation) -> pb.ResolvedCapacityReservation:
    message = pb.ResolvedCapacityReservation(
        id=r.id,
        instance_type=r.instance_type,
        zone=r.zone,
        owner_id=r.owner_id,
        reservation_type=r.reservation_type,
        instance_match_criteria=r.instance_match_criteria,
        available_instance_count=r.available_instance_count,
        total_instance_count=r.total_instance_count,
        state=r.state,
    )
    if r.end_time is not None:
        message.end_time.FromDatetime(r.end_time)
    return message
