"""What the notebooks say a computation prints or does is what it does.

Each test computes one claim of the notebooks' prose (a number, an error, what a
library call does) with torch and transformers, and checks that the sentence
stating it is still there, in the English source and, where the claim is a
number, an error text or a name, in the Chinese edition too. When torch or
transformers change what they do, the test fails and the sentence gets fixed.
"""

import copy
import json
import math
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from harness import fixture_module
from torch import nn

from course import models
from course.checks import CheckFailed, chunked, debugging, pictures, positions

ROOT = Path(__file__).resolve().parents[1]


def prose(assignment: str) -> str:
    """The English percent file's comment text, one space between words."""
    text = (ROOT / "source" / assignment / f"{assignment}.py").read_text("utf-8")
    lines = [re.sub(r"^\s*# ?", "", ln) for ln in text.splitlines()]
    return " ".join(" ".join(lines).split())


def chinese(assignment: str) -> str:
    """The Chinese edition's markdown, one space between words."""
    path = ROOT / "zh" / "source" / assignment / f"{assignment}.ipynb"
    cells = json.loads(path.read_text("utf-8"))["cells"]
    text = " ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return " ".join(text.split())


def says(assignment: str, *fragments: str, both: bool = False) -> None:
    """Every fragment is in the notebook's prose (and in the Chinese one)."""
    editions = {"en": prose(assignment)}
    if both:
        editions["zh"] = chinese(assignment)
    for lang, text in editions.items():
        for fragment in fragments:
            assert fragment in text, (assignment, lang, fragment)


@pytest.fixture(scope="module")
def course_model():
    return models.load()[0]


# 11 §1: -1e9 in float16


def test_an_additive_minus_1e9_in_float16_is_minus_zero_and_minus_inf():
    allowed = torch.tensor([[1, 1, 1, 0], [0, 0, 0, 0]])
    additive = (1 - allowed).half() * -1e9
    assert additive.dtype == torch.float16
    assert bool((additive[allowed == 1] == 0).all())
    assert bool(torch.signbit(additive[allowed == 1]).all())  # -0
    assert bool(torch.isneginf(additive[allowed == 0]).all())
    half = torch.randn(2, 4, generator=torch.Generator().manual_seed(0)).half()
    probs = torch.softmax(half + additive, dim=-1)
    want = torch.softmax(half[0, :3].float(), -1).half()
    assert torch.allclose(probs[0, :3], want, atol=1e-3) and probs[0, 3] == 0
    assert bool(probs[1].isnan().all())  # nothing to attend: NaN, as with -inf
    says(
        "11_debugging",
        "-1e9 rounds to -inf",
        "gives -0 at the allowed keys and -inf at the blocked ones",
        "NaN where it has none",
    )
    says("11_debugging", "65504", "-1e9", both=True)
    assert torch.finfo(torch.float16).max == 65504


def test_masked_fill_minus_1e9_on_float16_raises_what_the_notebook_quotes():
    scores = torch.zeros(2, 3, dtype=torch.float16)
    with pytest.raises(RuntimeError) as err:
        scores.masked_fill(torch.ones(2, 3, dtype=torch.bool), -1e9)
    says("11_debugging", f"RuntimeError: {err.value}", both=True)


def _additive_scalar(scores, mask, dim=-1):
    probs = torch.softmax(scores.float() + (~mask).float() * -1e9, dim=dim)
    return probs.to(scores.dtype).masked_fill(~mask.any(dim, keepdim=True), 0)


def _additive_half_tensor(scores, mask, dim=-1):
    big = torch.tensor(-1e9, dtype=scores.dtype)  # -inf in float16
    probs = torch.softmax(scores + (~mask).to(scores.dtype) * big, dim=dim)
    return probs.masked_fill(~mask.any(dim, keepdim=True), 0)


def test_the_float16_verdict_names_what_gives_nan_not_the_python_scalar():
    """-1e9 as a Python scalar is fine (the notebook says so); a float16 -1e9
    tensor is -inf, and 0 * -inf poisons the allowed keys: the verdict says that."""
    debugging.masked_softmax_half(_additive_scalar)
    with pytest.raises(CheckFailed) as err:
        debugging.masked_softmax_half(_additive_half_tensor)
    assert debugging.HALF in str(err.value)
    assert "0 * -inf is NaN" in debugging.HALF and "65504" in debugging.HALF
    assert bool((torch.zeros(()) * torch.tensor(-1e9).half()).isnan())


# 01 §4: a smaller position table


def test_from_pretrained_with_a_smaller_config_does_not_slice(course_model):
    from transformers import BertModel

    config = copy.deepcopy(course_model.config)
    config.max_position_embeddings = 32
    with pytest.raises(RuntimeError, match="ignore_mismatched_sizes"):
        BertModel.from_pretrained(course_model.name_or_path, config=config)
    loose = BertModel.from_pretrained(
        course_model.name_or_path, config=config, ignore_mismatched_sizes=True
    )
    table = course_model.embeddings.position_embeddings.weight
    got = loose.embeddings.position_embeddings.weight
    assert got.shape == (32, table.shape[1]) and not torch.allclose(got, table[:32])
    assert torch.equal(
        loose.embeddings.word_embeddings.weight,
        course_model.embeddings.word_embeddings.weight,
    )
    with pytest.raises(RuntimeError, match="size mismatch for embeddings.position_emb"):
        BertModel(config).load_state_dict(course_model.state_dict())
    says(
        "01_config",
        "transformers 5 stops with a size mismatch",
        "with `ignore_mismatched_sizes=True` it loads every other weight but fills "
        "the table with *random* values",
    )
    says("01_config", "ignore_mismatched_sizes=True", both=True)


def test_position_ids_is_one_row_of_columns(course_model):
    n = course_model.config.max_position_embeddings
    assert tuple(course_model.embeddings.position_ids.shape) == (1, n)
    assert "embeddings.position_ids" not in course_model.state_dict()
    says(
        "01_config",
        "is (1, `max_position_embeddings`)",
        "slice its *columns*, `[:, :max_len]`",
        "transformers 5 does not save it",
    )


# 02 §3: the sentence vector of the course model


def test_the_course_models_sentence_vector_is_the_mean_of_tokens(course_model):
    pooling = Path(course_model.name_or_path) / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    assert config["pooling_mode_mean_tokens"] is True
    assert config["pooling_mode_cls_token"] is False
    says("02_outputs", "pooling_mode_mean_tokens", "1_Pooling/config.json", both=True)
    says("02_outputs", "its sentence vector is the **mean** of the token vectors")
    assert "a sentence vector |" not in prose("02_outputs")


# 03: several heads cost the arithmetic of one, the memory of H


def test_heads_cost_the_flops_of_one_big_head_and_h_times_its_memory(course_model):
    config = course_model.config
    H, D, T = config.num_attention_heads, config.hidden_size, 10
    d = D // H
    assert H * (T * T * d) == T * T * D  # Q K^T and P V, all heads together
    with torch.no_grad():
        out = course_model(torch.ones(1, T, dtype=torch.long), output_attentions=True)
    assert out.attentions[0].numel() == H * T * T  # one (T, T) matrix per head
    says("03_head_slicing", "H times as many numbers as one big head would keep")
    says("03_head_slicing", "Tq and Tk may differ")
    assert "Tq ≠ Tk" not in prose("03_head_slicing")


# 06 §1: the additive mask, then and now


def test_the_additive_mask_is_minus_10000_in_bert_and_finfo_min_now(course_model):
    from transformers.masking_utils import create_bidirectional_mask

    assert torch.exp(torch.tensor(-10000.0)) == 0
    mask = torch.tensor([[1, 1, 0]])
    embeds = torch.zeros(1, 3, course_model.config.hidden_size)
    made = create_bidirectional_mask(
        config=course_model.config, inputs_embeds=embeds, attention_mask=mask
    )
    want = (1 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
    assert torch.equal(made, torch.broadcast_to(want, made.shape))
    says(
        "06_manual_attention",
        "`(1 - mask) * -10000` in the original BERT",
        "`(1 - mask) * torch.finfo(dtype).min` in current transformers",
    )
    says("06_manual_attention", "-10000", "torch.finfo(dtype).min", both=True)


def test_the_einsum_indices_are_not_the_head_size():
    source = (ROOT / "source/06_manual_attention/06_manual_attention.py").read_text()
    specs = re.findall(r'einsum\("([^"]+)"', source)
    assert specs and all("d" not in spec for spec in specs), specs
    q, k, v = torch.randn(3, 2, 5, 4).unbind(0)
    for spec in specs[:1]:
        assert torch.allclose(torch.einsum(spec, q, k), q @ k.transpose(1, 2))
    says("06_manual_attention", "f feature")


# 07: GELU's two forms; where the embedding dropout sits


def test_the_erf_and_tanh_gelu_differ_by_4_7e_4_on_minus_4_to_4():
    x = torch.linspace(-4, 4, 800001, dtype=torch.float64)
    gap = (F.gelu(x) - F.gelu(x, approximate="tanh")).abs().max().item()
    assert f"{gap:.1e}" == "4.7e-04", gap
    says("07_full_layer", "on [-4, 4] the two differ by up to about 4.7e-4")
    says("07_full_layer", "4.7e-4", both=True)


def test_the_embedding_dropout_comes_after_the_layernorm(course_model):
    seen = {}
    embeddings = course_model.embeddings
    hooks = [
        embeddings.LayerNorm.register_forward_hook(
            lambda m, i, o: seen.setdefault("norm", o)
        ),
        embeddings.dropout.register_forward_hook(
            lambda m, i, o: seen.setdefault("dropout_in", i[0])
        ),
    ]
    try:
        with torch.no_grad():
            course_model(torch.tensor([[101, 2023, 102]]))
    finally:
        for hook in hooks:
            hook.remove()
    assert torch.equal(seen["norm"], seen["dropout_in"])
    says("07_full_layer", "on the embeddings after their LayerNorm")


# 09 §3, 11 §4: what a causal mask does without positions


def _layers(n: int, d_model: int = 16) -> nn.ModuleList:
    torch.manual_seed(0)
    return nn.ModuleList(
        nn.TransformerEncoderLayer(d_model, 4, 32, 0.0, batch_first=True).eval()
        for _ in range(n)
    )


def _run(layers, x, causal: bool):
    T = x.shape[1]
    mask = torch.ones(T, T, dtype=torch.bool).triu(1) if causal else None
    with torch.no_grad():
        for layer in layers:
            x = layer(x, src_mask=mask)
    return x


def test_a_causal_layer_sees_which_tokens_came_not_when():
    x = torch.randn(1, 8, 16, generator=torch.Generator().manual_seed(1))
    t = 6
    order = torch.tensor([3, 0, 5, 1, 4, 2, 6, 7])  # reorders the tokens before t
    one, two = _layers(1), _layers(2)
    same = _run(one, x, True)[0, t], _run(one, x[:, order], True)[0, t]
    assert torch.allclose(*same, atol=1e-5)
    moved = _run(two, x, True)[0, t], _run(two, x[:, order], True)[0, t]
    assert not torch.allclose(*moved, atol=1e-3)  # deeper layers can tell
    perm = torch.randperm(8, generator=torch.Generator().manual_seed(2))
    unmasked = _run(two, x, False)[:, perm], _run(two, x[:, perm], False)
    assert torch.allclose(*unmasked, atol=1e-5)  # 08: permutation-equivariant
    says(
        "09_build_a_transformer",
        "in one causal attention layer, the output at position t stays the same "
        "when the tokens before t are reordered",
        "Stacked causal layers could work positions out indirectly",
    )
    says(
        "11_debugging",
        "Without a mask, attention is *permutation-equivariant*",
        "a first layer's output at position t is the same however the tokens "
        "before t are ordered",
    )
    assert "every earlier token looks alike" not in prose("09_build_a_transformer")


# 10: top_attended returns a list, or a tuple


def _top_attended_tuple(probs, tokens, query_index, k):
    row = probs[query_index].tolist()
    order = sorted(range(len(row)), key=lambda j: (-row[j], j))
    return tuple(tokens[j] for j in order[:k])


def test_top_attended_may_return_a_tuple():
    pictures.top_attended_small(_top_attended_tuple)
    pictures.top_attended_random(_top_attended_tuple, seed=1002)
    with pytest.raises(CheckFailed, match="list"):
        pictures.top_attended_small(lambda *a: "tok0 tok1 tok2")
    says("10_visualize", "as a list of str (a tuple is fine too)")


# 08 §3: the permutation check's tolerance


def _perm_gap(dtype, seed: int) -> torch.Tensor:
    """|layer(x[:, perm]) - layer(x)[:, perm]| for one BERT layer (no positions)."""
    g = torch.Generator().manual_seed(seed)
    layer = models.tiny_bert(seed=seed, num_layers=1, num_heads=4).encoder.layer[0]
    layer = layer.to(dtype)
    x = torch.randn(2, 16, 32, generator=g, dtype=dtype) * 0.5
    perm = torch.randperm(16, generator=g)
    with torch.no_grad():
        return layer(x[:, perm]), layer(x)[:, perm]


def test_the_permutation_tolerance_fits_float32_and_the_checks_run_in_float64():
    seeds = range(12)
    gaps = [_perm_gap(torch.float32, s) for s in seeds]
    assert max((a - b).abs().max().item() for a, b in gaps) <= 5e-7 * 1.5
    assert all(torch.allclose(a, b, atol=1e-5, rtol=1e-4) for a, b in gaps)
    # allclose's defaults fail some float32 layers (near-zero outputs) ...
    assert not all(torch.allclose(a, b) for a, b in gaps)
    # ... and never a float64 one, nor would exact equality pass there
    wide = [_perm_gap(torch.float64, s) for s in seeds]
    assert all(torch.allclose(a, b) and not torch.equal(a, b) for a, b in wide)
    assert positions.PERM_DTYPE == torch.float64
    says(
        "08_positions_and_masks",
        "`torch.allclose(a, b, atol=1e-5, rtol=1e-4)`",
        "in float32 the reordered sums differ by up to about 5e-7",
        "The tests run their layers in float64",
    )
    says("08_positions_and_masks", "atol=1e-5, rtol=1e-4", "float64", both=True)


# 11 §5: a first block that is all masked


def test_a_running_max_left_at_minus_inf_gives_nan_and_the_check_says_so():
    m = torch.tensor(float("-inf"))
    assert torch.exp(m - m).isnan()
    guarded = torch.exp(m - torch.where(m.isinf(), 0.0, m))
    assert guarded == 0
    gen = torch.Generator().manual_seed(5)
    mask = chunked._mask(gen, (2,), 5, 12, chunk=2)
    assert not mask[..., 0, :2].any() and mask.any(-1).all()

    mutant = next(
        m for m in fixture_module("11_debugging").MUTANTS if "left at -inf" in m.name
    )
    ns = {"math": math, "torch": torch}
    exec(mutant.code, ns)  # the fixture's unguarded running max
    unguarded = ns["chunked_attention"]

    with pytest.raises(CheckFailed, match="first block of keys is all masked"):
        chunked.chunked_attention_mask(unguarded)
    says(
        "11_debugging",
        "a query may attend no key of its first block",
        "$e^{-\\infty - (-\\infty)}$ is NaN",
        "Subtract 0 instead of $m'$ where $m' = -\\infty$",
    )
    says("11_debugging", "$e^{-\\infty - (-\\infty)}$", both=True)
