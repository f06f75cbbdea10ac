"""Decoding of the Kubernetes protobuf request bodies kubectl's typed clients send.

`kubectl create namespace|deployment|poddisruptionbudget|configmap|secret|serviceaccount|service`
and `kubectl auth can-i` POST `application/vnd.kubernetes.protobuf`: the 4-byte magic
`k8s\\0`, then a `runtime.Unknown` whose `raw` field holds the object in the protobuf encoding of
k8s.io/api's `generated.proto`. This module reads the protobuf wire format and maps the fields
of those few messages (numbers from `generated.proto`) to the JSON form. A field it does not
know is refused with UnsupportedMediaType naming it, never dropped silently. Responses are
always JSON, which those clients accept.
"""

from __future__ import annotations

import base64
from typing import Any, Final

from localcloud.kube.errors import UnsupportedMediaType

JsonObject = dict[str, Any]
MAGIC: Final = b"k8s\x00"

# A schema maps field number -> (json name, kind, sub-schema name or None). Kinds: string,
# bytes, int/bool (zero omitted), intp/boolp (Go pointers: zero kept), message, repeated, map,
# intorstring, ignore (server-set).
Field = tuple[str, str, str | None]
SCHEMAS: Final[dict[str, dict[int, Field]]] = {
    "Unknown": {
        1: ("typeMeta", "message", "TypeMeta"),
        2: ("raw", "bytes", None),
        3: ("contentEncoding", "string", None),
        4: ("contentType", "string", None),
    },
    "TypeMeta": {1: ("apiVersion", "string", None), 2: ("kind", "string", None)},
    "ObjectMeta": {
        1: ("name", "string", None),
        2: ("generateName", "string", None),
        3: ("namespace", "string", None),
        4: ("selfLink", "ignore", None),
        5: ("uid", "string", None),
        6: ("resourceVersion", "string", None),
        7: ("generation", "ignore", None),
        8: ("creationTimestamp", "ignore", None),
        9: ("deletionTimestamp", "ignore", None),
        10: ("deletionGracePeriodSeconds", "ignore", None),
        11: ("labels", "map", "string"),
        12: ("annotations", "map", "string"),
        13: ("ownerReferences", "repeated", "OwnerReference"),
        14: ("finalizers", "repeated", "string"),
        17: ("managedFields", "ignore", None),
    },
    "OwnerReference": {
        1: ("kind", "string", None),
        3: ("name", "string", None),
        4: ("uid", "string", None),
        5: ("apiVersion", "string", None),
        6: ("controller", "boolp", None),
        7: ("blockOwnerDeletion", "boolp", None),
    },
    "LabelSelector": {
        1: ("matchLabels", "map", "string"),
        2: ("matchExpressions", "repeated", "LabelSelectorRequirement"),
    },
    "LabelSelectorRequirement": {
        1: ("key", "string", None),
        2: ("operator", "string", None),
        3: ("values", "repeated", "string"),
    },
    "IntOrString": {
        1: ("type", "int", None),
        2: ("intVal", "int", None),
        3: ("strVal", "string", None),
    },
    "Quantity": {1: ("string", "string", None)},
    "Namespace": {
        1: ("metadata", "message", "ObjectMeta"),
        2: ("spec", "message", "NamespaceSpec"),
        3: ("status", "message", "Empty"),
    },
    "NamespaceSpec": {1: ("finalizers", "repeated", "string")},
    "Empty": {},
    "ConfigMap": {
        1: ("metadata", "message", "ObjectMeta"),
        2: ("data", "map", "string"),
        3: ("binaryData", "map", "bytes"),
        4: ("immutable", "boolp", None),
    },
    "Secret": {
        1: ("metadata", "message", "ObjectMeta"),
        2: ("data", "map", "bytes"),
        3: ("type", "string", None),
        4: ("stringData", "map", "string"),
        5: ("immutable", "boolp", None),
    },
    "ServiceAccount": {1: ("metadata", "message", "ObjectMeta")},
    "SelfSubjectReview": {
        1: ("metadata", "message", "ObjectMeta"),
        2: ("status", "message", "SelfSubjectReviewStatus"),
    },
    # the client sends an empty userInfo; the server fills it in
    "SelfSubjectReviewStatus": {1: ("userInfo", "message", "Empty")},
    "TokenReview": {
        1: ("metadata", "message", "ObjectMeta"),
        2: ("spec", "message", "TokenReviewSpec"),
        3: ("status", "message", "Empty"),
    },
    "TokenReviewSpec": {1: ("token", "string", None), 2: ("audiences", "repeated", "string")},
    "SelfSubjectAccessReview": {
        1: ("metadata", "message", "ObjectMeta"),
        2: ("spec", "message", "SelfSubjectAccessReviewSpec"),
        3: ("status", "message", "Empty"),
    },
    "SelfSubjectAccessReviewSpec": {
        1: ("resourceAttributes", "message", "ResourceAttributes"),
        2: ("nonResourceAttributes", "message", "NonResourceAttributes"),
    },
    "ResourceAttributes": {
        1: ("namespace", "string", None),
        2: ("verb", "string", None),
        3: ("group", "string", None),
        4: ("version", "string", None),
        5: ("resource", "string", None),
        6: ("subresource", "string", None),
        7: ("name", "string", None),
    },
    "NonResourceAttributes": {1: ("path", "string", None), 2: ("verb", "string", None)},
    "PodDisruptionBudget": {
        1: ("metadata", "message", "ObjectMeta"),
        2: ("spec", "message", "PodDisruptionBudgetSpec"),
        3: ("status", "message", "Empty"),
    },
    "PodDisruptionBudgetSpec": {
        1: ("minAvailable", "intorstring", "IntOrString"),
        2: ("selector", "message", "LabelSelector"),
        3: ("maxUnavailable", "intorstring", "IntOrString"),
        4: ("unhealthyPodEvictionPolicy", "string", None),
    },
    "Service": {
        1: ("metadata", "message", "ObjectMeta"),
        2: ("spec", "message", "ServiceSpec"),
        3: ("status", "message", "Empty"),
    },
    "ServiceSpec": {
        1: ("ports", "repeated", "ServicePort"),
        2: ("selector", "map", "string"),
        3: ("clusterIP", "string", None),
        4: ("type", "string", None),
        10: ("externalName", "string", None),
    },
    "ServicePort": {
        1: ("name", "string", None),
        2: ("protocol", "string", None),
        3: ("port", "int", None),
        4: ("targetPort", "intorstring", "IntOrString"),
        5: ("nodePort", "int", None),
    },
    "Deployment": {
        1: ("metadata", "message", "ObjectMeta"),
        2: ("spec", "message", "DeploymentSpec"),
        3: ("status", "message", "Empty"),
    },
    "DeploymentSpec": {
        1: ("replicas", "intp", None),
        2: ("selector", "message", "LabelSelector"),
        3: ("template", "message", "PodTemplateSpec"),
        4: ("strategy", "message", "DeploymentStrategy"),
        5: ("minReadySeconds", "int", None),
        6: ("revisionHistoryLimit", "intp", None),
        7: ("paused", "bool", None),
        9: ("progressDeadlineSeconds", "intp", None),
    },
    "DeploymentStrategy": {
        1: ("type", "string", None),
        2: ("rollingUpdate", "message", "RollingUpdateDeployment"),
    },
    "RollingUpdateDeployment": {
        1: ("maxUnavailable", "intorstring", "IntOrString"),
        2: ("maxSurge", "intorstring", "IntOrString"),
    },
    # rbac.authorization.k8s.io/v1 (`kubectl create role|clusterrole|rolebinding|...`)
    "Role": {
        1: ("metadata", "message", "ObjectMeta"),
        2: ("rules", "repeated", "PolicyRule"),
    },
    "ClusterRole": {
        1: ("metadata", "message", "ObjectMeta"),
        2: ("rules", "repeated", "PolicyRule"),
        3: ("aggregationRule", "message", "AggregationRule"),
    },
    "AggregationRule": {1: ("clusterRoleSelectors", "repeated", "LabelSelector")},
    "PolicyRule": {
        1: ("verbs", "repeated", "string"),
        2: ("apiGroups", "repeated", "string"),
        3: ("resources", "repeated", "string"),
        4: ("resourceNames", "repeated", "string"),
        5: ("nonResourceURLs", "repeated", "string"),
    },
    "RoleBinding": {
        1: ("metadata", "message", "ObjectMeta"),
        2: ("subjects", "repeated", "Subject"),
        3: ("roleRef", "message", "RoleRef"),
    },
    "Subject": {
        1: ("kind", "string", None),
        2: ("apiGroup", "string", None),
        3: ("name", "string", None),
        4: ("namespace", "string", None),
    },
    "RoleRef": {
        1: ("apiGroup", "string", None),
        2: ("kind", "string", None),
        3: ("name", "string", None),
    },
    # scheduling.k8s.io/v1 (`kubectl create priorityclass`)
    "PriorityClass": {
        1: ("metadata", "message", "ObjectMeta"),
        2: ("value", "int", None),
        3: ("globalDefault", "bool", None),
        4: ("description", "string", None),
        5: ("preemptionPolicy", "string", None),
    },
    # authentication.k8s.io/v1 TokenRequest (`kubectl create token`)
    "TokenRequest": {
        1: ("metadata", "message", "ObjectMeta"),
        2: ("spec", "message", "TokenRequestSpec"),
        3: ("status", "message", "TokenRequestStatus"),
    },
    "TokenRequestSpec": {
        1: ("audiences", "repeated", "string"),
        3: ("boundObjectRef", "message", "BoundObjectReference"),
        4: ("expirationSeconds", "intp", None),
    },
    "BoundObjectReference": {
        1: ("kind", "string", None),
        2: ("apiVersion", "string", None),
        3: ("name", "string", None),
        4: ("uid", "string", None),
    },
    # the client sends them empty; the server fills them in
    "TokenRequestStatus": {
        1: ("token", "string", None),
        2: ("expirationTimestamp", "message", "Empty"),
    },
    # autoscaling/v1 (`kubectl autoscale`)
    "HorizontalPodAutoscaler": {
        1: ("metadata", "message", "ObjectMeta"),
        2: ("spec", "message", "HorizontalPodAutoscalerSpec"),
        3: ("status", "message", "Empty"),
    },
    "HorizontalPodAutoscalerSpec": {
        1: ("scaleTargetRef", "message", "CrossVersionObjectReference"),
        2: ("minReplicas", "intp", None),
        3: ("maxReplicas", "int", None),
        4: ("targetCPUUtilizationPercentage", "intp", None),
    },
    "CrossVersionObjectReference": {
        1: ("kind", "string", None),
        2: ("name", "string", None),
        3: ("apiVersion", "string", None),
    },
    # batch/v1 (`kubectl create job|cronjob`)
    "Job": {
        1: ("metadata", "message", "ObjectMeta"),
        2: ("spec", "message", "JobSpec"),
        3: ("status", "message", "Empty"),
    },
    "JobSpec": {
        1: ("parallelism", "intp", None),
        2: ("completions", "intp", None),
        3: ("activeDeadlineSeconds", "intp", None),
        4: ("selector", "message", "LabelSelector"),
        5: ("manualSelector", "boolp", None),
        6: ("template", "message", "PodTemplateSpec"),
        7: ("backoffLimit", "intp", None),
        8: ("ttlSecondsAfterFinished", "intp", None),
    },
    "CronJob": {
        1: ("metadata", "message", "ObjectMeta"),
        2: ("spec", "message", "CronJobSpec"),
        3: ("status", "message", "Empty"),
    },
    "CronJobSpec": {
        1: ("schedule", "string", None),
        2: ("startingDeadlineSeconds", "intp", None),
        3: ("concurrencyPolicy", "string", None),
        4: ("suspend", "boolp", None),
        5: ("jobTemplate", "message", "JobTemplateSpec"),
        6: ("successfulJobsHistoryLimit", "intp", None),
        7: ("failedJobsHistoryLimit", "intp", None),
        8: ("timeZone", "string", None),
    },
    "JobTemplateSpec": {
        1: ("metadata", "message", "ObjectMeta"),
        2: ("spec", "message", "JobSpec"),
    },
    "PodTemplateSpec": {
        1: ("metadata", "message", "ObjectMeta"),
        2: ("spec", "message", "PodSpec"),
    },
    "PodSpec": {
        2: ("containers", "repeated", "Container"),
        3: ("restartPolicy", "string", None),
        4: ("terminationGracePeriodSeconds", "intp", None),
        6: ("dnsPolicy", "string", None),
        7: ("nodeSelector", "map", "string"),
        8: ("serviceAccountName", "string", None),
        10: ("nodeName", "string", None),
        19: ("schedulerName", "string", None),
        20: ("initContainers", "repeated", "Container"),
        22: ("tolerations", "repeated", "Toleration"),
        24: ("priorityClassName", "string", None),
    },
    "Toleration": {
        1: ("key", "string", None),
        2: ("operator", "string", None),
        3: ("value", "string", None),
        4: ("effect", "string", None),
        5: ("tolerationSeconds", "intp", None),
    },
    "Container": {
        1: ("name", "string", None),
        2: ("image", "string", None),
        3: ("command", "repeated", "string"),
        4: ("args", "repeated", "string"),
        5: ("workingDir", "string", None),
        6: ("ports", "repeated", "ContainerPort"),
        7: ("env", "repeated", "EnvVar"),
        8: ("resources", "message", "ResourceRequirements"),
        13: ("terminationMessagePath", "string", None),
        14: ("imagePullPolicy", "string", None),
        20: ("terminationMessagePolicy", "string", None),
    },
    "ContainerPort": {
        1: ("name", "string", None),
        2: ("hostPort", "int", None),
        3: ("containerPort", "int", None),
        4: ("protocol", "string", None),
        5: ("hostIP", "string", None),
    },
    "EnvVar": {1: ("name", "string", None), 2: ("value", "string", None)},
    "ResourceRequirements": {
        1: ("limits", "map", "Quantity"),
        2: ("requests", "map", "Quantity"),
    },
}
KIND_SCHEMAS: Final = {
    "Namespace": "Namespace",
    "Deployment": "Deployment",
    "PodDisruptionBudget": "PodDisruptionBudget",
    "ConfigMap": "ConfigMap",
    "Secret": "Secret",
    "ServiceAccount": "ServiceAccount",
    "Service": "Service",
    "SelfSubjectAccessReview": "SelfSubjectAccessReview",
    "SelfSubjectReview": "SelfSubjectReview",
    "TokenReview": "TokenReview",
    "Role": "Role",
    "ClusterRole": "ClusterRole",
    "RoleBinding": "RoleBinding",
    "ClusterRoleBinding": "RoleBinding",
    "Job": "Job",
    "CronJob": "CronJob",
    "PriorityClass": "PriorityClass",
    "HorizontalPodAutoscaler": "HorizontalPodAutoscaler",
    "TokenRequest": "TokenRequest",
}


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise UnsupportedMediaType("truncated protobuf varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) for each field of one message."""
    out = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise UnsupportedMediaType(f"protobuf wire type {wire} is not supported")
        out.append((number, wire, value))
    return out


def _scalar(kind: str | None, value: Any) -> Any:
    if kind == "string":
        return bytes(value).decode()
    if kind == "bytes":
        return base64.b64encode(bytes(value)).decode()
    if kind in ("int", "intp"):
        return value - (1 << 64) if value >= 1 << 63 else value
    if kind in ("bool", "boolp"):
        return bool(value)
    if kind == "Quantity":
        return decode_message("Quantity", value).get("string", "")
    return decode_message(str(kind), value)


def decode_message(schema_name: str, data: bytes) -> JsonObject:
    schema = SCHEMAS[schema_name]
    out: JsonObject = {}
    for number, _, value in _fields(data):
        field = schema.get(number)
        if field is None and value in (0, b""):
            continue  # Go encodes every non-pointer field, set or not: an empty one says nothing
        if field is None:
            raise UnsupportedMediaType(
                f"protobuf field {number} of {schema_name} is not understood by the localcloud "
                "apiserver; send JSON (kubectl create -f / apply -f) instead"
            )
        name, kind, sub = field
        if kind == "ignore" or (kind in ("string", "int", "bool") and not value):
            # server-set metadata, or a zero value the JSON form omits (`omitempty`); pointer
            # fields (intp, boolp) keep an explicit zero such as `replicas: 0`
            continue
        if kind == "message":
            out[name] = decode_message(str(sub), value)
        elif kind == "repeated":
            out.setdefault(name, []).append(_scalar(sub, value))
        elif kind == "map":
            entry = {n: v for n, _, v in _fields(value)}
            out.setdefault(name, {})[bytes(entry.get(1, b"")).decode()] = _scalar(
                sub, entry.get(2, b"")
            )
        elif kind == "intorstring":
            parsed = decode_message("IntOrString", value)
            out[name] = (
                parsed.get("strVal", "") if parsed.get("type") == 1 else parsed.get("intVal", 0)
            )
        else:
            out[name] = _scalar(kind, value)
    return out


def decode_object(body: bytes) -> JsonObject:
    """A protobuf-encoded Kubernetes object as its JSON form (apiVersion and kind included)."""
    if not body.startswith(MAGIC):
        raise UnsupportedMediaType("protobuf body without the k8s\\0 magic prefix")
    unknown = decode_message("Unknown", body[len(MAGIC) :])
    type_meta = unknown.get("typeMeta") or {}
    kind = type_meta.get("kind", "")
    schema = KIND_SCHEMAS.get(kind)
    if schema is None:
        raise UnsupportedMediaType(
            f"protobuf bodies of kind {kind!r} are not supported by the localcloud apiserver; "
            "send JSON (kubectl create -f / apply -f) instead"
        )
    raw = base64.b64decode(unknown.get("raw", ""))
    obj = decode_message(schema, raw)
    obj.pop("status", None)
    return {"apiVersion": type_meta.get("apiVersion", ""), "kind": kind, **obj}
