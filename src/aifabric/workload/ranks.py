"""Rank <-> (tp, cp, dp, pp) coordinates and the groups of every parallel dimension, in one place, as pure
functions (after Megatron-core's `parallel_state`).

The order names the dimensions from the fastest-varying to the slowest. Megatron's default is
"tp-cp-dp-pp": tensor-parallel ranks are consecutive, so with tp <= GPUs per server a tensor-parallel
group stays inside one server (on NVLink) and ranks follow torchrun (`rank = server x gpus_per_server +
local`). Expert parallelism re-slices the data-parallel dimension (Megatron's expert-data-parallel
view): an expert-parallel group is `ep` consecutive data-parallel indices with the same tp, cp and pp.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DIMS = ("tp", "cp", "dp", "pp")
DEFAULT_ORDER = "tp-cp-dp-pp"


def parse_order(order: str) -> tuple[str, ...]:
    dims = tuple(order.split("-"))
    if sorted(dims) != sorted(DIMS):
        raise ValueError(f"order must name each of {', '.join(DIMS)} once, e.g. {DEFAULT_ORDER!r} (got {order!r})")
    return dims


@dataclass(frozen=True)
class RankLayout:
    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1  # divides dp
    order: str = DEFAULT_ORDER
    _strides: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        stride, strides = 1, {}
        for d in parse_order(self.order):
            strides[d] = stride
            stride *= getattr(self, d)
        object.__setattr__(self, "_strides", strides)
        if min(self.tp, self.pp, self.dp, self.cp, self.ep) < 1:
            raise ValueError("every parallel size must be >= 1")
        if self.dp % self.ep:
            raise ValueError(f"ep ({self.ep}) must divide dp ({self.dp})")

    @property
    def world_size(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    def size(self, dim: str) -> int:
        return getattr(self, dim)

    def coords(self, rank: int) -> dict[str, int]:
        """{"tp": i, "cp": j, "dp": k, "pp": l} of a rank."""
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank {rank} outside 0..{self.world_size - 1}")
        return {d: (rank // self._strides[d]) % self.size(d) for d in DIMS}

    def rank(self, tp: int = 0, cp: int = 0, dp: int = 0, pp: int = 0) -> int:
        st = self._strides
        return tp * st["tp"] + cp * st["cp"] + dp * st["dp"] + pp * st["pp"]

    def group(self, rank: int, dim: str) -> tuple[int, ...]:
        """The ranks that differ from `rank` only in `dim` (in index order); "ep": its expert-parallel group;
        "edp": the ranks holding the same experts (expert-data-parallel); "dp-cp": data and context parallel
        together; "embd": the first and last stage's ranks holding a tied embedding (Megatron's embedding group).
        Arithmetic on the strides (a 16,384-rank layout asks for ~10^5 groups)."""
        c = self.coords(rank)
        st = self._strides
        if dim in DIMS:
            step = st[dim]
            base = rank - c[dim] * step
            return tuple(range(base, base + self.size(dim) * step, step))
        s_dp = st["dp"]
        no_dp = rank - c["dp"] * s_dp
        first = c["dp"] - c["dp"] % self.ep
        if dim == "ep":
            return tuple(range(no_dp + first * s_dp, no_dp + (first + self.ep) * s_dp, s_dp))
        if dim == "edp":
            off = c["dp"] % self.ep
            return tuple(range(no_dp + off * s_dp, no_dp + self.dp * s_dp, self.ep * s_dp))
        if dim == "embd":  # first and last pipeline stage: the copies of a tied embedding
            ends = sorted({0, self.pp - 1})
            return tuple(self.rank(**{**c, "pp": s}) for s in ends) if c["pp"] in ends else (rank,)
        if dim == "dp-cp":  # gradients of dense weights are reduced over data and context parallel ranks
            base = no_dp - c["cp"] * st["cp"]
            if self.cp == 1:
                return tuple(range(base, base + self.dp * s_dp, s_dp))
            return tuple(base + i * s_dp + j * st["cp"] for i in range(self.dp) for j in range(self.cp))
        raise ValueError(f"unknown dimension {dim!r}")

    def groups(self, dim: str) -> list[tuple[int, ...]]:
        """Every group of a dimension, each once, ordered by their first rank."""
        seen: dict[tuple[int, ...], None] = {}
        for r in range(self.world_size):
            seen.setdefault(self.group(r, dim), None)
        return sorted(seen, key=min)

    def stage_ranks(self, pp: int) -> list[int]:
        return [r for r in range(self.world_size) if self.coords(r)["pp"] == pp]
