"""Build a kubernetes_asyncio ApiClient from a kubeconfig file or the pod's service account.

The ApiClient is the one connection pool the service shares: watches hold one connection each,
writers borrow the rest. Close it with `await client.close()` (or `async with client:`).
"""

from __future__ import annotations

from pathlib import Path

from kubernetes_asyncio import client, config


async def api_client_from_kubeconfig(
    path: Path | str, *, context: str | None = None
) -> client.ApiClient:
    """An ApiClient for the cluster of `context` (the current one by default) in the kubeconfig.

    Raises `kubernetes_asyncio.config.ConfigException` when the file or context is invalid.
    """
    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=str(path),
        context=context,
        client_configuration=configuration,
        persist_config=False,
    )
    return client.ApiClient(configuration=configuration)


def api_client_in_cluster() -> client.ApiClient:
    """An ApiClient from the service account mounted into the pod (token refreshed on rotation).

    Raises `kubernetes_asyncio.config.ConfigException` outside a pod.
    """
    configuration = client.Configuration()
    # kubernetes_asyncio's config loaders carry no type hints.
    config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    return client.ApiClient(configuration=configuration)


async def new_api_client(
    *, kubeconfig: Path | str | None, in_cluster: bool, context: str | None = None
) -> client.ApiClient:
    """The ApiClient the settings ask for: in-cluster config, else the given kubeconfig."""
    if in_cluster:
        return api_client_in_cluster()
    if kubeconfig is None:
        raise ValueError("either in_cluster or a kubeconfig path is required")
    return await api_client_from_kubeconfig(kubeconfig, context=context)
