"""A trace file checked like a scenario: every record's fields and types, ranks within the world, and every
collective and transfer matched on the ranks it involves. Each problem names the file and line; all of them are
listed (up to `MAX_PROBLEMS`), and the replay exits 2 instead of crashing or replaying nonsense."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from ..errors import Problem

MAX_PROBLEMS = 50
MAX_WORLD = 1 << 20
COLLECTIVES = ("all-reduce", "all-gather", "broadcast")
LINE = "_line"  # where a record was read (file, line number); kept on the record for later messages


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_time(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _count(rec: dict, key: str, out: list[str], low: int = 0) -> None:
    if key not in rec:
        out.append(f"{key}: required field is missing")
    elif not _is_int(rec[key]) or rec[key] < low:
        out.append(f"{key}: must be an integer >= {low} (got {_short(rec[key])})")


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 60 else text[:60] + "..."


def record_problems(rec: Any, ops: tuple[str, ...]) -> list[str]:
    """What is wrong with one record, field by field (empty when nothing)."""
    if not isinstance(rec, dict):
        return [f"a record is a JSON object (got {type(rec).__name__})"]
    out: list[str] = []
    kind = rec.get("kind")
    if kind not in ("meta", "comm", "step"):
        out.append(f"kind: must be meta, comm or step (got {_short(kind)})")
    _count(rec, "rank", out)
    if kind == "meta":
        _count(rec, "world_size", out, 1)
        if _is_int(rec.get("world_size")) and rec["world_size"] > MAX_WORLD:
            out.append(f"world_size: at most {MAX_WORLD:,} (got {rec['world_size']:,})")
    elif kind == "step":
        _count(rec, "step", out)
        for key in ("start_s", "end_s"):
            if not _is_time(rec.get(key)):
                out.append(f"{key}: must be a finite number of seconds (got {_short(rec.get(key))})")
        if _is_time(rec.get("start_s")) and _is_time(rec.get("end_s")) and rec["end_s"] < rec["start_s"]:
            out.append("end_s: before start_s")
    elif kind == "comm":
        _count(rec, "seq", out)
        _count(rec, "step", out)
        _count(rec, "elements", out)
        _count(rec, "bytes", out)
        op = rec.get("op")
        if op not in ops:
            out.append(f"op: must be one of {', '.join(ops)} (got {_short(op)})")
        group = rec.get("group")
        if not isinstance(group, list) or not group or not all(_is_int(g) and g >= 0 for g in group):
            out.append(f"group: must be a non-empty list of ranks (got {_short(group)})")
        elif op in ("send", "recv") and (len(group) != 2 or group[0] == group[1]):
            out.append(f"group: a {op} names two different ranks, [source, destination] (got {_short(group)})")
        elif op in COLLECTIVES and len(set(group)) != len(group):
            out.append(f"group: a rank given twice (got {_short(group)})")
        elif op == "send" and rec.get("rank") != group[0] or op == "recv" and rec.get("rank") != group[1]:
            out.append(
                f"group: a {op} on rank {_short(rec.get('rank'))} is [source, destination] with this rank "
                f"{'first' if op == 'send' else 'second'} (got {_short(group)})"
            )
        elif _is_int(rec.get("rank")) and rec["rank"] not in group:
            out.append(f"group: does not hold the record's own rank {rec['rank']} (got {_short(group)})")
        for key in ("dtype", "tag"):
            if not isinstance(rec.get(key), str):
                out.append(f"{key}: must be a string (got {_short(rec.get(key))})")
        for key in ("start_s", "end_s"):
            if not _is_time(rec.get(key)):
                out.append(f"{key}: must be a finite number of seconds (got {_short(rec.get(key))})")
        if _is_time(rec.get("start_s")) and _is_time(rec.get("end_s")) and rec["end_s"] < rec["start_s"]:
            out.append("end_s: before start_s")
        if "async_op" in rec and not isinstance(rec["async_op"], bool):
            out.append(f"async_op: must be true or false (got {_short(rec['async_op'])})")
    return out


def where(rec: dict) -> str:
    path, n = rec.get(LINE, ("trace", 0))
    return f"{path} line {n}"


def trace_problems(meta: dict[int, dict], comms: dict[int, list[dict]], steps: dict[int, list[dict]]) -> list[Problem]:
    """Across records: one world size, ranks within it, unique seq per rank, collectives and transfers matched."""
    out: list[Problem] = []
    sizes = {m["world_size"] for m in meta.values()}
    if len(sizes) > 1:
        out.append(Problem("world_size", f"the ranks' meta records disagree: {', '.join(map(str, sorted(sizes)))}"))
    world = max(sizes) if sizes else (max(comms, default=-1) + 1)
    if not any(comms.values()):
        out.append(Problem("", "no comm records: nothing to replay"))
    for rank, recs in [
        *meta.items(),
        *((r, x) for r, lst in comms.items() for x in lst),
        *((r, x) for r, lst in steps.items() for x in lst),
    ]:
        rec_list = recs if isinstance(recs, list) else [recs]
        for rec in rec_list:
            if rank >= world:
                out.append(Problem(where(rec), f"rank {rank} is outside the world of {world} ranks"))
            bad = [g for g in rec.get("group", []) if g >= world]
            if bad:
                out.append(Problem(where(rec), f"group: rank {bad[0]} is outside the world of {world} ranks"))
    if out:
        return out
    colls: dict[tuple, dict[int, dict]] = defaultdict(dict)
    p2p: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for rank, lst in comms.items():
        seen: dict[int, dict] = {}
        coll_count: dict[tuple, int] = defaultdict(int)
        p2p_count: dict[tuple, int] = defaultdict(int)
        for rec in lst:
            if rec["seq"] in seen:
                out.append(
                    Problem(where(rec), f"seq: {rec['seq']} again on rank {rank} (first at {where(seen[rec['seq']])})")
                )
            seen[rec["seq"]] = rec
            group = tuple(rec["group"])
            if rec["op"] in ("send", "recv"):
                k = p2p_count[(group, rec["op"])]
                p2p_count[(group, rec["op"])] += 1
                p2p[(group, k)][rec["op"]] = rec
            else:
                k = coll_count[group]
                coll_count[group] += 1
                colls[(group, k)][rank] = rec
    for (group, k), by_rank in colls.items():
        first = next(iter(by_rank.values()))
        missing = sorted(set(group) - set(by_rank))
        if missing:
            out.append(
                Problem(
                    where(first),
                    f"{first['op']} #{k} over ranks {list(group)} has no match on rank"
                    f"{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing[:8]))}: "
                    "the replay would wait for it forever",
                )
            )
            continue
        for rec in by_rank.values():
            if (rec["op"], rec["elements"]) != (first["op"], first["elements"]):
                out.append(
                    Problem(
                        where(rec),
                        f"{rec['op']} of {rec['elements']} elements, but rank {first['rank']} "
                        f"has {first['op']} of {first['elements']} as #{k} over ranks "
                        f"{list(group)} ({where(first)})",
                    )
                )
                break
    for (group, k), pair in p2p.items():
        if len(pair) == 1:
            ((op, rec),) = pair.items()
            other = "recv" if op == "send" else "send"
            peer = group[1] if op == "send" else group[0]
            out.append(
                Problem(
                    where(rec),
                    f"{op} #{k} from rank {group[0]} to rank {group[1]} has no {other} on rank "
                    f"{peer}: the replay would wait for it forever",
                )
            )
        elif pair["send"]["bytes"] != pair["recv"]["bytes"]:
            out.append(
                Problem(
                    where(pair["recv"]),
                    f"recv of {pair['recv']['bytes']} bytes, but the send "
                    f"({where(pair['send'])}) has {pair['send']['bytes']}",
                )
            )
    return out


def cap(problems: list[Problem]) -> list[Problem]:
    if len(problems) <= MAX_PROBLEMS:
        return problems
    return problems[:MAX_PROBLEMS] + [Problem("", f"... and {len(problems) - MAX_PROBLEMS:,} more problems")]
