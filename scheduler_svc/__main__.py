"""`python -m scheduler_svc [flags]`: run one scheduler replica until SIGTERM/SIGINT.

Prints one line containing `ready` (with the role and the bound health/metrics ports) once the
cluster is mirrored and the first leader-election attempt is done. Flags and SCHEDULER_* env:
`--help`. Exit code 2 on a bad setting, 1 when a controller crashed (logged with its exception;
Kubernetes restarts the pod), 0 on a clean shutdown.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    # structlog imports rich, when it is installed (daiku's CLI needs it), for the console
    # renderer's tracebacks: 52 modules, ~3 MB of resident memory the service has no use for
    # (it logs JSON lines; on a TTY the console renderer prints plain tracebacks instead). A
    # None entry makes `import rich` raise ImportError, which structlog expects.
    sys.modules.setdefault("rich", None)  # type: ignore[arg-type]

import asyncio
import gc
import logging
import signal

import structlog

from scheduler_svc.service import ControllerCrashedError, SchedulerService
from scheduler_svc.settings import SchedulerSettings, SettingsError, load_settings

# Python's cyclic collector, tuned for a process holding a mirror of the cluster (millions of
# objects at 10k pods) whose watch events and rounds allocate thousands more that reference
# counting frees. Defaults (700, 10, 10) collect the young generation every 700 allocations
# and the whole heap every ~70,000: in bench.reaction --rss that took 6 of the scheduler's
# ~27 s of CPU. Young collections every 10,000 and full ones at most every ~300,000 cut
# the ramp's scheduler CPU from 24.3 s to 19.3 and 21.7 s (two runs beside one without, same
# load), its RSS 234 MB then 227 and 234 MB.
# Rarer full collections let cyclic garbage pile up: (50,000, 10, 10), one full collection per
# ~5 M allocations, grew the RSS past 300 MB (decision 0010).
GC_THRESHOLDS = (10_000, 10, 3)


def tune_garbage_collector() -> None:
    """The thresholds above, and the start-up's objects (modules, classes: ~60k, never
    garbage) frozen so that full collections stop scanning them."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def configure_logging(level: str, log_format: str) -> None:
    """structlog: JSON lines (console renderer on a TTY with format auto), on stderr."""
    use_console = log_format == "console" or (log_format == "auto" and sys.stderr.isatty())
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer() if use_console else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )


async def _main(settings: SchedulerSettings) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    def announce(line: str) -> None:
        print(line, flush=True)  # noqa: T201 - the ready line is the CLI's contract

    await SchedulerService(settings).run(stop, on_ready=announce)


def main(argv: list[str] | None = None) -> int:
    try:
        settings = load_settings(sys.argv[1:] if argv is None else argv)
    except SettingsError as error:
        print(f"python -m scheduler_svc: {error}", file=sys.stderr)  # noqa: T201
        return 2
    configure_logging(settings.log_level, settings.log_format)
    tune_garbage_collector()
    try:
        asyncio.run(_main(settings))
    except ControllerCrashedError:
        return 1  # already logged with the exception by the service's crash watch
    return 0


if __name__ == "__main__":
    sys.exit(main())
