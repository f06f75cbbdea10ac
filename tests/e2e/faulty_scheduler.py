"""`python -m tests.e2e.faulty_scheduler [scheduler flags]`: the real scheduler process
(`scheduler_svc.__main__.main`) with one fault injected: the provisioner's first batch window
raises, as a bug outside the per-round `try` would. The crash e2e test runs it to see what
Kubernetes would see: the process exits 1 and its Lease is free for a standby."""

from __future__ import annotations

import sys

from scheduler_svc import __main__ as scheduler_main
from scheduler_svc.provisioning.batcher import Batcher, BatchWindow

INJECTED = "injected fault: the batch window broke"


async def _broken_wait(self: Batcher) -> BatchWindow:
    # Waits for a real batch first, so the fault comes from inside a leader that was working.
    await _real_wait(self)
    raise KeyError(INJECTED)


_real_wait = Batcher.wait

if __name__ == "__main__":
    Batcher.wait = _broken_wait  # type: ignore[method-assign]
    sys.exit(scheduler_main.main(sys.argv[1:]))
