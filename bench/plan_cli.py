"""`daiku plan` on FACTS §5's mix written as manifests: parse, solve and total wall time.

    .venv/bin/python -m bench.plan_cli                    # 2k 5k 10k 20k pods
    .venv/bin/python -m bench.plan_cli --pods 20000 --yaml   # one size, manifests as YAML

The user's path, not hand-built objects: the pods are Deployments in one file (a JSON ``List``,
or YAML documents with ``--yaml``), the catalog a JSON file as ``daiku catalog -o json`` writes
it, and each size is timed twice:

* **total** — wall time of ``daiku plan --catalog … -f … -o json`` in a fresh process (Python
  start-up, imports, reading, solving, printing), as a user runs it;
* **parse / solve / output** — the same steps in this process (``build_input``, ``solve``,
  ``plan_document`` + ``json.dumps``), in CPU seconds, so the total's parts can be seen.

The process's CPU time is printed beside its wall time: on a shared machine the gap between
them is time spent waiting for a core.

Workload (FACTS §5): one fifth each plain, zone spread (maxSkew 1), hostname spread, pod
affinity to its own label on zone, anti-affinity to ``app: nginx`` on hostname; labels
``my-label`` in a..g; cpu from {100, 250, 500, 1000, 1500}m; memory from {100, 256, 512, 1024,
2048, 4096}Mi. Pods with the same template form one Deployment. Catalog: FACTS §5's 400 linear
types (i vCPU, 2i GiB, 10i pods) given by capacity only, so allocatable is computed below it
(FACTS §1); on-demand at 0.1 per vCPU + 0.1 per GiB in three zones, spot at 30-40 % of that in
two. One NodePool without requirements (spot and on-demand). Target (issue 11): 20k pods within
2 s total wall on the 2-core box, every pod scheduled.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from daiku_cli.plan import build_input, plan_document
from scheduler_svc.core import solve

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
ON_DEMAND_ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
SPOT_ZONES = {"us-east-1a": 0.3, "us-east-1b": 0.4}
SIZES = (2000, 5000, 10000, 20000)


def catalog_document() -> dict[str, Any]:
    """FACTS §5's 400 types by capacity, on-demand in three zones and spot in two."""
    types = []
    for i in range(1, 401):
        on_demand = round(0.1 * i + 0.1 * 2 * i, 6)
        offerings = [
            {"zone": z, "capacityType": "on-demand", "price": on_demand} for z in ON_DEMAND_ZONES
        ]
        offerings += [
            {"zone": z, "capacityType": "spot", "price": round(on_demand * share, 6)}
            for z, share in SPOT_ZONES.items()
        ]
        types.append(
            {
                "name": f"linear-{i}",
                "capacity": {"cpu": str(i), "memory": f"{2 * i}Gi", "pods": str(10 * i)},
                "labels": {"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"},
                "offerings": offerings,
            }
        )
    return {"instanceTypes": types}


def _template(kind: str, labels: dict[str, str], selector: str, cpu: int, memory: int) -> Any:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "app",
                "image": "registry.k8s.io/pause:3.9",
                "resources": {"requests": {"cpu": f"{cpu}m", "memory": f"{memory}Mi"}},
            }
        ]
    }
    if kind in ("zone-spread", "host-spread"):
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": ZONE if kind == "zone-spread" else HOST,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"my-label": selector}},
            }
        ]
    elif kind == "affinity":
        spec["affinity"] = {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": ZONE, "labelSelector": {"matchLabels": labels}}
                ]
            }
        }
    elif kind == "anti":
        spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": HOST, "labelSelector": {"matchLabels": {"app": "nginx"}}}
                ]
            }
        }
    return {"metadata": {"labels": labels}, "spec": spec}


def manifests(count: int, seed: int) -> list[dict[str, Any]]:
    """The NodePool and FACTS §5's pods as Deployments (one per distinct template)."""
    rng = random.Random(seed)
    templates: Counter[tuple[str, tuple[tuple[str, str], ...], str, int, int]] = Counter()
    fifth = count // 5
    for kind, how_many in (
        ("plain", fifth),
        ("zone-spread", fifth),
        ("host-spread", fifth),
        ("affinity", fifth),
        ("anti", count - 4 * fifth),
    ):
        for _ in range(how_many):
            cpu = rng.choice((100, 250, 500, 1000, 1500))
            memory = rng.choice((100, 256, 512, 1024, 2048, 4096))
            if kind == "affinity":
                labels = {"my-affinity": rng.choice("abcdefg")}
            elif kind == "anti":
                labels = {"app": "nginx"}
            else:
                labels = {"my-label": rng.choice("abcdefg")}
            selector = rng.choice("abcdefg") if kind.endswith("spread") else ""
            templates[(kind, tuple(sorted(labels.items())), selector, cpu, memory)] += 1
    items: list[dict[str, Any]] = [
        {
            "apiVersion": "daiku.dev/v1",
            "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {"template": {"spec": {"requirements": []}}},
        }
    ]
    for n, ((kind, pairs, selector, cpu, memory), replicas) in enumerate(sorted(templates.items())):
        items.append(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": f"{kind}-{n}"},
                "spec": {
                    "replicas": replicas,
                    "selector": {"matchLabels": dict(pairs)},
                    "template": _template(kind, dict(pairs), selector, cpu, memory),
                },
            }
        )
    return items


def write_manifests(path: Path, items: list[dict[str, Any]], as_yaml: bool) -> None:
    """One JSON List, or YAML documents."""
    if as_yaml:
        path.write_text(yaml.safe_dump_all(items, sort_keys=False), encoding="utf-8")
    else:
        path.write_text(json.dumps({"kind": "List", "items": items}), encoding="utf-8")


def run_size(count: int, seed: int, as_yaml: bool, scratch: Path, catalog: Path) -> str:
    """One size: the process's wall time, then the parts in process."""
    manifest_file = scratch / (f"pods-{count}.yaml" if as_yaml else f"pods-{count}.json")
    write_manifests(manifest_file, manifests(count, seed), as_yaml)
    daiku = Path(sys.executable).parent / "daiku"
    command = [
        str(daiku),
        "plan",
        "--catalog",
        str(catalog),
        "-f",
        str(manifest_file),
        "-o",
        "json",
    ]
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    finished = subprocess.run(command, capture_output=True, text=True, check=True)
    total = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    total_cpu = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
    document = json.loads(finished.stdout)
    started = time.process_time()
    problem = build_input([str(manifest_file)], str(catalog))
    parsed = time.process_time()
    result = solve(problem)
    solved = time.process_time()
    json.dumps(plan_document(result, solved - parsed))
    written = time.process_time()
    pods = sum(len(c["pods"]) for c in document["nodeClaims"])
    return (
        f"pods={count:>6}  total={total:5.2f}s wall, {total_cpu:5.2f}s cpu (daiku plan process)"
        f"  cpu in process: parse={parsed - started:5.2f}s solve={solved - parsed:5.2f}s "
        f"output={written - solved:5.2f}s  nodes={len(document['nodeClaims']):>5} "
        f"scheduled={pods:>6} unschedulable={len(document['unschedulable'])} "
        f"cost=${document['totalHourlyCost']:.2f}/h"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, action="append", help="a size (repeatable)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--yaml", action="store_true", help="manifests as YAML, not JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        scratch = Path(directory)
        catalog = scratch / "catalog.json"
        catalog.write_text(json.dumps(catalog_document()), encoding="utf-8")
        for count in args.pods or SIZES:
            print(run_size(count, args.seed, args.yaml, scratch, catalog), flush=True)


if __name__ == "__main__":
    main()
