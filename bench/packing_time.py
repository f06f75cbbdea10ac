"""What the integer program's second opinion adds to a solve: CPU time of one group of N
identical pods (500m/512Mi) on the default NodePool over the bundled catalog, greedy alone
(``PackingSettings(max_pods=0)``) against the default settings.

    .venv/bin/python -m bench.packing_time            # N = 1, 10, 100, 1000

Each solve runs once to warm the catalog cache, then is timed (process CPU seconds)."""

from __future__ import annotations

import time

from daiku_cli.catalog import bundled_catalog_document
from daiku_cli.plan import instance_types_from_document
from scheduler_svc.core import NodePool, PackingSettings, Pod, Resources, SchedulingInput, solve
from scheduler_svc.core.catalog_index import CatalogCache

MIB = 1024**2


def main() -> None:
    types = tuple(instance_types_from_document(bundled_catalog_document(), "bundled"))
    catalogs = CatalogCache()
    for count in (1, 10, 100, 1000):
        pods = tuple(Pod(f"p-{i}", containers=(Resources(500, 512 * MIB),)) for i in range(count))
        problem = SchedulingInput(pods, (NodePool("default"),), types)
        line = [f"pods={count:>5}"]
        for name, settings in (("greedy", PackingSettings(max_pods=0)), ("default", None)):
            solve(problem, catalogs=catalogs, packing=settings)
            started = time.process_time()
            result = solve(problem, catalogs=catalogs, packing=settings)
            spent = time.process_time() - started
            line.append(f"{name}={spent * 1000:6.1f} ms cpu ${result.total_price_per_hour:.4f}/h")
        print("  ".join(line), flush=True)


if __name__ == "__main__":
    main()
