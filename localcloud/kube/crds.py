"""CustomResourceDefinitions inside the store: creating one serves its resources.

Creating (or updating) a CRD registers its served versions and marks it Established; removing
it removes its objects and stops serving them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from localcloud.kube.errors import Invalid
from localcloud.kube.objects import JsonObject, copy_json, format_timestamp
from localcloud.kube.resources import resource_types_from_crd

if TYPE_CHECKING:
    from localcloud.kube.store import Store

CRD_KEY = "apiextensions.k8s.io/v1/customresourcedefinitions"


class CustomResourceDefinitions:
    """Registering and dropping the resource types CRDs define."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def establish(self, crd: JsonObject) -> None:
        """Fill the CRD's status (names accepted, Established) and serve its versions."""
        store = self._store
        types = resource_types_from_crd(crd)
        names = (crd.get("spec") or {}).get("names") or {}
        now = format_timestamp(store._clock())
        crd["status"] = {
            "acceptedNames": copy_json(names),
            "storedVersions": [t.version for t in types[:1]],
            "conditions": [
                {
                    "type": condition,
                    "status": "True",
                    "lastTransitionTime": now,
                    "reason": reason,
                    "message": message,
                }
                for condition, reason, message in (
                    ("NamesAccepted", "NoConflicts", "no conflicts found"),
                    ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
                )
            ],
        }
        if not store._dry_run:
            for resource_type in types:
                store.register(resource_type)

    def drop(self, crd: JsonObject) -> None:
        """Remove every object of the CRD's types and stop serving them."""
        store = self._store
        try:
            types = resource_types_from_crd(crd)
        except Invalid:
            return
        for resource_type in types:
            bucket = store._bucket(resource_type)
            for obj in list(bucket.objects.values()):
                store._remove(resource_type, obj, obj)
            store.unregister(resource_type)
