"""Run daiku's services as separate processes and wait until each one serves.

`daiku up` starts localcloud, the actuator and the scheduler the way a user would: as their own
processes talking over loopback. Each prints a line containing `ready` once it serves; the
supervisor waits for that line (with a bound), keeps draining the process's output into a log
file so a chatty child never blocks on a full pipe, and stops it with SIGTERM (then SIGKILL).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

READY_MARKER = "ready"
DEFAULT_READY_TIMEOUT_SECONDS = 60.0
DEFAULT_STOP_TIMEOUT_SECONDS = 10.0


class ProcessFailedError(RuntimeError):
    """A service exited, or did not print its ready line in time."""


@dataclass
class ManagedProcess:
    """A running service process and the line it printed when it became ready."""

    name: str
    process: asyncio.subprocess.Process
    ready_line: str
    log_path: Path
    _drain: asyncio.Task[None] | None = field(default=None, repr=False)
    # Every stdout line up to and including the ready line (endpoints are often printed first).
    startup_lines: tuple[str, ...] = ()

    def ready_field(self, key: str) -> str:
        """A `key=value` field printed up to the ready line, e.g. `ec2_endpoint_url`."""
        for line in (self.ready_line, *self.startup_lines):
            for token in line.split():
                name, _, value = token.partition("=")
                if name == key and value:
                    return value
        raise ProcessFailedError(
            f"{self.name}: printed no {key}= before ready: {self.ready_line!r}"
        )

    def ready_address(self) -> str:
        """The token after the word `ready` (`ready 127.0.0.1:50051` -> `127.0.0.1:50051`)."""
        tokens = self.ready_line.split()
        index = tokens.index(READY_MARKER)
        if index + 1 >= len(tokens):
            raise ProcessFailedError(f"{self.name}: no address after ready: {self.ready_line!r}")
        return tokens[index + 1]

    async def stop(self, timeout_seconds: float = DEFAULT_STOP_TIMEOUT_SECONDS) -> int:
        """SIGTERM, wait, SIGKILL if it will not go; returns the exit code."""
        if self.process.returncode is None:
            self.process.terminate()
            try:
                async with asyncio.timeout(timeout_seconds):  # not wait_for: see bpo-42130
                    await self.process.wait()
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        if self._drain is not None:
            await self._drain
        return self.process.returncode if self.process.returncode is not None else -1


def _open_log(path: Path) -> IO[str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("w", encoding="utf-8")


async def _copy_lines(stream: asyncio.StreamReader, sink: IO[str]) -> None:
    while line := await stream.readline():
        sink.write(line.decode(errors="replace"))
        sink.flush()


async def start_module(
    name: str,
    module: str,
    args: Sequence[str],
    log_dir: Path,
    *,
    env: Mapping[str, str] | None = None,
    ready_timeout_seconds: float = DEFAULT_READY_TIMEOUT_SECONDS,
) -> ManagedProcess:
    """Start `python -m module args…` and return once it prints its ready line.

    Its stdout and stderr go to `<log_dir>/<name>.log`. Raises ProcessFailedError, with the
    tail of that log, if the process exits or stays silent past the timeout.
    """
    log_path = log_dir / f"{name}.log"
    log_file = await asyncio.to_thread(_open_log, log_path)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=log_file,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )
    assert process.stdout is not None
    startup_lines: list[str] = []
    try:
        # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that
        # arrives as the line does (bpo-42130), and the orphan clean-up below would not run.
        async with asyncio.timeout(ready_timeout_seconds):
            ready_line = await _wait_for_ready(process.stdout, log_file, startup_lines)
    except asyncio.CancelledError:
        # The caller gave up (e.g. another part of the stack failed): leave no orphan behind.
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        log_file.close()
        raise
    except (TimeoutError, ProcessFailedError) as error:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        log_file.close()
        raise ProcessFailedError(
            f"{name} did not become ready ({error or 'timed out'}); its log ends:\n"
            + _tail(log_path)
        ) from error
    drain = asyncio.create_task(_drain_and_close(process.stdout, log_file))
    return ManagedProcess(name, process, ready_line, log_path, drain, tuple(startup_lines))


async def _wait_for_ready(stream: asyncio.StreamReader, sink: IO[str], seen: list[str]) -> str:
    while raw := await stream.readline():
        line = raw.decode(errors="replace")
        sink.write(line)
        sink.flush()
        seen.append(line.strip())
        if READY_MARKER in line.split():
            return line.strip()
    raise ProcessFailedError("exited before it was ready")


async def _drain_and_close(stream: asyncio.StreamReader, sink: IO[str]) -> None:
    try:
        await _copy_lines(stream, sink)
    finally:
        sink.close()


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8").splitlines()[-lines:])
    except OSError:
        return "(no log)"
