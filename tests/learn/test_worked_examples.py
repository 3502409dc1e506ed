"""The worked examples of Deep Learning for Network Engineers, Chapters 1-8, as `aifabric learn` computes them
with PyTorch tensors: every value the book prints, the correct one where it prints a wrong one, and autograd's
gradients equal to the book's hand formulas. (IDs T1... are the acceptance tests of the project's
specification of the book.)"""

import math

import pytest

torch = pytest.importorskip("torch")

from aifabric.learn import run


@pytest.fixture(scope="module")
def les():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # toy tensors (as `aifabric learn` runs them)
    cache = {}

    def get(topic, **values):
        key = (topic, repr(sorted(values.items())))
        if key not in cache:
            cache[key] = run(topic, values or None)
        return cache[key]

    yield get
    torch.set_num_threads(threads)


def test_t1_t2_t3_the_neuron(les):
    v = les("neuron").values
    assert v["z"] == pytest.approx(4.8)
    assert round(v["sigmoid"], 3) == 0.992 and v["relu"] == pytest.approx(4.8)  # T1
    # T2; the book prints the first sum as 4.84: it is 4.8 (4.8 - 4.3 = 0.5)
    assert v["z_shifted"] == pytest.approx(0.5) and round(v["sigmoid_shifted"], 3) == 0.622
    assert (v["weight_bits"], v["input_bits"], v["total_bits"]) == (96, 16, 112)  # T3


def test_the_neurons_autograd_is_the_sigmoids_derivative(les):
    v = les("neuron", x1=2.0, x2=-1.0).values
    s = v["sigmoid"]
    assert v["dsigmoid_dz"] == pytest.approx(s * (1 - s)) == pytest.approx(v["dsigmoid_dz_hand"])
    assert v["grad_w"] == pytest.approx([2.0 * s * (1 - s), -1.0 * s * (1 - s)])
    assert v["grad_w0"] == pytest.approx(s * (1 - s))


def test_t4_backprop_first_iteration_with_the_corrected_learning_rate(les):
    it = les("backprop").values["iterations"][0]
    assert (it["y_hat"], it["y_a"]) == pytest.approx((1.7, 3.0))
    assert it["loss"] == pytest.approx(0.245) and it["mse_derivative"] == pytest.approx(0.7)
    assert (it["E_b"], it["E_a"]) == pytest.approx((0.7, 0.28))
    assert it["grad"]["w_a"][0] == pytest.approx(0.84) and it["grad"]["w_b1"] == pytest.approx(2.1)
    # the book prints η = 0.012, but its Δw 0.042 and 0.105 are 0.05 × 0.84 and 0.05 × 2.1 (0.012 would give 0.01008)
    assert it["delta"]["w_a"][0] == pytest.approx(0.042) and it["delta"]["w_b1"] == pytest.approx(0.105)
    assert it["new"]["w_a"][0] == pytest.approx(0.058) and it["new"]["w_b1"] == pytest.approx(0.295)
    assert it["new"]["w_b0"] == pytest.approx(0.465)  # the bias is updated too (0.5 - 0.05 x 0.7)


def test_t5_the_books_second_output_gives_its_loss(les):
    assert round(les("backprop").values["book_second_output_loss"], 3) == 0.007


def test_backprop_autograd_equals_the_books_hand_formulas_every_iteration(les):
    v = les("backprop", iterations=4, x=[1.0, -2.0, 0.5], w_a=[0.3, -0.2, 0.9], y=0.4).values
    assert len(v["iterations"]) == 4
    for it in v["iterations"]:
        for k in ("w_b1", "w_b0", "w_a0"):
            assert it["grad"][k] == pytest.approx(it["grad_hand"][k], abs=1e-12)
        assert it["grad"]["w_a"] == pytest.approx(it["grad_hand"]["w_a"], abs=1e-12)
    assert v["loss_final"] < v["iterations"][0]["loss"]


def test_data_parallel_averaging_is_the_gradient_of_the_mean_loss(les):
    v = les("backprop").values
    a, b = v["dp_grads"]
    assert v["dp_average"]["w_b1"] == pytest.approx((a["w_b1"] + b["w_b1"]) / 2)
    for k in v["dp_single"]:
        assert v["dp_average"][k] == pytest.approx(v["dp_single"][k])


def test_t6_t7_softmax_cross_entropy_and_its_gradient(les):
    v = les("softmax").values
    assert v["exp_sum"] == pytest.approx(24.813, abs=1e-3)
    p = v["probabilities"]
    assert round(p[4], 3) == 0.244 and round(p[8], 3) == 0.181 and sum(p) == pytest.approx(1.0)
    assert v["predicted"] == 4  # neuron 5
    assert round(v["cross_entropy"], 3) == 1.709 == round(v["cross_entropy_hand"], 3)  # not the book's 0.734
    assert round(v["delta"][8], 3) == -0.819 and round(v["delta"][4], 3) == 0.244
    assert v["grad"] == pytest.approx(v["delta"], abs=1e-12)  # autograd = p - one-hot
    assert (v["hidden_weights"], v["output_weights"], v["weights"], v["weight_bytes"]) == (
        100_352,
        1_280,
        101_632,
        406_528,
    )
    assert v["biases"] == 138 and v["dp_first_layer_weights"] == 131_072


def test_softmax_gradient_for_your_own_logits(les):
    v = les("softmax", logits=[1.0, 2.0, 3.0], label=0).values
    e = [math.exp(x) for x in (1.0, 2.0, 3.0)]
    p = [x / sum(e) for x in e]
    assert v["probabilities"] == pytest.approx(p)
    assert v["grad"] == pytest.approx([p[0] - 1, p[1], p[2]])
    assert v["cross_entropy"] == pytest.approx(-math.log(p[0]))


def test_t8_t9_convolution(les):
    v = les("conv").values
    assert v["out_side"] == 4 and v["positions"] == 16
    assert v["position2"] == (99.0, 0.0)
    assert [s[1] for s in v["kirsch_shapes"]] == [94, 47, 45, 22]
    assert [s[0] for s in v["kirsch_shapes"]] == [8, 8, 16, 16]
    assert (v["conv1_kernel_weights"], v["conv2_kernel_weights"]) == (27, 72)
    assert (v["flatten"], v["raw_inputs"]) == (7_744, 27_648) and round(v["reduction"], 2) == 0.72
    assert v["dense_weights"] == [30_976_000, 4_000_000, 10_000]
    assert round(v["pixels"] / 1e6, 2) == 5.58 and round(v["rgb_values"] / 1e6) == 17
    assert round(v["book_neuron_mib"]) == 32 and round(v["book_layer_gib"]) == 317  # the book's 316 (binary units)
    assert v["book_layer_gib"] == pytest.approx(316.65, abs=0.01)


def test_t10_one_hot_and_saturation(les):
    v = les("rnn").values
    assert v["one_hot"]["a"] == [1, 0, 0, 0] and v["one_hot"]["l"] == [0, 0, 1, 0]
    assert v["pairs"] == [("a", "l"), ("l", "l"), ("l", "e"), ("e", "y")]
    sat = v["saturation"]
    assert round(sat[-5.0][0], 4) == 0.0067  # the book prints 0.0998 (= σ(-2.2))
    assert round(sat[-2.2][0], 4) == 0.0998 and round(sat[-7.0][0], 4) == 0.0009
    for y, dy in sat.values():
        assert dy == pytest.approx(y * (1 - y))


def test_bptt_the_recurrent_weights_gradient_is_the_sum_over_time_steps(les):
    v = les("rnn", hidden=3, seed=4).values
    total = [sum(x) for x in zip(*[sum(step, []) for step in v["grad_W_steps"]])]
    assert total == pytest.approx(sum(v["grad_W"], []), abs=1e-12)
    assert v["loss_after"] < v["loss"]


def test_the_lstm_cells(les):
    v = les("lstm").values
    assert v["lstmcell_max_diff"] < 1e-12  # the standard cell is PyTorch's LSTMCell
    assert v["cec_grad"] == pytest.approx(v["forget"])  # ∂C_t/∂C_(t-1) = f_t
    assert (v["book_params"], v["torch_params"]) == (4 * 2 * (4 + 2), 4 * 2 * (4 + 2) + 2 * 4 * 2)
    for step in v["steps"]:
        assert min(step["book"]["gates"]["a"]) >= 0 and min(step["book"]["h"]) >= 0  # ReLU
        assert all(0 < g < 1 for k in ("f", "i", "o") for g in step["book"]["gates"][k])


def test_t11_t12_t13_t19_the_transformer(les):
    v = les("transformer").values
    assert v["tokens"] == [2, 3, 4, 5, 6, 7, 8, 9, 10, 5, 2, 11] and len(v["vocabulary"]) == 12
    pos4 = v["positions"][4]
    assert [round(x, 1) for x in pos4["pe"]] == [-0.8, 1.0]
    assert [round(x, 1) for x in pos4["final"]] == [1.7, 2.0]
    assert pos4["pe_standard"][1] == pytest.approx(math.cos(4))
    assert v["positions"][10]["final"] == pytest.approx([2.5 + math.sin(10), 1.0 + math.cos(10 / 10000)])
    assert round(v["book_figure_7_12"], 3) == 0.007
    mean, std = v["book_add_norm_mean_std"]
    assert abs(mean) < 0.01 and abs(std - 1) < 0.01
    a = torch.tensor(v["add_norm"], dtype=torch.float64)
    assert float(a.mean()) == pytest.approx(0, abs=1e-9) and float(a.pow(2).mean()) == pytest.approx(1, abs=1e-6)
    att = v["attention"]
    assert len(att) == 10 and sum(att) == pytest.approx(1.0)  # causal: "clear" at 10 sees 10 words
    assert v["loss_trained"] < v["loss_untrained"] and v["next_word"] == "the"  # as the book's Figure 7-20
    assert v["gpt3_embedding"] == 614_400_000
    assert round(v["gpt3_attention"] / 1e6, 1) == 604.0 and 600e6 <= v["gpt3_attention"] <= 605e6
    assert round(v["gpt3_ffn"] / 1e9, 1) == 1.2
    assert round(v["gpt3_block_weights"] / 1e9, 1) == 173.9 and round(v["gpt3_total"] / 1e9) == 175


def test_t14_power(les):
    v = les("power").values
    assert v["power_mw"] == pytest.approx(17.5) and v["hours"] == 1440
    assert v["energy_mwh"] == pytest.approx(25_200) and v["cost_usd"] == pytest.approx(2_520_000)
    v = les("power", pue=1.5).values
    assert v["power_mw"] == pytest.approx(26.25) and v["cost_usd"] == pytest.approx(3_780_000)
