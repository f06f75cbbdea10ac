"""The scheduler service's configuration: command-line flags, else `SCHEDULER_*` environment
variables, else defaults.

Every setting `some_name` is the flag `--some-name` and the variable `SCHEDULER_SOME_NAME`
(booleans: `--some-name` / `--no-some-name`, and `true|false|1|0|yes|no` in the environment).
A bad value raises `SettingsError` naming the flag or variable. `load_settings()` reads both;
`python -m scheduler_svc --help` lists them all.
"""

from __future__ import annotations

import argparse
import os
import socket
import types
import typing
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from scheduler_svc.core.disruption import ConsolidationOptions
from scheduler_svc.core.model import MinValuesPolicy

ENV_PREFIX = "SCHEDULER_"


class SettingsError(ValueError):
    """A flag or environment variable with an unusable value; the message names it."""


def _default_identity() -> str:
    # Unique per process, readable in `kubectl get lease -o yaml`: which pod holds the lease.
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True)
class SchedulerSettings:
    """Everything the scheduler service reads at start-up."""

    # Kubernetes
    kubeconfig: Path | None = field(
        default=None, metadata=_help("kubeconfig file (default: $KUBECONFIG, else in-cluster)")
    )
    kube_context: str | None = field(default=None, metadata=_help("kubeconfig context to use"))
    in_cluster: bool = field(
        default=False, metadata=_help("use the pod's service account instead of a kubeconfig")
    )
    cluster_name: str = field(default="daiku", metadata=_help("name of the cluster (tags)"))
    # Actuator
    actuator_address: str = field(
        default="127.0.0.1:50051", metadata=_help("actuator gRPC address host:port")
    )
    actuator_token: str | None = field(
        default=None, metadata=_help("bearer token for the actuator (prefer the token file)")
    )
    actuator_token_file: Path | None = field(
        default=None, metadata=_help("file holding the actuator bearer token (re-read at start)")
    )
    actuator_tls_ca_file: Path | None = field(
        default=None, metadata=_help("CA bundle verifying the actuator; enables TLS")
    )
    actuator_tls_cert_file: Path | None = field(
        default=None, metadata=_help("client certificate for mutual TLS")
    )
    actuator_tls_key_file: Path | None = field(
        default=None, metadata=_help("client private key for mutual TLS")
    )
    actuator_tls_server_name: str | None = field(
        default=None, metadata=_help("name to verify in the actuator's certificate")
    )
    watch_inactivity_timeout_seconds: float = field(
        default=75.0,
        metadata=_help("reopen a watch silent this long (> the API server's bookmark interval)"),
    )
    # Provisioning
    batch_idle_seconds: float = field(
        default=1.0, metadata=_help("close a batch after this long without a new pending pod")
    )
    batch_max_seconds: float = field(
        default=10.0, metadata=_help("close a batch after this long, however busy")
    )
    pending_pods_recheck_seconds: float = field(
        default=15.0,
        metadata=_help(
            "solve the pending pods again after this long without a provisioning round, even"
            " when nothing in the cluster changed"
        ),
    )
    # Operations
    metrics_port: int = field(default=8000, metadata=_help("Prometheus /metrics port (0: off)"))
    health_port: int = field(default=8081, metadata=_help("/healthz and /readyz port (0: off)"))
    log_level: str = field(default="info", metadata=_help("debug, info, warning or error"))
    log_format: str = field(
        default="auto", metadata=_help("json, console, or auto (console on a TTY)")
    )
    # Leader election
    leader_elect: bool = field(
        default=True, metadata=_help("run only while holding the Lease (two replicas, one active)")
    )
    leader_election_namespace: str = field(
        default="daiku", metadata=_help("namespace of the leader-election Lease")
    )
    leader_election_lease_name: str = field(
        default="daiku-scheduler", metadata=_help("name of the leader-election Lease")
    )
    leader_election_identity: str = field(
        default_factory=_default_identity, metadata=_help("this replica's identity in the Lease")
    )
    lease_duration_seconds: float = field(
        default=15.0, metadata=_help("how long a lease lasts without renewal")
    )
    lease_renew_deadline_seconds: float = field(
        default=10.0, metadata=_help("the leader steps down if it cannot renew within this")
    )
    lease_retry_period_seconds: float = field(
        default=2.0, metadata=_help("how often candidates try to acquire or renew")
    )
    consolidation_min_saving_percent: float = field(
        default=10.0,
        metadata=_help("a consolidation must save this percentage of the replaced nodes' price"),
    )
    consolidation_min_saving_per_hour: float = field(
        default=0.01, metadata=_help("... and at least this many dollars per hour")
    )
    consolidation_validation_seconds: float = field(
        default=15.0,
        metadata=_help("a consolidation is checked again after this wait before it acts"),
    )
    spot_to_spot_min_types: int = field(
        default=15,
        metadata=_help("spot nodes are replaced by spot only with this many cheaper spot types"),
    )

    min_values_policy: str = field(
        default="Strict",
        metadata=_help(
            "Strict: pods a NodePool's minValues rules out stay pending; BestEffort: the claim"
            " is opened with minValues lowered to what the catalog offers, and an Event says"
            " so (Karpenter's --min-values-policy)"
        ),
    )
    node_repair: bool = field(
        default=False,
        metadata=_help(
            "replace nodes whose Ready (or a node monitoring condition) has been unhealthy past"
            " its toleration (Karpenter's NodeRepair feature gate; off by default as there)"
        ),
    )
    node_repair_drain_seconds: float = field(
        default=300.0,
        metadata=_help("a repaired node's pods still there after this long are deleted"),
    )

    def __post_init__(self) -> None:
        _check(self.batch_idle_seconds > 0, "batch_idle_seconds", "must be positive")
        _check(
            self.pending_pods_recheck_seconds > 0,
            "pending_pods_recheck_seconds",
            "must be positive",
        )
        _check(
            self.watch_inactivity_timeout_seconds > 0,
            "watch_inactivity_timeout_seconds",
            "must be positive",
        )
        _check(
            self.batch_max_seconds >= self.batch_idle_seconds,
            "batch_max_seconds",
            "must be at least batch_idle_seconds",
        )
        for port_name in ("metrics_port", "health_port"):
            port = getattr(self, port_name)
            _check(0 <= port <= 65535, port_name, f"{port} is not a TCP port")
        _check(
            self.log_level in ("debug", "info", "warning", "error"),
            "log_level",
            f"{self.log_level!r} is not one of debug, info, warning, error",
        )
        _check(
            self.log_format in ("json", "console", "auto"),
            "log_format",
            f"{self.log_format!r} is not one of json, console, auto",
        )
        _check(
            (self.actuator_tls_cert_file is None) == (self.actuator_tls_key_file is None),
            "actuator_tls_cert_file",
            "mutual TLS needs both the certificate and the key file",
        )
        _check(
            0 <= self.consolidation_min_saving_percent <= 100,
            "consolidation_min_saving_percent",
            "must be between 0 and 100",
        )
        for name in (
            "consolidation_min_saving_per_hour",
            "consolidation_validation_seconds",
            "node_repair_drain_seconds",
        ):
            _check(getattr(self, name) >= 0, name, "must not be negative")
        _check(
            self.min_values_policy in ("Strict", "BestEffort"),
            "min_values_policy",
            f"{self.min_values_policy!r} is not one of Strict, BestEffort",
        )
        _check(self.spot_to_spot_min_types >= 1, "spot_to_spot_min_types", "must be at least 1")
        _check(
            self.lease_duration_seconds
            > self.lease_renew_deadline_seconds
            > self.lease_retry_period_seconds
            > 0,
            "lease_duration_seconds",
            "need lease duration > renew deadline > retry period > 0",
        )

    def consolidation_options(self) -> ConsolidationOptions:
        """The consolidation thresholds these settings name (see ConsolidationOptions)."""
        return ConsolidationOptions(
            min_saving_fraction=self.consolidation_min_saving_percent / 100,
            min_saving_per_hour=self.consolidation_min_saving_per_hour,
            validation_wait_seconds=self.consolidation_validation_seconds,
            spot_to_spot_min_types=self.spot_to_spot_min_types,
            min_values_policy=MinValuesPolicy(self.min_values_policy),
        )

    @property
    def actuator_tls_enabled(self) -> bool:
        return self.actuator_tls_ca_file is not None or self.actuator_tls_cert_file is not None

    def resolved_actuator_token(self) -> str | None:
        """The token from the token file when set (stripped), else `actuator_token`."""
        if self.actuator_token_file is not None:
            try:
                return self.actuator_token_file.read_text().strip()
            except OSError as error:
                raise SettingsError(
                    f"--actuator-token-file / {ENV_PREFIX}ACTUATOR_TOKEN_FILE: "
                    f"cannot read {self.actuator_token_file}: {error.strerror}"
                ) from error
        return self.actuator_token


def _check(condition: bool, name: str, reason: str) -> None:
    if not condition:
        raise SettingsError(f"{_flag(name)} / {_env(name)}: {reason}")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _env(name: str) -> str:
    return ENV_PREFIX + name.upper()


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})


def _base_type(annotation: Any) -> tuple[type, bool]:
    """(the type, whether None is allowed) of `X` or `X | None`."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return members[0], True
    return annotation, False


def _convert(source: str, text: str, target: type) -> Any:
    if target is bool:
        lowered = text.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise SettingsError(f"{source}: {text!r} is not a boolean (true/false)")
    try:
        return target(text)
    except ValueError as error:
        raise SettingsError(f"{source}: {text!r} is not a valid {target.__name__}") from error


def build_parser() -> argparse.ArgumentParser:
    """The argument parser: one flag per setting, defaults left to `load_settings`."""
    parser = argparse.ArgumentParser(
        prog="python -m scheduler_svc",
        description="daiku scheduler: pending pods -> NodeClaims -> EC2, via the actuator.",
    )
    hints = typing.get_type_hints(SchedulerSettings)
    for spec in fields(SchedulerSettings):
        target, _ = _base_type(hints[spec.name])
        help_text = f"{spec.metadata.get('help', '')} [env {_env(spec.name)}]"
        if target is bool:
            parser.add_argument(
                _flag(spec.name),
                dest=spec.name,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=help_text,
            )
        else:
            parser.add_argument(
                _flag(spec.name), dest=spec.name, default=None, metavar="VALUE", help=help_text
            )
    return parser


def load_settings(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> SchedulerSettings:
    """Settings from `argv` flags, else `environ` SCHEDULER_* variables, else defaults.

    `KUBECONFIG` is honoured when neither --kubeconfig nor SCHEDULER_KUBECONFIG is set, like
    kubectl. Raises SettingsError naming the flag or variable of a bad value.
    """
    environ = os.environ if environ is None else environ
    parsed = vars(build_parser().parse_args(list(argv) if argv is not None else []))
    hints = typing.get_type_hints(SchedulerSettings)
    values: dict[str, Any] = {}
    for spec in fields(SchedulerSettings):
        target, nullable = _base_type(hints[spec.name])
        flag_value = parsed.get(spec.name)
        if flag_value is not None:
            values[spec.name] = (
                flag_value
                if isinstance(flag_value, bool)
                else _convert(_flag(spec.name), flag_value, target)
            )
            continue
        env_value = environ.get(_env(spec.name))
        if env_value is not None and (env_value != "" or not nullable):
            values[spec.name] = _convert(_env(spec.name), env_value, target)
    settings = SchedulerSettings(**values)
    if settings.kubeconfig is None and not settings.in_cluster and environ.get("KUBECONFIG"):
        # KUBECONFIG may list several files; the client reads one: take the first.
        first = environ["KUBECONFIG"].split(os.pathsep)[0]
        settings = replace(settings, kubeconfig=Path(first))
    return settings
