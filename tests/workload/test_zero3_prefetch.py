"""ZeRO-3 / FSDP gathers each block's weights one block ahead (PyTorch FSDP, Megatron-Core's FSDP): the order of a
rank's ops says so, and an iteration whose gathers cross the network hides more of them with BACKWARD_PRE than
with BACKWARD_POST."""

from __future__ import annotations

import copy

from aifabric.scenario.load import parse_scenario
from aifabric.simulate import build_workload, simulate
from aifabric.workload.ops import Collective, Compute, Wait

FSDP = {
    "name": "fsdp",
    "seed": 1,
    "cluster": {"gpu": "A100", "servers": 2, "gpus_per_server": 8, "nic_speed_gbps": 100},
    "fabric": {"topology": "rail-optimized", "link_speed_gbps": 100, "switch_radix": 64},
    "workload": {
        "kind": "llm-training",
        "model": {"kind": "transformer", "layers": 4, "hidden": 4096, "heads": 32, "vocab": 50368},
        "parallelism": {"tp": 1, "pp": 1, "zero": 3, "micro_batch_size": 1},
        "global_batch_size": 16,
        "seq_len": 2048,
        "memory_check": False,
    },
}


def _with(prefetch: str) -> dict:
    d = copy.deepcopy(FSDP)
    d["workload"]["parallelism"]["backward_prefetch"] = prefetch
    return d


def _trace(prefetch: str, pass_: str) -> list[str]:
    """Rank 0's ops of the first forward or backward pass: 'G3' a block's gather (L3), 'W' a wait for it, 'C' a
    compute op of a block."""
    ops = build_workload(parse_scenario(_with(prefetch))).ranks[0]
    out = []
    for op in ops:
        key = getattr(op, "key", "")
        if isinstance(op, Collective) and "/zero3-ag@" in key and f"it0/mb0/{pass_}/" in key:
            assert not op.blocking and op.stream == "zero"
            out.append("G" + key.split("/L")[1].split("/")[0])
        elif isinstance(op, Wait) and op.stream == "zero":
            out.append("W")
        elif isinstance(op, Compute) and op.name.startswith((f"{pass_}/attn", f"{pass_}/mlp")):
            out.append("C")
    return "".join(out).lstrip("W")  # the waits of the passes before this one


def test_the_forward_gathers_one_block_ahead_and_the_backward_as_its_prefetch_says():
    # block 0's gather waited for at once, then block 1's launched beside block 0's attention and MLP, and so on
    fwd = _trace("pre", "fwd")
    assert fwd.startswith("G0WG1CCWG2CCWG3CCW"), fwd
    assert _trace("post", "fwd").startswith("G0WG1CCWG2CCWG3CCW")  # the forward is the same either way
    # BACKWARD_PRE: the next block's gather before this block's gradients; BACKWARD_POST: after them
    assert _trace("pre", "bwd").startswith("G3WG2C"), _trace("pre", "bwd")
    post = _trace("post", "bwd")
    assert post.startswith("G3WC") and "G2" in post and post.index("G2") > post.index("C"), post


def test_gathers_across_the_network_hide_behind_the_compute_with_backward_pre():
    pre = simulate(parse_scenario(_with("pre"))).results
    post = simulate(parse_scenario(_with("post"))).results
    assert pre.exposed_communication_s < post.exposed_communication_s
    assert pre.iteration_time_s < post.iteration_time_s
    assert pre.compute_by_kind_s == post.compute_by_kind_s


def test_a_prefetch_without_zero_3_is_refused_by_field():
    import pytest

    from aifabric.errors import InputError

    d = _with("post")
    d["workload"]["parallelism"]["zero"] = 1
    with pytest.raises(InputError) as e:
        parse_scenario(d)
    assert "zero: 3" in {p.path: p.message for p in e.value.problems}["workload.parallelism.backward_prefetch"]
    d["workload"]["parallelism"].update(zero=0, fsdp=True)
    parse_scenario(d)  # FSDP is ZeRO-3
