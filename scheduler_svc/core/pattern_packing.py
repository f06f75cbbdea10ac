"""Whole nodes as the integer program's columns: the per-node check that the counts of
``integer_packing`` lack.

``integer_packing`` counts room per instance type; its counts may not split into real nodes
(three pods that each take 40 % of a node's cpu fit its type's cpu row on two nodes' worth of
room, but not on two nodes), and the realised plan then pays for extra nodes. Here every column
is one node as it would run: a type and how many pods of each shape it holds (a "pattern"; only
maximal ones, to which no pending pod can be added). The program

    minimise   sum_p price_p * z_p
    subject to sum_p pods_ps * z_p >= n_s      (every pod of shape s placed)
               z_p non-negative integers

is exact over the types it is given: every node of every plan on them is a pattern or fits in
one. Patterns multiply with shapes and node size, so they are enumerated only for the types the
counting program chose (and others while a budget of columns allows), and a type whose patterns
exceed it is left out (on nodes holding that many pods, the counts split well anyway).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scheduler_svc.core.integer_packing import (
    EPSILON,
    NodeOption,
    PackedNode,
    PackingSettings,
    fits_count,
)

_VISITS_PER_PATTERN = 10  # enumeration steps allowed per column of the budget (deterministic)


@dataclass
class PatternBudget:
    """What is left of the enumeration's work: columns and steps, over all types."""

    patterns: int
    visits: int


def maximal_patterns(
    shapes: Sequence[tuple[int, ...]],
    bounds: Sequence[int],
    room: Sequence[int],
    budget: PatternBudget,
) -> list[tuple[int, ...]] | None:
    """Every count vector (at most ``bounds[s]`` of shape s) that fits in ``room`` and to which
    no shape still below its bound can be added, most of the first shape first; None (and the
    budget spent) when they need more columns or steps than ``budget`` has left."""
    found: list[tuple[int, ...]] = []
    counts = [0] * len(shapes)
    last = len(shapes) - 1

    def visit(s: int, free: list[int]) -> bool:  # False: over the budget
        budget.visits -= 1
        if budget.visits < 0 or len(found) > budget.patterns:
            return False
        most = min(bounds[s], fits_count(shapes[s], free))
        if s == last:  # the last shape takes all it can: anything less is not maximal
            counts[s] = most
            after = [f - a * most for f, a in zip(free, shapes[s], strict=True)]
            if any(counts) and not any(
                counts[j] < bounds[j] and fits_count(shapes[j], after) for j in range(last)
            ):
                found.append(tuple(counts))
            return True
        for count in range(most, -1, -1):
            counts[s] = count
            if not visit(s + 1, [f - a * count for f, a in zip(free, shapes[s], strict=True)]):
                return False
        counts[s] = 0
        return True

    if not visit(0, list(room)):
        budget.visits = min(budget.visits, 0)
        return None
    budget.patterns -= len(found)
    return found


def pattern_packing(
    shapes: Sequence[tuple[int, ...]],
    counts: Sequence[int],
    options: Sequence[NodeOption],
    types: Sequence[int],
    settings: PackingSettings,
    *,
    known: Sequence[Sequence[PackedNode]] = (),
) -> list[PackedNode]:
    """The cheapest nodes holding every pod, as the program of the module docstring finds them
    within the work budget, over the maximal patterns of ``types`` (first ones first, while
    ``settings.max_patterns`` columns allow) and the nodes of plans already ``known`` (other
    packings' nodes: on a type whose patterns are too many to list they still let the program
    mix that type with others; the cheapest known plan is the program's starting point, so the
    search only looks for better); empty when HiGHS finds no plan."""
    columns = sorted({(n.option, n.counts) for nodes in known for n in nodes})
    budget = PatternBudget(settings.max_patterns, _VISITS_PER_PATTERN * settings.max_patterns)
    for t in types:
        room = options[t].allocatable
        bounds = [min(n, fits_count(shape, room)) for shape, n in zip(shapes, counts, strict=True)]
        found = maximal_patterns(shapes, bounds, room, budget)
        if found is None:
            break  # the budget is spent: the types listed so far are the program's
        columns += [(t, pattern) for pattern in found]
    covered = [sum(p[s] for _, p in columns) for s in range(len(shapes))]
    if not columns or any(c == 0 and n for c, n in zip(covered, counts, strict=True)):
        return []
    start = [0.0] * len(columns)
    if known:
        index = {column: i for i, column in enumerate(columns)}
        for n in min(known, key=lambda nodes: sum(options[n.option].price_per_hour for n in nodes)):
            start[index[(n.option, n.counts)]] += 1
    values = _solve_cover(columns, counts, options, settings, start=start if known else None)
    if values is None:
        return []
    nodes = [
        (t, list(pattern))
        for (t, pattern), value in zip(columns, values, strict=True)
        for _ in range(round(value))
    ]
    return _trimmed(nodes, counts, options)


def limited_packing(
    shapes: Sequence[tuple[int, ...]],
    counts: Sequence[int],
    options: Sequence[NodeOption],
    *,
    capacities: Sequence[Sequence[int]],
    room: LimitRoom,
    settings: PackingSettings,
) -> list[PackedNode]:
    """The nodes holding as many pods as fit within what a NodePool's limits leave (``room``:
    at most so many nodes, and per limited resource at most so much summed capacity, where
    ``capacities[t]`` is option t's capacity as the limits count it), the cheapest such; empty
    when HiGHS finds none. The program of the module docstring plus one row per limit and,
    per shape, a column of pods left pending at a price above any node's,
    over the maximal patterns of the options that fit the limits and no other option beats
    (as much room, no dearer, no more capacity), those holding the most pods per dollar first.
    Used when the greedy pass, node by node, reached a limit with pods left over: the limit
    may still hold them all on fewer, larger nodes."""
    usable = [
        t
        for t, option in enumerate(options)
        if all(c <= most for c, most in zip(capacities[t], room.capacity, strict=True))
        and any(fits_count(shape, option.allocatable) for shape in shapes)
    ]
    usable = [t for t in usable if not any(_beats(u, t, options, capacities) for u in usable)]
    usable.sort(
        key=lambda t: (
            -sum(
                min(n, fits_count(shape, options[t].allocatable))
                for shape, n in zip(shapes, counts, strict=True)
            )
            / max(options[t].price_per_hour, EPSILON),
            t,
        )
    )
    budget = PatternBudget(settings.max_patterns, _VISITS_PER_PATTERN * settings.max_patterns)
    columns: list[tuple[int, tuple[int, ...]]] = []
    for t in usable:
        allocatable = options[t].allocatable
        bounds = [
            min(n, fits_count(shape, allocatable)) for shape, n in zip(shapes, counts, strict=True)
        ]
        found = maximal_patterns(shapes, bounds, allocatable, budget)
        if found is None:
            break
        columns += [(t, pattern) for pattern in found]
    if not columns:
        return []
    rows: list[tuple[list[float], float]] = []
    if room.nodes is not None:
        rows.append(([1.0] * len(columns), float(room.nodes)))
    for d, most in enumerate(room.capacity):
        if most < _NO_LIMIT:
            # Scaled to the limit: bytes would upset the solver's tolerances.
            rows.append(([capacities[t][d] / most for t, _ in columns], 1.0))
    # A pod left pending costs more than every node the pods could need: the program places
    # as many pods as the limits allow, then buys them as cheaply as it can.
    pending = sum(counts) * max(options[t].price_per_hour for t, _ in columns) + 1.0
    values = _solve_cover(
        columns, counts, options, settings, start=None, at_most=rows, pending_price=pending
    )
    if values is None:
        return []
    left = [round(v) for v in values[len(columns) :]]
    nodes = [
        (t, list(pattern))
        for (t, pattern), value in zip(columns, values[: len(columns)], strict=True)
        for _ in range(round(value))
    ]
    return _trimmed(nodes, [max(0, n - u) for n, u in zip(counts, left, strict=True)], options)


_NO_LIMIT = 1 << 62


@dataclass(frozen=True)
class LimitRoom:
    """What a NodePool's limits leave for new nodes: ``nodes`` (None: no node limit) and, per
    limited resource, the summed capacity (``_NO_LIMIT`` where that resource is not limited)."""

    nodes: int | None
    capacity: tuple[int, ...]

    @staticmethod
    def of(nodes: int | None, capacity: Sequence[int | None]) -> LimitRoom:
        return LimitRoom(nodes, tuple(_NO_LIMIT if c is None else c for c in capacity))


def _beats(
    u: int, t: int, options: Sequence[NodeOption], capacities: Sequence[Sequence[int]]
) -> bool:
    """Whether option ``u`` makes ``t`` useless under limits: as much room, no dearer, no more
    capacity counted, and not the same (ties keep the first)."""
    if u == t:
        return False
    a, b = options[u], options[t]
    as_good = (
        a.price_per_hour <= b.price_per_hour
        and all(x >= y for x, y in zip(a.allocatable, b.allocatable, strict=True))
        and all(x <= y for x, y in zip(capacities[u], capacities[t], strict=True))
    )
    same = (
        a.price_per_hour == b.price_per_hour
        and a.allocatable == b.allocatable
        and tuple(capacities[u]) == tuple(capacities[t])
    )
    return as_good and (not same or u < t)


def _solve_cover(
    columns: Sequence[tuple[int, tuple[int, ...]]],
    counts: Sequence[int],
    options: Sequence[NodeOption],
    settings: PackingSettings,
    *,
    start: list[float] | None,
    at_most: Sequence[tuple[Sequence[float], float]] = (),
    pending_price: float | None = None,
) -> Any:
    """HiGHS's column values for the cover program (from ``start``, a feasible point, when
    given; each of ``at_most`` adds a row: coefficients per column, summed at most the bound;
    with ``pending_price``, one more column per shape after the others: its pods left pending,
    at that price each), or None when it holds no feasible point."""
    import numpy as np
    from highspy import HighsLp, HighsSolution, HighsVarType, MatrixFormat, kHighsInf
    from highspy._core import _Highs  # highspy.Highs() prints a banner on stdout; plan's JSON

    lp = HighsLp()
    rows = len(counts) + len(at_most)
    slack = [] if pending_price is None else list(range(len(counts)))
    width = len(columns) + len(slack)
    lp.num_col_, lp.num_row_ = width, rows
    lp.col_cost_ = np.array(
        [*(options[t].price_per_hour for t, _ in columns), *(pending_price for _ in slack)],
        dtype=float,
    )
    lp.col_lower_ = np.zeros(width)
    lp.col_upper_ = np.full(width, kHighsInf)
    lp.row_lower_ = np.array([*counts, *(-kHighsInf for _ in at_most)], dtype=float)
    lp.row_upper_ = np.array([*(kHighsInf for _ in counts), *(b for _, b in at_most)])
    lp.integrality_ = [HighsVarType.kInteger] * width
    matrix = lp.a_matrix_
    matrix.format_ = MatrixFormat.kColwise
    matrix.num_col_, matrix.num_row_ = width, rows
    entries = [
        [(s, float(n)) for s, n in enumerate(pattern) if n]
        + [(len(counts) + r, coefficients[i]) for r, (coefficients, _) in enumerate(at_most)]
        for i, (_, pattern) in enumerate(columns)
    ] + [[(s, 1.0)] for s in slack]
    matrix.start_ = np.cumsum([0, *(len(e) for e in entries)], dtype=np.int32)
    matrix.index_ = np.array([s for e in entries for s, _ in e], dtype=np.int32)
    matrix.value_ = np.array([v for e in entries for _, v in e], dtype=float)
    solver = _Highs()
    solver.setOptionValue("output_flag", False)
    settings.limit(solver)
    # HiGHS's presolve probes every general-integer column: most of the time on a thousand
    # patterns, and these few-row programs gain nothing from it.
    solver.setOptionValue("presolve", "off")
    solver.setOptionValue("mip_rel_gap", 1e-4)
    solver.passModel(lp)
    if start is not None:
        solution = HighsSolution()
        solution.col_value = start
        solution.value_valid = True
        solver.setSolution(solution)
    solver.run()
    if solver.getInfo().primal_solution_status != 2:  # 2: HiGHS holds a feasible point
        return None
    return solver.getSolution().col_value


def _trimmed(
    nodes: list[tuple[int, list[int]]], counts: Sequence[int], options: Sequence[NodeOption]
) -> list[PackedNode]:
    """The cover's nodes less the pods it placed twice (taken off the dearest nodes first)."""
    surplus = [sum(got[s] for _, got in nodes) - n for s, n in enumerate(counts)]
    for _, got in sorted(nodes, key=lambda node: -options[node[0]].price_per_hour):
        for s, extra in enumerate(surplus):
            taken = min(extra, got[s])
            got[s] -= taken
            surplus[s] -= taken
    return [PackedNode(t, tuple(got)) for t, got in nodes if any(got)]


def downsized(
    nodes: Sequence[PackedNode], shapes: Sequence[tuple[int, ...]], options: Sequence[NodeOption]
) -> list[PackedNode]:
    """Each node on the cheapest option that holds its pods (its own unless one is cheaper)."""
    moved: dict[PackedNode, PackedNode] = {}  # plans repeat nodes: 1,000 alike are common
    for node in nodes:
        if node in moved:
            continue
        used = [
            sum(n * shape[d] for shape, n in zip(shapes, node.counts, strict=True))
            for d in range(len(shapes[0]))
        ]
        best = node.option
        for t, option in enumerate(options):
            if option.price_per_hour < options[best].price_per_hour - EPSILON and all(
                u <= a for u, a in zip(used, option.allocatable, strict=True)
            ):
                best = t
        moved[node] = PackedNode(best, node.counts)
    return [moved[node] for node in nodes]


__all__ = [
    "LimitRoom",
    "PatternBudget",
    "downsized",
    "limited_packing",
    "maximal_patterns",
    "pattern_packing",
]
