"""Conformance through kopf (issue 16): a real operator process against localcloud.

kopf lists and watches with bookmarks, adds its finalizer and progress annotations with
JSON merge patches, writes handler results into `status` through the status subresource,
posts core/v1 Events about each handler and removes its finalizer on deletion — the
API a Python operator leans on.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from localcloud.kube.errors import NotFound
from localcloud.kube.server import KubeApiServer
from tests.polling import until

GREETINGS_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "greetings.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"kind": "Greeting", "plural": "greetings", "singular": "greeting"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {"to": {"type": "string"}},
                            },
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        },
                    }
                },
            }
        ],
    },
}

# The operator: on create it writes a ConfigMap and returns a message (kopf stores it in
# status.greet); on delete it removes the ConfigMap (kopf holds the Greeting with its
# finalizer until then).
HANDLERS = """
import kopf
import kubernetes

@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_):
    settings.watching.server_timeout = 5
    settings.persistence.finalizer = "example.com/greeter"
    settings.posting.loggers = True  # handler logs become Events too (off by default)

@kopf.on.create("example.com", "v1", "greetings")
def greet(body, spec, name, namespace, logger, **_):
    kubernetes.config.load_kube_config()
    with kubernetes.client.ApiClient() as api:
        kubernetes.client.CoreV1Api(api).create_namespaced_config_map(
            namespace,
            {"metadata": {"name": f"greeting-{name}"}, "data": {"text": f"hello {spec['to']}"}},
        )
    kopf.info(body, reason="Greeted", message=f"greeted {spec['to']}")
    return {"message": f"hello {spec['to']}"}

@kopf.on.delete("example.com", "v1", "greetings")
def forget(name, namespace, **_):
    kubernetes.config.load_kube_config()
    with kubernetes.client.ApiClient() as api:
        kubernetes.client.CoreV1Api(api).delete_namespaced_config_map(f"greeting-{name}", namespace)
"""


@pytest.fixture
async def operator(
    kube: KubeApiServer, tmp_path: Path
) -> AsyncIterator[asyncio.subprocess.Process]:
    """`kopf run` as a subprocess watching the default namespace, stopped with SIGTERM (kopf's
    graceful exit); its log is checked for errors after the test."""
    await kube.store.create("customresourcedefinitions", GREETINGS_CRD)
    handlers = tmp_path / "handlers.py"
    handlers.write_text(HANDLERS)
    log = tmp_path / "kopf.log"
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "kubeconfig"), "HOME": str(tmp_path)}
    with log.open("wb") as output:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "kopf",
            "run",
            "--standalone",
            "--namespace=default",
            "--verbose",
            str(handlers),
            env=env,
            stdout=output,
            stderr=asyncio.subprocess.STDOUT,
        )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), 20)
            except TimeoutError:
                process.kill()
                await process.wait()
    text = log.read_text()
    problems = [
        line
        for line in text.splitlines()
        if "[ERROR" in line or "[WARNING" in line or "Traceback" in line or "APIClientError" in line
    ]
    assert not problems, "\n".join(problems[:20])


async def test_kopf_operator_handles_create_and_delete(
    kube: KubeApiServer, operator: asyncio.subprocess.Process
) -> None:
    """Creating a Greeting makes the operator write its ConfigMap, its finalizer, its status
    and an Event; deleting it runs the delete handler and the finalizer lets it go."""
    greeting = {
        "apiVersion": "example.com/v1",
        "kind": "Greeting",
        "metadata": {"name": "hi"},
        "spec": {"to": "world"},
    }
    await kube.store.create("greetings.example.com", greeting, "default")

    async def config_map() -> dict[str, Any] | None:
        try:
            return await kube.store.get("configmaps", "greeting-hi", "default")
        except NotFound:
            return None

    async def handled() -> dict[str, Any] | None:
        obj = await kube.store.get("greetings.example.com", "hi", "default")
        return obj if obj.get("status", {}).get("greet") else None

    made = await until(config_map, timeout_seconds=30)
    assert made["data"] == {"text": "hello world"}
    greeted = await until(handled, timeout_seconds=30)
    assert greeted["status"]["greet"] == {"message": "hello world"}
    assert greeted["metadata"]["finalizers"] == ["example.com/greeter"]
    assert "kopf.zalando.org/last-handled-configuration" in greeted["metadata"]["annotations"]

    async def events_about_hi() -> list[str]:
        """kopf's Events about the Greeting, once the last of them (posted in the
        background) has arrived."""
        events = (await kube.store.list("events", "default")).items
        messages = [
            e["message"]
            for e in events
            if e["involvedObject"].get("name") == "hi"
            and e["involvedObject"].get("kind") == "Greeting"
        ]
        return messages if "Handler 'greet' succeeded." in messages else []

    messages = await until(events_about_hi, timeout_seconds=30)
    assert "greeted world" in messages
    assert "Handler 'greet' succeeded." in messages

    await kube.store.delete("greetings.example.com", "hi", "default")

    async def gone() -> bool:
        try:
            await kube.store.get("greetings.example.com", "hi", "default")
        except NotFound:
            return await config_map() is None
        return False

    await until(gone, timeout_seconds=30)
    assert operator.returncode is None  # still running: nothing made it give up
