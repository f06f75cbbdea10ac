"""bench/mutation_survivors.py's ``check`` refuses to judge mutants with tests that fail
without any: every mutant would look killed (as a test importing a helper newer than the
mutants tree's copy once made them look)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import mutation_survivors


def _tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    """A repository with one test file and a target ``t`` whose mutants tree is empty."""
    (tmp_path / "repo" / "tests").mkdir(parents=True)
    (tmp_path / "repo" / "tests" / "test_one.py").write_text(body)
    (tmp_path / "work" / "t" / "mutants").mkdir(parents=True)
    monkeypatch.setattr(mutation_survivors, "ROOT", tmp_path / "repo")
    monkeypatch.setattr(mutation_survivors, "WORK", tmp_path / "work")


def test_tests_failing_without_a_mutant_judge_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _tree(tmp_path, monkeypatch, "def test_broken() -> None:\n    assert False\n")
    with pytest.raises(SystemExit, match="with no mutant switched on"):
        mutation_survivors.check("t", ["tests/test_one.py"], ["m.x_f__mutmut_1"])
    assert "killed" not in capsys.readouterr().out


def test_passing_tests_judge_each_mutant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A test that fails only with the mutant switched on kills it."""
    body = (
        "import os\n\n\ndef test_sees_the_mutant() -> None:\n"
        '    assert os.environ.get("MUTANT_UNDER_TEST") != "m.x_f__mutmut_1"\n'
    )
    _tree(tmp_path, monkeypatch, body)
    mutation_survivors.check("t", ["tests/test_one.py"], ["m.x_f__mutmut_1", "m.x_f__mutmut_2"])
    assert capsys.readouterr().out.splitlines() == [
        "killed m.x_f__mutmut_1",
        "ALIVE  m.x_f__mutmut_2",
    ]
