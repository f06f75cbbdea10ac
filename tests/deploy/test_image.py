"""The service image, built by `make test-image` (buildah, chroot isolation): both services start
from it, provision pods to Ready against a localcloud on the host and remove the nodes again,
with no traceback, no write outside /tmp and nothing but the locked runtime packages inside.

Skipped unless DAIKU_TEST_IMAGE names the image (`make test-image` sets it)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
import pytest_asyncio
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc  # type: ignore[import-untyped]

from localcloud.cluster import LocalCloud
from tests.e2e.conftest import free_port, pause_pod_spec
from tests.polling import until

ROOT = Path(__file__).resolve().parents[2]
IMAGE = os.environ.get("DAIKU_TEST_IMAGE", "")
BUILDAH = shutil.which("buildah") or "buildah"
UV = shutil.which("uv") or str(ROOT / ".tools" / "bin" / "uv")
# Where the test's kubeconfig and token appear inside the container.
SHARED = "/etc/daiku-test"

pytestmark = pytest.mark.skipif(
    not IMAGE, reason="make test-image builds the image and sets DAIKU_TEST_IMAGE"
)


def buildah(*args: str) -> str:
    result = subprocess.run([BUILDAH, *args], capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"buildah {' '.join(args)}: {result.stderr}"
    return result.stdout


def run_in(container: str, *command: str, volume: str | None = None) -> list[str]:
    """`buildah run` as the image runs it in production: chroot isolation, host network,
    the image's own user."""
    mounts = ["--volume", f"{volume}:{SHARED}:ro"] if volume else []
    return [
        BUILDAH,
        "run",
        "--isolation",
        "chroot",
        "--network",
        "host",
        *mounts,
        container,
        "--",
        *command,
    ]


@pytest.fixture(scope="module")
def container() -> Iterator[str]:
    """A working container of the image, removed afterwards."""
    name = buildah("from", "--pull-never", IMAGE).strip()
    yield name
    buildah("rm", name)


@pytest.mark.parametrize("service", ["scheduler_svc", "actuator_svc"])
def test_each_service_prints_its_help_from_the_image(container: str, service: str) -> None:
    """`python -m <service> --help` exits 0 with its usage inside the image."""
    result = subprocess.run(
        run_in(container, "python", "-m", service, "--help"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: python -m {service}"), result.stdout[:200]


def test_the_image_is_at_most_320_mb_non_root_and_labelled() -> None:
    """Its layers add up to at most 320 MB (uncompressed, as `docker images` counts; `make
    image` prints the size; 250 MB before the scheduler's HiGHS and the numpy it brings, about
    60 MB, became runtime dependencies), it runs as UID 65532, and it carries the OCI source,
    version and licenses labels."""
    inspected = json.loads(buildah("inspect", "--type", "image", IMAGE))
    size_bytes = sum(layer["size"] for layer in json.loads(inspected["Manifest"])["layers"])
    assert size_bytes <= 320e6, f"{size_bytes / 1e6:.1f} MB"
    config = inspected["OCIv1"]["config"]
    assert config["User"] == "65532:65532"
    labels = config["Labels"]
    assert labels["org.opencontainers.image.source"].startswith("https://github.com/")
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", labels["org.opencontainers.image.version"])


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_image_holds_only_the_locked_runtime_packages(container: str) -> None:
    """The image's distributions are exactly uv.lock's runtime closure (no dev group, no moto):
    no pytest, no moto, no linters; and localcloud and the CLI are not importable."""
    runtime = subprocess.run(
        [UV, "export", "--frozen", "--no-default-groups", "--no-emit-project", "--no-hashes"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    locked = {_normalized(line.split("==")[0]) for line in runtime.splitlines() if "==" in line}
    listing = subprocess.run(
        run_in(
            container,
            "python",
            "-c",
            "import importlib.metadata as m, importlib.util as u, json; print(json.dumps({"
            "'dists': [d.metadata['Name'] for d in m.distributions()],"
            "'modules': {n: u.find_spec(n) is not None for n in "
            "('localcloud', 'daiku_cli', 'moto', 'pytest', 'scheduler_svc', 'actuator_svc')}}))",
        ),
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(listing.stdout)
    installed = {_normalized(name) for name in found["dists"]}
    assert installed == locked, {
        "not in the runtime lock": sorted(installed - locked),
        "missing": sorted(locked - installed),
    }
    assert found["modules"] == {
        "localcloud": False,
        "daiku_cli": False,
        "moto": False,
        "pytest": False,
        "scheduler_svc": True,
        "actuator_svc": True,
    }


class ImageProcess:
    """One service started from the image (`buildah run`), its output in a log file."""

    def __init__(self, name: str, log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        self.process: asyncio.subprocess.Process | None = None

    async def start(self, command: list[str]) -> None:
        with self.log_path.open("wb") as log:
            self.process = await asyncio.create_subprocess_exec(
                *command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    async def stop(self) -> None:
        """SIGTERM to the whole process group (buildah and the service under it), then wait."""
        if self.process is None or self.process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(self.process.wait(), timeout=20)
        except TimeoutError:
            os.killpg(self.process.pid, signal.SIGKILL)
            await self.process.wait()


def _env_flags(env: dict[str, str]) -> list[str]:
    """`--env NAME=VALUE` flags setting these variables inside `buildah run`."""
    return [flag for name, value in env.items() for flag in ("--env", f"{name}={value}")]


@pytest_asyncio.fixture
async def cloud(tmp_path: Path) -> AsyncIterator[tuple[LocalCloud, Path]]:
    """localcloud on the host (boot 0), with daiku's CRDs; its kubeconfig and a token in a
    directory the image's non-root user can read."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    async with LocalCloud(boot_seconds=0, kubeconfig_path=shared / "kubeconfig") as cloud:
        (shared / "kubeconfig").chmod(0o644)
        (shared / "token").write_text(secrets.token_hex(16))
        (shared / "token").chmod(0o644)
        for crd in sorted((ROOT / "deploy" / "crds").glob("*.yaml")):
            await cloud.kube.store.create(
                "customresourcedefinitions", yaml.safe_load(crd.read_text())
            )
        yield cloud, shared


async def _actuator_serving(port: int) -> bool:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            response = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=2
            )
        except grpc.aio.AioRpcError:
            return False
    return bool(response.status == health_pb2.HealthCheckResponse.SERVING)


async def _http_ok(url: str) -> bool:
    try:
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            return response.status == 200
    except aiohttp.ClientError:
        return False


def _demo(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(
        (ROOT / "deploy" / "examples" / "demo" / name).read_text()
    )
    return loaded


def _running_instances(local: LocalCloud) -> list[str]:
    import boto3

    client = boto3.client(
        "ec2",
        endpoint_url=local.ec2.endpoint_url,
        region_name=local.region,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    reservations = client.describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    )["Reservations"]
    return [i["InstanceId"] for r in reservations for i in r["Instances"]]


def _written_outside_tmp(root: Path, marker: Path) -> list[str]:
    """Files in the container's root filesystem changed after `marker`, except /tmp and the
    mount points buildah manages (what a read-only root filesystem would have refused)."""
    skip = {"tmp", "proc", "sys", "dev", "run", SHARED.strip("/")}
    managed = {"etc/hosts", "etc/resolv.conf", "etc/hostname"}
    changed = []
    for top in root.iterdir():
        if top.name in skip or str(top.relative_to(root)) in skip:
            continue
        paths = [top, *top.rglob("*")] if top.is_dir() and not top.is_symlink() else [top]
        for path in paths:
            relative = str(path.relative_to(root))
            if relative in managed or relative.startswith(SHARED.strip("/")):
                continue
            # Files only: buildah itself adds mount points (a directory's mtime then moves).
            if path.is_dir() and not path.is_symlink():
                continue
            if path.lstat().st_mtime > marker.stat().st_mtime:
                changed.append(relative)
    return changed


@pytest.mark.timeout(300)
async def test_services_from_the_image_provision_pods_and_remove_their_nodes(
    container: str, cloud: tuple[LocalCloud, Path], tmp_path: Path
) -> None:
    """The actuator and the scheduler, run from the image as its non-root user with the host
    network, bring five pending pods to Ready on new nodes and remove the nodes once the pods
    are gone; their logs hold no traceback and they write nothing outside /tmp."""
    local, shared = cloud
    store = local.kube.store
    grpc_port, health_port, actuator_metrics = free_port(), free_port(), free_port()
    scheduler_health, scheduler_metrics = free_port(), free_port()
    root = Path(buildah("mount", container).strip())
    marker = tmp_path / "marker"
    marker.write_text("")
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": local.region,
    }
    actuator = ImageProcess("actuator", tmp_path / "actuator.log")
    scheduler = ImageProcess("scheduler", tmp_path / "scheduler.log")
    buildah_run = [BUILDAH, "run", "--isolation", "chroot", "--network", "host"]
    volume = ["--volume", f"{shared}:{SHARED}:ro"]
    try:
        await actuator.start(
            [
                *buildah_run,
                *volume,
                *_env_flags(env),
                container,
                "--",
                "python",
                "-m",
                "actuator_svc",
                f"--listen=127.0.0.1:{grpc_port}",
                f"--health-port={health_port}",
                f"--metrics-port={actuator_metrics}",
                f"--cluster-name={local.cluster_name}",
                f"--region={local.region}",
                f"--ec2-endpoint-url={local.ec2.endpoint_url}",
                f"--pricing-endpoint-url={local.ec2.endpoint_url}",
                f"--auth-token-file={SHARED}/token",
            ]
        )
        await until(
            lambda: _actuator_serving(health_port), timeout_seconds=120, interval_seconds=0.5
        )
        await scheduler.start(
            [
                *buildah_run,
                *volume,
                container,
                "--",
                "python",
                "-m",
                "scheduler_svc",
                f"--kubeconfig={SHARED}/kubeconfig",
                f"--cluster-name={local.cluster_name}",
                f"--actuator-address=127.0.0.1:{grpc_port}",
                f"--actuator-token-file={SHARED}/token",
                "--no-leader-elect",
                f"--metrics-port={scheduler_metrics}",
                f"--health-port={scheduler_health}",
                "--log-format=json",
            ]
        )
        await until(
            lambda: _http_ok(f"http://127.0.0.1:{scheduler_health}/readyz"),
            timeout_seconds=60,
            interval_seconds=0.5,
        )

        pool = _demo("nodepool.yaml")
        # 0s: a node whose pods the default-scheduler has not bound yet is nominated, not empty
        # (tests/e2e/test_nomination.py); the clean-up below waits for the empty nodes to go.
        pool["spec"]["disruption"] = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s"}
        await store.create("ec2nodeclasses", _demo("ec2nodeclass.yaml"))
        await store.create("nodepools", pool)
        names = [f"smoke-{i}" for i in range(5)]
        for name in names:
            await store.create(
                "pods",
                {
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": pause_pod_spec("1", "1Gi"),
                },
                "default",
            )

        async def all_ready() -> bool:
            pods = (await store.list("pods", "default")).items
            ready = [
                p
                for p in pods
                if p["metadata"]["name"] in names
                and any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in p.get("status", {}).get("conditions", [])
                )
            ]
            return len(ready) == len(names)

        await until(all_ready, timeout_seconds=90, interval_seconds=0.5)
        assert (await store.list("nodeclaims")).items, "pods ran without a NodeClaim"

        for name in names:
            await store.delete("pods", name, "default", grace_period_seconds=0)

        async def nodes_gone() -> bool:
            return (
                not (await store.list("nodeclaims")).items and not (await store.list("nodes")).items
            )

        await until(nodes_gone, timeout_seconds=120, interval_seconds=0.5)
        assert _running_instances(local) == []
    except AssertionError as failure:
        tails = "\n".join(f"--- {p.name} log:\n{p.log()[-3000:]}" for p in (actuator, scheduler))
        raise AssertionError(f"{failure}\n{tails}") from failure
    finally:
        await scheduler.stop()
        await actuator.stop()
        logs = {process.name: process.log() for process in (actuator, scheduler)}
        written = _written_outside_tmp(root, marker)
        buildah("umount", container)
    for name, log in logs.items():
        assert "Traceback" not in log, f"{name} log:\n{log[-4000:]}"
    assert written == []
