"""docker-compose.yml is a valid compose file that starts the local stack in order with health
checks; the Dockerfile builds one non-root image from the lock; the protos pass buf lint."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKER_COMPOSE = shutil.which("docker-compose")
BUF = ROOT / ".tools" / "buf" / "node_modules" / ".bin" / "buf"


def _compose() -> dict[str, Any]:
    compose: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return compose


@pytest.mark.skipif(DOCKER_COMPOSE is None, reason="docker-compose not installed (.ci/run adds it)")
@pytest.mark.parametrize("profile", [None, "kwok"])
def test_docker_compose_config_is_valid(profile: str | None) -> None:
    """`docker-compose config -q` accepts the file, with and without the kwok profile."""
    assert DOCKER_COMPOSE is not None
    command = [DOCKER_COMPOSE, "-f", str(ROOT / "docker-compose.yml")]
    if profile:
        command += ["--profile", profile]
    result = subprocess.run(
        [*command, "config", "-q"], capture_output=True, text=True, check=False, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr


def test_compose_runs_the_stack_in_order() -> None:
    """localcloud, actuator and scheduler run daiku's entrypoints with health checks, each
    starting only once what it needs is healthy; the demo waits for the scheduler."""
    services = _compose()["services"]
    commands = {name: services[name]["command"][:3] for name in ("localcloud", "actuator")}
    assert commands == {
        "localcloud": ["python", "-m", "localcloud"],
        "actuator": ["python", "-m", "actuator_svc"],
    }
    assert services["scheduler"]["command"][:3] == ["python", "-m", "scheduler_svc"]
    for name in ("localcloud", "actuator", "scheduler", "kwok"):
        assert "test" in services[name]["healthcheck"], name
    assert services["actuator"]["depends_on"] == {"localcloud": {"condition": "service_healthy"}}
    assert services["scheduler"]["depends_on"] == {
        "localcloud": {"condition": "service_healthy"},
        "actuator": {"condition": "service_healthy"},
    }
    assert services["demo"]["depends_on"] == {"scheduler": {"condition": "service_healthy"}}
    assert {name for name, s in services.items() if "kwok" in s.get("profiles", [])} == {
        "kwok",
        "kwok-demo",
        "scheduler-kwok",
    }


def test_compose_keeps_everything_on_loopback() -> None:
    """localcloud serves on loopback, so the actuator, the schedulers and the demo share its
    network namespace; the actuator listens on loopback and its gRPC port stays unpublished."""
    services = _compose()["services"]
    for name in ("actuator", "scheduler", "scheduler-kwok", "demo"):
        assert services[name]["network_mode"] == "service:localcloud", name
    assert "--listen=127.0.0.1:50051" in services["actuator"]["command"]
    for name in ("scheduler", "scheduler-kwok"):
        assert "--actuator-address=127.0.0.1:50051" in services[name]["command"]
    published = [port for s in services.values() for port in s.get("ports", [])]
    assert all(port.startswith("127.0.0.1:") for port in published)
    assert not any(port.endswith(":50051") for port in published)


def _dockerfile_instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "")
        for line in lines
        if line and not line.startswith("#")
    ]


def _dockerfile_stages() -> dict[str, list[tuple[str, str]]]:
    """Each stage's instructions by stage name (`FROM base AS name`), in file order."""
    stages: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] = []
    for op, arg in _dockerfile_instructions():
        if op == "FROM":
            current = stages.setdefault(arg.split()[-1], [])
        current.append((op, arg))
    return stages


def test_dockerfile_is_multistage_locked_and_non_root() -> None:
    """The Dockerfile takes its base as PYTHON_IMAGE (python 3.11 slim by default), installs
    with `uv sync --frozen` without the dev and cli groups (the cli extra only for the
    localcloud stage), and its last stage, the service image, runs as UID 65532 with the OCI
    source, version and licenses labels."""
    instructions = _dockerfile_instructions()
    base = next(arg for op, arg in instructions if op == "ARG" and arg.startswith("PYTHON_IMAGE"))
    assert re.fullmatch(r"PYTHON_IMAGE=python:3\.11-slim(-\w+)?", base)
    stages = _dockerfile_stages()
    assert list(stages)[-1] == "service"
    for name, stage in stages.items():
        for op, arg in stage:
            if op == "RUN" and "uv sync" in arg:
                assert "--frozen" in arg
                assert "--no-dev" in arg
                assert "--no-default-groups" in arg
                assert ("--extra cli" in arg) == (name == "localcloud-build"), name
    for name in ("service", "localcloud"):
        users = [arg for op, arg in stages[name] if op == "USER"]
        assert users == ["65532:65532"], name
        # Set after the last RUN and COPY, so it is what the container runs as.
        ops = [op for op, _ in stages[name]]
        assert ops.index("USER") > max(i for i, op in enumerate(ops) if op in {"RUN", "COPY"})
    labels = " ".join(arg for op, arg in stages["service"] if op == "LABEL")
    for key in ("source", "version", "licenses"):
        assert f"org.opencontainers.image.{key}=" in labels, key


def test_dockerignore_lets_every_copied_path_in() -> None:
    """Each path the Dockerfile COPYs from the context is re-included by .dockerignore."""
    allowed = {
        line.removeprefix("!").rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    for op, arg in _dockerfile_instructions():
        if op == "COPY" and not arg.startswith("--from"):
            sources = arg.split()[:-1]
            for source in sources:
                assert source.rstrip("/") in allowed, source
                assert (ROOT / source).exists(), source


@pytest.mark.skipif(not BUF.exists(), reason="buf not installed (.ci/run adds it from npm)")
def test_protos_pass_buf_lint() -> None:
    """`buf lint` with protos/buf.yaml reports nothing."""
    result = subprocess.run(
        [str(BUF), "lint"], capture_output=True, text=True, check=False, cwd=ROOT / "protos"
    )
    assert result.returncode == 0, result.stdout + result.stderr
