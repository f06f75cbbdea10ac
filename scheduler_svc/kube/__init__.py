"""Everything that talks to the Kubernetes API: client, list/watch loop, resources, writes.

Import the submodules themselves (``scheduler_svc.kube.client``, ``.watch``, ``.convert`` …):
this package re-exports nothing, so importing a pure one (``convert``, ``resources``,
``events``) does not import aiohttp and structlog, which only the client, the watch loop and
the writers need (`daiku plan` reads manifests without them).
"""
