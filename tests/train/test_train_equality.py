"""Every parallel plan computes what one process computes: losses and weights after k steps equal within
1e-5 (fp32). The replicas other than the first start from different weights on purpose, so these tests
also fail if the initial Broadcast is missing; the sums of TP partial results, the pipeline's send/recv
of activations and gradients, and the bucketed gradient AllReduce all have to be right."""

import pytest

torch = pytest.importorskip("torch")

from aifabric.train.summary import assemble_weights

PLANS = [
    ("fnn", dict(dp=2)),  # data parallel: Broadcast + bucketed AllReduce
    ("fnn", dict(dp=2, tp=2, pp=2, schedule="1f1b")),  # 3D, 8 processes
    ("gpt", dict(tp=2, pp=2, schedule="gpipe")),  # attention heads split, GPipe
    ("gpt", dict(dp=2, tp=2, pp=2, schedule="1f1b")),  # 3D transformer
    ("lstm", dict(dp=2, tp=2)),  # hidden units split, h AllGathered every time step
    ("cnn", dict(tp=2, pp=2, micro_batches=4)),  # channels split; 1F1B with 4 micro-batches
]


@pytest.mark.parametrize(
    ("model", "plan"), PLANS, ids=[f"{m}-" + "-".join(f"{k}{v}" for k, v in p.items()) for m, p in PLANS]
)
def test_plan_equals_single_process(trained, model, plan):
    par, ref = trained(model, **plan)
    assert par.losses == pytest.approx(ref.losses, abs=1e-5)
    w_par, w_ref = assemble_weights(par.out_dir, par), assemble_weights(ref.out_dir, ref)
    assert w_par.keys() == w_ref.keys()
    for name in w_ref:
        assert w_par[name].shape == w_ref[name].shape, name
        assert torch.allclose(w_par[name], w_ref[name], atol=1e-5, rtol=0), name
    # and training moved the weights (the comparison is not between two untouched initialisations)
    from aifabric.train.models import dataset, full_units

    init = full_units(model, 0, dataset(model, 0).vocab_size)
    first = init[0].module
    w0 = next(first.parameters()) if not hasattr(first, "weight") else first.weight
    assert not torch.allclose(next(v for k, v in w_ref.items() if k.startswith("0.")), w0.detach())
