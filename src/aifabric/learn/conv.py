"""Chapter 4: convolution. The output-size rule, the Prewitt edge example on a 6 × 6 image, the book's
two-layer CNN with the Kirsch operator (96 × 96 RGB input) traced shape by shape with real layers, and the
600-dpi image that motivates convolution (the memory one fully connected layer would need)."""

from __future__ import annotations

from typing import Any

from .lesson import Lesson, Param, count

# Kirsch compass kernels (the book's Figure 4-7 shows them; these are the operator's standard values)
KIRSCH = {
    "N": [[5, 5, 5], [-3, 0, -3], [-3, -3, -3]],
    "NW": [[5, 5, -3], [5, 0, -3], [-3, -3, -3]],
    "W": [[5, -3, -3], [5, 0, -3], [5, -3, -3]],
    "SW": [[-3, -3, -3], [5, 0, -3], [5, 5, -3]],
    "S": [[-3, -3, -3], [-3, 0, -3], [5, 5, 5]],
    "SE": [[-3, -3, -3], [-3, 0, 5], [-3, 5, 5]],
    "E": [[-3, -3, 5], [-3, 0, 5], [-3, -3, 5]],
    "NE": [[-3, 5, 5], [-3, 0, 5], [-3, -3, -3]],
}
PREWITT_VERTICAL = [[-1, 0, 1], [-1, 0, 1], [-1, 0, 1]]
PREWITT_HORIZONTAL = [[-1, -1, -1], [0, 0, 0], [1, 1, 1]]

PARAMS = {
    "side": Param(6, "the Prewitt example's image side (6 × 6)", "int", low=3, high=32),
    "kernel": Param(3, "kernel side", "int", positive=True),
    "stride": Param(1, "stride", "int", positive=True),
    "low": Param(0.0, "the Prewitt image's dark pixels (the book's pixel values are in its Figure 4-2)"),
    "high": Param(33.0, "its bright pixels (a step of 33 over 3 rows gives the book's f(z) = 99)"),
    "edge": Param(3, "first bright column (0-based): a vertical edge", "int", low=0),
    "cnn_side": Param(96, "the Kirsch CNN's input side (96 × 96 RGB)", "int", low=10, high=1024),
    "conv2_kernels": Param(16, "the second convolution layer's kernels", "int", positive=True),
    "dense": Param([4000.0, 1000.0, 10.0], "the fully connected layers after the flatten", "floats"),
    "inches": Param(3.937, "the large image's side in inches", positive=True),
    "dpi": Param(600, "its resolution (dots per inch)", "int", positive=True),
    "neurons": Param(10000, "neurons of a fully connected first layer on it", "int", positive=True),
    "bytes_per_weight": Param(2, "bytes per weight (FP16)", "int", positive=True),
}


def out_side(h: int, k: int, s: int) -> int:
    """floor((H - K) / S) + 1, no padding."""
    return (h - k) // s + 1


def run(v: dict[str, Any]) -> Lesson:
    import torch
    import torch.nn.functional as F

    from ..errors import InputError, Problem

    if v["kernel"] > v["side"]:
        raise InputError(Problem("--values", f"kernel: {v['kernel']} is larger than the image side {v['side']}"))
    if any(d < 1 or d != int(d) for d in v["dense"]):
        raise InputError(Problem("--values", "dense: whole numbers of neurons, at least 1"))
    les = Lesson("conv", "Chapter 4 · convolution", inputs=dict(v))
    h, k, st = v["side"], v["kernel"], v["stride"]
    o = out_side(h, k, st)
    s = les.section(
        "Output size (Figure 4-1)",
        "A k × k kernel slides over the image with stride S; each position gives one output value.",
    )
    s.add(
        "height = width",
        f"({h} - {k}) / {st} + 1 = {o}",
        "floor((H - K) / S) + 1",
        book='the book calls the "+ 1" term "bias": it counts the kernel\'s first position, it is no bias'
        if (h, k, st) == (6, 3, 1)
        else "",
    )
    s.add('kernel positions ("strides")', f"{o * o}", f"{o} × {o}, row by row")
    les.values.update(out_side=o, positions=o * o)
    # Prewitt (Figures 4-2 ... 4-5): real conv2d with two fixed kernels on a one-channel image
    img = torch.full((h, h), v["low"], dtype=torch.float64)
    img[:, min(v["edge"], h) :] = v["high"]
    kernels = torch.tensor([[PREWITT_VERTICAL], [PREWITT_HORIZONTAL]], dtype=torch.float64)
    if k != 3:
        kernels = torch.ones(2, 1, k, k, dtype=torch.float64)
        kernels[0, 0, :, : k // 2] = -1
        kernels[0, 0, :, k // 2] = 0
        kernels[1] = kernels[0].transpose(-1, -2)
    out = torch.relu(F.conv2d(img.view(1, 1, h, h), kernels, stride=st))[0]
    prewitt = k == 3
    s = les.section(
        "The Prewitt example (Figures 4-2 ... 4-5)",
        "Two fixed kernels, one for vertical and one for horizontal edges, on a grayscale image: each "
        "output value is Σ w_ij·x_ij over the kernel's window, then ReLU. Two kernels, two output "
        "channels.",
    )
    s.add(
        "image rows",
        " / ".join(" ".join(f"{x:g}" for x in row.tolist()) for row in img[:2]) + " / ...",
        f"columns from {v['edge']} are {v['high']:g}, the others {v['low']:g}: a vertical edge",
    )
    if prewitt:
        s.add("vertical kernel", _rows(kernels[0, 0]))
        s.add("horizontal kernel", _rows(kernels[1, 0]))
    s.add("output channels", f"2 × {o} × {o}", "torch.nn.functional.conv2d, then ReLU")
    s.add("vertical edges", _rows(out[0]))
    s.add("horizontal edges", _rows(out[1]))
    if o > 1:
        s.add(
            'position 2 ("stride two"): f(z)',
            f"vertical {out[0, 0, 1].item():g}, horizontal {out[1, 0, 1].item():g}",
            "the book: 99 and 0",
        )
    found_v, found_h = bool((out[0] > 0).any()), bool((out[1] > 0).any())
    s.add("found", f"{'a' if found_v else 'no'} vertical edge, {'a' if found_h else 'no'} horizontal edge")
    les.values.update(prewitt=out.tolist(), position2=(out[0, 0, 1].item(), out[1, 0, 1].item()) if o > 1 else None)
    if (v["low"], v["high"], v["edge"], h, k, st) == (0.0, 33.0, 3, 6, 3, 1):
        les.notes.append(
            "The book's Prewitt image is drawn in its Figure 4-2 only; this one, dark columns then a "
            "step of 33, gives its f(z) = 99 (3 rows × 33) for the vertical kernel at position 2 and 0 "
            "for the horizontal one."
        )
    _kirsch(torch, les, v)
    _large_image(torch, les, v)
    return les


def _rows(t) -> str:
    return " / ".join(" ".join(f"{x:g}" for x in row) for row in t.tolist())


def _kirsch(torch, les: Lesson, v) -> None:
    nn = torch.nn
    side = v["cnn_side"]
    torch.manual_seed(0)
    x = torch.rand(1, 3, side, side)
    conv1 = nn.Conv2d(3, len(KIRSCH), 3, bias=False)
    with torch.no_grad():  # each compass kernel over the three colour channels: 3 × 3 × 3 fixed weights
        conv1.weight.copy_(torch.tensor(list(KIRSCH.values()), dtype=torch.float32).unsqueeze(1).expand(-1, 3, -1, -1))
    conv1.weight.requires_grad_(False)
    conv2 = nn.Conv2d(len(KIRSCH), v["conv2_kernels"], 3, bias=False)
    pool = nn.MaxPool2d(2)
    a1 = conv1(x)
    p1 = pool(torch.relu(a1))
    a2 = conv2(p1)
    p2 = pool(torch.relu(a2))
    flat = p2.flatten(1)
    raw = x[0].numel()
    s = les.section(
        "The Kirsch two-layer CNN (Figures 4-6 ... 4-9)",
        "The Kirsch operator's 8 fixed compass kernels, each 3 × 3 over the 3 colour channels, then "
        "2 × 2 max pooling (per channel), then 16 trainable 3 × 3 × 8 kernels, pooling again, a flatten "
        "and fully connected layers: shapes from real layers on a 96 × 96 RGB tensor.",
    )
    s.add("input", f"{side} × {side} × 3", f"{count(raw)} values")
    s.add("conv 1: 8 Kirsch kernels", f"{_hw(a1)}", f"{a1.shape[1]} channels of ({side} - 3) / 1 + 1")
    s.add("weights per kernel", f"{conv1.weight[0].numel()}", "3 (width) × 3 (height) × 3 (depth)")
    s.add("one kernel per colour channel instead", f"{3 * len(KIRSCH)} output channels", "not used")
    s.add(
        "max pool 2 × 2",
        _hw(p1),
        "each channel on its own",
        book='the book\'s pooling kernels have "a depth of 8" and pick the highest of the eight channels; pooling '
        "works per channel (eight 47 × 47 outputs, as it says)"
        if side == 96
        else "",
    )
    s.add(f"conv 2: {v['conv2_kernels']} kernels", _hw(a2), "random initial weights, trained")
    s.add("weights per kernel", f"{conv2.weight[0].numel()}", "3 × 3 × 8")
    s.add("max pool 2 × 2", _hw(p2))
    s.add("flatten", count(flat.shape[1]), f"{p2.shape[2]} × {p2.shape[3]} × {p2.shape[1]}")
    red = 1 - flat.shape[1] / raw
    s.add(
        "vs the raw image",
        f"{count(raw)}: {red * 100:.0f} % fewer inputs",
        f"1 - {count(flat.shape[1])} / {count(raw)}",
    )
    widths = [flat.shape[1], *[int(d) for d in v["dense"]]]
    fcs = [nn.Linear(a, b, bias=False, device="meta") for a, b in zip(widths, widths[1:])]
    for fc in fcs:
        s.add(f"fully connected {fc.in_features} → {fc.out_features}", f"{count(fc.weight.numel())} weights")
    s.add(
        "weights: convolutions, dense",
        f"{count(conv1.weight.numel())} + {count(conv2.weight.numel())}, {count(sum(fc.weight.numel() for fc in fcs))}",
    )
    les.values.update(
        kirsch_shapes=[tuple(t.shape[1:]) for t in (a1, p1, a2, p2)],
        flatten=flat.shape[1],
        raw_inputs=raw,
        reduction=red,
        conv1_kernel_weights=conv1.weight[0].numel(),
        conv2_kernel_weights=conv2.weight[0].numel(),
        dense_weights=[fc.weight.numel() for fc in fcs],
    )


def _hw(t) -> str:
    return f"{t.shape[2]} × {t.shape[3]} × {t.shape[1]}"


def _large_image(torch, les: Lesson, v) -> None:
    side = round(v["inches"] * v["dpi"])
    dtype = {2: torch.float16, 4: torch.float32, 8: torch.float64, 1: torch.int8}.get(v["bytes_per_weight"])
    image = torch.empty(3, side, side, device="meta")
    values = image.numel()
    per_neuron = values * v["bytes_per_weight"]
    layer = per_neuron * v["neurons"]
    if dtype is not None:  # the layer itself, on the meta device (no memory)
        fc = torch.nn.Linear(values, v["neurons"], bias=False, device="meta", dtype=dtype)
        assert fc.weight.numel() * fc.weight.element_size() == layer
    mib, gib = 2**20, 2**30
    book = (v["inches"], v["dpi"], v["neurons"], v["bytes_per_weight"]) == (3.937, 600, 10000, 2)
    s = les.section(
        "Why convolution: a 600-dpi image (Chapter 4)",
        "A fully connected neuron needs one weight per input value; a 3 × 3 kernel needs 9 per colour "
        "channel, whatever the image's size.",
    )
    s.add("pixels", f"{side} × {side} = {count(side * side)}", f"{v['inches']:g} in × {v['dpi']} dpi per side")
    s.add("RGB values", count(values), "≈ 17 million in the book")
    s.add(
        "one neuron's weights",
        f"{count(per_neuron)} B = {per_neuron / mib:.1f} MiB",
        f"{count(values)} × {v['bytes_per_weight']} bytes",
        book=f"the book's 32 MB is 17,000,000 × 2 B = {17e6 * 2 / mib:.1f} MiB (binary megabytes)" if book else "",
    )
    s.add(
        f"{count(v['neurons'])} neurons",
        f"{layer / 1e9:.1f} GB = {layer / gib:.1f} GiB",
        book=f"the book's 316 GB is 17,000,000 × 2 B × 10,000 = {17e6 * 2 * 1e4 / gib:.1f} GiB" if book else "",
    )
    s.add("a 3 × 3 kernel", "9 weights per colour channel", "27 for RGB")
    les.values.update(
        image_side=side,
        pixels=side * side,
        rgb_values=values,
        neuron_bytes=per_neuron,
        layer_bytes=layer,
        neuron_mib=per_neuron / mib,
        layer_gib=layer / gib,
        book_neuron_mib=17e6 * 2 / mib,
        book_layer_gib=17e6 * 2 * 1e4 / gib,
    )
