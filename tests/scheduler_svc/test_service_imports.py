"""`python -m scheduler_svc` leaves rich out: structlog imports it when it is installed (daiku's
CLI needs it) for the console renderer's tracebacks, 52 modules and ~3 MB of resident memory
the service never uses (decision 0010)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# `python -m scheduler_svc --help`, in-process so that sys.modules can be read afterwards.
RUN_AS_PROGRAM = """
import runpy, sys
sys.argv = ["scheduler_svc", "--help"]
try:
    runpy.run_module("scheduler_svc", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
loaded = sorted(m for m in sys.modules if sys.modules[m] is not None)
print("structlog" in loaded, [m for m in loaded if m == "rich" or m.startswith("rich.")])
"""


def test_the_service_does_not_import_rich() -> None:
    result = subprocess.run(
        [sys.executable, "-c", RUN_AS_PROGRAM], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip().splitlines()[-1] == "True []"


def test_the_service_still_logs_to_a_console_without_rich() -> None:
    """structlog's console renderer (format console, or auto on a TTY) works without rich: it
    prints plain tracebacks."""
    code = RUN_AS_PROGRAM + (
        "import structlog\n"
        "from scheduler_svc.__main__ import configure_logging\n"
        "configure_logging('info', 'console')\n"
        "try:\n"
        "    raise ValueError('boom')\n"
        "except ValueError:\n"
        "    structlog.get_logger().exception('failed')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert "failed" in result.stderr
    assert "ValueError: boom" in result.stderr
