"""`daiku up`: daiku's main job on embedded defaults, with no cloud account and no cluster.

Starts localcloud (a Kubernetes API server with its control plane, and an EC2 emulator), the
actuator and the scheduler as separate processes talking over loopback; applies daiku's CRDs,
a default EC2NodeClass and NodePool and the Deployment `inflate` (500m / 512Mi pods); then plays
the default scenario (inflate scaled 0 -> 5 -> 20, waiting until settled after each scale) or
the one given with `--scenario` (format: docs/scenario.md), showing progress as it goes.

Without `--keep-running` it stops everything after the last step and prints a summary (with
the default scenario, about 30 s on a laptop). Exit status: 0 when every step ran (and, with
`--exit-when-settled` or the default scenario, the cluster settled), 1 when a step failed or
the cluster did not settle (the reason is printed), 2 on a bad scenario file, 3 when a process
of the stack could not start.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer

from daiku_cli import exit_codes
from daiku_cli.main import DaikuCommand, app
from daiku_cli.processes import ProcessFailedError
from daiku_cli.scenario import (
    RunRecorder,
    Scenario,
    ScenarioError,
    default_objects,
    default_scenario,
    merge_objects,
    parse_scenario,
)
from daiku_cli.scenario.chart import render_html
from daiku_cli.scenario.progress import summary
from daiku_cli.up_kube import KubeCallError, KubeClient
from daiku_cli.up_runner import (
    Observer,
    ScenarioFailedError,
    apply_objects,
    install_crds,
    run_steps,
)
from daiku_cli.up_stack import (
    SchedulerUnavailableError,
    Stack,
    new_stack,
    price_book,
    start_actuator,
    start_localcloud,
    start_scheduler,
)

DEFAULT_BOOT_SECONDS = 2.0
DEFAULT_SETTLE_TIMEOUT_SECONDS = 120.0


def crd_dir() -> Path:
    """Where daiku's CRDs are: inside an installed wheel (`daiku_cli/crds`, see pyproject's
    force-include), else in the source checkout (`deploy/crds`)."""
    packaged = Path(__file__).resolve().parent / "crds"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[1] / "deploy" / "crds"


EXIT_OK = exit_codes.OK
EXIT_NOT_SETTLED = exit_codes.INCOMPLETE
EXIT_BAD_SCENARIO = exit_codes.BAD_INPUT
EXIT_STACK_FAILED = exit_codes.FAILED
EXIT_INTERRUPTED = exit_codes.INTERRUPTED


@dataclass(frozen=True)
class UpOptions:
    scenario: Scenario
    exit_when_settled: bool
    report_path: Path | None
    keep_running: bool
    boot_seconds: float
    settle_timeout_seconds: float
    cluster_name: str
    work_dir: Path
    with_scheduler: bool = True
    poll_seconds: float = 0.25


def report_text(report: dict[str, Any], path: Path) -> str:
    """The report as `path` wants it: a chart for ``.html``/``.htm``, JSON for anything else."""
    if path.suffix.lower() in {".html", ".htm"}:
        return render_html(report)
    return json.dumps(report, indent=2) + "\n"


def load_scenario(path: Path | None, cluster_name: str) -> Scenario:
    """The default scenario, or the file's objects over the defaults and its steps."""
    if path is None:
        return default_scenario(cluster_name)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ScenarioError(f"{path}: cannot read: {error.strerror}") from error
    parsed = parse_scenario(text, str(path))
    return Scenario(
        objects=merge_objects(default_objects(cluster_name), parsed.objects),
        steps=parsed.steps,
        name=str(path),
    )


class UpRun:
    """One run of `daiku up`: start the stack, play the scenario, report, stop."""

    def __init__(self, options: UpOptions, out: TextIO) -> None:
        self.options = options
        self.out = out
        self.started = time.monotonic()
        self.recorder = RunRecorder()
        self.stack: Stack | None = None
        self.kube: KubeClient | None = None
        self.observer: Observer | None = None
        self._observer_task: asyncio.Task[None] | None = None

    def say(self, line: str) -> None:
        self.out.write(f"[{time.monotonic() - self.started:6.1f}s] {line}\n")
        self.out.flush()

    async def run(self) -> int:
        """The whole run; returns the exit status."""
        status = EXIT_OK
        try:
            await self._start()
            await self._play()
        except ScenarioFailedError as error:
            self.say(f"FAILED: {error}")
            status = EXIT_NOT_SETTLED
        except SchedulerUnavailableError as error:
            self.say(f"the scheduler is not available: {error}")
            status = EXIT_STACK_FAILED
        except ProcessFailedError as error:
            self.say(f"a process of the stack failed: {error}")
            status = EXIT_STACK_FAILED
        except (KubeCallError, OSError) as error:
            self.say(f"the Kubernetes API failed: {error}")
            status = EXIT_STACK_FAILED
        except asyncio.CancelledError:
            self.say("interrupted; stopping")
            status = EXIT_INTERRUPTED
        finally:
            await self._finish(final_poll=status != EXIT_INTERRUPTED)
        return status

    async def _start(self) -> None:
        """localcloud, then (while the actuator and the scheduler start) CRDs and objects."""
        options = self.options
        self.say(f"daiku up: logs and kubeconfig in {options.work_dir}")
        self.say(
            "starting localcloud (Kubernetes API server, control plane, EC2 emulator) "
            "and the actuator"
        )
        stack = self.stack = new_stack(options.work_dir, options.cluster_name)
        actuator_start = asyncio.create_task(start_actuator(stack))
        starting: list[asyncio.Task[None]] = [actuator_start]
        try:
            await start_localcloud(stack, boot_seconds=options.boot_seconds)
            assert stack.localcloud is not None
            self.say(f"localcloud ready: {stack.localcloud.ready_field('kube_url')}")
            kube = self.kube = await KubeClient.from_kubeconfig(stack.kubeconfig)
            await install_crds(kube, crd_dir())
            self.say("CRDs installed (NodePool, EC2NodeClass, NodeClaim)")
            if options.with_scheduler:
                starting.append(asyncio.create_task(start_scheduler(stack)))
            await apply_objects(kube, options.scenario, lambda line: self.say(f"  {line}"))
            await actuator_start
            self.say(f"actuator ready on {stack.actuator_address}")
            prices = await price_book(stack.actuator_address)
            if options.with_scheduler:
                await starting[-1]
                self.say(f"scheduler ready (metrics on 127.0.0.1:{stack.scheduler_metrics_port})")
            else:
                self.say("scheduler NOT started (--without-scheduler): nothing provisions nodes")
        finally:
            for task in starting:
                task.cancel()
            await asyncio.gather(*starting, return_exceptions=True)
        self.observer = Observer(
            kube,
            self.recorder,
            self.out,
            self.started,
            prices=prices,
            poll_seconds=options.poll_seconds,
        )
        await self.observer.poll_once()
        self._observer_task = asyncio.create_task(self.observer.run())

    async def _play(self) -> None:
        """The steps, the final wait, and with --keep-running the wait for Ctrl-C (also after a
        failure, so that the cluster can be inspected; the failure still sets the status)."""
        assert self.kube is not None
        assert self.observer is not None
        assert self.stack is not None
        scenario = self.options.scenario
        self.say(f"running the {scenario.name} scenario ({len(scenario.steps)} steps)")
        failure: ScenarioFailedError | None = None
        try:
            await run_steps(scenario, self.kube, self.observer)
            if self.options.exit_when_settled:
                self.say("last step done; waiting until settled")
                await self.observer.wait_until_settled(
                    time.monotonic(), self.options.settle_timeout_seconds
                )
        except ScenarioFailedError as error:
            if not self.options.keep_running:
                raise
            self.say(f"FAILED: {error}")
            failure = error
        if self.options.keep_running:
            _print_keep_running(self.stack, self.say)
            await _wait_while_alive(self.stack)
        if failure is not None:
            raise failure

    async def _finish(self, *, final_poll: bool) -> None:
        if self._observer_task is not None:
            self._observer_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._observer_task
        if final_poll and self.observer is not None:
            with contextlib.suppress(KubeCallError, OSError, TimeoutError):
                await self.observer.poll_once()
        if self.recorder.last is not None:
            launched = sum(1 for c in self.recorder.claims.values() if c.condition_true("Launched"))
            for line in summary(self.recorder.last, time.monotonic() - self.started, launched):
                self.out.write(line + "\n")
        if self.options.report_path is not None:
            self.options.report_path.write_text(
                report_text(self.recorder.report(), self.options.report_path)
            )
            self.out.write(f"report written to {self.options.report_path}\n")
        if self.kube is not None:
            await self.kube.close()
        if self.stack is not None:
            dead = self.stack.exited()
            codes = await self.stack.stop()
            if dead:
                self.out.write("stopped on its own before the end: " + ", ".join(dead) + "\n")
            self.out.write(f"stopped: {', '.join(f'{n} ({c})' for n, c in codes.items())}\n")
        self.out.flush()


async def run_up(options: UpOptions, out: TextIO) -> int:
    """Run `daiku up` with these options, writing progress to `out`; the exit status."""
    return await UpRun(options, out).run()


def _print_keep_running(stack: Stack, say: Callable[[str], None]) -> None:
    say("the stack keeps running (Ctrl-C stops it). From another terminal:")
    say(f"  export KUBECONFIG={stack.kubeconfig}")
    say("  kubectl get nodes -w")


async def _wait_while_alive(stack: Stack) -> None:
    """Until Ctrl-C (the task is cancelled) or a process of the stack exits."""
    await asyncio.wait(
        [asyncio.create_task(p.process.wait()) for p in stack.processes],
        return_when=asyncio.FIRST_COMPLETED,
    )
    raise ScenarioFailedError("stopped on its own: " + ", ".join(stack.exited()))


def _main_with_signals(options: UpOptions) -> int:
    async def main() -> int:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        assert task is not None
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, task.cancel)
        return await run_up(options, sys.stdout)

    return asyncio.run(main())


@app.command(cls=DaikuCommand)
def up(  # noqa: PLR0917 - Typer maps each command-line option to one parameter
    scenario: Annotated[
        Path | None,
        typer.Option(help="scenario file (multi-document YAML; see docs/scenario.md)"),
    ] = None,
    exit_when_settled: Annotated[
        bool,
        typer.Option(
            "--exit-when-settled",
            help="after the last step, wait until settled (fail if it does not)",
        ),
    ] = False,
    report: Annotated[
        Path | None,
        typer.Option(
            help="write the run's report here: JSON, or a chart if the name ends in .html"
        ),
    ] = None,
    keep_running: Annotated[
        bool,
        typer.Option(
            "--keep-running",
            help="leave the stack up after the scenario (kubectl works against it)",
        ),
    ] = False,
    boot_seconds: Annotated[
        float, typer.Option(help="simulated instance boot time (node NotReady -> Ready)")
    ] = DEFAULT_BOOT_SECONDS,
    settle_timeout: Annotated[
        float, typer.Option(help="seconds --exit-when-settled waits after the last step")
    ] = DEFAULT_SETTLE_TIMEOUT_SECONDS,
    cluster_name: Annotated[str, typer.Option(help="cluster name (tags, discovery)")] = "daiku",
    work_dir: Annotated[
        Path | None, typer.Option(help="where logs and the kubeconfig go (default: a temp dir)")
    ] = None,
    without_scheduler: Annotated[
        bool,
        typer.Option(
            "--without-scheduler",
            help="start everything but the scheduler (to drive the stack with another one)",
        ),
    ] = False,
) -> None:
    """Run daiku on a local cluster and EC2 emulator and play a scenario (default: inflate
    scaled 0 -> 5 -> 20)."""
    try:
        loaded = load_scenario(scenario, cluster_name)
    except ScenarioError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(EXIT_BAD_SCENARIO) from error
    directory = (work_dir or Path(tempfile.mkdtemp(prefix="daiku-up-"))).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    options = UpOptions(
        scenario=loaded,
        # The default scenario ends with a wait until settled; it always exits settled or fails.
        exit_when_settled=exit_when_settled or scenario is None,
        report_path=report,
        keep_running=keep_running,
        boot_seconds=boot_seconds,
        settle_timeout_seconds=settle_timeout,
        cluster_name=cluster_name,
        work_dir=directory,
        with_scheduler=not without_scheduler,
    )
    raise typer.Exit(_main_with_signals(options))
