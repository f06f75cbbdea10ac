"""`metadata.managedFields`: who owns which field, kept on every write (see `apply`).

Pure: the caller passes the live object, the written/applied one, the manager and the time.
An entry is identified by (manager, operation, subresource), as kube-apiserver does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from localcloud.kube.apply import (
    NODE,
    FieldSet,
    Path,
    Shape,
    field_set,
    fields_tree,
    from_fields_v1,
    path_string,
    shape_of,
    to_fields_v1,
)
from localcloud.kube.errors import BadRequest, Conflict
from localcloud.kube.objects import Clock, JsonObject, copy_json, format_timestamp, json_bytes
from localcloud.kube.resources import ResourceType

APPLY: Final = "Apply"
UPDATE: Final = "Update"
MAX_MANAGER_LENGTH: Final = 128


@dataclass(frozen=True)
class Writer:
    """Who writes: `manager` (the fieldManager), the API version written, when, and the
    subresource written ("" for the object itself)."""

    manager: str
    api_version: str
    subresource: str = ""
    time: str = ""  # filled in by the store at the write


def default_manager(user_agent: str) -> str:
    """kube-apiserver's manager for a write without `fieldManager`: the user agent up to its
    first `/` (`kubectl/v1.31.0 (linux/amd64) ...` -> `kubectl`), at most 128 characters."""
    return (user_agent.split("/", 1)[0] or "unknown")[:MAX_MANAGER_LENGTH]


def check_manager(manager: str) -> None:
    if len(manager) > MAX_MANAGER_LENGTH:
        raise BadRequest(
            f"fieldManager: Too long: may not be longer than {MAX_MANAGER_LENGTH} characters"
        )


def _entries(obj: JsonObject | None) -> list[JsonObject]:
    if obj is None:
        return []
    entries = (obj.get("metadata") or {}).get("managedFields") or []
    return [e for e in entries if isinstance(e, dict)]


def _ident(entry: JsonObject) -> tuple[str, str, str]:
    return (
        str(entry.get("manager", "")),
        str(entry.get("operation", "")),
        str(entry.get("subresource", "")),
    )


def _paths(entry: JsonObject) -> set[Path]:
    fields = entry.get("fieldsV1")
    return from_fields_v1(fields) if isinstance(fields, dict) else set()


def _entry(
    writer: Writer, operation: str, paths: set[Path], tree: JsonObject | None = None
) -> JsonObject:
    entry: JsonObject = {
        "manager": writer.manager,
        "operation": operation,
        "apiVersion": writer.api_version,
        "time": writer.time,
        "fieldsType": "FieldsV1",
        "fieldsV1": shared_tree(to_fields_v1(paths) if tree is None else tree),
    }
    if writer.subresource:
        entry["subresource"] = writer.subresource
    return entry


# fieldsV1 trees already handed out, by their JSON: objects written alike own alike fields
# (a thousand pods of one Deployment), so they share one tree instead of keeping ~10 dicts
# each for the garbage collector to scan on every full collection. Sharing is safe because
# stored objects are never edited in place and `copy=True` readers get deep copies.
_SHARED_TREES: dict[bytes, JsonObject] = {}
_SHARED_TREES_MAX: Final = 4096


def shared_tree(tree: JsonObject) -> JsonObject:
    """The one stored fieldsV1 tree equal to `tree` (`tree` itself the first time)."""
    key = json_bytes(tree)
    shared = _SHARED_TREES.get(key)
    if shared is None:
        if len(_SHARED_TREES) >= _SHARED_TREES_MAX:
            _SHARED_TREES.clear()
        shared = _SHARED_TREES[key] = tree
    return shared


def _rebuilt(
    entries: list[JsonObject], sets: dict[tuple[str, str, str], set[Path]], touched: set[Any]
) -> list[JsonObject]:
    """`entries` with their new sets: untouched ones as they were, empty ones dropped."""
    out = []
    for entry in entries:
        ident = _ident(entry)
        paths = sets.get(ident)
        if ident not in touched:
            out.append(entry)
        elif paths:
            out.append({**entry, "fieldsV1": shared_tree(to_fields_v1(paths))})
    return out


def record_update(
    old: JsonObject | None, new: JsonObject, shape: Shape, writer: Writer
) -> list[JsonObject]:
    """The managedFields after a non-apply write of `new` over `old` (None: a create): the
    writer's Update entry gains what it changed, other entries lose it, removed fields leave
    every entry. Unchanged entries keep their time, so a no-op write stays a no-op."""
    if old is None:  # a create: the writer owns everything
        tree = fields_tree(new, shape)
        return [_entry(writer, UPDATE, set(), tree)] if tree else []
    after = field_set(new, shape)
    before = field_set(old, shape)
    changed = {p for p, v in after.items() if p not in before or (v is not NODE and before[p] != v)}
    removed = before.keys() - after.keys()
    entries = _entries(old)
    if not changed and not removed:
        return entries
    own = (writer.manager, UPDATE, writer.subresource)
    sets = {_ident(e): _paths(e) for e in entries}
    touched = set()
    for ident, paths in sets.items():
        remaining = paths - removed - changed if ident != own else paths - removed
        if remaining != paths:
            sets[ident] = remaining
            touched.add(ident)
    out = _rebuilt(entries, sets, touched)
    mine = (sets.get(own, set()) | changed) - removed
    out = [e for e in out if _ident(e) != own]
    if mine:
        out.append(_entry(writer, UPDATE, mine))
    return out


# ----------------------------------------------------------------- apply


def apply(
    live: JsonObject | None, config: JsonObject, shape: Shape, writer: Writer, *, force: bool
) -> JsonObject:
    """The object after `writer` applies `config` to `live` (None: absent), with its
    managedFields; `Conflict` (409) when another manager owns a field `config` sets to
    a different value, unless `force`, which moves the field to `writer`."""
    applied = field_set(config, shape)
    entries = _entries(live)
    own = (writer.manager, APPLY, writer.subresource)
    sets = {_ident(e): _paths(e) for e in entries}
    current = field_set(live, shape) if live is not None else {}
    conflicts: list[tuple[JsonObject, Path]] = []
    touched: set[Any] = set()
    for entry in entries:
        ident = _ident(entry)
        if ident == own:
            continue
        clashing = {
            p
            for p in sets[ident] & applied.keys()
            if applied[p] is not NODE and p in current and current[p] != applied[p]
        }
        if clashing and force:
            sets[ident] -= clashing
            touched.add(ident)
        conflicts.extend((entry, p) for p in sorted(clashing))
    if conflicts and not force:
        raise _conflict_error(conflicts)
    merged: JsonObject = merge(copy_json(live) if live is not None else {}, config, shape)
    others = set().union(*(paths for ident, paths in sets.items() if ident != own))
    # parents first: an item removed by its key takes its fields with it
    for path in sorted(sets.get(own, set()) - applied.keys() - others, key=len):
        remove_path(merged, path)
    previous = next((e for e in entries if _ident(e) == own), None)
    if previous is not None and sets[own] == applied.keys() and not touched:
        # the same configuration again: the entry keeps its time, so an unchanged object
        # stays unchanged (no new resourceVersion), as kube-apiserver skips no-op applies
        out = entries
    else:
        out = [e for e in _rebuilt(entries, sets, touched) if _ident(e) != own]
        out.append(_entry(writer, APPLY, set(applied)))
    merged.setdefault("metadata", {})["managedFields"] = out
    return merged


def _print_manager(entry: JsonObject) -> str:
    text = json.dumps(entry.get("manager", ""))
    if entry.get("subresource"):
        text += f" with subresource {json.dumps(entry['subresource'])}"
    if entry.get("operation") == UPDATE:
        text += f" using {entry.get('apiVersion', '')}"
        if entry.get("time"):
            text += f" at {entry['time']}"
    return text


def _conflict_error(conflicts: list[tuple[JsonObject, Path]]) -> Conflict:
    """The 409 as apiserver's NewConflictError words it."""
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {_print_manager(entry)}",
            "field": path_string(path),
        }
        for entry, path in conflicts
    ]
    if len(conflicts) == 1:
        entry, path = conflicts[0]
        message = (
            f"Apply failed with 1 conflict: conflict with {_print_manager(entry)}: "
            f"{path_string(path)}"
        )
    else:
        by_manager: dict[str, list[str]] = {}
        for entry, path in conflicts:
            by_manager.setdefault(_print_manager(entry), []).append(path_string(path))
        lines = []
        for manager in sorted(by_manager):
            lines.append(f"conflicts with {manager}:")
            lines.extend(f"- {p}" for p in by_manager[manager])
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return Conflict(message, causes=causes)


# ----------------------------------------------------------------- merge and remove


def merge(live: Any, config: Any, shape: Shape) -> Any:
    """`config` merged into `live` (in place where live is a dict) by `shape`."""
    if isinstance(live, dict) and isinstance(config, dict) and shape.kind in ("struct", "map"):
        for name, value in config.items():
            live[name] = merge(live.get(name), value, shape.child(name))
        return live
    if isinstance(live, list) and isinstance(config, list) and shape.kind == "list":
        if (
            shape.list_type == "map"
            and _all_keyed(live, shape.keys)
            and _all_keyed(config, shape.keys)
        ):
            out = list(live)
            index = {_key(i, shape.keys): n for n, i in enumerate(out)}
            for item in config:
                n = index.get(_key(item, shape.keys))
                if n is None:
                    out.append(copy_json(item))
                else:
                    out[n] = merge(out[n], item, shape.item())
            return out
        if shape.list_type == "set":
            return [*live, *(copy_json(i) for i in config if i not in live)]
    return copy_json(config)


def _all_keyed(items: list[Any], keys: tuple[str, ...]) -> bool:
    return bool(keys) and all(isinstance(i, dict) and all(k in i for k in keys) for i in items)


def _key(item: JsonObject, keys: tuple[str, ...]) -> str:
    return json.dumps({k: item[k] for k in sorted(keys)}, separators=(",", ":"))


def remove_path(obj: Any, path: Path) -> None:
    """Remove the value at `path` from `obj`, if it is there."""
    parent, holder, last = None, obj, path[-1]
    for element in path[:-1]:
        parent, holder = holder, _step(holder, element)
        if holder is None:
            return
    del parent
    kind, _, rest = last.partition(":")
    if kind == "f" and isinstance(holder, dict):
        holder.pop(rest, None)
    elif kind in ("k", "v") and isinstance(holder, list):
        for n, item in enumerate(holder):
            if _matches(item, kind, rest):
                del holder[n]
                return


def _step(holder: Any, element: str) -> Any:
    kind, _, rest = element.partition(":")
    if kind == "f":
        return holder.get(rest) if isinstance(holder, dict) else None
    if isinstance(holder, list):
        return next((i for i in holder if _matches(i, kind, rest)), None)
    return None


def _matches(item: Any, kind: str, rest: str) -> bool:
    if kind == "v":
        return bool(item == json.loads(rest))
    keys = json.loads(rest)
    return isinstance(item, dict) and all(item.get(k) == v for k, v in keys.items())


def require_manager(manager: str | None) -> str:
    if not manager:
        raise BadRequest("fieldManager is required for apply requests")
    check_manager(manager)
    return manager


__all__ = ["FieldSet"]


class Writers:
    """The writer of the HTTP write being served (None for in-process writes, which keep the
    managedFields they are given); `applied` when `apply` already computed the entries."""

    def __init__(self) -> None:
        self.writer: Writer | None = None
        self.applied = False

    def writing(self, writer: Writer, *, applied: bool = False) -> _Writing:
        """`writer` writes inside the `with` block (`applied`: its entries are computed)."""
        return _Writing(self, writer, applied=applied)

    def record(
        self, rt: ResourceType, old: JsonObject | None, new: JsonObject, clock: Clock
    ) -> None:
        """Set `new`'s managedFields for this write; an update that names none keeps `old`'s
        (as apiserver: omitted managedFields are preserved, an empty list resets them)."""
        meta = new["metadata"]
        if old is not None and "managedFields" not in meta and "managedFields" in old["metadata"]:
            meta["managedFields"] = old["metadata"]["managedFields"]
        if self.writer is None or self.applied:
            return
        base = old
        if old is not None and meta.get("managedFields") != old["metadata"].get("managedFields"):
            base = {
                **old,
                "metadata": {**old["metadata"], "managedFields": meta.get("managedFields") or []},
            }
        # a create happens at its creationTimestamp: no second clock read and format
        now = (meta.get("creationTimestamp") if old is None else None) or format_timestamp(clock())
        w = self.writer  # built directly: dataclasses.replace costs more on every write
        entries = record_update(
            base, new, shape_of(rt), Writer(w.manager, w.api_version, w.subresource, now)
        )
        if entries:
            meta["managedFields"] = entries
        else:
            meta.pop("managedFields", None)


class _Writing:
    """`Writers.writing`'s block: a class, not a generator, as every HTTP write enters one."""

    __slots__ = ("_applied", "_owner", "_previous", "_writer")

    def __init__(self, owner: Writers, writer: Writer, *, applied: bool) -> None:
        self._owner, self._writer, self._applied = owner, writer, applied
        self._previous: tuple[Writer | None, bool] = (None, False)

    def __enter__(self) -> None:
        owner = self._owner
        self._previous = owner.writer, owner.applied
        owner.writer, owner.applied = self._writer, self._applied

    def __exit__(self, *_: object) -> None:
        self._owner.writer, self._owner.applied = self._previous
