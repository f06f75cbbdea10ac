"""The scheduler's settings: flags over SCHEDULER_* variables over defaults, clear errors."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from scheduler_svc.settings import SchedulerSettings, SettingsError, load_settings


def test_defaults_apply_when_nothing_is_set() -> None:
    """With no flags and no variables, the documented defaults apply (1 s / 10 s batches)."""
    settings = load_settings([], {})
    assert settings.batch_idle_seconds == 1.0
    assert settings.batch_max_seconds == 10.0
    assert settings.leader_elect is True
    assert settings.kubeconfig is None
    assert settings.actuator_tls_enabled is False


def test_environment_variables_with_the_prefix_set_each_kind_of_value() -> None:
    """SCHEDULER_* variables set strings, numbers, paths and booleans."""
    settings = load_settings(
        [],
        {
            "SCHEDULER_KUBECONFIG": "/etc/kube/config",
            "SCHEDULER_ACTUATOR_ADDRESS": "actuator:50051",
            "SCHEDULER_BATCH_IDLE_SECONDS": "0.5",
            "SCHEDULER_METRICS_PORT": "9100",
            "SCHEDULER_LEADER_ELECT": "false",
            "SCHEDULER_ACTUATOR_TLS_CA_FILE": "/etc/tls/ca.pem",
            "SCHEDULER_WATCH_INACTIVITY_TIMEOUT_SECONDS": "15",
        },
    )
    assert settings.watch_inactivity_timeout_seconds == 15.0
    assert settings.kubeconfig == Path("/etc/kube/config")
    assert settings.actuator_address == "actuator:50051"
    assert settings.batch_idle_seconds == 0.5
    assert settings.metrics_port == 9100
    assert settings.leader_elect is False
    assert settings.actuator_tls_enabled is True


def test_flags_override_environment_variables() -> None:
    """A flag wins over the variable of the same setting, booleans included."""
    settings = load_settings(
        ["--batch-max-seconds", "20", "--leader-elect", "--leader-election-identity", "pod-a"],
        {"SCHEDULER_BATCH_MAX_SECONDS": "5", "SCHEDULER_LEADER_ELECT": "no"},
    )
    assert settings.batch_max_seconds == 20.0
    assert settings.leader_elect is True
    assert settings.leader_election_identity == "pod-a"


def test_consolidation_thresholds_default_to_10_percent_and_a_cent_and_can_be_set() -> None:
    """By default a consolidation must save 10 % and $0.01/h, is validated after 15 s and
    moves spot to spot with 15 cheaper types; flags and variables change each."""
    default = load_settings([], {}).consolidation_options()
    assert (
        default.min_saving_fraction,
        default.min_saving_per_hour,
        default.validation_wait_seconds,
        default.spot_to_spot_min_types,
    ) == (0.10, 0.01, 15.0, 15)
    tuned = load_settings(
        ["--consolidation-min-saving-percent", "25", "--consolidation-validation-seconds", "30"],
        {"SCHEDULER_CONSOLIDATION_MIN_SAVING_PER_HOUR": "0.05"},
    ).consolidation_options()
    assert (tuned.min_saving_fraction, tuned.min_saving_per_hour) == (0.25, 0.05)
    assert tuned.validation_wait_seconds == 30.0


def test_kubeconfig_falls_back_to_the_kubeconfig_variable_unless_in_cluster() -> None:
    """KUBECONFIG (its first file) is used when no kubeconfig is set and not in-cluster."""
    assert load_settings([], {"KUBECONFIG": "/a:/b"}).kubeconfig == Path("/a")
    assert load_settings(["--in-cluster"], {"KUBECONFIG": "/a"}).kubeconfig is None


@pytest.mark.parametrize(
    ("argv", "environ", "named"),
    [
        ([], {"SCHEDULER_METRICS_PORT": "eighty"}, "SCHEDULER_METRICS_PORT"),
        (["--batch-idle-seconds", "soon"], {}, "--batch-idle-seconds"),
        ([], {"SCHEDULER_LEADER_ELECT": "maybe"}, "SCHEDULER_LEADER_ELECT"),
        (["--batch-idle-seconds", "5", "--batch-max-seconds", "2"], {}, "--batch-max-seconds"),
        (["--health-port", "70000"], {}, "--health-port"),
        (["--actuator-tls-cert-file", "/c.pem"], {}, "--actuator-tls-cert-file"),
        (["--log-format", "xml"], {}, "--log-format"),
        (["--consolidation-min-saving-percent", "150"], {}, "--consolidation-min-saving-percent"),
        ([], {"SCHEDULER_SPOT_TO_SPOT_MIN_TYPES": "0"}, "SCHEDULER_SPOT_TO_SPOT_MIN_TYPES"),
    ],
)
def test_bad_values_raise_an_error_naming_the_setting(
    argv: list[str], environ: dict[str, str], named: str
) -> None:
    """An unusable value raises SettingsError naming its flag or variable."""
    with pytest.raises(SettingsError, match=named):
        load_settings(argv, environ)


def test_the_token_file_wins_over_the_token_and_an_unreadable_one_is_named(tmp_path: Path) -> None:
    """The actuator token comes from the token file (stripped) when set; an unreadable file is
    reported with its setting."""
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    settings = SchedulerSettings(actuator_token="inline", actuator_token_file=token_file)
    assert settings.resolved_actuator_token() == "from-file"
    assert SchedulerSettings(actuator_token="inline").resolved_actuator_token() == "inline"
    missing = SchedulerSettings(actuator_token_file=tmp_path / "missing")
    with pytest.raises(SettingsError, match="--actuator-token-file"):
        missing.resolved_actuator_token()


def test_help_lists_every_setting(capsys: pytest.CaptureFixture[str]) -> None:
    """`--help` prints every flag (help texts are argparse-safe) and exits 0."""
    with pytest.raises(SystemExit) as exited:
        load_settings(["--help"], {})
    assert exited.value.code == 0
    printed = capsys.readouterr().out
    for setting in fields(SchedulerSettings):
        assert "--" + setting.name.replace("_", "-") in printed
