"""Run the local Kubernetes API server alone: `python -m localcloud.kube [--port N] ...`.

Prints the URL and a line containing `ready` once it serves; Ctrl-C stops it. The whole local
cloud (controllers, EC2 emulator) is `python -m localcloud`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from pathlib import Path

from localcloud.kube.server import KubeApiServer


async def serve(args: argparse.Namespace) -> None:
    async with KubeApiServer(
        host=args.host, port=args.port, token=args.token, tls=not args.no_tls
    ) as api:
        path = api.write_kubeconfig(args.kubeconfig)
        print(f"kube-apiserver {api.url} kubeconfig {path}")  # noqa: T201 - the CLI's output
        print("ready", flush=True)  # noqa: T201
        await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m localcloud.kube", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token", default=None, help="bearer token (random by default)")
    parser.add_argument("--kubeconfig", type=Path, default=Path("localcloud.kubeconfig"))
    parser.add_argument(
        "--no-tls", action="store_true", help="plain HTTP (kubectl then sends no token)"
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
