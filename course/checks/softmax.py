"""Checks for 05_softmax_and_scaling.

Oracles: torch's softmax (taken before any test turns it off) and torch's fused
``scaled_dot_product_attention``. The scores are read off the latter exactly: with an
extra all-zero key, whose score is 0, ``log(p_j / p_zero)`` is score j. For
``dot_product_std``, the theory: a dot product of two unit-normal d_k-vectors has
standard deviation sqrt(d_k).
"""

from __future__ import annotations

import math
import random

import torch
import torch.nn.functional as F

from .. import models
from ..hints import hint as hint  # the notebook's check.hint("<exercise>")
from ..i18n import N_, mistakes_of, say, with_keys
from ..worked import worked as worked  # check.worked("<exercise>"), once tried
from . import (
    SAMPLE_TEXTS,
    allclose,
    call,
    expect_close,
    expect_finite,
    expect_shape,
    fail,
)
from .calls import CaseVerdicts, both
from .compare import fail_mistaken, same_mistake
from .lessons import FUSED_ATTENTION, SOFTMAXES, Lesson
from .oracles import BY_D, BY_LENGTH, BY_WIDTH, LAST_DIM, sample_qk

_softmax = torch.softmax  # the oracle, kept before any check blocks it
SQRT2 = math.sqrt(2)

BY_HEADS = N_(
    "it divides by sqrt(H), the number of heads (dim 1 of (B, H, T, d) scores); "
    "the scale uses the head size d, the last dim of Q.",
    mistake="scaled-by-heads",
)
STD_TENSORS = N_(
    "dot_product_std returns tensors, not Python floats: the exercise asks for "
    "(unscaled_std, scaled_std) as floats; take each one's .item().",
    mistake="std-tensors",
)
#: k drawn as the same numbers as q: q·k = |q|^2, a chi-square of d_k degrees of
#: freedom, with std sqrt(2 d_k) (sqrt(2) once scaled), where q·k of independent
#: draws has std sqrt(d_k) (1 scaled).
K_IS_Q = N_(
    "dot_product_std for d_k={d_k} gives {unscaled:.3g} and {scaled:.3g}, about "
    "sqrt(2 d_k) = {sqrt_2d:.3g} and sqrt(2): the std of q·q = |q|^2, so k is q "
    "(e.g. two generators seeded alike). The two vectors must be independent "
    "draws (one generator, or two different seeds); then q·k has std sqrt(d_k) "
    "and 1 once scaled.",
    mistake="k-is-q",
)
#: q·k taken as a mean over the d_k products, not their sum: std 1/sqrt(d_k) where
#: the sum's is sqrt(d_k), and 1/d_k once scaled (d_k = 1: the mean is the sum).
MEAN_NOT_SUM = N_(
    "dot_product_std for d_k={d_k} gives {unscaled:.3g} and {scaled:.3g}, about "
    "1/sqrt(d_k) = {inv_sqrt:.3g} and 1/d_k = {inv_d:.3g}: q·k was taken as a "
    "mean over the d_k products, not their sum. A dot product adds them up; its "
    "std is sqrt(d_k), and 1 once scaled.",
    mistake="dot-mean",
)

WRONG_DIM = N_(
    "rows do not sum to 1 — softmax over the key dim (-1), not dim 0.",
    mistake="wrong-dim",
)
SCALED_AFTER = N_(
    "the weights were divided by sqrt(d) after the softmax, so each row sums to "
    "1/sqrt(d): the scale belongs to the scores, before the softmax.",
    mistake="scaled-after-softmax",
)
HEADS_DIM = N_(
    "it normalises over dim 1 (the heads); each query's weights over the keys "
    "(dim -1) must sum to 1.",
    mistake="heads-dim",
)
ROWS_DIM = N_(
    "it normalises over dim -2 (the queries); each query's weights over the "
    "keys (dim -1) must sum to 1.",
    mistake="query-dim",
)
GLOBAL_MAX = N_(
    "it subtracts one max for the whole tensor: a row whose scores lie far below "
    "it underflows to 0/0 (NaN). Subtract each row's own max along dim, with "
    "keepdim=True.",
    mistake="global-max",
)
GLOBAL_SUM = N_(
    "the sum runs over every element, not along dim: each slice along dim must sum "
    "to 1, so sum with dim=dim, keepdim=True.",
    mistake="global-sum",
)
MAX_OTHER_DIM = N_(
    "it subtracts each slice's max along another dim than dim: the shift must be "
    "the same for every element it normalises together, so take the max along "
    "dim (keepdim=True).",
    mistake="max-other-dim",
)
SUM_OVER_SAMPLES = N_(
    "dot_product_std for d_k={d_k} gives {unscaled:.3g}, about sqrt(n_samples) = "
    "{sqrt_n:.3g}: the products were summed over the samples (dim 0). A dot "
    "product sums over the d_k features (dim -1), one dot per sample.",
    mistake="sum-over-samples",
)
BY_HAND = N_(
    "Write softmax by hand with exp and sum: torch's softmax functions are "
    "turned off for this exercise.",
    mistake="softmax-shortcut",
)

#: What softmax by hand may use: arithmetic, reductions, shapes and dtypes. Anything
#: else (softmax under any name, fused attention, torch.distributions, ...) is out.
BY_HAND_SOFTMAX = {"exp", "exp_", "log", "sum", "max", "amax", "min", "amin", "mean"}
BY_HAND_SOFTMAX |= {"logsumexp", "clamp", "clamp_min", "clip", "where", "maximum"}
BY_HAND_SOFTMAX |= {"minimum", "isfinite", "isinf", "isnan", "nan_to_num", "sub"}
BY_HAND_SOFTMAX |= {"sub_", "add", "mul", "div", "div_", "neg", "true_divide", "abs"}
BY_HAND_SOFTMAX |= {"float", "double", "half", "to", "type_as", "dtype", "shape"}
BY_HAND_SOFTMAX |= {"size", "dim", "ndim", "values", "indices", "unsqueeze"}
BY_HAND_SOFTMAX |= {"squeeze", "expand", "expand_as", "reshape", "view", "transpose"}
BY_HAND_SOFTMAX |= {"permute", "movedim", "contiguous", "clone", "detach", "numel"}
BY_HAND_SOFTMAX |= {"zeros_like", "ones_like", "full_like", "tensor", "as_tensor"}
BY_HAND_SOFTMAX |= {"finfo", "inf", "float16", "float32", "float64", "bfloat16"}
BY_HAND_SOFTMAX |= {"masked_fill", "broadcast_to", "item", "tolist", "keepdim"}
BY_HAND_SOFTMAX |= {"sqrt", "pow", "e", "mT", "T", "new_zeros", "new_ones"}
BY_HAND_SOFTMAX |= {"cpu", "numpy", "from_numpy", "asarray", "array", "astype"}  # numpy
BY_HAND_SOFTMAX |= {"device"}

LESSONS = {
    "softmax": Lesson(
        BY_HAND, SOFTMAXES | FUSED_ATTENTION, allowed=frozenset(BY_HAND_SOFTMAX)
    ),
}


def _expect_softmax(fn, x: torch.Tensor, dim: int) -> None:
    args = (x.clone(), dim)
    with LESSONS["softmax"].enforced(args):
        got = call(fn, *args, name="softmax")
    want = _softmax(x.double(), dim)
    expect_shape(got, x.shape, f"softmax(x, dim={dim})")
    if not bool(torch.isfinite(got).all()) and x.abs().max() > 80:
        shifted = torch.exp(x - x.max())  # one max for the whole tensor, in x's dtype
        if same_mistake(got, shifted / shifted.sum(dim, keepdim=True), 1e-5, 1e-5):
            fail_mistaken(f"softmax(x, dim={dim})", GLOBAL_MAX)
        fail(
            "softmax(x, dim={dim}) gives NaN/inf on scores as large as "
            "{largest:.0f}: exp overflows. Subtract the max along dim "
            "first (it does not change the result).",
            mistake="overflow",
            dim=dim,
            largest=x.abs().max(),
        )
    expect_finite(got, f"softmax(x, dim={dim})")
    _expect_normalised_along(got, x, dim)
    diagnose = {mistake: _softmax(x.double(), k) for k, mistake in _other_dims(x, dim)}
    for k in range(x.dim()):  # a max along another dim: not a constant shift
        if k != dim % x.dim() and x.shape[k] > 1:
            e = torch.exp(x.double() - x.double().amax(k, keepdim=True))
            diagnose.setdefault(MAX_OTHER_DIM, []).append(e / e.sum(dim, keepdim=True))
    if MAX_OTHER_DIM in diagnose:
        diagnose[MAX_OTHER_DIM] = tuple(diagnose[MAX_OTHER_DIM])
    if x.dim() > 1:
        e = torch.exp(x.double() - x.double().amax(dim, keepdim=True))
        diagnose[GLOBAL_SUM] = (
            _softmax(x.double().flatten(), 0).view_as(x),
            e / e.sum(),
        )
    expect_close(
        got,
        want,
        f"softmax(x, dim={dim})",
        diagnose=diagnose,
        what="torch.softmax",
        atol=_softmax_atol(x),
    )


def _expect_normalised_along(got: torch.Tensor, x: torch.Tensor, dim: int) -> None:
    """Name the dim ``got`` sums to 1 along, where that is not ``dim``: a softmax
    normalised over another dim, whatever max it subtracted first."""
    if x.dim() < 2 or x.shape[dim] == 1:
        return

    def sums_to_one(k: int) -> bool:
        sums = got.double().sum(k)
        return bool(allclose(sums, torch.ones_like(sums), atol=1e-4))

    if sums_to_one(dim):
        return
    for k, mistake in _other_dims(x, dim):
        if x.shape[k] > 1 and sums_to_one(k):
            fail_mistaken(f"softmax(x, dim={dim})", mistake)


def _other_dims(x: torch.Tensor, dim: int) -> list[tuple[int, str]]:
    """``(dim, mistake)`` for each dim a softmax over ``dim`` is taken along by
    mistake: the first, the one before the last where ``dim`` is the last, and
    the last. None for a tensor of one dim."""
    if x.dim() < 2:
        return []
    last, asked = x.dim() - 1, dim % x.dim()
    named = [(0, WRONG_DIM)]
    if asked == last:
        named.append((last - 1, ROWS_DIM))
    named.append((last, LAST_DIM))
    return [(k, mistake) for k, mistake in named if k != asked]


def _softmax_atol(x: torch.Tensor) -> float:
    """1e-5, or what a correct formula loses rounding numbers as large as the
    scores (``exp(x - logsumexp(x))`` in float32 on scores of 3e4: up to 2e-3)."""
    return max(1e-5, 2 * torch.finfo(x.dtype).eps * float(x.abs().max()))


def softmax_rows(fn) -> None:
    """Rows of softmax(scores) equal torch.softmax over the last dim."""
    gen = torch.Generator().manual_seed(0)
    _expect_softmax(fn, torch.randn(2, 3, 5, 5, generator=gen) * 3, -1)


def softmax_stable(fn) -> None:
    """softmax stays finite and right on scores of 1e4."""
    gen = torch.Generator().manual_seed(1)
    _expect_softmax(fn, torch.randn(3, 6, generator=gen) * 1e4, -1)


def softmax_random(fn, seed: int) -> None:
    """Other shapes and other dims, float32 and float64, big and small scores."""
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    for i in range(6):  # every other draw: a matrix over dim -1
        with verdicts:
            if i % 2 == 0:
                shape, dim = [rng.randint(2, 5) for _ in range(rng.randint(2, 4))], -1
            elif i == 1:  # a dim before the last, longer than 1: a fixed dim -1 shows
                shape, dim = (
                    [rng.randint(2, 5) for _ in range(3)],
                    rng.choice([0, 1, -2]),
                )
            else:
                shape = [rng.randint(1, 5) for _ in range(rng.randint(1, 4))]
                dim = rng.randrange(-len(shape), len(shape))
            # Each scale twice. The dim-before-the-last case has scores of about 1:
            # at 30 a small softmax is nearly one-hot along any dim, and one taken
            # along the wrong dim can give the same numbers.
            x = torch.randn(*shape, generator=gen) * (1.0, 1.0, 3e4, 30.0, 30.0, 3e4)[i]
            if i == 2:  # rows far apart: one max for the whole tensor underflows some
                x[0] -= 2e5
            _expect_softmax(fn, x if rng.random() < 0.5 else x.double(), dim)
    verdicts.fail_if_any()


def _wrong_weights(Q, K, s) -> dict:
    """What each softmax-dim or scaling misconception makes of the scores ``s``,
    alone and two at a time (a wrong dim and a wrong scale: both are named)."""
    dims = {WRONG_DIM: 0 if s.dim() > 2 else -2, ROWS_DIM: -2}
    if s.dim() == 4:  # (B, H, Tq, Tk)
        dims[HEADS_DIM] = 1
    scales = _diagnose_scores(Q, K, s)
    root = math.sqrt(Q.shape[-1])
    wrong = {k: _softmax(s, dim) for k, dim in dims.items()}
    wrong |= {k: _softmax(v, -1) for k, v in scales.items()}
    wrong[SCALED_AFTER] = _softmax(s * root, -1) / root
    for dim_mistake, dim in dims.items():
        for scale_mistake, scores in scales.items():
            wrong[both(dim_mistake, scale_mistake)] = _softmax(scores, dim)
        wrong[both(dim_mistake, SCALED_AFTER)] = _softmax(s * root, dim) / root
    return wrong


def _expect_weights(fn, Q, K, *, values: bool = True) -> None:
    """attention_weights(Q, K) against torch's; without ``values``, only that it
    runs and gives the right shape."""
    got = call(fn, Q.clone(), K.clone(), name="attention_weights")
    s = scores_oracle(Q, K)
    want = _softmax(s, -1)
    expect_shape(got, want.shape, "attention_weights(Q, K)")
    if not values:
        return
    diagnose = _wrong_weights(Q, K, s)
    expect_close(
        got,
        want,
        "attention_weights(Q, K)",
        diagnose=diagnose,
        what=say("torch's scaled dot-product attention"),
    )


def attention_weights_rows(fn) -> None:
    """Each query's weights over the keys sum to 1 (sample text and one more, layer 0)."""
    for text in SAMPLE_TEXTS:
        _expect_rows(fn, *sample_qk(text=text))


def _expect_rows(fn, Q, K) -> None:
    got = call(fn, Q, K, name="attention_weights")
    expect_shape(got, Q.shape[:-1] + (K.shape[-2],), "attention_weights(Q, K)")
    rows = got.sum(-1)
    if not allclose(
        rows.double(), torch.ones_like(rows, dtype=torch.float64), atol=1e-4
    ):
        root = math.sqrt(Q.shape[-1])
        if allclose(rows.double(), torch.full_like(rows.double(), 1 / root)):
            fail_mistaken("attention_weights", SCALED_AFTER)
        cols = got.sum(-2)
        if allclose(
            cols.double(), torch.ones_like(cols, dtype=torch.float64), atol=1e-4
        ):
            fail_mistaken("attention_weights", ROWS_DIM)
        fail_mistaken("attention_weights", WRONG_DIM)


def attention_weights_values(fn) -> None:
    """attention_weights equals the model's attention for layer 0 (sample and one more)."""
    model, tok = models.oracle_model(), models.load_tokenizer()
    for text in SAMPLE_TEXTS:
        Q, K = sample_qk(text=text)
        with torch.no_grad():
            want = model(**tok(text, return_tensors="pt")).attentions[0]
        got = call(fn, Q, K, name="attention_weights")
        expect_shape(got, want.shape, "attention_weights(Q, K)")
        expect_close(
            got,
            want,
            "attention_weights(Q, K)",
            diagnose=_wrong_weights(Q, K, scores_oracle(Q, K)),
            what=say("the model's attentions[0]"),
        )


def attention_weights_random(fn, seed: int) -> None:
    """Other shapes, batch sizes and head sizes; (B, T, d) and (T, d) too."""
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    for i in range(4):
        with verdicts:
            _expect_weights(
                fn,
                *_random_qk(
                    seed + i,
                    B=rng.randint(2, 3),
                    H=rng.randint(2, 4),
                    Tq=rng.randint(2, 6),
                    Tk=rng.randint(2, 6),
                    d=rng.choice([8, 16, 64]),
                ),
            )
    # Fewer dims: where the (B, H, T, d) cases were wrong, only that it runs (the
    # same mistake would be named again, under another dim's name)
    Q, K = _random_qk(seed, B=2, H=1, Tq=4, Tk=5, d=8)
    values = not verdicts.failures
    with verdicts:
        _expect_weights(fn, Q[:, 0], K[:, 0], values=values)  # (B, T, d)
    with verdicts:
        _expect_weights(fn, Q[0, 0], K[0, 0], values=values)  # (T, d)
    verdicts.fail_if_any()


# --- the scaling: attention_scores, and dot_product_std (why divide) ------------------


_sdpa = F.scaled_dot_product_attention


def scores_oracle(Q: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """Q K^T / sqrt(d), read off torch's scaled_dot_product_attention (float64)."""
    Q, K = Q.double(), K.double()
    K0 = torch.cat([K, torch.zeros_like(K[..., :1, :])], dim=-2)  # (..., Tk+1, d)
    eye = torch.eye(K0.shape[-2], dtype=torch.float64).expand(*K0.shape[:-2], -1, -1)
    p = _sdpa(Q, K0, eye)  # (..., Tq, Tk+1): the attention weights themselves
    return p[..., :-1].log() - p[..., -1:].log()


SCORES_T = N_(
    "the scores are transposed (K Q^T): row i must hold query i's scores against "
    "every key.",
    mistake="scores-transposed",
)


def _diagnose_scores(Q, K, s) -> dict:
    """What each scaling or transpose misconception makes of the true scores ``s``
    of ``Q`` and ``K``: its message -> its scores."""
    d = Q.shape[-1]
    out = {
        say(
            "missing 1/sqrt(d): divide Q K^T by the square root of the head size.",
            mistake="no-scale-qk",
        ): s * math.sqrt(d),
        say(BY_D): s / math.sqrt(d),
    }
    if Q.dim() == 4:
        D = Q.shape[1] * d
        out[say(BY_WIDTH)] = s * math.sqrt(d / D)
        out[say(BY_HEADS)] = s * math.sqrt(d / Q.shape[1])
    Tk = K.shape[-2]  # one key: sqrt(Tk) is no scale at all, and both are named
    out[say(BY_LENGTH)] = s * math.sqrt(d / Tk)
    if Q.shape[-2] == K.shape[-2]:
        out[say(SCORES_T)] = s.transpose(-1, -2)
    return out


def _scores_tiers(Q, K, s) -> list[dict]:
    """:func:`_diagnose_scores`, then a transpose and a scaling mistake together."""
    single = _diagnose_scores(Q, K, s)
    if Q.shape[-2] != K.shape[-2]:
        return [single]
    return [
        single,
        {
            both(SCORES_T, m): wrong.transpose(-1, -2)
            for m, wrong in single.items()
            if "scores-transposed" not in mistakes_of(m)
        },
    ]


def _random_qk(seed: int, *, B, H, Tq, Tk, d):
    """Unit-normal queries (B, H, Tq, d) and keys (B, H, Tk, d), drawn from ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(B, H, Tq, d, generator=gen), torch.randn(
        B, H, Tk, d, generator=gen
    )


#: Scores of shape (..., Tk, Tq): the keys' rows where the queries' belong.
SCORES_T_SHAPE = with_keys(  # the transpose that scores-transposed names, by shape
    N_(
        "attention_scores has shape (..., Tk, Tq): the scores are transposed (K "
        "Q^T); row i must be query i.",
        mistake="scores-transposed-shape",
    ),
    ["scores-transposed-shape", "scores-transposed"],
)


def _expect_scores(fn, Q, K) -> None:
    got = call(fn, Q.clone(), K.clone(), name="attention_scores")
    want = scores_oracle(Q, K)
    verdicts = CaseVerdicts()  # transposed, and scaled wrong too: both named
    if (
        isinstance(got, torch.Tensor)
        and got.shape != want.shape
        and got.shape == want.mT.shape
    ):
        with verdicts:
            fail(SCORES_T_SHAPE)
        got = got.mT  # judged as the student meant it, for the scale
    with verdicts:
        expect_close(
            got,
            want,
            "attention_scores(Q, K)",
            diagnose=_scores_tiers(Q, K, want),
            what=say("torch's scaled dot-product attention"),
            atol=2e-4,
            rtol=2e-4,
        )
    verdicts.fail_if_any()


def attention_scores_shape(fn) -> None:
    """attention_scores gives (B, H, Tq, Tk), also when Tq != Tk."""
    Q, K = _random_qk(0, B=2, H=3, Tq=4, Tk=6, d=8)
    got = call(fn, Q, K, name="attention_scores")
    if isinstance(got, torch.Tensor) and tuple(got.shape) == (2, 3, 6, 4):
        fail(SCORES_T_SHAPE)
    expect_shape(
        got,
        (2, 3, 4, 6),
        "attention_scores(Q, K)",
        say("One score per (query, key): (..., Tq, Tk)."),
    )


def attention_scores_values(fn) -> None:
    """attention_scores on layer 0's queries and keys of the sample text (and one more)."""
    for text in SAMPLE_TEXTS:
        _expect_scores(fn, *sample_qk(text=text))


def attention_scores_random(fn, seed: int) -> None:
    """Other batch shapes, head sizes and lengths."""
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    for i in range(4):
        with verdicts:
            _expect_scores(
                fn,
                *_random_qk(
                    seed + i,
                    B=rng.randint(1, 2),
                    H=rng.randint(
                        2, 4
                    ),  # H != d and H > 1: every mistake looks different
                    Tq=rng.randint(1, 6),
                    Tk=rng.randint(1, 6),
                    d=rng.choice([8, 16, 64]),
                ),
            )
    Q, K = _random_qk(seed, B=1, H=1, Tq=5, Tk=5, d=8)
    with verdicts:
        _expect_scores(fn, Q[0, 0], K[0, 0])  # no batch dims at all
    verdicts.fail_if_any()


def _expect_std(fn, d_k: int, n: int, seed: int) -> None:
    got = call(fn, d_k, n, seed, name="dot_product_std")
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        fail("dot_product_std should return a pair (unscaled_std, scaled_std).")
    unscaled, scaled = (float(v) for v in got)
    again = tuple(float(v) for v in call(fn, d_k, n, seed, name="dot_product_std"))
    verdicts = CaseVerdicts()  # unseeded, and a wrong std as well: both named
    same = len(again) == 2 and all(  # NaN (a std of one value) is NaN again
        a == b or math.isnan(a) and math.isnan(b)
        for a, b in zip(again, (unscaled, scaled), strict=True)
    )
    with verdicts:
        if not same:
            fail(
                "dot_product_std gives different numbers for the same seed: "
                "seed a torch.Generator (or torch.manual_seed) with it.",
                mistake="std-unseeded",
            )
    with verdicts:  # a std is a std on any draw: judged, seeded or not
        _expect_stds(got, d_k, n)
    verdicts.fail_if_any()


def _expect_stds(got, d_k: int, n: int) -> None:
    """Whether (unscaled, scaled) of ``n`` dot products are the stds they should
    be, each within a few standard errors."""
    unscaled, scaled = (float(v) for v in got)
    tol = 5 * math.sqrt(2 / n)  # relative standard error of a sample std, with margin
    if d_k > 1 and abs(unscaled / d_k - 1) < 2 * tol and abs(scaled - 1) < 2 * tol:
        fail(
            "dot_product_std for d_k={d_k} gives {unscaled:.3g}, about d_k: that is "
            "the variance (the std squared); return the standard deviation.",
            mistake="variance",
            d_k=d_k,
            unscaled=unscaled,
        )
    single = abs(unscaled - 1) < tol and abs(scaled * math.sqrt(d_k) - 1) < tol
    if d_k > 1 and single:
        fail(
            "dot_product_std for d_k={d_k} gives {unscaled:.3g} and {scaled:.3g}: the "
            "std of the single products q_i·k_i, about 1. A dot product sums d_k of "
            "them, and its std is sqrt(d_k).",
            mistake="std-of-products",
            d_k=d_k,
            unscaled=unscaled,
            scaled=scaled,
        )
    if abs(unscaled / math.sqrt(2 * d_k) - 1) < tol and abs(scaled / SQRT2 - 1) < tol:
        fail(
            K_IS_Q,
            d_k=d_k,
            unscaled=unscaled,
            scaled=scaled,
            sqrt_2d=math.sqrt(2 * d_k),
        )
    if (
        d_k > 1
        and _about(unscaled, math.sqrt(n), d_k)
        and _about(scaled, math.sqrt(n / d_k), d_k)
    ):
        fail(SUM_OVER_SAMPLES, d_k=d_k, unscaled=unscaled, sqrt_n=math.sqrt(n))
    mean = abs(unscaled * math.sqrt(d_k) - 1) < tol and abs(scaled * d_k - 1) < tol
    if d_k > 1 and mean:
        fail(
            MEAN_NOT_SUM,
            d_k=d_k,
            unscaled=unscaled,
            scaled=scaled,
            inv_sqrt=1 / math.sqrt(d_k),
            inv_d=1 / d_k,
        )
    if abs(unscaled / math.sqrt(d_k) - 1) > tol:
        fail(
            "unscaled_std for d_k={d_k} is {unscaled:.3g}; the dot "
            "product of two unit-normal d_k-vectors has std sqrt(d_k) = "
            "{sqrt:.3g}.",
            d_k=d_k,
            unscaled=unscaled,
            sqrt=math.sqrt(d_k),
        )
    if d_k > 1 and abs(scaled * math.sqrt(d_k) - 1) < tol:
        fail(
            "scaled_std for d_k={d_k} is {scaled:.3g} = 1/sqrt(d_k): it "
            "divides by d_k; divide q·k by sqrt(d_k).",
            mistake="std-by-d",
            d_k=d_k,
            scaled=scaled,
        )
    if abs(scaled - 1) > tol:
        fail(
            "scaled_std for d_k={d_k} is {scaled:.3g}; after dividing by "
            "sqrt(d_k) it should be close to 1.",
            d_k=d_k,
            scaled=scaled,
        )
    if any(isinstance(v, torch.Tensor) for v in got):  # the numbers are right
        fail(STD_TENSORS)


def _about(std: float, sigma: float, values: int) -> bool:
    """Whether ``std``, of only ``values`` numbers (each of std ``sigma``), is
    sigma within 5 standard errors on a log scale (few values: a wide band)."""
    spread = 5 / math.sqrt(2 * (values - 1))
    return std > 0 and abs(math.log(std / sigma)) < spread


def dot_product_std_values(fn) -> None:
    """dot_product_std(64, 20000, 0) is about (8, 1); (16, 20000, 1) about (4, 1)."""
    _expect_std(fn, 64, 20000, 0)
    _expect_std(fn, 16, 20000, 1)


def dot_product_std_random(fn, seed: int) -> None:
    """Other head sizes and seeds, reproducible per seed (d_k = 1 last: there a
    variance and a standard deviation are both 1)."""
    verdicts = CaseVerdicts()
    for d_k in (5, 32, 300, 1):
        with verdicts:
            _expect_std(fn, d_k, 20000, seed + d_k)
    verdicts.fail_if_any()
