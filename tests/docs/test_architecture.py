"""docs/architecture.md's package table is true: every module of the two services belongs to a
row, and everything a module imports is named in its row's "may import" column (issue 12 item
5). import-linter enforces the layering rules (`pyproject.toml`); this keeps the table itself
from drifting, which it had once done unnoticed.

How a column is read: comma-separated entries, each a row of the table by its short name
(`core`, `core/disruption`, `kube`, `actuator client`, `cloud`, `catalog`, ...), `leaves`
(the service's errors, metrics, settings, health), the contract (`contract`), `everything in
<service>`, `stdlib`, or a third-party library (import name, or `protobuf`);
parenthesised remarks are ignored. A module may always import its own row, and `structlog`
(the logging library; import-linter keeps it out of the pure cores). Imports under
`if TYPE_CHECKING:` are for types only and not counted."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("scheduler_svc", "actuator_svc")
FIRST_PARTY = ("daiku", "daiku_cli", "localcloud", *SERVICES)
LIBRARY_NAMES = {"protobuf": "google", "pyyaml": "yaml"}
ALWAYS = {"structlog"}
# The short name `leaves` in a column: modules every package of the service may use.
LEAVES = {
    "scheduler_svc": ("errors", "metrics", "settings", "health"),
    "actuator_svc": ("errors", "metrics"),
}


def table() -> dict[str, set[str]]:
    """Each service row's module (dotted) -> its "may import" entries (lower case); the
    modules of one row share one set."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Packages", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        names = re.findall(r"`([^`]+)`", cells[0])
        if not names[0].startswith(SERVICES):
            continue
        folder = names[0].rstrip("/").rsplit("/", 1)[0] if names[0].endswith(".py") else ""
        column = re.sub(r"\([^)]*\)", "", cells[2])
        entries = {e.strip().lower() for e in column.split(",") if e.strip()}
        for name in names:
            path = name if "/" in name else f"{folder}/{name}"
            rows[path.rstrip("/").removesuffix(".py").replace("/", ".")] = entries
    return rows


def owner(module: str, rows: dict[str, set[str]]) -> str | None:
    """The row a module belongs to: the longest row name it is, or is inside of."""
    matches = [r for r in rows if module == r or module.startswith(r + ".")]
    return max(matches, key=len, default=None)


def allowed_rows(service: str, entries: set[str], rows: dict[str, set[str]]) -> set[str]:
    allowed: set[str] = set()
    for entry in entries:
        if entry == "contract":
            allowed.add("daiku")
        elif entry == "leaves":
            allowed.update(f"{service}.{leaf}" for leaf in LEAVES[service])
        elif entry == f"everything in {service}":
            allowed.update(r for r in rows if r.startswith(service + "."))
        else:
            candidate = f"{service}.{entry.replace(' ', '_').replace('/', '.')}"
            if candidate in rows:
                allowed.add(candidate)
    return allowed


def modules() -> dict[str, Path]:
    found = {}
    for service in SERVICES:
        for path in (ROOT / service).rglob("*.py"):
            dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            dotted = dotted.removesuffix(".__init__")
            if dotted not in SERVICES:
                found[dotted] = path
    return found


def imports(path: Path) -> set[str]:
    """What a module imports (absolute names), leaving out `if TYPE_CHECKING:` blocks."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    type_only = {
        id(child)
        for node in ast.walk(tree)
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
        for statement in node.body
        for child in ast.walk(statement)
    }
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_every_module_of_the_services_has_a_row() -> None:
    """No module of scheduler_svc or actuator_svc is left out of the table."""
    rows = table()
    assert {m for m in modules() if owner(m, rows) is None} == set()


def test_the_check_sees_an_import_the_column_does_not_name() -> None:
    """A core importing kube, or a third-party library its column does not name, is found."""
    rows = {"scheduler_svc.core": {"stdlib"}, "scheduler_svc.kube": {"core"}}
    assert unlisted("scheduler_svc.core.x", {"scheduler_svc.kube.client", "json"}, rows) == {
        "scheduler_svc.kube.client"
    }
    assert unlisted("scheduler_svc.kube.x", {"scheduler_svc.core.model", "yaml"}, rows) == {"yaml"}


def unlisted(module: str, names: set[str], rows: dict[str, set[str]]) -> set[str]:
    """The imports of `module` its row's column does not allow."""
    service = module.split(".", maxsplit=1)[0]
    row = owner(module, rows)
    assert row is not None
    # A row naming several modules shares one entries object among them: they are one row.
    allowed = allowed_rows(service, rows[row], rows) | {r for r in rows if rows[r] is rows[row]}
    libraries = {LIBRARY_NAMES.get(e, e) for e in rows[row]} | ALWAYS
    found: set[str] = set()
    for name in names:
        top = name.split(".")[0]
        if top in FIRST_PARTY:
            if owner(name, rows) not in allowed and not (top == "daiku" and "daiku" in allowed):
                found.add(name)
        elif top not in sys.stdlib_module_names and top not in libraries:
            found.add(name)
    return found


@pytest.mark.parametrize("service", SERVICES)
def test_every_import_is_in_the_may_import_column(service: str) -> None:
    """Each module imports only what its row's "may import" column names."""
    rows = table()
    found = {
        module: sorted(bad)
        for module, path in sorted(modules().items())
        if module.startswith(service + ".")
        and owner(module, rows) is not None  # a module without a row fails the test above
        and (bad := unlisted(module, imports(path), rows))
    }
    assert found == {}
