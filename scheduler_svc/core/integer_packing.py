"""The cheapest nodes for a batch of interchangeable pods: an integer program (HiGHS), then a
packing that realises it.

The greedy solver fills one node at a time and decides each node's type from what is left; it
cannot see that, say, two mid-size nodes beat one large and three small. For pods that only
need room (no topology, no host ports: what ``improve`` is given), the choice of node types is a
small integer program whose size depends on the instance types and pod shapes, not on the
number of pods:

    minimise   sum_t price_t * x_t
    subject to sum_t y_ts = n_s                                  (every pod of shape s placed)
               sum_s request_sd * y_ts <= allocatable_td * x_t   (each resource d of type t)
               y_ts <= fit_ts * x_t       (a node of type t holds at most fit_ts pods of s)
               x_t, y_ts non-negative integers

plus, per type and resource, "a node holds at most allocatable // v pods asking at least v of
it" for each request size v. Its answer is turned into nodes by spreading each type's pods over
its nodes, largest shape first; pods that do not fit (the program counts resources per type,
not per node) go to a node of the plan with room, else to new nodes chosen the cheapest way.
Where counts do not split into nodes, ``pattern_packing`` solves a second program over whole
nodes (the types this one chose first); the cheaper packing wins, each node then on the
cheapest type that holds it. The caller keeps whichever of this and the greedy plan is cheaper,
so the result is never worse than the greedy one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

EPSILON = 1e-9


@dataclass(frozen=True)
class PackingSettings:
    """When the solver improves its greedy answer with the integer program.

    ``max_pods``: batches (pods that only need room, per NodePool and requirements) larger than
    this keep the greedy answer (fast, and within a few per cent there). ``max_types``: when more
    instance types could serve, the program keeps those its LP relaxation prices best (small
    programs solve to the optimum quickly; large ones often do not). ``max_branch_nodes`` (HiGHS's
    branch-and-bound nodes per program) and ``max_patterns`` (whole-node columns listed, see
    ``pattern_packing``) are the work budget: counted work, not time, so the same input gives
    the same plan on any machine however loaded. ``deadline_seconds`` (off by default) adds
    HiGHS's wall-clock limit for callers that prefer a bounded wait to a reproducible plan: with
    it, a loaded machine may stop a program early and the plan then depends on timing."""

    max_pods: int = 1000
    max_types: int = 24
    max_branch_nodes: int = 200
    max_patterns: int = 500
    deadline_seconds: float | None = None

    @property
    def enabled(self) -> bool:
        """Whether any batch is improved."""
        return self.max_pods > 0 and (self.deadline_seconds is None or self.deadline_seconds > 0)

    def limit(self, solver: Any) -> None:
        """Give a HiGHS instance this budget (and the deadline, when one is set). The budget
        counts branch-and-bound nodes, and HiGHS's heuristics that solve sub-programs of their
        own (each with its own nodes) are off: on 1,000 columns they took 9 s of a program the
        tree alone solves as well in 0.3 s."""
        solver.setOptionValue("mip_max_nodes", self.max_branch_nodes)
        for heuristic in ("rins", "rens", "root_reduced_cost"):
            solver.setOptionValue(f"mip_heuristic_run_{heuristic}", False)
        if self.deadline_seconds is not None:
            solver.setOptionValue("time_limit", self.deadline_seconds)


@dataclass(frozen=True)
class NodeOption:
    """A node type the pods may go on: room for pods (allocatable less DaemonSet overhead) and
    the cheapest price it can be launched at."""

    allocatable: tuple[int, ...]
    price_per_hour: float


@dataclass(frozen=True)
class PackedNode:
    """One node of a packing: ``option`` indexes the options, ``counts`` the pods per shape."""

    option: int
    counts: tuple[int, ...]


def packing_cost(nodes: Sequence[PackedNode], options: Sequence[NodeOption]) -> float:
    """The hourly price of ``nodes``."""
    return sum(options[n.option].price_per_hour for n in nodes)


def fits_count(request: Sequence[int], room: Sequence[int]) -> int:
    """How many pods of ``request`` fit in ``room``."""
    most = 1 << 62
    for amount, free in zip(request, room, strict=True):
        if amount > 0:
            most = min(most, free // amount)
    return max(most, 0)


def cost_lower_bound(
    shapes: Sequence[tuple[int, ...]], counts: Sequence[int], options: Sequence[NodeOption]
) -> float:
    """A price no packing of ``counts[s]`` pods of each shape onto ``options`` goes below, found
    without the solver (so a group whose greedy claims already cost this needs no program, and
    no numpy or HiGHS loaded). Each is a relaxation of the program: the nodes must together
    hold every pod's request of each resource (at best at the type cheapest per unit of it); a
    node of type t holds at most ``fits_count`` pods of one shape; and when one type holds
    every shape, those counts round up to whole nodes. 0.0 when some pod fits no option."""
    holding = [o for o in options if any(fits_count(shape, o.allocatable) for shape in shapes)]
    wanted = [(shape, n) for shape, n in zip(shapes, counts, strict=True) if n > 0]
    if not holding or any(
        not any(fits_count(s, o.allocatable) for o in holding) for s, _ in wanted
    ):
        return 0.0
    totals = [sum(n * shape[d] for shape, n in wanted) for d in range(len(shapes[0]))]
    bound = 0.0
    for d, total in enumerate(totals):
        if total > 0:
            per_unit = min(
                o.price_per_hour / o.allocatable[d] for o in holding if o.allocatable[d] > 0
            )
            bound = max(bound, total * per_unit)
    if len(wanted) == 1:
        shape, n = wanted[0]
        per_pod = min(
            o.price_per_hour / fits_count(shape, o.allocatable)
            for o in holding
            if fits_count(shape, o.allocatable)
        )
        bound = max(bound, n * per_pod)
    if len(holding) == 1:
        only = holding[0]
        nodes = max(
            [-(-total // only.allocatable[d]) for d, total in enumerate(totals) if total > 0]
            + [-(-n // fits_count(shape, only.allocatable)) for shape, n in wanted]
        )
        bound = max(bound, nodes * only.price_per_hour)
    return bound


def useful_options(shapes: Sequence[tuple[int, ...]], options: Sequence[NodeOption]) -> list[int]:
    """Options that hold some shape and that no other option dominates (as much room for
    everything, no dearer): an optimal packing never needs a dominated one. Cheapest first, so
    a dominator is always seen before what it dominates."""
    import numpy as np

    holding = [
        i for i, o in enumerate(options) if any(fits_count(s, o.allocatable) for s in shapes)
    ]
    holding.sort(
        key=lambda i: (options[i].price_per_hour, tuple(-a for a in options[i].allocatable))
    )
    room = np.array([options[i].allocatable for i in holding], dtype=np.int64)
    kept: list[int] = []
    for position in range(len(holding)):
        if not kept or not (room[kept] >= room[position]).all(axis=1).any():
            kept.append(position)
    return [holding[position] for position in kept]


@dataclass
class _Program:
    """The integer program's columns and rows. Column ``(t, -1)`` is ``x_t``, ``(t, s)`` is
    ``y_ts``; a row is (lower, upper, [(column, coefficient)])."""

    shapes: Sequence[tuple[int, ...]]
    counts: Sequence[int]
    options: Sequence[NodeOption]
    useful: Sequence[int]
    columns: list[tuple[int, int]] = field(default_factory=list)
    fit: dict[tuple[int, int], int] = field(default_factory=dict)
    rows: list[tuple[float, float, list[tuple[int, float]]]] = field(default_factory=list)

    def build(self, infinity: float) -> None:
        """Columns for every type and every shape one of its nodes holds; the rows of the
        module docstring, each resource row scaled by the type's room (bytes would upset the
        solver's tolerances)."""
        for t in self.useful:
            self.columns.append((t, -1))
            for s, shape in enumerate(self.shapes):
                most = fits_count(shape, self.options[t].allocatable)
                if most > 0:
                    self.columns.append((t, s))
                    self.fit[(t, s)] = most
        index = {column: i for i, column in enumerate(self.columns)}
        for s, count in enumerate(self.counts):
            placed = [(index[(t, s)], 1.0) for t in self.useful if (t, s) in index]
            self.rows.append((float(count), float(count), placed))
        for t in self.useful:
            nodes = index[(t, -1)]
            on_type = [s for s in range(len(self.shapes)) if (t, s) in index]
            for d, room in enumerate(self.options[t].allocatable):
                used = [(index[(t, s)], self.shapes[s][d] / max(room, 1)) for s in on_type]
                self.rows.append((-infinity, 0.0, [*used, (nodes, -1.0)]))
            for s in on_type:
                limit = -float(self.fit[(t, s)])
                self.rows.append((-infinity, 0.0, [(index[(t, s)], 1.0), (nodes, limit)]))
            for k, large in self._large_sets(t, on_type):
                entries = [(index[(t, s)], 1.0) for s in large]
                self.rows.append((-infinity, 0.0, [*entries, (nodes, -float(k))]))

    def _large_sets(self, t: int, on_type: Sequence[int]) -> list[tuple[int, list[int]]]:
        """(k, shapes): a node of type t holds at most k pods of these shapes whatever their
        mix. For each resource and each request size v some shape asks for, the shapes asking
        at least v of it: k = allocatable // v. Without these rows the program counts room per
        type, not per node, and would put two 16 GiB pods on one 30 GiB node's worth of room.
        One resource per row: pods large in different resources can share a node (60 % of the
        cpu and 60 % of the memory fit beside 10 % and 10 %)."""
        room = self.options[t].allocatable
        tightest: dict[tuple[int, ...], int] = {}
        for d, free in enumerate(room):
            for v in sorted({self.shapes[s][d] for s in on_type if self.shapes[s][d]}):
                large = tuple(s for s in on_type if self.shapes[s][d] >= v)
                if len(large) > 1:
                    tightest[large] = min(tightest.get(large, free // v), free // v)
        return [(k, list(large)) for large, k in sorted(tightest.items())]

    def start(self) -> list[float] | None:
        """A feasible point: every pod on nodes of the one type that costs least that way
        (enough nodes for each resource and for each shape's per-node limit)."""
        best: tuple[float, int, int] | None = None
        pairs = list(zip(self.shapes, self.counts, strict=True))
        for t in self.useful:
            room = self.options[t].allocatable
            if any(fits_count(shape, room) == 0 for shape, n in pairs if n):
                continue
            by_resource = [
                -(-sum(n * shape[d] for shape, n in pairs) // room[d])
                for d in range(len(room))
                if room[d]
            ]
            by_shape = [-(-n // fits_count(shape, room)) for shape, n in pairs if n]
            nodes = max([*by_resource, *by_shape], default=0)
            cost = nodes * self.options[t].price_per_hour
            if best is None or cost < best[0]:
                best = (cost, t, nodes)
        if best is None:
            return None
        _, chosen, nodes = best
        return [
            0.0 if t != chosen else float(nodes) if s < 0 else float(self.counts[s])
            for t, s in self.columns
        ]

    def counts_per_type(self, values: Sequence[float]) -> dict[int, tuple[int, list[int]]]:
        """A solution as option -> (nodes, pods per shape)."""
        plan: dict[int, tuple[int, list[int]]] = {}
        for (t, s), value in zip(self.columns, values, strict=True):
            amount = round(value)
            if amount <= 0:
                continue
            nodes, per_shape = plan.get(t, (0, [0] * len(self.shapes)))
            if s < 0:
                nodes = amount
            else:
                per_shape[s] = amount
            plan[t] = (nodes, per_shape)
        return plan


def _highs(program: _Program, settings: PackingSettings, *, integer: bool) -> Any:
    """A HiGHS instance holding the program (or its LP relaxation), run within the budget."""
    import numpy as np
    from highspy import HighsLp, HighsSolution, HighsVarType, MatrixFormat, kHighsInf
    from highspy._core import _Highs  # highspy.Highs() prints a banner on stdout; plan's JSON

    program.build(kHighsInf)
    columns, rows = program.columns, program.rows
    lp = HighsLp()
    lp.num_col_, lp.num_row_ = len(columns), len(rows)
    costs = [program.options[t].price_per_hour if s < 0 else 0.0 for t, s in columns]
    lp.col_cost_ = np.array(costs, dtype=float)
    lp.col_lower_ = np.zeros(len(columns))
    lp.col_upper_ = np.full(len(columns), kHighsInf)
    lp.row_lower_ = np.array([low for low, _, _ in rows], dtype=float)
    lp.row_upper_ = np.array([high for _, high, _ in rows], dtype=float)
    if integer:
        lp.integrality_ = [HighsVarType.kInteger] * len(columns)
    matrix = lp.a_matrix_
    matrix.format_ = MatrixFormat.kRowwise
    matrix.num_col_, matrix.num_row_ = len(columns), len(rows)
    matrix.start_ = np.cumsum([0, *(len(entries) for _, _, entries in rows)], dtype=np.int32)
    matrix.index_ = np.array([c for _, _, entries in rows for c, _ in entries], dtype=np.int32)
    matrix.value_ = np.array([v for _, _, entries in rows for _, v in entries], dtype=float)
    solver = _Highs()
    solver.setOptionValue("output_flag", False)
    settings.limit(solver)
    solver.setOptionValue("mip_rel_gap", 1e-4)
    solver.passModel(lp)
    start = program.start() if integer else None
    if start is not None:
        solution = HighsSolution()
        solution.col_value = start
        solution.value_valid = True
        solver.setSolution(solution)
    solver.run()
    return solver


def _likely_types(program: _Program, settings: PackingSettings) -> list[int]:
    """The ``settings.max_types`` types the LP relaxation prices best: those it uses, then the
    lowest reduced costs (a type whose reduced cost exceeds the gap cannot improve the answer;
    the rest are the likeliest to)."""
    solver = _highs(program, settings, integer=False)
    solution = solver.getSolution()
    if not solution.dual_valid:
        return list(program.useful)
    score = {
        t: (-value, reduced)
        for (t, s), value, reduced in zip(
            program.columns, solution.col_value, solution.col_dual, strict=True
        )
        if s < 0
    }
    ranked = sorted(program.useful, key=lambda t: score[t])
    return sorted(ranked[: settings.max_types])


def _solve_counts(program: _Program, settings: PackingSettings) -> dict[int, tuple[int, list[int]]]:
    """The program solved by HiGHS from the single-type start, within the settings' budget:
    option -> (nodes, pods per shape); empty when HiGHS holds no feasible point."""
    solver = _highs(program, settings, integer=True)
    if solver.getInfo().primal_solution_status != 2:  # 2: HiGHS holds a feasible point
        return {}
    return program.counts_per_type(solver.getSolution().col_value)


def _realise(
    plan: dict[int, tuple[int, list[int]]],
    shapes: Sequence[tuple[int, ...]],
    counts: Sequence[int],
    options: Sequence[NodeOption],
    useful: Sequence[int],
    *,
    spread: bool,
) -> list[PackedNode]:
    """Nodes from the program's counts: each type's pods spread evenly over its nodes
    (``spread``) or first-fit, largest shape first; what does not fit goes to a node with room,
    else to new nodes."""
    order = sorted(range(len(shapes)), key=lambda s: tuple(-x for x in shapes[s]))
    nodes: list[tuple[int, list[int], list[int]]] = []  # (option, room, counts)
    left = list(counts)
    for t in sorted(plan):
        node_count, per_shape = plan[t]
        mine = [(t, list(options[t].allocatable), [0] * len(shapes)) for _ in range(node_count)]
        for s in order:
            wanted = min(per_shape[s], left[s])
            if not mine or wanted <= 0:
                continue
            base, extra = divmod(wanted, len(mine))
            for k, (_, room, got) in enumerate(mine):
                share = base + (1 if k < extra else 0) if spread else wanted
                take = min(share, fits_count(shapes[s], room))
                _add(room, got, shapes[s], s, take)
                left[s] -= take
                wanted -= take
        nodes.extend(mine)
    for s in order:
        for _, room, got in nodes:
            if left[s] <= 0:
                break
            take = min(left[s], fits_count(shapes[s], room))
            _add(room, got, shapes[s], s, take)
            left[s] -= take
    while any(left):
        opened = _cheapest_new_node(left, shapes, options, useful, order)
        if opened is None:
            return []
        t, got = opened
        nodes.append((t, [], got))
        left = [n - g for n, g in zip(left, got, strict=True)]
    return [PackedNode(t, tuple(got)) for t, _, got in nodes if any(got)]


def _add(room: list[int], got: list[int], request: Sequence[int], shape: int, count: int) -> None:
    if count <= 0:
        return
    for d, amount in enumerate(request):
        room[d] -= amount * count
    got[shape] += count


def _cheapest_new_node(
    left: Sequence[int],
    shapes: Sequence[tuple[int, ...]],
    options: Sequence[NodeOption],
    useful: Sequence[int],
    order: Sequence[int],
) -> tuple[int, list[int]] | None:
    """The node with the lowest price per pod placed of what is left (largest first)."""
    best: tuple[float, int, list[int]] | None = None
    for t in useful:
        room = list(options[t].allocatable)
        got = [0] * len(shapes)
        for s in order:
            _add(room, got, shapes[s], s, min(left[s], fits_count(shapes[s], room)))
        placed = sum(got)
        if placed == 0:
            continue
        score = options[t].price_per_hour / placed
        if best is None or score < best[0] - EPSILON:
            best = (score, t, got)
    return None if best is None else (best[1], best[2])


def cheapest_packing(
    shapes: Sequence[tuple[int, ...]],
    counts: Sequence[int],
    options: Sequence[NodeOption],
    settings: PackingSettings,
) -> list[PackedNode]:
    """Nodes holding ``counts[s]`` pods of each shape ``shapes[s]`` at the lowest price the
    integer program finds within its budget (empty when it finds none)."""
    # Only the resources some pod asks for matter (to fit, and to compare types).
    dimensions = [d for d in range(len(shapes[0])) if any(shape[d] for shape in shapes)]
    shapes = [tuple(shape[d] for d in dimensions) for shape in shapes]
    options = [
        NodeOption(tuple(o.allocatable[d] for d in dimensions), o.price_per_hour) for o in options
    ]
    useful = useful_options(shapes, options)
    if not useful:
        return []
    if len(useful) > settings.max_types:
        useful = _likely_types(_Program(shapes, counts, options, useful), settings)
    plan = _solve_counts(_Program(shapes, counts, options, useful), settings)
    if not plan:
        return []
    ways = [_realise(plan, shapes, counts, options, useful, spread=s) for s in (True, False)]
    # Imported here: pattern_packing builds on this module's values.
    from scheduler_svc.core.pattern_packing import downsized, pattern_packing

    chosen = sorted(plan)
    others = [t for t in useful if t not in plan]
    known = [nodes for nodes in ways if nodes]
    ways.append(pattern_packing(shapes, counts, options, [*chosen, *others], settings, known=known))
    found = [downsized(nodes, shapes, options) for nodes in ways if nodes]
    return min(found, key=lambda nodes: packing_cost(nodes, options)) if found else []


__all__ = [
    "NodeOption",
    "PackedNode",
    "PackingSettings",
    "cheapest_packing",
    "cost_lower_bound",
    "packing_cost",
    "useful_options",
]
