"""What each rank does in an iteration, in order: compute with a duration, collectives with a group,
point-to-point sends and receives, and waits.

Streams (as CUDA streams in PyTorch / NCCL): a rank's ops run in program order on its main stream. A
`Collective` with `blocking=False` is launched at its place in program order on the named `stream` and
the main stream goes on without it (PyTorch DDP's bucket AllReduce during backward, ZeRO-3 prefetch);
collectives on one stream run one after another. `Wait(stream)` makes the main stream wait until
everything launched on that stream so far has finished.

A `Send` is posted when the sender reaches it (the data is ready) and does not hold the sender up; the
matching `Recv` (same key) holds the receiver until the data has arrived (activations and gradients
between pipeline stages).

Sizes follow nccl-tests: `elements` is the whole buffer of the collective (AllReduce: the buffer each
rank reduces; AllGather: the gathered output; ReduceScatter: the input before scattering; AllToAll:
all a rank sends, to every destination together).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .ranks import RankLayout


@dataclass(frozen=True)
class Compute:
    name: str  # e.g. "forward", "backward"
    flops: float  # FLOPs of the op, 2 per multiply-accumulate, recomputation included (hardware FLOPs)
    duration_s: float
    kernels: tuple[tuple[str, float], ...] = ()  # seconds by kernel kind (kernels/model.py KINDS), summing to
    # duration_s; ("all", duration_s) when the time comes from a `compute_efficiency` override


@dataclass(frozen=True)
class Collective:
    """One rank's part in a collective. Every member of `group` has an op with the same `key`."""

    key: str  # identifies the collective instance across ranks, e.g. "it0/grad-allreduce"
    op: str  # "all-reduce", "all-gather", "reduce-scatter", "all-to-all", ...
    group: tuple[int, ...]
    elements: int
    bytes_per_element: int
    label: str = ""  # what is communicated, e.g. "gradients"
    blocking: bool = True  # False: launched on `stream`, the main stream does not wait (see Wait)
    stream: str = "comm"
    dim: str = ""  # the parallel dimension it serves: "dp", "tp", "pp", "ep", "cp", "zero"

    @property
    def size_bytes(self) -> int:
        return self.elements * self.bytes_per_element


@dataclass(frozen=True)
class Send:
    key: str  # the matching Recv has the same key
    src: int
    dst: int
    size_bytes: int
    label: str = ""  # e.g. "activations"
    dim: str = "pp"


@dataclass(frozen=True)
class Recv:
    key: str
    src: int
    dst: int
    size_bytes: int
    label: str = ""
    dim: str = "pp"


@dataclass(frozen=True)
class Wait:
    """The main stream waits for every non-blocking collective launched so far on `stream`."""

    stream: str = "comm"


@dataclass(frozen=True)
class Block:
    """A run of a group's main-stream ops that its members execute in lockstep: compute ops and blocking
    collectives of `group` (tensor parallelism), as the same objects on every member. Only in
    `Workload.blocked`, the form the engines lower when scale-up collectives are folded
    (engines/fold.py); `Workload.ranks` keeps the ops one by one."""

    key: str  # identifies the instance across the group's members
    group: tuple[int, ...]
    ops: tuple  # Compute and Collective ops, in program order
    shape: int  # blocks with the same shape hold the same op sequence (on another group): a cache key
    compute_s: float  # the compute ops' durations, summed


class StageTransfer:
    """A pipeline send or receive in the op list that a pipeline stage's ranks share (`Workload.blocked`): rank r
    sends to (or receives from) `Workload.pipeline_peers[r][vstage % pp]`, the key being `<key>@<sender>`.
    `Workload.ranks` spells it out as each rank's own `Send` / `Recv`."""

    __slots__ = ("key", "kind", "label", "size_bytes", "vstage")

    def __init__(self, kind: str, key: str, vstage: int, size_bytes: int, label: str):
        self.kind, self.key, self.vstage, self.size_bytes, self.label = kind, key, vstage, size_bytes, label


Op = Compute | Collective | Send | Recv | Wait


@dataclass(frozen=True)
class Workload:
    """Per-rank ordered operations plus the facts the report needs."""

    name: str
    ranks: list[list[Op]]
    params: int
    iterations: int
    flops_per_iteration: float  # model FLOPs of one iteration, all ranks together (no recomputation: MFU)
    description: str = ""
    blocked: list[list] | None = None  # per rank, runs of lockstep ops as `Block`s (None: not built)
    hardware_flops_per_iteration: float = 0.0  # every compute op's FLOPs, recomputation included (HFU)
    compute_by_kind_s: tuple[tuple[str, float], ...] = ()  # per iteration, the rank that computes longest
    layout: RankLayout | None = None  # the parallelism plan's ranks (LLM training; None: no plan to show)
    # per rank, the rank of each pipeline stage in its pipeline: where `blocked`'s StageTransfers go (None: none)
    pipeline_peers: list[tuple[int, ...]] | None = None

    @property
    def world_size(self) -> int:
        return len(self.ranks)
