"""Toleration matching, as kube-scheduler's ToleratesTaint."""

import pytest

from scheduler_svc.core import Taint, TaintEffect, Toleration
from scheduler_svc.core.taints import first_untolerated

NO_SCHEDULE = TaintEffect.NO_SCHEDULE
TEAM_ML = Taint("team", NO_SCHEDULE, "ml")


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        (Toleration("team", "Equal", "ml", NO_SCHEDULE), TEAM_ML, True),
        (Toleration("team", "Equal", "web", NO_SCHEDULE), TEAM_ML, False),
        (Toleration("team", "Exists"), TEAM_ML, True),
        (Toleration("other", "Exists"), TEAM_ML, False),
        (Toleration("", "Exists"), TEAM_ML, True),
        (Toleration("team", "Equal", "ml", TaintEffect.NO_EXECUTE), TEAM_ML, False),
        (Toleration("team", "Equal", "ml"), TEAM_ML, True),
        (Toleration("", "Equal", "ml"), TEAM_ML, False),
        (Toleration("gpu", "Exists"), Taint("gpu", TaintEffect.NO_EXECUTE), True),
    ],
)
def test_toleration_matching(toleration: Toleration, taint: Taint, tolerated: bool) -> None:
    """Key, operator, value and effect match exactly as Kubernetes defines."""
    assert toleration.tolerates(taint) is tolerated


def test_prefer_no_schedule_never_blocks_and_first_blocking_taint_is_named() -> None:
    """PreferNoSchedule is ignored; the first untolerated blocking taint is returned."""
    soft = Taint("soft", TaintEffect.PREFER_NO_SCHEDULE)
    hard = Taint("hard", TaintEffect.NO_EXECUTE, "x")
    assert first_untolerated((), (soft,)) is None
    assert first_untolerated((), (soft, hard)) == hard
    assert first_untolerated((Toleration("hard", "Exists"),), (soft, hard)) is None
    assert hard.describe() == "hard=x:NoExecute"
