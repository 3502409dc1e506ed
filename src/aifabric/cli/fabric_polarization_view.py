"""`aifabric fabric polarization FILE --same-index K`: the book's Chapter 13 case of hash polarization in a Clos
(every leaf's hash gives the same result for flows to one endpoint), on the file's fabric and on the same hardware
cabled the other way (full mesh <-> partial mesh)."""

from __future__ import annotations

from collections import Counter

from rich.markup import escape
from rich.table import Table


def _variants(hw):
    """The file's fabric, and the same hardware with the other spine cabling when that is a valid design."""
    from ..scenario.checks_fabric import check_fabric_spec

    fs = hw.fabric
    out = [(f"{fs.spine_cabling} (the file's)", fs)]
    spines = fs.spines
    if fs.spine_cabling == "full-mesh" and spines >= 2 and fs.leaf_oversubscription is None:
        other = fs.model_copy(update={"spine_cabling": "partial-mesh", "spines_per_leaf": max(1, spines // 2)})
    else:
        other = fs.model_copy(update={"spine_cabling": "full-mesh", "spines_per_leaf": None})
    if not check_fabric_spec(hw.cluster, other):
        label = f"{other.spine_cabling}" + (
            f", {other.spines_per_leaf} spines per leaf" if other.spine_cabling == "partial-mesh" else ""
        )
        out.append((label, other))
    return out


def print_same_index(hw, fabric, target: int, index: int, console) -> int:
    from ..fabric import Router, build
    from ..fabric.polarization import same_index_spines

    nic = fabric.rank_nic(target)
    dst_leaf = next(fabric.links[li].dst for li in fabric.out_links[nic] if fabric.is_switch(fabric.links[li].dst))
    console.print(
        f"[bold]{escape(hw.name)}[/]: every leaf's ECMP hash gives index {index} for the flows to rank "
        f"{target}'s leaf {escape(dst_leaf)} (identical headers, one deterministic hash: Deep Learning for "
        "Network Engineers, Chapter 13)"
    )
    for label, fs in _variants(hw):
        f = fabric if fs is hw.fabric else build(hw.cluster, fs, hw.name)
        picks = same_index_spines(Router(f, hash_seed=fs.ecmp_hash_seed), dst_leaf, index)
        if not picks:
            console.print(f"{label}: no other leaf reaches {escape(dst_leaf)} through a spine")
            continue
        per_spine = Counter(picks.values())
        console.print(
            f"\n[bold]{escape(label)}[/]: {len(picks)} leaves -> {len(per_spine)} distinct "
            f"spine{'s' * (len(per_spine) > 1)}; the busiest spine takes the flows of "
            f"{max(per_spine.values())} of them",
            highlight=False,
        )
        t = Table()
        t.add_column("leaf")
        t.add_column(f"spine at hash index {index}")
        for leaf, spine in list(picks.items())[:16]:
            t.add_row(escape(leaf), escape(spine))
        console.print(t)
        if len(picks) > 16:
            console.print(f"  ... {len(picks) - 16} more leaves")
    return 0
