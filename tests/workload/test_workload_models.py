"""Model zoo: parameter counts from the architecture against the published ones and the seeds' figures."""

import pytest

from aifabric.errors import InputError
from aifabric.models import LSTM, MODELS, conv_output_side, get_model

# The GPT-3 paper rounds its model names: computed from Table 2.1's dimensions, "350M" is 355.9 M, "1.3B" is
# 1.316 B and "2.7B" is 2.652 B, i.e. 1.2-1.8 % off the name. The other sizes are within 1 %.
GPT3_NAMES_ROUNDED = {"gpt3-350m", "gpt3-1.3b", "gpt3-2.7b"}


@pytest.mark.parametrize(
    "name", sorted(k for k, m in MODELS.items() if getattr(m, "published_params", None) and k not in GPT3_NAMES_ROUNDED)
)
def test_published_parameter_counts_within_one_percent(name):
    m = MODELS[name]
    assert m.params == pytest.approx(m.published_params, rel=0.01)


def test_exact_counts_of_the_model_cards():
    # Hugging Face model cards / safetensors metadata give these to the parameter
    assert MODELS["llama2-7b"].params == 6_738_415_616
    assert MODELS["llama2-70b"].params == 68_976_648_192
    assert MODELS["llama3-8b"].params == 8_030_261_248
    assert MODELS["llama3-70b"].params == 70_553_706_496
    assert MODELS["mixtral-8x7b"].params == 46_702_792_704


def test_moe_active_parameters():
    # Mixtral paper: 47 B parameters, 13 B active per token; DeepSeekMoE 16B: 2.8 B active
    assert MODELS["mixtral-8x7b"].active_params == pytest.approx(12.9e9, rel=0.01)
    assert MODELS["deepseek-moe-16b"].active_params == pytest.approx(2.8e9, rel=0.02)
    assert MODELS["llama3-8b"].active_params == MODELS["llama3-8b"].params
    # DeepSeek-V3: 671 B total, "37B activated for each token" (37.5 B computed: the report rounds)
    assert MODELS["deepseek-v3"].params == pytest.approx(671e9, rel=0.001)
    assert MODELS["deepseek-v3"].active_params == pytest.approx(37e9, rel=0.02)


def test_gpt_oss_counts_as_its_model_card_does():
    """gpt-oss (OpenAI 2025 model card): 116.83 B and 5.13 B active (120B), 20.91 B and 3.61 B (20B); the card's
    active count leaves out the input embedding (a lookup, no multiply), not the output layer. Every other block
    attends through its 128-token window, the first one included."""
    for name, total, active in (("gpt-oss-120b", 116.83e9, 5.13e9), ("gpt-oss-20b", 20.91e9, 3.61e9)):
        m = MODELS[name]
        assert abs(m.params - total) <= 0.005e9  # the card's two decimals
        assert abs(m.active_params - m.embedding_params - active) <= 0.005e9
        assert [m.is_windowed(i) for i in range(4)] == [True, False, True, False]
        assert m.windowed_layers == m.layers // 2 and m.sliding_window == 128


def test_heads_wider_than_hidden_over_heads():
    # Qwen3 30B-A3B (Qwen3 technical report: "30.5B total, 3.3B activated"; its configuration: hidden 2,048, 32
    # query heads of head_dim 128, 4 key-value heads, 128 experts of 768, 8 per token, an RMSNorm over each
    # head's Q and K): Q is 32 x 128 = 4,096 wide, twice the hidden size, so the attention's projections are
    # 2,048 x (4,096 + 2 x 512) and 4,096 x 2,048
    m = MODELS["qwen3-30b-a3b"]
    assert (m.head_dim, m.q_dim, m.kv_dim) == (128, 4096, 512)
    assert m.attention_params == 2048 * (4096 + 2 * 512) + 4096 * 2048 + 2 * 128
    assert m.params == pytest.approx(30.5e9, rel=0.005)
    assert m.active_params == pytest.approx(3.3e9, rel=0.02)
    assert m.attention_core_flops_per_token(4096) == 4.0 * 4096 * 4096
    big = MODELS["qwen3-235b-a22b"]  # "235B total, 22B activated"
    assert big.params == pytest.approx(235e9, rel=0.002)
    assert big.active_params == pytest.approx(22e9, rel=0.02)
    # without kv_channels the heads split the hidden size, as before
    assert MODELS["llama3-8b"].q_dim == MODELS["llama3-8b"].hidden


def test_ch3_mnist_network():
    m = MODELS["mnist-784-128-10"]
    assert m.weights == 100_352 + 1_280 == 101_632
    assert m.weights * 4 == 406_528  # FP32 bytes


def test_ch4_cnn_shapes_and_weights():
    assert conv_output_side(6, 3, 1) == 4  # the book's "(6-3)/1 + 1 = 4"
    cnn = MODELS["ch4-cnn"]
    assert cnn.feature_shapes() == [(47, 8), (22, 16)]  # 96 -> 94 -> pool 47; 47 -> 45 -> pool 22
    assert cnn.flatten_width == 7_744
    assert 1 - 7_744 / (96 * 96 * 3) == pytest.approx(0.72, abs=0.005)  # "approximately a 72% reduction"
    assert cnn.conv_params() == [8 * 27, 16 * 72]
    assert cnn.dense_params() == [7_744 * 4_000, 4_000 * 1_000, 1_000 * 10]


def test_lstm_matches_pytorch_layout():
    # torch.nn.LSTM(10, 20, num_layers=2) has 4 gates x (W_ih, W_hh, b_ih, b_hh) per layer: 5,920 parameters
    assert LSTM("t", 10, 20, layers=2, biases_per_gate=2).params == 5_920
    assert LSTM("book", 4, 16, bias=False).params == 4 * (16 * 4 + 16 * 16)  # no biases in the book's cell


def test_gpt3_breakdown_of_the_seeds():
    m = MODELS["gpt3-175b-book"]
    assert m.embedding_params == 614_400_000  # 12,288 x 50,000
    weights_attention = 4 * m.hidden**2
    assert weights_attention == 603_979_776  # book: "roughly 600 million" (Ch. 7), "approximately 605 million" (Ch. 8)
    assert 600e6 <= m.attention_params <= 605e6
    assert m.dense_mlp_params == pytest.approx(1.2e9, rel=0.01)  # "about 1.2 billion"
    blocks = m.layers * m.block_params()
    # the book's "173 billion" is 173.3 B with its rounded 605 M + 1.2 B; exact per-block numbers give 173.96 B
    assert blocks == pytest.approx(173.96e9, rel=1e-3)
    assert m.params == pytest.approx(175e9, rel=0.01)  # "roughly 175 billion"


def test_unknown_model_names_the_field():
    with pytest.raises(InputError) as e:
        get_model("gpt-5")
    assert e.value.problems[0].path == "workload.model"


def test_seed_models_train_data_parallel():
    from aifabric.scenario import ch14_scenario
    from aifabric.simulate import build_workload

    base = ch14_scenario().model_dump()
    for name in ("mnist-784-128-10", "ch4-cnn", "ch6-lstm"):
        base["workload"]["model"] = {"name": name}
        w = build_workload(type(ch14_scenario()).model_validate(base))
        assert w.params == MODELS[name].params
        [grad] = [op for op in w.ranks[0] if not hasattr(op, "duration_s")]  # forward, backward, AllReduce, optimizer
        assert grad.size_bytes == MODELS[name].params * 2  # bf16 gradients in the AllReduce


def test_cnn_forward_flops_count_every_output_position():
    cnn = MODELS["ch4-cnn"]
    conv1 = 2 * 94 * 94 * 8 * 27  # 8 kernels of 3x3x3 at each of 94 x 94 positions
    conv2 = 2 * 45 * 45 * 16 * 72
    dense = 2 * (7_744 * 4_000 + 4_000 * 1_000 + 1_000 * 10)
    assert cnn.forward_flops(1) == conv1 + conv2 + dense
