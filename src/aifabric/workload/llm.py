"""LLM training: a transformer, a parallelism plan and a batch -> every rank's ordered operations.

Per iteration, each rank runs its pipeline stage's passes in the schedule's order (workload/pipeline.py).

- Forward of a micro-batch on a stage: receive the activations from the previous stage (pipeline), then
  per decoder block: attention, MLP, each followed by the tensor-parallel exchange of Megatron's
  column/row split (Shoeybi et al. 2019): one AllReduce of the block output (b x s x h), or, with
  sequence parallelism (Korthikanti et al. 2022), an AllGather before and a ReduceScatter after each
  part; context parallelism gathers K and V of the sequence chunks (AllGather over the cp group, dK
  and dV reduce-scattered in the backward); an MoE layer sends each token to its experts and back with
  an AllToAll (dispatch, combine) over the expert-parallel group; the last stage adds the logits. Then
  send the activations to the next stage. Vocabulary parallelism (Megatron's VocabParallelEmbedding and
  vocab_parallel_cross_entropy): the first stage's forward starts with the AllReduce of the embedding
  output (b x s x h); the last stage's logits are followed by the cross-entropy's three AllReduces of
  one fp32 value per token (maximum logit, target logit, sum of exponentials).
- Backward: receive the gradient, recompute (none / selective / full, where full re-runs the forward
  including its tensor-parallel exchanges), the LM head's AllReduce of its input gradient on the last
  stage, the blocks in reverse with the same exchanges mirrored, send the gradient to the previous
  stage (the embedding's backward needs no collective). A dense block part's column-parallel layer (QKV,
  MLP up) runs its backward exchanges beside its GEMMs, as Megatron-LM has since late 2021 and Transformer
  Engine does (`Plan.tp_async_backward`; not with `software: megatron-2021`): under sequence parallelism
  its input is gathered again for the weight gradient while the input gradient's GEMM runs, and the input
  gradient is reduce-scattered (all-reduced without sequence parallelism) while the weight gradient's runs.
- Bytes: in an FP8 run the gathers that feed a linear layer carry FP8 (Transformer Engine casts the input,
  or the output's gradient, before it gathers it), as do the weights' gathers (Megatron-LM's
  fp8_param_gather); every other activation exchange is 16-bit: the reductions of a row-parallel layer's
  output or of an input gradient, context parallelism's K and V, the pipeline's tensors, MoE tokens.
- Data parallelism: gradients are summed over the data (and context) parallel ranks in buckets of
  `bucket_mb` MiB filled with whole parameter tensors in backward order, a bucket closed once it holds at
  least the cap, as PyTorch DDP does (workload/buckets.py; each tensor taken when backward has produced
  it: a block's MLP tensors before the MLP input's AllReduce, its attention and second norm before the
  attention input's, its first norm after; the output layer before the LM head's AllReduce); with overlap
  each bucket's AllReduce is launched on the "dp" stream as soon as it is full during the last
  micro-batch's backward (the last,
  partly filled one when the stage's last backward has produced every gradient, before it sends its
  gradient back), and the optimizer step waits for all of them. A GPU's gradients are those of the
  parameters it holds (workload/memory.py: row-parallel biases and norms are whole on every
  tensor-parallel rank). ZeRO-1/2 (Megatron's distributed optimizer): ReduceScatter of
  the buckets, optimizer step on the shard, AllGather of the updated weights. ZeRO-3 / FSDP: each
  block's weights are gathered (AllGather) before its forward and again before its backward, and its
  gradients reduce-scattered right after its backward, every micro-batch. Expert weights are reduced
  over the expert-data-parallel group.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .. import collector
from ..catalog import GpuSpec
from ..kernels.model import KernelModel
from ..kernels.transformer import TransformerKernels, column_width, optimizer_kernels
from ..models.transformer import Transformer
from ..units import BYTES_PER_ELEMENT
from .compute import LayerFlops, compute_summary, duration_s, iteration_flops, layer_flops, logits_flops
from .memory import (
    block_param_tensors,
    block_params_per_gpu,
    is_moe_layer,
    outer_param_tensors,
    outer_params_per_gpu,
    stage_layers,
    stage_params,
)
from .ops import Block, Collective, Compute, Op, Recv, Send, StageTransfer, Wait, Workload
from .pipeline import F, stage_order
from .plan import Plan
from .ranks import RankLayout

MIB = 2**20


_Placeholder = StageTransfer  # a pipeline Send/Recv in a stage's shared op list, spelled out per rank in `ranks`


class _StageBuilder:
    """Builds the op list of one rank (the template of its pipeline stage; see build_llm_training)."""

    def __init__(
        self,
        model: Transformer,
        plan: Plan,
        gpu: GpuSpec,
        rank: int,
        lay: RankLayout,
        kernels: KernelModel | None = None,
    ):
        self.m, self.p, self.gpu = model, plan, gpu
        self.km = kernels

        def kernels_of(window: int | None) -> TransformerKernels | None:
            if kernels is None:
                return None
            return TransformerKernels(
                kernels,
                model,
                tp=plan.tp,
                cp=plan.cp,
                micro_batch=plan.micro_batch_size,
                seq_len=plan.seq_len,
                sequence_parallel=plan.sequence_parallel,
                attention=plan.attention,
                ep=plan.ep,
                fp8_recipe=plan.fp8_recipe,
                window=window,
            )

        # the kernels of a block attending to the whole sequence, and of one attending through the sliding window
        # (`self.tk` is the current block's: `_block_kernels`)
        self.tk_full = self.tk = kernels_of(None)
        windowed = (
            model.sliding_window is not None and model.sliding_window < plan.seq_len and model.windowed_layers > 0
        )
        self.tk_window = kernels_of(model.sliding_window) if windowed else self.tk_full
        self.c = lay.coords(rank)
        self.stage = self.c["pp"]
        self.tp_group = lay.group(rank, "tp")
        self.cp_group = lay.group(rank, "cp")
        self.dp_group = lay.group(rank, "dp-cp")
        self.ep_group = lay.group(rank, "ep")
        self.edp_group = lay.group(rank, "edp")
        self.embd_group = lay.group(rank, "embd")
        # bytes per element: what a GEMM takes (FP8 in an FP8 run: Transformer Engine casts a linear layer's input,
        # or its output's gradient, before gathering it) and every other activation, 16-bit in an FP8 run
        # (a row-parallel layer's output and its reduction, the attention core, the pipeline's tensors)
        self.gemm_bpe = BYTES_PER_ELEMENT[plan.precision]
        self.bpe = BYTES_PER_ELEMENT["bf16"] if plan.precision == "fp8" else self.gemm_bpe
        self.grad_bpe = BYTES_PER_ELEMENT[plan.grad_precision]  # data-parallel gradient reductions
        self.tokens = plan.micro_batch_size * plan.seq_len  # per micro-batch, whole sequence
        self.eff = plan.compute_efficiency
        self.stage_bounds = plan.virtual_stage_layers(model.layers)
        self.layers = stage_layers(model, plan, self.stage)
        self.flops = {
            (moe, win): layer_flops(model, self.tokens, plan.seq_len, moe, plan.tp, plan.cp, win)
            for moe in ((False, True) if model.moe else (False,))
            for win in (False, True)
        }
        self._compute_cache: dict[tuple[str, float, bool], Compute] = {}
        # outside the blocks: token embedding + positions (first stage), final norm + output layer (last)
        self.first_params, self.last_params = outer_params_per_gpu(model, plan, self.stage)
        self.extra_params = self.first_params + self.last_params
        self.ops: list[Op | _Placeholder] = []
        self._tensors: dict[bool, tuple[list[float], list[float], list[float]]] = {}
        self.head_tensors, self.final_norm_tensors, self.embed_tensors = outer_param_tensors(model, plan, self.stage)

    # ---- small emitters -------------------------------------------------------------------
    def compute(self, name: str, flops: float) -> None:
        """A compute op: timed kernel by kernel (kernels/transformer.py), or, with a `compute_efficiency`
        override, as its FLOPs at that fraction of the dense peak."""
        key = (name, flops, self.tk is not self.tk_full)
        op = self._compute_cache.get(key)
        if op is None:
            if self.tk is None:
                t = duration_s(flops, self.gpu, self.p.precision, self.eff)
                op = Compute(name, flops, t, (("all", t),))
            else:
                seq = self.tk.op(name)
                op = Compute(name, flops, seq.time_s, seq.by_kind())
            self._compute_cache[key] = op
        self.ops.append(op)

    def optimizer(self, shard_params: float, local_params: float) -> None:
        flops = 12.0 * shard_params  # Adam: ~12 FLOP per parameter
        if self.km is None:
            self.compute("optimizer", flops)
            return
        seq = optimizer_kernels(self.km, shard_params, local_params, loss_scaling=self.p.precision == "fp16")
        self.ops.append(Compute("optimizer", flops, seq.time_s, seq.by_kind()))

    def coll(
        self,
        key: str,
        op: str,
        group: tuple[int, ...],
        elements: float,
        label: str,
        dim: str,
        blocking: bool = True,
        stream: str = "comm",
        bpe: int = 0,
    ) -> None:
        if len(group) > 1 and elements > 0:  # Collective(...) without its frozen __init__: 74,706 at 1,024 GPUs
            self.ops.append(
                _new(
                    Collective,
                    key=f"{key}@{group[0]}",
                    op=op,
                    group=group,
                    elements=int(elements),
                    bytes_per_element=bpe or self.bpe,
                    label=label,
                    blocking=blocking,
                    stream=stream,
                    dim=dim,
                )
            )

    # ---- per-block exchanges --------------------------------------------------------------
    def tp_exchange(
        self, key: str, before: bool, label: str = "activations", gemm_input: bool = False, blocking: bool = True
    ) -> None:
        """Megatron: AllReduce after a block part (fwd) / before it (bwd); with sequence parallelism an
        AllGather before and a ReduceScatter after (mirrored in the backward). `gemm_input`: the gathered
        tensor is a linear layer's input (FP8 in an FP8 run). `blocking=False`: on the "tp" stream, beside
        the compute that follows (until a Wait("tp"))."""
        elements = self.tokens / self.p.cp * self.m.hidden
        bpe = self.gemm_bpe if gemm_input else self.bpe
        stream = "comm" if blocking else "tp"
        if self.p.sequence_parallel:
            op = "all-gather" if before else "reduce-scatter"
            if before and gemm_input and self.p.precision == "fp8" and self.p.fp8_recipe == "current":
                # Transformer Engine's current scaling: the shards' amax all-reduced (MAX) before the FP8 gather
                fp32 = BYTES_PER_ELEMENT["fp32"]
                self.coll(f"{key}/amax", "all-reduce", self.tp_group, 1, "FP8 amax", "tp", True, "comm", fp32)
            self.coll(key, op, self.tp_group, elements, label, "tp", blocking, stream, bpe)
        elif not before:
            self.coll(key, "all-reduce", self.tp_group, elements, label, "tp", blocking, stream, bpe)

    def cross_entropy(self, pre: str) -> None:
        """Megatron's vocabulary-parallel cross-entropy on the logits split by vocabulary: AllReduce (MAX) of
        the maximum logit, AllReduce (SUM) of the target's logit, AllReduce (SUM) of the sum of the
        exponentials, one fp32 value per token each. Its backward is local."""
        for part in ("max-logit", "target-logit", "sum-exp"):
            self.coll(
                f"{pre}/xent-{part}",
                "all-reduce",
                self.tp_group,
                self.tokens / self.p.cp,
                f"cross-entropy {part}",
                "tp",
                bpe=BYTES_PER_ELEMENT["fp32"],
            )

    def cp_exchange(self, key: str, backward: bool) -> None:
        """Context parallelism (Transformer Engine's ring of K and V chunks, passed on while each step's attention
        runs): K and V of the whole sequence gathered beside the attention core, on the "cp" stream; in the
        backward gathered again (only the rank's own chunk is kept) and their gradients reduce-scattered."""
        elements = 2 * self.tokens * self.m.kv_dim / self.p.tp  # K and V of the whole sequence
        if backward:
            self.coll(f"{key}/bwd-kv", "all-gather", self.cp_group, elements, "K,V", "cp", False, "cp")
            self.coll(key, "reduce-scatter", self.cp_group, elements, "dK,dV", "cp", False, "cp")
        else:
            self.coll(key, "all-gather", self.cp_group, elements, "K,V", "cp", False, "cp")

    def moe_exchange(self, key: str) -> None:
        m = self.m.moe
        elements = self.tokens / (self.p.cp * self.p.tp) * m.top_k * self.m.hidden
        self.coll(key, "all-to-all", self.ep_group, elements, "tokens", "ep")

    def tensors(self, layer: int) -> tuple[list[float], list[float], list[float]]:
        key = is_moe_layer(self.m, layer)
        if key not in self._tensors:
            self._tensors[key] = block_param_tensors(self.m, self.p, layer)
        return self._tensors[key]

    def layer_params(self, layer: int) -> tuple[float, float]:
        """(dense, expert) parameters of one block on this GPU (row-parallel biases and norms replicated)."""
        return block_params_per_gpu(self.m, self.p, layer)

    def zero3_gather(self, key: str, layer: int) -> None:
        """ZeRO-3 / FSDP: the block's weight shards gathered (dense over data parallel, experts over
        expert-data parallel) on the "zero" stream, beside the compute that follows until a Wait("zero")
        (`zero3_blocks`)."""
        dense, expert = self.layer_params(layer)
        bpe = self.gemm_bpe  # FP8 runs gather FP8 weights (Megatron-LM's fp8_param_gather, NeMo's FP8 recipes)
        for suffix, group, n in (("", self.dp_group, dense), ("-experts", self.edp_group, expert)):
            self.coll(f"{key}/zero3-ag{suffix}", "all-gather", group, n, "weights", "zero", False, "zero", bpe)

    def zero3_blocks(self, pre: str, layers: list[int], ahead: bool = True):
        """The blocks of a pass in order, each one's weights gathered one block ahead, as PyTorch FSDP and
        Megatron-Core's FSDP run them (FSDP's forward issues the next unit's all-gather while the current one
        computes, the host running ahead of the GPU; its backward, with BACKWARD_PRE, before computing the current
        unit's gradients; at most two units' weights in flight, `limit_all_gathers`): the first block's gather is
        waited for at once, every later one runs beside the block before it. `ahead=False` (BACKWARD_POST): the
        next block's gather is issued after the current block's ops, so it runs beside nothing of the compute.
        Yields each layer, its weights gathered; without ZeRO-3, just the layers."""
        if self.p.zero < 3:
            yield from layers
            return
        for i, layer in enumerate(layers):
            if i == 0:
                self.zero3_gather(f"{pre}/L{layer}", layer)
            self.ops.append(Wait("zero"))  # this block's weights
            nxt = layers[i + 1] if i + 1 < len(layers) else None
            if nxt is not None and ahead:
                self.zero3_gather(f"{pre}/L{nxt}", nxt)  # the next block's, beside this one
            yield layer
            if nxt is not None and not ahead:
                self.zero3_gather(f"{pre}/L{nxt}", nxt)  # after this block's ops

    # ---- passes ---------------------------------------------------------------------------
    def _block_kernels(self, layer: int | None) -> None:
        """Time what follows with block `layer`'s kernels (its attention windowed or not); None: outside the
        blocks."""
        windowed = layer is not None and self.m.is_windowed(layer)
        self.tk = self.tk_window if windowed else self.tk_full

    def block_forward(self, pre: str, layer: int, lf: LayerFlops, moe: bool) -> None:
        """One block's forward, its ZeRO-3 weights already gathered (`zero3_blocks`, or the backward's for its
        recomputation)."""
        p = self.p
        self.tp_exchange(f"{pre}/L{layer}/attn-in", True, gemm_input=True)
        if p.cp > 1:  # K and V of the other chunks arrive while the attention core runs
            qkv = self.column_gemm_flops("attn")
            self.compute("fwd/attn:pre", qkv)
            self.cp_exchange(f"{pre}/L{layer}/kv", False)
            self.compute("fwd/attn:core", lf.attention_core)
            self.ops.append(Wait("cp"))
            self.compute("fwd/attn:post", lf.attention - qkv - lf.attention_core)
        else:
            self.compute("fwd/attn", lf.attention)
        self.tp_exchange(f"{pre}/L{layer}/attn-out", False)
        self.tp_exchange(f"{pre}/L{layer}/mlp-in", True, gemm_input=True)
        if moe and p.ep > 1:
            self.moe_exchange(f"{pre}/L{layer}/dispatch")
        self.compute(f"fwd/{'moe' if moe else 'mlp'}", lf.mlp)
        if moe and p.ep > 1:
            self.moe_exchange(f"{pre}/L{layer}/combine")
        self.tp_exchange(f"{pre}/L{layer}/mlp-out", False)

    def block_backward(self, pre: str, layer: int, lf: LayerFlops, moe: bool, buckets: _Buckets | None) -> None:
        """One block's backward, its ZeRO-3 weights already gathered (`zero3_blocks`)."""
        p = self.p
        if p.recompute == "full":
            self.block_forward(f"{pre}/recompute", layer, lf, moe)  # on the weights gathered for the backward
        elif p.recompute == "selective":
            self.compute("recompute/attn-core", lf.attention_core)
        # mirrored: the forward's "out" exchange becomes the backward's "in" and vice versa
        self.tp_exchange(f"{pre}/L{layer}/mlp-out", True, gemm_input=True)
        dense, expert = self.layer_params(layer)
        # DDP buckets take each gradient when backward has produced it (the MLP's, the attention's and the
        # second norm's, the first norm's), so a bucket can be launched between the block's exchanges
        mlp, attn, norm1 = self.tensors(layer) if buckets is not None else ((), (), ())
        if moe:
            if p.ep > 1:
                self.moe_exchange(f"{pre}/L{layer}/combine")
            self.compute("bwd/moe", 2 * lf.mlp)
            if p.ep > 1:
                self.moe_exchange(f"{pre}/L{layer}/dispatch")
            if buckets is not None:
                buckets.add(mlp, expert)
            self.tp_exchange(f"{pre}/L{layer}/mlp-in", False)
        else:
            self.part_backward(
                "mlp",
                f"{pre}/L{layer}/mlp-in",
                2 * lf.mlp,
                after_wgrad=(lambda: buckets.add(mlp, expert)) if buckets is not None else None,
            )
        self.tp_exchange(f"{pre}/L{layer}/attn-out", True, gemm_input=True)
        self.part_backward(
            "attn",
            f"{pre}/L{layer}/attn-in",
            2 * lf.attention,
            after_wgrad=(lambda: buckets.add(attn)) if buckets is not None else None,
            cp_key=f"{pre}/L{layer}/kv",
            core_flops=lf.attention_core,
        )
        if p.zero >= 3:  # FSDP: each unit's gradients reduce-scattered right after its backward
            self.coll(
                f"{pre}/L{layer}/zero3-rs",
                "reduce-scatter",
                self.dp_group,
                dense,
                "gradients",
                "zero",
                blocking=False,
                stream="dp",
                bpe=self.grad_bpe,
            )
            self.coll(
                f"{pre}/L{layer}/zero3-rs-experts",
                "reduce-scatter",
                self.edp_group,
                expert,
                "gradients",
                "zero",
                blocking=False,
                stream="dp",
                bpe=self.grad_bpe,
            )
        elif buckets is not None:
            buckets.add(norm1)

    def part_backward(
        self,
        part: str,
        key: str,
        flops: float,
        after_wgrad: Callable[[], None] | None = None,
        cp_key: str = "",
        core_flops: float = 0.0,
    ) -> None:
        """The backward of a dense block part (attn, mlp) and the exchange of its input gradient. With
        `tp_async_backward` (Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication, Transformer Engine's
        Linear alike), its column-parallel layer (QKV, MLP up) runs its exchanges beside its GEMMs: the layer's
        input, kept as a 1/tp shard under sequence parallelism, gathered again for the weight gradient while the
        input gradient's GEMM runs; the input gradient reduced (ReduceScatter, or AllReduce without sequence
        parallelism) while the weight gradient's GEMM runs. With context parallelism (`cp_key`) the attention's
        core runs beside its ring (`cp_exchange`; `core_flops`: its forward FLOPs). `after_wgrad`: what follows
        the weight gradient (DDP buckets)."""
        name = f"bwd/{part}"
        gemm = self.column_gemm_flops(part)
        core = self.p.cp > 1 and part == "attn" and bool(cp_key)  # the attention core beside the cp ring
        if core:
            lf_core = 2.0 * core_flops
            head = flops - 2.0 * gemm - lf_core  # the output projection's two GEMMs
            self.compute(f"{name}:head", head)
            self.cp_exchange(cp_key, True)
            self.compute(f"{name}:core", lf_core)
            self.ops.append(Wait("cp"))
        if self.p.tp == 1 or not self.p.tp_async_backward:  # the rest as one op, then its exchange
            if core:
                self.compute(f"{name}:rest", 2.0 * gemm)
            else:
                self.compute(name, flops)
            if after_wgrad is not None:
                after_wgrad()
            self.tp_exchange(key, False)
            return
        if core:
            self.compute(f"{name}:tail", 0.0)
        else:
            self.compute(f"{name}:pre", flops - 2.0 * gemm)
        if self.p.sequence_parallel:
            elements = self.tokens / self.p.cp * self.m.hidden
            label = "layer input for the weight gradient"
            self.coll(f"{key}/regather", "all-gather", self.tp_group, elements, label, "tp", False, "tp", self.gemm_bpe)
        self.compute(f"{name}:dgrad", gemm)
        if self.p.sequence_parallel:
            self.ops.append(Wait("tp"))
        self.tp_exchange(key, False, blocking=False)
        self.compute(f"{name}:wgrad", gemm)
        self.ops.append(Wait("tp"))
        if after_wgrad is not None:
            after_wgrad()
        self.compute(f"{name}:post", 0.0)

    def column_gemm_flops(self, part: str) -> float:
        """FLOPs of one GEMM of a block part's column-parallel layer (QKV, MLP up) on this rank, forward or
        either of its backward's."""
        return 2.0 * (self.tokens / self.p.cp) * self.m.hidden * column_width(self.m, part) / self.p.tp

    def chunk_layers(self, chunk: int) -> list[int]:
        vs = chunk * self.p.pp + self.stage
        return list(self.stage_bounds[vs])

    def act_bytes(self) -> int:
        """Bytes one rank sends to the next stage: the activation (b x s x h), split by tp with sequence
        parallelism or Megatron's pipeline scatter/gather."""
        elements = self.tokens / self.p.cp * self.m.hidden
        if self.p.sequence_parallel or self.p.pipeline_scatter_gather:  # either splits it by tp (not both)
            elements /= self.p.tp
        return int(elements) * self.bpe

    def pipeline_gather(self, key: str, label: str) -> None:
        """Megatron's scatter/gather: the 1/tp slices the tensor-parallel ranks received, all-gathered."""
        if self.p.pipeline_scatter_gather and not self.p.sequence_parallel:
            self.coll(key, "all-gather", self.tp_group, self.tokens / self.p.cp * self.m.hidden, label, "tp")

    def run_pass(self, it: int, kind: str, mb: int, chunk: int, last_mb: bool, final: bool = False) -> None:
        """One forward or backward pass of a micro-batch over a chunk of layers. Vocabulary parallelism
        (Megatron): the first virtual stage's forward starts with the embedding's AllReduce (with sequence
        parallelism a ReduceScatter; its backward then AllGathers the gradient), the last one's ends with
        the cross-entropy's three small AllReduces after the logits, and its backward starts with the LM
        head's AllReduce of the input gradient (with sequence parallelism an AllGather of the input in
        forward and a ReduceScatter backward). `final`: the stage's last backward of the iteration, when
        DDP's last bucket is launched (its last gradient is ready), before the gradient is sent back."""
        p, m = self.p, self.m
        vs = chunk * p.pp + self.stage
        last_vs = p.virtual_stages - 1
        pre = f"it{it}/mb{mb}"
        layers = self.chunk_layers(chunk)
        size = self.act_bytes()
        zero3_extra = p.zero >= 3 and chunk == 0 and self.extra_params > 0
        if zero3_extra:  # FSDP's root unit: embedding, final norm, output layer
            self.coll(
                f"{pre}/{kind}/extra-zero3-ag",
                "all-gather",
                self.dp_group,
                self.extra_params,
                "weights",
                "zero",
                bpe=self.gemm_bpe,
            )
        if kind == F:
            if vs > 0 and p.pp > 1:
                self.ops.append(_Placeholder("recv", f"{pre}/act{vs - 1}to{vs}", vs - 1, size, "activations"))
                self.pipeline_gather(f"{pre}/act{vs - 1}to{vs}/gather", "pipeline activations")
            if vs == 0:
                if self.tk is not None:
                    self.compute("fwd/embedding", 0.0)
                self.tp_exchange(f"{pre}/fwd/embedding", False, "embedding output")
            for layer in self.zero3_blocks(f"{pre}/fwd", layers):
                moe = is_moe_layer(m, layer)
                self._block_kernels(layer)
                self.block_forward(f"{pre}/fwd", layer, self.flops[(moe, m.is_windowed(layer))], moe)
            self._block_kernels(None)
            if vs == last_vs:
                self.tp_exchange(f"{pre}/fwd/head-in", True, "LM head input")
                self.compute("fwd/logits", logits_flops(m, self.tokens, p.tp, p.cp))
                self.cross_entropy(f"{pre}/fwd")
            elif p.pp > 1:
                self.ops.append(_Placeholder("send", f"{pre}/act{vs}to{vs + 1}", vs + 1, size, "activations"))
            return
        if vs < last_vs and p.pp > 1:
            self.ops.append(_Placeholder("recv", f"{pre}/grad{vs + 1}to{vs}", vs + 1, size, "activation gradients"))
            self.pipeline_gather(f"{pre}/grad{vs + 1}to{vs}/gather", "pipeline activation gradients")
        buckets = self.buckets if (last_mb and p.zero < 3) else None
        if vs == last_vs:
            self.compute("bwd/logits", 2 * logits_flops(m, self.tokens, p.tp, p.cp))
            if buckets is not None:  # the output layer's gradient: the first of the backward
                buckets.add(self.head_tensors)
            self.tp_exchange(f"{pre}/bwd/head-in", False, "LM head input gradient")
            if buckets is not None:  # the final norm's, after the LM head's input gradient
                buckets.add(self.final_norm_tensors)
        for layer in self.zero3_blocks(f"{pre}/bwd", list(reversed(layers)), p.backward_prefetch == "pre"):
            moe = is_moe_layer(m, layer)
            self._block_kernels(layer)
            lf = self.flops[(moe, m.is_windowed(layer))]
            self.block_backward(f"{pre}/bwd", layer, lf, moe, buckets)
        self._block_kernels(None)
        if vs == 0:
            self.tp_exchange(f"{pre}/bwd/embedding", True, "embedding output gradient")
            if self.tk is not None:
                self.compute("bwd/embedding", 0.0)
            if buckets is not None:
                buckets.add(self.embed_tensors)
        if final and p.zero < 3:
            self.buckets.flush()
        if vs > 0 and p.pp > 1:
            self.ops.append(_Placeholder("send", f"{pre}/grad{vs}to{vs - 1}", vs - 1, size, "activation gradients"))
        if zero3_extra:
            self.coll(
                f"{pre}/extra-zero3-rs",
                "reduce-scatter",
                self.dp_group,
                self.extra_params,
                "gradients",
                "zero",
                blocking=False,
                stream="dp",
                bpe=self.grad_bpe,
            )

    def iteration(self, it: int) -> None:
        p = self.p
        self.buckets = _Buckets(self, it)
        order = stage_order(p.schedule, p.pp, p.micro_batches, self.stage, p.chunks)
        # a (micro-batch, chunk) backward is the last to touch a chunk's weights when it is the last micro-batch
        final = max(i for i, ref in enumerate(order) if ref.kind != F)
        for i, ref in enumerate(order):
            last = ref.micro_batch == p.micro_batches - 1
            self.run_pass(it, ref.kind, ref.micro_batch, ref.chunk, last, i == final)
        self.buckets.reduce_deferred()
        dense, expert = stage_params(self.m, p, self.stage)
        if p.zero >= 3:
            self.ops.append(Wait("dp"))
        else:
            self.ops.append(Wait("dp"))
            self.ops.append(Wait("edp"))
        if self.m.tied_embeddings and p.pp > 1:  # the first and last stage sum their copies' gradients
            self.coll(
                f"it{it}/embedding-grad",
                "all-reduce",
                self.embd_group,
                self.m.embedding_params / p.tp,
                "embedding gradients",
                "pp",
                bpe=self.grad_bpe,
            )
        self.optimizer((dense + expert) / (p.dp * p.cp if p.zero >= 1 else 1), dense + expert)
        if 1 <= p.zero <= 2:
            bpe = self.gemm_bpe  # as zero3_gather's
            self.coll(f"it{it}/zero-ag-dense", "all-gather", self.dp_group, dense, "weights", "zero", bpe=bpe)
            self.coll(f"it{it}/zero-ag-expert", "all-gather", self.edp_group, expert, "weights", "zero", bpe=bpe)


class _Buckets:
    """PyTorch DDP's gradient buckets (workload/buckets.py): whole parameter tensors in backward order, a
    bucket reduced as soon as it holds at least the cap, the last one at the stage's last backward."""

    def __init__(self, b: _StageBuilder, it: int):
        self.b, self.it = b, it
        self.cap = b.p.bucket_mb * MIB / b.grad_bpe  # elements
        self.fill = {"dp": 0.0, "edp": 0.0}
        self.count = {"dp": 0, "edp": 0}
        self.deferred: list[tuple] = []  # without overlap: the buckets' reductions, issued after the schedule

    def add(self, dense, expert: float = 0.0) -> None:
        """`dense`: the tensors (elements each) whose gradients are now ready, in bucket order; `expert`:
        the experts' (one tensor)."""
        for stream, tensors in (("dp", dense), ("edp", (expert,) if expert else ())):
            for n in tensors:
                self.fill[stream] += n
                if self.fill[stream] >= self.cap:
                    self._reduce(stream)

    def flush(self) -> None:
        for stream in ("dp", "edp"):
            if self.fill[stream] > 0:
                self._reduce(stream)

    def _reduce(self, stream: str) -> None:
        b, p = self.b, self.b.p
        group = b.dp_group if stream == "dp" else b.edp_group
        op = "reduce-scatter" if p.zero in (1, 2) else "all-reduce"
        key = f"it{self.it}/{stream}-bucket{self.count[stream]}"
        args = (key, op, group, self.fill[stream], "gradients", "dp" if stream == "dp" else "ep")
        if p.overlap_grad_reduce:  # launched as soon as the bucket is full, on its own stream
            b.coll(*args, blocking=False, stream=stream, bpe=b.grad_bpe)
        else:  # Megatron-LM without overlap: every bucket reduced once the whole schedule is done
            self.deferred.append(args)
        self.fill[stream] = 0.0
        self.count[stream] += 1

    def reduce_deferred(self) -> None:
        """The buckets held back (no overlap), in order, blocking: Megatron-LM's finish_grad_sync after the
        pipeline schedule, so the last backward passes send their gradients upstream first."""
        for args in self.deferred:
            self.b.coll(*args, blocking=True, bpe=self.b.grad_bpe)
        self.deferred.clear()


def _skeleton(ops: list, template: int) -> list[tuple[int, int, int, float, int]]:
    """A stage's op list cut into items (lo, hi, shape, compute seconds, first collective): a maximal run ops[lo:hi] of
    compute ops and tensor-parallel collectives (blocking, or beside the compute on the "tp" stream, with its
    waits) that holds at least one collective (a `Block`), or a single op (lo, lo, ...), in order. Runs with
    the same ops in the same order share a shape."""
    items: list[tuple[int, int, int, float, int]] = []
    shapes: dict[tuple, int] = {}
    i, n = 0, len(ops)

    def lockstep(op) -> bool:
        if isinstance(op, Collective):
            return op.dim == "tp" and (op.blocking or op.stream == "tp")
        return isinstance(op, Compute) or (isinstance(op, Wait) and op.stream == "tp")

    while i < n:
        j = i
        while j < n and lockstep(ops[j]):
            j += 1
        first = next((k for k in range(i, j) if isinstance(ops[k], Collective)), -1)
        if first >= 0:
            sig = tuple(
                (op.name, op.duration_s)
                if isinstance(op, Compute)
                else (op.op, op.elements, op.bytes_per_element, op.blocking)
                if isinstance(op, Collective)
                else ("wait", op.stream)
                for op in ops[i:j]
            )
            shape = shapes.setdefault(sig, len(shapes)) + template * 1_000_000
            items.append((i, j, shape, sum(op.duration_s for op in ops[i:j] if isinstance(op, Compute)), first))
            i = j
        else:  # no collective in the run: each of its ops (or the op that ends it) an item of its own
            stop = max(j, i + 1)
            items.extend((k, k, -1, 0.0, -1) for k in range(i, stop))
            i = stop
    return items


class LazyRanks(Sequence):
    """Every rank's ops in order, built when first read: the tensor-parallel collectives moved to each
    group's ranks are most of a large workload's objects, and the engines read the `blocked` form."""

    def __init__(self, recipes: list[tuple], templates: dict[int, tuple], p2p: dict[int, list]):
        self._recipes = recipes
        self._templates = templates
        self._p2p = p2p  # stage -> its pipeline sends and receives (index, send, key, peer stage, bytes, label)
        self._groups: dict[tuple[int, tuple[int, ...]], list] = {}  # (stage, TP group) -> its ops
        self._ranks: dict[int, list] = {}

    def __len__(self) -> int:
        return len(self._recipes)

    def __getitem__(self, r):
        if isinstance(r, slice):
            return [self[i] for i in range(*r.indices(len(self)))]
        if r < 0:
            r += len(self)
        ops = self._ranks.get(r)
        if ops is None:
            stage, group, own, peers = self._recipes[r]
            b, base, tp_idx, _, _ = self._templates[stage]
            group_ops = self._groups.get((stage, group))
            if group_ops is None:
                group_ops = list(b.ops)
                if group != base["tp"]:
                    for i in tp_idx:
                        group_ops[i] = _moved(b.ops[i], group)
                self._groups[(stage, group)] = group_ops
            ops = list(group_ops)
            for i, op in own.items():
                ops[i] = op
            for i, send, key, vstage, size, label in self._p2p[stage]:
                peer = peers[vstage]
                if send:
                    ops[i] = _new(Send, key=f"{key}@{r}", src=r, dst=peer, size_bytes=size, label=label, dim="pp")
                else:
                    ops[i] = _new(Recv, key=f"{key}@{peer}", src=peer, dst=r, size_bytes=size, label=label, dim="pp")
            self._ranks[r] = ops
        return ops


def _groups(lay: RankLayout, rank: int) -> dict[str, tuple[int, ...]]:
    return {d: lay.group(rank, d) for d in ("tp", "cp", "dp-cp", "ep", "edp", "embd")}


def _moved(op: Collective, group: tuple[int, ...]) -> Collective:
    key = f"{op.key[: op.key.rindex('@')]}@{group[0]}"
    return _new(
        Collective,
        key=key,
        op=op.op,
        group=group,
        elements=op.elements,
        bytes_per_element=op.bytes_per_element,
        label=op.label,
        blocking=op.blocking,
        stream=op.stream,
        dim=op.dim,
    )


def _new(cls, **fields):
    """A frozen op without the per-field checks of its __init__ (hot path at 8,192 GPUs)."""
    obj = object.__new__(cls)
    obj.__dict__.update(fields)
    return obj


def build_llm_training(
    model: Transformer,
    plan: Plan,
    gpu: GpuSpec,
    name: str = "llm-training",
    iterations: int = 1,
    kernels: KernelModel | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Workload:
    """Every rank's ops. The op list is built once per pipeline stage (for its first rank) and then moved to
    the stage's other ranks: tensor-parallel collectives to each tensor-parallel group (whose members share
    the list), then per rank the few other collectives (data, context, expert parallel; one instance per
    group, shared by its members) and the pipeline sends and receives. This keeps 8,192-GPU plans fast to
    build. A collective's key ends in @<first rank of its group>.

    Compute ops are timed kernel by kernel on `kernels` (default: the GPU's own kernel model at the plan's
    precision), unless the plan sets `compute_efficiency` (then FLOPs / (peak x efficiency))."""
    if plan.compute_efficiency is not None:
        kernels = None
    elif kernels is None:
        kernels = KernelModel(gpu, plan.precision)
    with collector.paused():  # millions of small objects and no cycles: the collector would only slow the build
        return _build(model, plan, gpu, name, iterations, kernels, progress)


def _build(
    model: Transformer,
    plan: Plan,
    gpu: GpuSpec,
    name: str,
    iterations: int,
    kernels: KernelModel | None,
    progress: Callable[[int, int], None] | None = None,
) -> Workload:
    lay = plan.layout
    world = lay.world_size
    recipes: list[tuple] = [()] * world  # per rank: (template stage, its TP group, {index: rank-specific op})
    blocked: list[list] = [[] for _ in range(world)]
    templates: dict[int, tuple] = {}
    shared: dict[tuple[int, tuple[int, ...]], Collective] = {}  # (template index, group) -> instance
    items: dict[int, tuple[list, list, list]] = {}  # stage -> (its non-TP collectives, pipeline sends and receives,
    # its blocks' parts)
    pipeline_peers: list[tuple[int, ...]] = [()] * world
    tp_groups = lay.groups("tp")
    for n_done, group in enumerate(tp_groups):
        if progress is not None and n_done % 64 == 0:
            progress(n_done * plan.tp, world)  # ranks built so far
        stage = lay.coords(group[0])["pp"]
        if stage not in templates:
            b = _StageBuilder(model, plan, gpu, group[0], lay, kernels)
            for it in range(iterations):
                b.iteration(it)
            tp_idx = [i for i, op in enumerate(b.ops) if isinstance(op, Collective) and op.dim == "tp"]
            rank_idx = [
                i
                for i, op in enumerate(b.ops)
                if isinstance(op, _Placeholder) or (isinstance(op, Collective) and op.dim != "tp")
            ]
            templates[stage] = (b, _groups(lay, group[0]), tp_idx, rank_idx, _skeleton(b.ops, len(templates)))
            at_position = {lo: k for k, (lo, hi, *_) in enumerate(templates[stage][4]) if lo == hi}
            colls = [(at_position[i], i, b.ops[i]) for i in rank_idx if not isinstance(b.ops[i], _Placeholder)]
            p2p = [
                (i, op.kind == "send", op.key, op.vstage % plan.pp, op.size_bytes, op.label)
                for i, op in ((i, b.ops[i]) for i in rank_idx)
                if isinstance(op, _Placeholder)
            ]
            # each block of the stage: (its key before the group's first rank, after it, its ops, shape, compute),
            # the ops one tuple shared by every group's block
            runs = [
                (
                    k,
                    b.ops[first].key[: b.ops[first].key.rindex("@")],
                    f"+{hi - lo - 1}",
                    tuple(b.ops[lo:hi]),
                    shape,
                    compute_s,
                )
                for k, (lo, hi, shape, compute_s, first) in enumerate(templates[stage][4])
                if hi > lo
            ]
            items[stage] = (colls, p2p, runs)
        b, base, tp_idx, rank_idx, skeleton = templates[stage]
        colls, p2p, runs = items[stage]
        # a block holds the template's ops: its members come from `group` (the folder times the block on the
        # group's own GPUs); the collectives moved to each group are built only if `ranks` is read
        at = f"@{group[0]}"
        blocks = {
            k: _new(Block, key=f"{head}{at}{tail}", group=group, ops=ops, shape=shape, compute_s=compute_s)
            for k, head, tail, ops, shape, compute_s in runs
        }
        # every rank of the group: the template's list with the group's blocks, the rank's own collectives (data,
        # context, expert parallel) in their places, and the stage's shared pipeline sends and receives, which
        # the lowering aims with `pipeline_peers` (`ranks` spells them out as Send / Recv only if read)
        shared_list = [blocks[k] if lo < hi else b.ops[lo] for k, (lo, hi, *_) in enumerate(skeleton)]
        for r in group:
            target = _groups(lay, r)
            mapping = {base[d]: target[d] for d in base}
            c = lay.coords(r)
            peers = tuple(lay.rank(tp=c["tp"], cp=c["cp"], dp=c["dp"], pp=s) for s in range(plan.pp))
            own: dict[int, Op] = {}
            program = shared_list.copy()
            for pos, i, op in colls:
                g = mapping[op.group]
                inst = shared.get((i, g))
                if inst is None:
                    inst = shared[(i, g)] = op if g == op.group else _moved(op, g)
                own[i] = inst
                program[pos] = inst
            recipes[r] = (stage, group, own, peers)
            pipeline_peers[r] = peers
            blocked[r] = program
    if progress is not None:
        progress(world, world)
    ranks = LazyRanks(recipes, templates, {stage: p2p for stage, (_, p2p, _) in items.items()})
    par = (
        f"tp{plan.tp} pp{plan.pp} dp{plan.dp}"
        + (f" cp{plan.cp}" if plan.cp > 1 else "")
        + (f" ep{plan.ep}" if plan.ep > 1 else "")
    )
    extras = [plan.schedule, f"m={plan.micro_batches}"]
    if plan.sequence_parallel:
        extras.append("sp")
    if plan.zero:
        extras.append(f"zero{plan.zero}")
    if plan.recompute != "none":
        extras.append(f"recompute={plan.recompute}")
    if plan.compute_efficiency is None:  # the kernel model: which attention kernel it timed
        if plan.attention == "unfused":
            kernel = "unfused"
        elif kernels is not None and kernels.attention_table is not None:
            kernel = "measured"
        else:
            kernel = gpu.attention_kernel(plan.attention).name
        extras.append(f"attention={kernel}")
        if plan.precision == "fp8":
            extras.append(f"fp8 {plan.fp8_recipe} scaling")
    per_stage = {stage: compute_summary(t[0].ops) for stage, t in templates.items()}
    hw_flops = sum(per_stage[lay.coords(r)["pp"]][0] for r in range(world)) / iterations
    busiest = max(per_stage.values(), key=lambda fk: sum(s for _, s in fk[1]))[1]
    return Workload(
        name=name,
        ranks=ranks,
        params=model.params,
        iterations=iterations,
        flops_per_iteration=iteration_flops(model, plan.global_batch_size, plan.seq_len),  # model FLOPs (MFU)
        description=f"{model.name} ({model.params / 1e9:.1f} B parameters), {par}, {', '.join(extras)}, "
        f"batch {plan.global_batch_size} x {plan.seq_len} tokens, {plan.precision}",
        blocked=blocked if plan.tp > 1 else None,
        pipeline_peers=pipeline_peers if plan.tp > 1 else None,
        hardware_flops_per_iteration=hw_flops,
        compute_by_kind_s=tuple((k, v / iterations) for k, v in busiest),
    )


__all__ = ["build_llm_training", "iteration_flops"]
