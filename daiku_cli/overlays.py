"""NodeOverlays in the CLI: what `daiku plan --explain` says about them and how `daiku catalog
-f overlays.yaml` shows the catalog they make. The overlays themselves are converted by the
scheduler's converter (through `daiku_cli.plan.read_manifests` and the mirror) and applied by
the core (`scheduler_svc.core.overlay`), as the live scheduler does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scheduler_svc.core import InstanceType, NodeClaimPlan
from scheduler_svc.core.overlay import NodeOverlay, effective_overlays, overlay_effects


def explain_overlays(
    base_catalog: Sequence[InstanceType], overlays: Sequence[NodeOverlay], claim: NodeClaimPlan
) -> list[str]:
    """Lines saying how NodeOverlays changed the claim's chosen instance type (none: a line
    saying that none matched it)."""
    chosen = claim.offerings[0]
    # Conflicts are found over the whole catalog: an overlay left out for a clash on another
    # type changed nothing here either.
    applied = effective_overlays(base_catalog, overlays)
    effect = overlay_effects(
        [t for t in base_catalog if t.name == chosen.instance_type], applied
    ).get(chosen.instance_type)
    if effect is None:
        return [f"NodeOverlays: none of {len(overlays)} matched {chosen.instance_type}"]
    by_name = {o.name: o for o in overlays}
    lines = [f"NodeOverlays on {chosen.instance_type}: {', '.join(effect.overlays)}"]
    for offering, price, name in effect.prices:
        if (offering.zone, offering.capacity_type) == (chosen.zone, chosen.capacity_type):
            lines.append(
                f"  price {offering.zone} {offering.capacity_type}: "
                f"{offering.price_per_hour:.4f} -> {price:.4f} "
                f"(NodeOverlay {name}: {by_name[name].describe_price()})"
            )
    lines += [
        f"  capacity +{resource}={amount} (NodeOverlay {name})"
        for resource, amount, name in effect.capacity
    ]
    return lines


def overlay_catalog_document(
    document: dict[str, Any], base_catalog: Sequence[InstanceType], overlays: Sequence[NodeOverlay]
) -> dict[str, Any]:
    """The `daiku catalog` document with the overlays applied in place: offerings get the new
    `price` with `basePrice` and `overlay` beside it, capacity and allocatable the extended
    resources, and each changed type an `overlays` list."""
    effects = overlay_effects(base_catalog, overlays)
    for item in document["instanceTypes"]:
        effect = effects.get(item["name"])
        if effect is None:
            continue
        item["overlays"] = list(effect.overlays)
        repriced = {(o.zone, o.capacity_type): (p, n) for o, p, n in effect.prices}
        for offering in item["offerings"]:
            change = repriced.get((offering["zone"], offering["capacityType"]))
            if change is not None:
                offering["basePrice"] = offering["price"]
                offering["price"], offering["overlay"] = change
        for resource, amount, _ in effect.capacity:
            item["capacity"][resource] = str(amount)
            item["allocatable"][resource] = str(amount)
    return document
