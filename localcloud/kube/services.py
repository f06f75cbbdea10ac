"""Services as kube-apiserver admits them: defaults, and a clusterIP from the service range.

- Defaults (core/v1 `SetDefaults_Service`): `type: ClusterIP`, `sessionAffinity: None`,
  `internalTrafficPolicy: Cluster`, each port's `protocol: TCP` and `targetPort` = its `port`.
- ClusterIP, NodePort and LoadBalancer Services get `spec.clusterIP` (and `clusterIPs`,
  `ipFamilies: [IPv4]`, `ipFamilyPolicy: SingleStack`) from 10.96.0.0/12, the range kubeadm and
  kind use; 10.96.0.1 is the `kubernetes` Service's, as in every cluster. `clusterIP: None`
  (headless) and ExternalName Services get none. An address asked for must be in the range and
  free (else 422 `provided IP is already allocated`).
- On update a Service that omits its clusterIP keeps the allocated one (the apiserver copies
  allocated values forward); changing it is refused as immutable.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator
from typing import Final

from localcloud.kube.objects import JsonObject
from localcloud.kube.schema import Violation

SERVICE_KEY: Final = "v1/services"
SERVICE_RANGE: Final = ipaddress.ip_network("10.96.0.0/12")
KUBERNETES_SERVICE_IP: Final = ipaddress.ip_address("10.96.0.1")
HEADLESS: Final = "None"
_WITHOUT_CLUSTER_IP: Final = frozenset({"ExternalName"})


def default_service(service: JsonObject) -> None:
    """The apiserver's defaults, in place."""
    spec = service.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec["type"] != "ExternalName":
        spec.setdefault("internalTrafficPolicy", "Cluster")
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            if "port" in port:
                port.setdefault("targetPort", port["port"])


def carry_cluster_ip(new: JsonObject, old: JsonObject) -> None:
    """An update that omits the clusterIP keeps the one allocated."""
    spec = new.setdefault("spec", {})
    old_spec = old.get("spec") or {}
    for field in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
        if field not in spec and field in old_spec:
            spec[field] = old_spec[field]


def cluster_ip_violations(new: JsonObject, old: JsonObject) -> Iterator[Violation]:
    before = (old.get("spec") or {}).get("clusterIP")
    after = (new.get("spec") or {}).get("clusterIP")
    if before and after != before and (new.get("spec") or {}).get("type") != "ExternalName":
        yield Violation("spec.clusterIP", f'Invalid value: "{after}": field is immutable')


class ServiceAddresses:
    """Hands out clusterIPs: the lowest free address of the range, as a new cluster does."""

    def __init__(self) -> None:
        self._next = int(KUBERNETES_SERVICE_IP) + 1

    def assign(self, service: JsonObject, services: Iterable[JsonObject]) -> list[Violation]:
        """Give `service` its clusterIP (in place); the violations when the one asked for
        cannot be had. `services` are those that exist (their addresses are taken)."""
        spec = service.setdefault("spec", {})
        if spec.get("type") in _WITHOUT_CLUSTER_IP:
            return []
        asked = spec.get("clusterIP") or ""
        if asked == HEADLESS:
            spec.setdefault("clusterIPs", [HEADLESS])
            return []
        taken = {str((s.get("spec") or {}).get("clusterIP")) for s in services}
        if asked:
            problem = _unusable(asked, taken)
            if problem:
                return [Violation("spec.clusterIP", f'Invalid value: "{asked}": {problem}')]
            address = asked
        else:
            address = self._free(taken)
        spec["clusterIP"] = address
        spec["clusterIPs"] = [address]
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        return []

    def _free(self, taken: set[str]) -> str:
        last = int(SERVICE_RANGE.broadcast_address) - 1
        first = int(KUBERNETES_SERVICE_IP) + 1
        for offset in range(last - first + 1):
            candidate = first + (self._next - first + offset) % (last - first + 1)
            address = str(ipaddress.ip_address(candidate))
            if address not in taken:
                self._next = candidate + 1
                return address
        raise RuntimeError("the service address range is exhausted")


def _unusable(asked: str, taken: set[str]) -> str:
    try:
        address = ipaddress.ip_address(asked)
    except ValueError:
        return "must be a valid IP address"
    if address not in SERVICE_RANGE:
        return f"provided IP is not in the valid range. The range of valid IPs is {SERVICE_RANGE}"
    if asked in taken or address == KUBERNETES_SERVICE_IP:
        return "provided IP is already allocated"
    return ""
