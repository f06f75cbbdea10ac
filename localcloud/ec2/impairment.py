"""Impaired instances: EC2 status checks that fail, as a hardware, kernel or network failure
makes them (the instance keeps running; DescribeInstanceStatus says `impaired`).

`install()` (once per process) makes moto's `Instance.instance_status`/`system_status` read a
flag `mark(instance, impaired)` sets: impaired -> `Status: impaired` with the `reachability`
check `failed`, else moto's own answer. localcloud's kubelet of an impaired instance stops
posting node status (`localcloud.kube.controllers.kubelets`).
"""

from __future__ import annotations

import threading
from typing import Any, Final

IMPAIRED_ATTRIBUTE: Final = "localcloud_impaired"
_RUNNING: Final = 16


class _Installed:
    lock = threading.Lock()
    done = False


def is_impaired(instance: Any) -> bool:
    """Whether `mark` flagged the moto instance impaired."""
    return bool(getattr(instance, IMPAIRED_ATTRIBUTE, False))


def mark(instance: Any, *, impaired: bool) -> None:
    """Flag (or clear) a moto instance's status checks as failed."""
    setattr(instance, IMPAIRED_ATTRIBUTE, impaired)


def _impaired_status() -> dict[str, Any]:
    return {"Details": [{"Name": "reachability", "Status": "failed"}], "Status": "impaired"}


def install() -> None:
    """Route moto's status-check properties through the flag (idempotent)."""
    from moto.ec2.models.instances import Instance

    with _Installed.lock:
        if _Installed.done:
            return
        _Installed.done = True
        for name in ("instance_status", "system_status"):
            original = getattr(Instance, name)

            def status(self: Any, _original: Any = original) -> dict[str, Any]:
                if is_impaired(self) and self.state_code == _RUNNING:
                    return _impaired_status()
                result: dict[str, Any] = _original.fget(self)
                return result

            setattr(Instance, name, property(status))
