"""`python -m scheduler_svc [flags]`: run one scheduler replica until SIGTERM/SIGINT.

Prints one line containing `ready` (with the role and the bound health/metrics ports) once the
cluster is mirrored and the first leader-election attempt is done. Flags and SCHEDULER_* env:
`--help`. Exit code 2 on a bad setting, 1 when a controller crashed (logged with its exception;
Kubernetes restarts the pod), 0 on a clean shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

import structlog

from scheduler_svc.service import ControllerCrashedError, SchedulerService
from scheduler_svc.settings import SchedulerSettings, SettingsError, load_settings


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
    try:
        asyncio.run(_main(settings))
    except ControllerCrashedError:
        return 1  # already logged with the exception by the service's crash watch
    return 0


if __name__ == "__main__":
    sys.exit(main())
