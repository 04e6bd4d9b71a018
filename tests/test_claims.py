"""What the notebooks say a computation prints or does is what it does.

Each test computes one claim of the notebooks' prose (a number, an error, what a
library call does) with torch and transformers, and checks that the sentence
stating it is still there, in the English source and, where the claim is a
number, an error text or a name, in the Chinese edition too. When torch or
transformers change what they do, the test fails and the sentence gets fixed.
"""

import ast
import copy
import json
import math
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from harness import definitions, fixture_module, reference_answers
from torch import nn

from course import data, models
from course.checks import (
    CheckFailed,
    debugging,
    pictures,
    positions,
    transformer,
)

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


# A claim about a result holds on the embedded model and on a bert-base-sized one
# (12 layers, 12 heads, 768: what COURSE_MODEL may point at; random weights, so
# only claims about shapes, sizes and what the code does are checked on it).
MODELS = ("embedded", "bert-base-sized")


@pytest.fixture(scope="module", params=MODELS)
def course_model(request):
    if request.param == "embedded":
        return models.load_model(str(models.default_model_path()))
    return models.load_model(str(request.getfixturevalue("bert_base_sized")))


@pytest.fixture(scope="module")
def embedded_model():
    """The MiniLM that ships with the course, for what the prose says of it alone."""
    return models.load_model(str(models.default_model_path()))


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


def test_the_course_models_sentence_vector_is_the_mean_of_tokens(embedded_model):
    """The prose names the model: "The course model is a sentence-transformers
    MiniLM" (a bert-base checkpoint has no 1_Pooling folder)."""
    pooling = Path(embedded_model.name_or_path) / "1_Pooling" / "config.json"
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


def _cell_after(assignment: str, marker: str) -> str:
    """The code cell of the percent file that starts with the line ``marker``."""
    text = (ROOT / "source" / assignment / f"{assignment}.py").read_text("utf-8")
    cell = next(c for c in text.split("# %%") if c.split("\n", 1)[1].startswith(marker))
    return cell.split("\n", 1)[1]


def _defined(assignment: str, *markers: str, **given) -> dict:
    """The functions and classes of the cells starting with ``markers``, run in a
    namespace holding ``given`` (what the notebook's earlier cells made)."""
    ns = dict(given)
    for marker in markers:
        tree = ast.parse(_cell_after(assignment, marker))
        kinds = (ast.FunctionDef, ast.ClassDef)
        tree.body = [s for s in tree.body if isinstance(s, kinds)]
        exec(compile(tree, assignment, "exec"), ns)
    return ns


def test_03_s_picture_splits_the_query_weight_into_h_blocks_of_d_rows(
    course_model, monkeypatch
):
    """What the sentence above 03's picture says it shows: layer 0's query weight,
    (D, D), and red lines between H row blocks of d rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    a = "03_head_slicing"
    H, D = course_model.config.num_attention_heads, course_model.config.hidden_size
    code = _cell_after(a, "W = model.encoder.layer[0].attention.self.query.weight")
    scope = {"model": course_model, "plt": plt, "H": H, "D": D, "d": D // H}
    monkeypatch.setattr(plt, "show", lambda: None)  # the figure stays to be read
    exec(code, scope)  # noqa: S102 - the notebook's own cell
    ax = scope["ax"]
    shown = ax.get_images()[0].get_array()
    query = course_model.encoder.layer[0].attention.self.query.weight
    assert tuple(shown.shape) == (D, D) and torch.equal(
        torch.as_tensor(shown.data), query.detach()
    )
    lines = [ln for ln in ax.get_lines() if ln.get_color() == "red"]
    rows = sorted(ln.get_ydata()[0] + 0.5 for ln in lines)
    assert rows == [h * (D // H) for h in range(1, H)]
    plt.close("all")
    says(a, "The picture below is layer 0's query weight, (D, D). The red lines")
    says(a, "rows into H blocks of d rows: one block per head.")


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
    assert made.shape == (1, 1, 3, 3)  # (B, 1, T, T): spread over the queries
    assert torch.equal(made, want.expand(1, 1, 3, 3))  # each row the (B, 1, 1, T)
    says(
        "06_manual_attention",
        "`(1 - mask) * -10000` in the original BERT",
        "`(1 - mask) * torch.finfo(dtype).min` in current transformers",
        "The original BERT shaped it (B, 1, 1, T)",
        "hands each layer (B, 1, T, T)",
    )
    says(
        "06_manual_attention",
        "-10000",
        "torch.finfo(dtype).min",
        "(B, 1, 1, T)",
        "(B, 1, T, T)",
        both=True,
    )


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
        "The tests run most of their layers in float64",
    )
    says("08_positions_and_masks", "atol=1e-5, rtol=1e-4", "float64", both=True)


# 11 §4: the echo run without positions flattens; with positions it falls past


def _guess_from_earlier_counts(rows: int = 20_000) -> float:
    """The echo task's cross-entropy when guessing each target from how often each
    token came before it (what a model that cannot tell positions apart can use)."""
    tokens, targets = data.echo_task(rows, torch.Generator().manual_seed(0))
    losses = []
    for t in range(data.ECHO_LAG, data.ECHO_LEN):
        counts = F.one_hot(tokens[:, :t], data.ECHO_VOCAB).sum(1)  # (rows, vocab)
        guess = counts.double() / t
        losses.append(-guess.gather(1, targets[:, t, None]).log().mean().item())
    return sum(losses) / len(losses)


def test_11_s_echo_loss_flattens_without_positions_and_falls_past_with_them():
    a = "11_debugging"
    given = {"torch": torch, "nn": nn, "F": F, "data": data}
    ns = _defined(a, "class EchoModel", "def position_table", **given)
    without = ns["train_echo"](None)
    with_positions = ns["train_echo"](ns["position_table"](data.ECHO_LEN, 64))
    counts = _guess_from_earlier_counts()
    assert len(without) == 60
    assert without[-1] < without[0] - 0.5  # falls at first
    late, last = without[30:40], without[50:]
    assert abs(sum(late) / 10 - sum(last) / 10) < 0.1  # then flattens
    assert min(without) > counts - 0.1  # no better than the earlier tokens' counts
    assert with_positions[-1] < counts - 0.5  # with positions: past that plateau
    says(
        a,
        "The loss falls at first (the model learns which tokens it has seen so far, "
        "and guessing among those beats guessing among all 16), then flattens",
        "but in 60 steps this model does not learn to",
    )


# 11 §2: the inverted mask sends everything to the padding


def test_an_inverted_key_mask_shows_by_a_change_of_padding(course_model):
    a = "11_debugging"
    config = course_model.config
    H = config.num_attention_heads
    ns = _defined(
        a,
        "def masked_softmax",
        "def broken_key_mask",
        "def key_mask",
        model=course_model,
        H=H,
        d=config.hidden_size // H,
        math=math,
        torch=torch,
    )
    tokenizer = models.load_tokenizer(course_model.name_or_path)
    texts = [data.SAMPLE_TEXT, "A short one."]
    rows = {}
    for mask in ("broken_key_mask", "key_mask"):
        for pad_to in (16, 24):
            enc = tokenizer(
                texts, padding="max_length", max_length=pad_to, return_tensors="pt"
            )
            real = enc["attention_mask"][1].bool()
            row = ns["layer0_attention"](enc, ns[mask])[1, 0, 1]  # (T,)
            rows[mask, pad_to] = row[real], row[~real]
    for pad_to in (16, 24):
        assert rows["broken_key_mask", pad_to][1].sum() == pytest.approx(1)
        assert rows["key_mask", pad_to][0].sum() == pytest.approx(1)
    broken = [rows["broken_key_mask", p][1].max() for p in (16, 24)]
    assert broken[1] < broken[0] - 0.01  # its largest weight shrinks
    assert torch.allclose(rows["key_mask", 16][0], rows["key_mask", 24][0], atol=1e-6)
    says(
        a,
        "the short text's attention (and so its output) changes when only the "
        "amount of padding changes; here all of it goes to the padding, and its "
        "largest weight shrinks as the padding grows",
        "A correct mask makes padding invisible",
    )


# 11 §5: a first block that is all masked


def test_a_running_max_left_at_minus_inf_gives_nan_and_the_check_says_so():
    m = torch.tensor(float("-inf"))
    assert torch.exp(m - m).isnan()
    guarded = torch.exp(m - torch.where(m.isinf(), 0.0, m))
    assert guarded == 0
    gen = torch.Generator().manual_seed(5)
    mask = debugging._mask(gen, (2,), Tq=5, Tk=12, chunk=2)
    assert not mask[..., 0, :2].any() and mask.any(-1).all()

    mutant = next(
        m for m in fixture_module("11_debugging").MUTANTS if "left at -inf" in m.name
    )
    ns = {"math": math, "torch": torch}
    exec(mutant.code, ns)  # the fixture's unguarded running max
    unguarded = ns["chunked_attention"]

    with pytest.raises(CheckFailed, match="first block of keys is all masked"):
        debugging.chunked_attention_mask(unguarded)
    says(
        "11_debugging",
        "a query may attend no key of its first block",
        "$e^{-\\infty - (-\\infty)}$ is NaN",
        "Subtract 0 instead of $m'$ where $m' = -\\infty$",
    )
    says("11_debugging", "$e^{-\\infty - (-\\infty)}$", both=True)


# The sizes the prose gives: the embedded MiniLM, and bert-base (whose shapes
# transformers' BertConfig() defaults hold)

SIZES = {  # L, H, D, d = D / H, intermediate size, positions
    "embedded": (6, 12, 384, 32, 1536, 512),
    "bert-base-sized": (12, 12, 768, 64, 3072, 512),
}


def _which(request) -> str:
    return request.node.callspec.params["course_model"]


def test_the_sizes_the_notebooks_give_are_the_models(course_model, request):
    c = course_model.config
    head_size = c.hidden_size // c.num_attention_heads
    got = (c.num_hidden_layers, c.num_attention_heads, c.hidden_size, head_size)
    got += (c.intermediate_size, c.max_position_embeddings)
    assert got == SIZES[_which(request)]
    says(
        "01_config",
        "(MiniLM: 6 layers, 12 heads, hidden size 384)",
        "bert-base-uncased, has 12 layers, 12 heads and hidden size 768",
        "(512 for bert-base)",
    )
    says(
        "02_outputs",
        "With the course model D = 384, H = 12, L = 6; with bert-base-uncased "
        "D = 768, H = 12, L = 12.",
    )
    says(
        "06_manual_attention",
        "With the course model D = 384, H = 12, d = 32; bert-base has 768, 12, 64.",
    )
    says("07_full_layer", "intermediate size (1536 here, 3072 in bert-base)")
    says("10_visualize", "`max_position_embeddings` of them (512)")
    for assignment, numbers in {
        "01_config": ("384", "768", "512"),
        "02_outputs": ("D = 384", "D = 768"),
        "06_manual_attention": ("D = 384", "d = 32", "768", "64"),
        "07_full_layer": ("1536", "3072"),
    }.items():
        says(assignment, *numbers, both=True)


# 02 §2: the table of outputs


def test_the_output_table_holds_on_the_model(course_model):
    c = course_model.config
    L, H, D, B, T = c.num_hidden_layers, c.num_attention_heads, c.hidden_size, 2, 5
    mask = torch.tensor([[1] * T, [1] * 3 + [0] * 2])
    with torch.no_grad():
        out = course_model(
            torch.full((B, T), 1000),
            attention_mask=mask,
            output_hidden_states=True,
            output_attentions=True,
        )
    assert out.last_hidden_state.shape == (B, T, D)
    assert out.pooler_output.shape == (B, D)
    assert len(out.hidden_states) == L + 1
    assert all(h.shape == (B, T, D) for h in out.hidden_states)
    assert len(out.attentions) == L
    assert all(a.shape == (B, H, T, T) for a in out.attentions)
    says(
        "02_outputs",
        "| `last_hidden_state` | (B, T, D) |",
        "| `pooler_output` | (B, D) |",
        "| `hidden_states` | L + 1 entries of (B, T, D) |",
        "| `attentions` | L entries of (B, H, T, T) |",
    )


# 05 §1 and §4: overflow, and what the scale does to one row of scores


def test_exp_overflows_float32_at_89_and_the_naive_softmax_gives_nan():
    assert torch.isfinite(torch.exp(torch.tensor(88.0)))
    assert torch.isinf(torch.exp(torch.tensor(89.0)))
    few_hundred = torch.tensor([300.0, 299.0, 0.0])
    assert few_hundred.exp().div(few_hundred.exp().sum()).isnan().any()
    says(
        "05_softmax_and_scaling",
        "$e^{89}$ is already `inf`, and `inf / inf` is NaN — scores of a few hundred "
        "are enough to break the naive formula",
    )
    says("05_softmax_and_scaling", "$e^{89}$", both=True)


def test_unscaled_scores_are_one_hot_and_scores_over_d_k_uniform():
    """05's demo: one row of 8 scores with d_k = 64, three scalings."""
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 20000, 64, generator=gen)
    assert abs((q * k).sum(-1).std().item() - 8) < 0.3  # "±8 and more"
    gen = torch.Generator().manual_seed(0)
    dots = (torch.randn(8, 64, generator=gen) * torch.randn(8, 64, generator=gen)).sum(
        -1
    )
    one_hot, scaled, over_d = (torch.softmax(dots / s, -1) for s in (1, 8, 64))
    assert one_hot.max() > 0.99  # nearly one-hot
    assert over_d.max() - over_d.min() < 0.05  # nearly uniform (1/8 = 0.125 each)
    assert 0.2 < scaled.max() < 0.9 and scaled.min() > 0.01  # neither
    says(
        "05_softmax_and_scaling",
        "With d = 64 typical scores are ±8 and more; the softmax of such scores is "
        "nearly one-hot",
        "the softmax of near-equal scores is nearly uniform",
    )


# 09 §4: one layer's attention at batch 8, 12 heads, T = 512


def test_one_layers_attention_at_batch_8_and_512_tokens_is_about_100_mb(
    course_model,
):
    from transformers import BertModel

    c = course_model.config
    H, T = c.num_attention_heads, c.max_position_embeddings
    assert (H, T) == (12, 512)  # both models: the prose's example is each of them
    one_layer = BertModel.from_pretrained(
        course_model.name_or_path, num_hidden_layers=1, attn_implementation="eager"
    ).eval()
    with torch.no_grad():
        probs = one_layer(torch.full((1, T), 1000), output_attentions=True).attentions
    per_example = probs[0].numel() * probs[0].element_size()
    assert 8 * per_example == 8 * 12 * 512**2 * 4
    assert round(8 * per_example / 1e6, -1) == 100  # 100.7 MB
    says("09_build_a_transformer", "8·12·512²·4 bytes ≈ 100 MB — per layer")
    says("09_build_a_transformer", "8·12·512²·4", both=True)


# 10 §5: a long text


@pytest.fixture
def course_post(monkeypatch):
    """``data.long_text()`` as it is offline: the course's own post."""
    from course import data

    def no_corpus():
        raise OSError("offline")

    monkeypatch.setattr(data, "_newsgroups_posts", no_corpus)
    return data.long_text()


def test_the_long_post_is_cut_to_the_models_positions(course_model, course_post):
    from course import data

    tokenizer = models.load_tokenizer(course_model.name_or_path)
    shown = [(data.SAMPLE_TEXT,), data.SENTENCE_PAIR]  # 10's texts before §5
    assert [len(tokenizer(*texts)["input_ids"]) for texts in shown] == [16, 18]
    pieces = len(tokenizer(course_post)["input_ids"])
    assert 650 <= pieces <= 750  # "about 700"
    max_len = course_model.config.max_position_embeddings
    assert pieces > max_len
    kept = tokenizer(course_post, truncation=True, max_length=max_len)["input_ids"]
    assert len(kept) == max_len and kept[-1] == tokenizer.sep_token_id
    assert data.LONG_WORDS == 600  # at least 600 words: 600 word pieces or more
    says(
        "10_visualize",
        "The texts so far had 16 to 18 tokens",
        "a newsgroup post of at least 600 words, more word pieces than BERT has "
        "positions",
        "the course's own post in its style, of about 700 word pieces",
        "keeps the first tokens and still ends with `[SEP]`",
    )
    says("10_visualize", "16", "18", "600", "700", "512", both=True)


def test_attention_memory_is_l_h_t_squared_and_an_even_spread_is_t_over_3(
    course_model, course_post
):
    tokenizer = models.load_tokenizer(course_model.name_or_path)
    max_len = course_model.config.max_position_embeddings
    enc = tokenizer(
        course_post, truncation=True, max_length=max_len // 2, return_tensors="pt"
    )
    with torch.no_grad():
        attentions = course_model(**enc, output_attentions=True).attentions
    c, T = course_model.config, enc["input_ids"].shape[1]
    measured = sum(a.numel() * a.element_size() for a in attentions)
    L, H = c.num_hidden_layers, c.num_attention_heads
    assert measured == L * H * T * T * 4  # float32
    positions = torch.arange(T)
    gap = (positions[:, None] - positions[None, :]).abs().double()
    even = torch.full((T, T), 1 / T, dtype=torch.float64)
    assert abs((even * gap).sum(-1).mean() / (T / 3) - 1) < 0.01
    previous = torch.eye(T, dtype=torch.float64).roll(-1, dims=1)
    previous[0] = torch.eye(T)[0]  # the first token has no previous one
    assert abs((previous * gap).sum(-1).mean() - 1) < 0.01
    special = (enc["input_ids"][0] == tokenizer.cls_token_id) | (
        enc["input_ids"][0] == tokenizer.sep_token_id
    )
    assert int(special.sum()) == 2 and 2 / T < 0.01  # an even spread's share
    says(
        "10_visualize",
        "L · H · T² numbers, so doubling T makes that memory four times larger",
        "A previous-token head scores about 1; a head that spreads evenly over the "
        "whole text scores about T / 3.",
        "An even spread would give the two [CLS]/[SEP] tokens under 1% of the weight.",
    )
    says("10_visualize", "T / 3", "1%", both=True)


# 04: the small picture of split heads


def test_head_0_holds_the_first_d_features_of_every_token_only_after_transpose():
    x = torch.arange(12.0).view(1, 2, 6)
    right, wrong = x.view(1, 2, 2, 3).transpose(1, 2), x.view(1, 2, 2, 3)
    assert right[0, 0].tolist() == [[0, 1, 2], [6, 7, 8]]
    assert wrong[0, 0].flatten().tolist() == x[0, 0].tolist()  # token 0's vector
    says(
        "04_split_heads",
        "In the right version, head 0 holds `0 1 2` (token 0) and `6 7 8` (token 1)",
        'In the wrong one "head 0" is token 0\'s whole vector.',
    )


# 05 §3: the two "bank" rows, softmax over the right and the wrong dim


def _bank_rows(model) -> tuple[torch.Tensor, torch.Tensor]:
    """Layer 0, head 0's weights of the sample text's two "bank" rows, softmax over
    dim -1 and over dim 0 (05's demo, from the model's own projections)."""
    from course import data

    tokenizer = models.load_tokenizer(model.name_or_path)
    enc = tokenizer(data.SAMPLE_TEXT, return_tensors="pt")
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    banks = [i for i, t in enumerate(tokens) if t == "bank"]
    assert len(banks) == 2
    self_attn = model.encoder.layer[0].attention.self
    d = self_attn.attention_head_size
    with torch.no_grad():
        hidden = model(**enc, output_hidden_states=True).hidden_states[0][0]
        q, k = (m(hidden)[:, :d] for m in (self_attn.query, self_attn.key))
    scores = q @ k.T / math.sqrt(d)
    return torch.softmax(scores, -1)[banks], torch.softmax(scores, 0)[banks]


def test_over_dim_0_the_bank_rows_no_longer_sum_to_1(course_model, request):
    """On trained weights. The bert-base-sized model's are random (std 0.02): its
    scores are all near 0, its weights near uniform, and a near-uniform (T, T)
    matrix sums to about 1 along either dim, so there only the rows are checked."""
    right, wrong = _bank_rows(course_model)
    assert torch.allclose(right.sum(-1), torch.ones(2))
    if _which(request) == "embedded":
        assert bool(((wrong.sum(-1) - 1).abs() > 0.05).all())  # 0.92 and 0.91
    says("05_softmax_and_scaling", 'the row of "bank" no longer sums to 1')


def test_in_layer_0_head_0_the_two_banks_look_alike(embedded_model):
    """A claim about the trained weights: the embedded model's alone."""
    right, _ = _bank_rows(embedded_model)
    assert (right[0] - right[1]).abs().max() < 0.02
    says(
        "05_softmax_and_scaling",
        'in layer 0, head 0 the two rows of "bank" are still nearly the same',
    )


# 09 §3: without positions, the echo task's best guess


def _most_frequent_earlier_token(rows: int = 20_000) -> float:
    """The accuracy of the best a model without positions can do on the echo
    task, by simulation of the task itself: at each position, guess the token most
    frequent among those before it (the target is one of them, and which one
    cannot be told without positions)."""
    tokens, _ = data.echo_task(rows, torch.Generator().manual_seed(0))
    rates = []
    for t in range(data.ECHO_LAG, data.ECHO_LEN):
        counts = F.one_hot(tokens[:, :t], data.ECHO_VOCAB).sum(1)  # (rows, vocab)
        rates.append((counts.max(1).values / t).double().mean().item())
    return sum(rates) / len(rates)


def test_without_positions_09_s_model_guesses_the_most_frequent_earlier_token():
    best = _most_frequent_earlier_token()
    says("09_build_a_transformer", f"about {round(100 * best)}% here")
    a = "09_build_a_transformer"
    assert f"约为 {round(100 * best)}%" in chinese(a)
    train = definitions(ROOT, a, reference_answers(ROOT, a))["train_tiny_transformer"]
    model, _ = train(0, use_positions=False)
    assert abs(transformer._held_out_accuracy(model, 1) - best) < 0.03


def test_09_states_the_accuracies_its_checks_ask_for():
    a = "09_build_a_transformer"
    least = f"{round(100 * transformer.WITH_POSITIONS)}%"
    most = f"{round(100 * transformer.WITHOUT_POSITIONS)}%"
    says(a, f"held-out accuracy reaches {least}", f"the tests check at most {most}")
    says(a, least, most, both=True)
    source = (ROOT / "source" / a / f"{a}.py").read_text("utf-8")
    assert f"(>= {least})" in source and f"(held-out accuracy <= {most})" in source


# 01 §1: the head size is derived, not stored


def test_the_head_size_is_not_in_the_config_but_d_is_d_over_h(course_model):
    c = course_model.config
    assert not [k for k in c.to_dict() if "head_size" in k or "head_dim" in k]
    self_attn = course_model.encoder.layer[0].attention.self
    assert self_attn.attention_head_size == c.hidden_size // c.num_attention_heads
    says(
        "01_config",
        "Note that the head size is *not* stored: BERT splits the hidden vector of "
        "size D into H equal pieces, so d = D // H.",
    )


# 01 §4: the two traps of a smaller position table


def _smaller(model, rows: int = 32):
    config = copy.deepcopy(model.config)
    config.max_position_embeddings = rows
    return config


def test_load_state_dict_fails_only_on_the_position_table(course_model):
    from transformers import BertModel

    new = BertModel(_smaller(course_model))
    state = course_model.state_dict()
    with pytest.raises(RuntimeError) as err:
        new.load_state_dict(state)
    assert str(err.value).count("size mismatch") == 1
    assert "size mismatch for embeddings.position_embeddings.weight" in str(err.value)
    table = "embeddings.position_embeddings.weight"
    new.load_state_dict({**state, table: state[table][:32]})  # the rest fits
    says(
        "01_config",
        "`new.load_state_dict(model.state_dict())` fails with a *size mismatch* for "
        "`embeddings.position_embeddings.weight`",
        "Slice it to its first `max_len` rows first; every other weight has the "
        "same shape.",
    )
    says("01_config", "embeddings.position_embeddings.weight", both=True)


def test_from_pretrained_on_an_instance_builds_a_fresh_model(course_model):
    import inspect

    from transformers import BertModel

    made = BertModel(_smaller(course_model))
    loaded = made.from_pretrained(course_model.name_or_path)
    assert isinstance(inspect.getattr_static(BertModel, "from_pretrained"), classmethod)
    rows = course_model.config.max_position_embeddings
    assert loaded is not made and loaded.config.max_position_embeddings == rows
    assert loaded.embeddings.position_embeddings.weight.shape[0] == rows
    assert made.embeddings.position_embeddings.weight.shape[0] == 32
    says(
        "01_config",
        "does **not** use your edited config: `from_pretrained` is a *classmethod*, "
        "so it builds a fresh model from the saved config and the instance you made "
        "is thrown away.",
    )


# 01 §2: what parameters() yields


def test_parameters_yield_shared_and_frozen_tensors_once_and_no_buffers(course_model):
    from transformers import BertConfig, BertForMaskedLM

    small = BertConfig(
        vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=2
    )
    tied = BertForMaskedLM(small)
    shared = tied.bert.embeddings.word_embeddings.weight
    assert tied.cls.predictions.decoder.weight is shared  # two modules, one tensor
    listed = list(tied.parameters())
    assert sum(p is shared for p in listed) == 1
    every = list(tied.named_parameters(remove_duplicate=False))
    assert sum(p is shared for _, p in every) == 2 and len(every) > len(listed)
    frozen = nn.Linear(3, 2).requires_grad_(False)
    assert [p.numel() for p in frozen.parameters()] == [6, 2]
    ids = course_model.embeddings.position_ids
    assert any(b is ids for b in course_model.buffers())
    assert not any(p is ids for p in course_model.parameters())
    says(
        "01_config",
        "`model.parameters()` yields every learned tensor once, even when two modules "
        "share one (tied weights). Frozen parameters (`requires_grad=False`) are "
        "still parameters; buffers such as `position_ids` are not.",
    )


# 02 §2: why the course model runs the eager implementation


def test_the_sdpa_implementation_warns_and_returns_no_attention_weights(
    course_model,
):
    import logging

    from transformers import BertModel
    from transformers.utils import logging as hf_logging

    fused = BertModel.from_pretrained(
        course_model.name_or_path, attn_implementation="sdpa"
    ).eval()
    ids = torch.tensor([[101, 2023, 102]])
    logged = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = logged.append
    verbosity, library = hf_logging.get_verbosity(), hf_logging.get_logger()
    hf_logging.warning_once.cache_clear()  # warned once per process otherwise
    hf_logging.set_verbosity_warning()  # transformers' default; the course's is error
    library.addHandler(handler)
    try:
        with torch.no_grad():
            got = fused(ids, output_attentions=True).attentions
    finally:
        library.removeHandler(handler)
        hf_logging.set_verbosity(verbosity)
    with torch.no_grad():
        eager = course_model(ids, output_attentions=True).attentions
    assert not got  # an empty tuple: no weights, no error
    assert any("output_attentions" in r.getMessage() for r in logged)
    assert len(eager) == course_model.config.num_hidden_layers
    assert course_model.config._attn_implementation == "eager"
    says(
        "02_outputs",
        'with the "eager" attention implementation (the fused kernels do not return '
        "attention weights: asked for them, transformers 5 only logs a warning and "
        "leaves `attentions` empty)",
    )
    says("02_outputs", "transformers 5", "`attentions`", both=True)


# 04 §2: a transpose is a view with other strides


def test_view_refuses_a_transposed_tensor_and_reshape_copies_it():
    x = torch.randn(2, 3, 4, 5)  # (B, H, T, d)
    swapped = x.transpose(1, 2)  # (B, T, H, d)
    assert swapped.data_ptr() == x.data_ptr() and not swapped.is_contiguous()
    assert swapped.stride() == (60, 5, 20, 1)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        swapped.view(2, 4, 15)
    merged = swapped.reshape(2, 4, 15)
    assert merged.data_ptr() != x.data_ptr()  # copied
    assert torch.equal(merged, swapped.contiguous().view(2, 4, 15))
    assert x.reshape(2, 3, 20).data_ptr() == x.data_ptr()  # no need: no copy
    says(
        "04_split_heads",
        "A transpose does not move memory, it only changes strides, so the result is "
        "not contiguous and `.view` refuses it: call `.contiguous()` first, or use "
        "`.reshape`, which copies when it has to.",
    )


# 05 §4: unscaled scores saturate the softmax


def test_the_softmax_of_unscaled_scores_has_a_nearly_zero_gradient():
    gen = torch.Generator().manual_seed(0)  # 05's row of 8 scores, d_k = 64
    dots = (torch.randn(8, 64, generator=gen) * torch.randn(8, 64, generator=gen)).sum(
        -1
    )
    grads = [
        torch.autograd.functional.jacobian(lambda s: torch.softmax(s, -1), dots / c)
        for c in (1, 8)
    ]
    unscaled, scaled = (g.abs().max().item() for g in grads)
    assert torch.softmax(dots, -1).max() > 0.99  # nearly one-hot
    assert unscaled < 0.01 and unscaled < scaled / 20  # and its gradient nearly zero
    says(
        "05_softmax_and_scaling",
        "the softmax of such scores is nearly one-hot and its gradient nearly zero",
    )


# 07: GPT-2's GELU is the tanh form; BERT's is the erf one


def test_gpt2_uses_the_tanh_gelu_and_bert_the_erf_one(course_model):
    from transformers import GPT2Config
    from transformers.activations import ACT2FN

    x = torch.linspace(-4, 4, 1001, dtype=torch.float64)
    tanh_form = x / 2 * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    erf_form = x / 2 * (1 + torch.erf(x / math.sqrt(2)))
    gpt2 = ACT2FN[GPT2Config().activation_function]
    assert torch.allclose(gpt2(x), tanh_form, atol=1e-12)
    assert torch.allclose(F.gelu(x, approximate="tanh"), tanh_form, atol=1e-12)
    assert not torch.allclose(gpt2(x), erf_form, atol=1e-5)
    bert = ACT2FN[course_model.config.hidden_act]
    assert torch.allclose(bert(x), erf_form, atol=1e-12)
    says(
        "07_full_layer",
        "**GELU**, exact (`erf`) form",
        'Many implementations (GPT-2, `F.gelu(x, approximate="tanh")`) use the tanh '
        "approximation $\\tfrac{x}{2}(1 + \\tanh(\\sqrt{2/\\pi}\\,(x + 0.044715x^3)))$",
    )
    says("07_full_layer", "GPT-2", "0.044715x^3", both=True)


# 08 §3: allclose's defaults, and how far an order-aware layer is from them


def test_allclose_defaults_are_atol_1e_8_and_rtol_1e_5():
    def close(a: float, b: float) -> bool:
        return torch.allclose(*torch.tensor([a, b], dtype=torch.float64))

    assert close(0.99e-8, 0.0) and not close(1.01e-8, 0.0)  # atol, where b = 0
    assert close(1e3 + 0.99e-2, 1e3) and not close(1e3 + 1.01e-2, 1e3)  # + rtol·|b|
    says("08_positions_and_masks", "`torch.allclose`'s defaults (`atol=1e-8`,")
    says("08_positions_and_masks", "atol=1e-8", "rtol=1e-5", both=True)


def _order_gaps(layer, hidden, perm, tolerances) -> list[float]:
    """The largest |layer(x[:, perm]) - layer(x)[:, perm]|, as a multiple of each
    tolerance's allowance atol + rtol·|b|."""
    with torch.no_grad():
        a, b = layer(hidden[:, perm]), layer(hidden)[:, perm]
    return [
        ((a - b).abs() / (atol + rtol * b.abs())).max().item()
        for atol, rtol in tolerances
    ]


def test_a_layer_that_sees_order_misses_either_tolerance_by_far(
    course_model, monkeypatch
):
    a = "08_positions_and_masks"
    tolerances = [(1e-8, 1e-5), (1e-5, 1e-4)]  # allclose's defaults, the notebook's
    # the checks' layers, float64: rounding far below, positions far above
    g = torch.Generator().manual_seed(1)
    hidden = torch.randn(2, 6, 32, generator=g, dtype=positions.PERM_DTYPE)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    blind = positions._bert_layer(0)
    seeing = positions.AddPositions(blind, 32)
    assert max(_order_gaps(blind, hidden, perm, tolerances)) < 1e-3
    assert min(_order_gaps(seeing, hidden, perm, tolerances)) > 1e3
    # the notebook's demo, on the course model's layer 0 in float32
    ns = definitions(ROOT, a, reference_answers(ROOT, a))
    ns.update(torch=torch, model=course_model)
    gaps = []
    ns["permutation_check"] = lambda *args: gaps.append(_order_gaps(*args, tolerances))
    monkeypatch.setattr("builtins.print", lambda *args: None)
    torch.manual_seed(0)
    exec(_cell_after(a, "layer = model.encoder.layer[0]"), ns)  # noqa: S102
    assert len(gaps) == 2 and gaps[0][1] < 1  # no positions: within 1e-5, 1e-4
    assert min(gaps[1]) > 100  # with sinusoids added
    # the checks' one float32 layer: the notebook's tolerance says True, the
    # defaults do not (on every seed tried here)
    for seed in range(5):
        layer, hidden32, perm32 = positions._float32_case(seed)
        assert hidden32.dtype == torch.float32
        default, stated = _order_gaps(layer, hidden32, perm32, tolerances)
        assert stated < 1 < default
    says(
        a,
        "The tests run most of their layers in float64, where the rounding is far "
        "below either tolerance, and one in float32, where the tolerance above must "
        "still say True; a layer that sees order changes its output by far more than "
        "either.",
    )


# 09 §1: two conventions for a bool mask


def test_sdpa_reads_true_as_may_attend_and_torch_nn_as_blocked():
    torch.manual_seed(0)
    x = torch.randn(1, 3, 4)
    mask = torch.tensor([False, True, True]).expand(3, 3)  # True on keys 1 and 2
    blocked_where_true = torch.zeros(3, 3).masked_fill(mask, float("-inf"))
    blocked_where_false = torch.zeros(3, 3).masked_fill(~mask, float("-inf"))
    sdpa = F.scaled_dot_product_attention
    want = sdpa(x, x, x, attn_mask=blocked_where_false)
    assert torch.allclose(sdpa(x, x, x, attn_mask=mask), want)
    mha = nn.MultiheadAttention(4, 1, batch_first=True).eval()
    with torch.no_grad():
        _, weights = mha(x, x, x, attn_mask=mask)
        assert torch.equal(weights[0], torch.eye(3)[[0, 0, 0]])  # key 0 only
        layer = nn.TransformerEncoderLayer(4, 1, 8, 0.0, batch_first=True).eval()
        got = layer(x, src_mask=mask)
        assert torch.allclose(got, layer(x, src_mask=blocked_where_true))
        assert not torch.allclose(got, layer(x, src_mask=blocked_where_false))
    says(
        "09_build_a_transformer",
        "`F.scaled_dot_product_attention(attn_mask=...)` reads True as *may attend* "
        "(ours), while `nn.MultiheadAttention` and `nn.TransformerEncoderLayer` read "
        "True in `attn_mask` / `src_mask` as *blocked*.",
    )
    says("09_build_a_transformer", "attn_mask", "src_mask", both=True)


# 10 §3 and §4: a previous-token head; the head view's sentence-pair menu


def test_some_head_of_the_course_model_attends_mostly_to_the_previous_token(
    embedded_model,
):
    tokenizer = models.load_tokenizer(embedded_model.name_or_path)
    enc = tokenizer(data.SAMPLE_TEXT, return_tensors="pt")
    with torch.no_grad():
        attentions = embedded_model(**enc, output_attentions=True).attentions
    previous = torch.stack([a.diagonal(-1, -2, -1).mean((0, 2)) for a in attentions])
    assert previous.max() > 0.5  # (L, H): mean weight on key i - 1
    assert torch.arange(9).view(3, 3).diagonal(-1).tolist() == [3, 7]  # (i, i-1)
    says(
        "10_visualize",
        "Some heads attend mostly to the token just before the query",
        "For query i (i ≥ 1) the previous token is key i − 1: the diagonal just "
        "**below** the main one.",
    )


def test_the_head_view_of_a_pair_offers_sentence_a_to_sentence_b(embedded_model):
    from course import viz

    tokenizer = models.load_tokenizer(embedded_model.name_or_path)
    shown = viz.attention_inputs(
        *data.SENTENCE_PAIR, model=embedded_model, tokenizer=tokenizer
    )
    html = viz.head_view(*shown).data
    assert ">Sentence A -> Sentence B</option>" in html
    says("10_visualize", '(choose "Sentence A -> Sentence B")')
    says("10_visualize", "Sentence A -> Sentence B", both=True)


# 11 §1: a large negative fill hides the NaN


def test_a_minus_1e9_fill_spreads_a_row_with_nothing_to_attend_evenly():
    scores = torch.randn(3, 4, generator=torch.Generator().manual_seed(0)) * 3
    mask = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0], [1, 0, 1, 1]], dtype=torch.bool)
    filled = torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1)
    infinite = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    assert torch.allclose(filled[1], torch.full((4,), 1 / 4))  # uniform, no NaN
    assert infinite[1].isnan().all()
    assert torch.allclose(filled[[0, 2]], infinite[[0, 2]])  # other rows unchanged
    wide = torch.softmax(scores.double().masked_fill(~mask, -1e9), dim=-1)
    assert torch.equal(wide[1], torch.full((4,), 0.25, dtype=torch.float64))  # exact
    says(
        "11_debugging",
        "Filling with a large negative number instead hides the NaN but gives a row "
        "with nothing to attend a uniform spread over keys it must not see.",
    )


# 07: dropout on the attention probabilities and on each sublayer's output


def test_dropout_acts_on_the_probabilities_and_on_sublayers_before_the_residual(
    course_model, monkeypatch
):
    c, seen, dropped = course_model.config, {}, []
    dropout = F.dropout

    def recording(input, p=0.5, training=True, inplace=False):
        out = dropout(input, p, training, inplace)
        if input.dim() == 4:  # (B, H, T, T)
            dropped.append((input, p, training, out))
        return out

    def keep(key):
        return lambda module, args, out: seen.__setitem__(key, (args, out))

    hooks = []
    for i, layer in enumerate(course_model.encoder.layer):
        for block in (layer.attention.output, layer.output):  # Linear, dropout, norm
            for name in ("", "dense", "dropout", "LayerNorm"):
                module = block.get_submodule(name)
                hooks.append(module.register_forward_hook(keep((i, block, name))))
    monkeypatch.setattr(torch.nn.functional, "dropout", recording)
    course_model.train()  # dropout on: it changes what it is given
    try:
        with torch.no_grad():
            out = course_model(torch.tensor([[101, 2023, 2003, 102]]))
    finally:
        course_model.eval()
        for hook in hooks:
            hook.remove()
    assert len(dropped) == c.num_hidden_layers == len(out.attentions)
    for (probs, p, training, after), returned in zip(
        dropped, out.attentions, strict=True
    ):
        assert p == c.attention_probs_dropout_prob > 0 and training
        assert torch.allclose(probs.sum(-1), torch.ones(()))  # probabilities
        assert torch.equal(after, returned) and not torch.equal(after, probs)
    for i, layer in enumerate(course_model.encoder.layer):
        for block in (layer.attention.output, layer.output):
            (_, residual), _ = seen[i, block, ""]
            (dropout_in,), dropout_out = seen[i, block, "dropout"]
            assert torch.equal(dropout_in, seen[i, block, "dense"][1])
            assert not torch.equal(dropout_in, dropout_out)
            (norm_in,), _ = seen[i, block, "LayerNorm"]
            assert torch.equal(norm_in, dropout_out + residual)
    says(
        "07_full_layer",
        "on the embeddings after their LayerNorm, on the attention probabilities, and "
        "on each sublayer's output before the residual is added.",
    )


# 06 §2, exercise 3: the plot needs torch.no_grad() and no batch dimension


def test_a_matrix_that_requires_grad_does_not_plot_and_one_made_under_no_grad_does():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scores = torch.randn(1, 5, 5, requires_grad=True)
    fig, ax = plt.subplots()
    with pytest.raises(RuntimeError, match="requires grad"):
        ax.imshow(scores.softmax(-1)[0])
    with torch.no_grad():
        probs = scores.softmax(-1)
    ax.imshow(probs[0])  # (T, T): the batch dimension dropped
    with pytest.raises(TypeError, match="Invalid shape"):
        ax.imshow(probs[None, 0, :, :1].expand(1, 5, 5))  # (B, T, T) does not plot
    plt.close(fig)
    a = "06_manual_attention"
    says(a, "drop the batch dimension", "`with torch.no_grad():`")
    says(a, "without it the matrix still requires grad and the plot below fails")
    assert "requires_grad=True" in chinese(a) and "torch.no_grad()" in chinese(a)


# 06 and 09: each notebook runs on its own, so 04's helpers are not there


@pytest.mark.parametrize(
    "assignment", ["06_manual_attention", "09_build_a_transformer"]
)
def test_04_s_helpers_are_not_defined_in_a_later_notebook(assignment):
    nb = json.loads(
        (ROOT / "release" / assignment / f"{assignment}.ipynb").read_text("utf-8")
    )
    code = "\n".join(
        "".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"
    )
    defined = {
        node.name
        for node in ast.walk(ast.parse(code.replace("%", "#")))
        if isinstance(node, ast.FunctionDef | ast.ClassDef)
    }
    assert not {"split_heads", "merge_heads"} & defined
    assert "split_heads" not in code and "merge_heads" not in code
    if assignment.startswith("06"):
        says(assignment, "04's `split_heads` and `merge_heads` are not defined")
        assert "没有定义" in chinese(assignment)
    else:
        says(assignment, "Nothing of 04 or 06 is defined in this notebook")
        assert "都没有定义" in chinese(assignment)


# 09 §3: what echo_task returns


def test_echo_task_returns_tokens_and_targets_of_batch_by_16_longs():
    tokens, targets = data.echo_task(7, torch.Generator().manual_seed(0))
    assert tokens.shape == targets.shape == (7, data.ECHO_LEN) == (7, 16)
    assert tokens.dtype == targets.dtype == torch.long
    a = "09_build_a_transformer"
    says(a, "`echo_task(batch, generator)` (from `course.data`) returns")
    says(a, "`(tokens, targets)`, two LongTensors of shape (batch, 16)")
    assert "(batch, 16)" in chinese(a) and "`(tokens, targets)`" in chinese(a)


# --- 12_modern_encoder ----------------------------------------------------------


def test_12_rotated_scores_depend_only_on_the_offset():
    """Scores of rotated q and k (transformers' own rotary code) agree for pairs
    the same offset apart, and differ for the same distance the other way."""
    from course.checks import modern

    gen = torch.Generator().manual_seed(0)
    for d in (32, 64):  # the embedded model's head size and bert-base's
        for _ in range(10):
            q, k = torch.randn(1, d, generator=gen), torch.randn(1, d, generator=gen)

            def score(m, n, q=q, k=k):
                rq = modern._rotated(q, torch.tensor([m]), 10000.0)
                return float(rq @ modern._rotated(k, torch.tensor([n]), 10000.0)[0])

            same = [score(3, 1), score(10, 8), score(103, 101)]
            assert max(same) - min(same) < 5e-5  # four decimals
            assert abs(score(3, 5) - same[0]) > 1e-3
    says(
        "12_modern_encoder",
        "their scores agree to four decimals",
        "its score differs",
    )


def test_12_pairs_are_halves_in_modernbert_and_llama_and_turn_ever_slower():
    from transformers.models.llama import modeling_llama as llama
    from transformers.models.modernbert import modeling_modernbert as mb

    x = torch.arange(8.0)
    halves = torch.cat([-x[4:], x[:4]])
    assert torch.equal(mb.rotate_half(x), halves)
    assert torch.equal(llama.rotate_half(x), halves)
    rope = mb.ModernBertRotaryEmbedding(models.modern_bert().config)
    inv_freq = rope.full_attention_inv_freq  # pair i's angle per position
    assert bool((inv_freq[1:] < inv_freq[:-1]).all())
    says(
        "12_modern_encoder",
        "ModernBERT and Llama pair feature i with feature i + d/2",
        "the first pairs turn fast, the last ones slowly",
    )


def test_12_one_layer_in_three_is_global_and_local_layers_stop_at_half_the_window():
    import transformers

    from course.checks import modern

    default = transformers.ModernBertConfig(num_hidden_layers=6).layer_types
    assert default == (["full_attention"] + ["sliding_attention"] * 2) * 2
    encoder = modern.course_encoder()  # the notebook's
    config = encoder.config
    assert config.layer_types == ["full_attention"] + ["sliding_attention"] * 2
    ids = models.load_tokenizer()(data.SAMPLE_TEXT, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        attentions = encoder(ids, output_attentions=True).attentions
    T, half = ids.shape[1], config.local_attention // 2
    offset = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).abs()
    assert bool((attentions[0] > 0).all())  # layer 0 reaches every token
    for layer in (1, 2):
        assert bool(((attentions[layer] > 0) == (offset <= half)).all())
    says(
        "12_modern_encoder",
        "ModernBERT keeps that for one layer in three (`full_attention`)",
        "layer 0 is global, its lines reach every token; in layers 1 and 2 (local)",
    )


def test_12_query_heads_share_kv_heads_in_order():
    from transformers.models.llama import modeling_llama as llama

    K = torch.randn(2, 3, 5, 4)
    repeated = llama.repeat_kv(K, 4)  # (B, 12, T, d)
    assert all(torch.equal(repeated[:, h], K[:, h // 4]) for h in range(12))
    says(
        "12_modern_encoder", "query heads 0..g-1 use K/V head 0, the next g use head 1"
    )


def test_12_cache_of_a_llama_3_8b_shape():
    """2 x 32 layers x 8 heads x 128 x 8192 tokens x 2 bytes, measured on a random
    Llama's cache scaled down, is 1 GiB; 32 K/V heads make it 4."""
    from course.checks import modern

    # the measured cache of a small Llama grows as each factor does
    base = modern._measured_cache(2, 2, 8, 4, 1, "bfloat16")
    assert base == 2 * 2 * 2 * 8 * 4 * 1 * 2
    gib = 2 * 32 * 8 * 128 * 8192 * 2 / 2**30
    assert (gib, 4 * gib, 16 * gib, 64 * gib) == (1, 4, 16, 64)
    says(
        "12_modern_encoder",
        "A quarter of the cache",
        "would need 16 GiB of cache with shared heads, and 64 GiB without",
    )


# --- 13_decoding ----------------------------------------------------------------


def test_13_cross_attention_rows_sum_to_one_over_the_source():
    from course.checks import decoding

    tokenizer = models.load_tokenizer()
    src = tokenizer([data.SAMPLE_TEXT], return_tensors="pt")["input_ids"]
    tgt = tokenizer(["the cat sat on the mat"], return_tensors="pt")["input_ids"]
    with torch.no_grad():
        out = decoding.course_translator()(
            input_ids=src, decoder_input_ids=tgt, output_attentions=True
        )
    for probs in out.cross_attentions:  # (1, H, Tq, Tk)
        assert probs.shape[-2:] == (tgt.shape[1], src.shape[1])
        assert torch.allclose(probs.sum(-1), torch.ones(()), atol=1e-5)
    says("13_decoding", "Every row of a cross-attention head sums to 1 over the source")


def test_13_a_decoder_keeps_earlier_keys_when_a_token_is_appended_bert_does_not():
    """The decoder's cache of T tokens is the first T entries of its cache of
    T + 1; BERT's states of earlier tokens change when one is appended."""
    from course.checks import decoding

    decoder = decoding.course_decoder()
    ids = torch.randint(1, 1000, (1, 7), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        short = decoder(ids[:, :6], use_cache=True).past_key_values
        long = decoder(ids, use_cache=True).past_key_values
        for a, b in zip(short.layers, long.layers, strict=True):
            assert torch.allclose(a.keys, b.keys[..., :6, :], atol=1e-5)
            assert torch.allclose(a.values, b.values[..., :6, :], atol=1e-5)
        bert = models.tiny_bert()
        before = bert(ids[:, :6] % 100).hidden_states[2]
        after = bert(ids % 100).hidden_states[2][:, :6]
    assert not torch.allclose(before, after, atol=1e-3)
    says(
        "13_decoding",
        "they have not changed: a causal mask means no token's states depend on a "
        "later token",
        "a new token changes the states of every earlier token in every layer above",
    )


def test_13_the_uncached_loop_reads_the_whole_sequence_each_step():
    """transformers' own greedy generate, watched: without the cache it reads T,
    T + 1, ..., T + n - 1 tokens; with it T, then one per step."""
    from course.checks import decoding

    decoder = decoding.course_decoder()
    ids = torch.randint(1, 1000, (1, 5), generator=torch.Generator().manual_seed(1))
    T, n = ids.shape[1], 6
    runs = {}
    for use_cache in (False, True):
        tokens, read = decoding.tokens_read(
            decoder,
            lambda use_cache=use_cache: decoder.generate(
                ids, max_new_tokens=n, do_sample=False, use_cache=use_cache
            ),
        )
        runs[use_cache] = tokens
        want = [T + s for s in range(n)] if not use_cache else [T] + [1] * (n - 1)
        assert read == want
    assert torch.equal(runs[False], runs[True])
    says(
        "13_decoding",
        "T + (T + 1) + ... + (T + n - 1) tokens, the cached one T + (n - 1)",
        "The two ways give the same tokens",
    )


def test_13_the_top_token_wins_more_often_at_low_temperature():
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0])  # the notebook's
    low, high = (torch.softmax(logits / t, -1)[0] for t in (0.5, 2.0))
    assert low > 0.75 and high < 0.4
    says(
        "13_decoding",
        "at 0.5 it is drawn most of the time, at 2 well under half the time",
    )
