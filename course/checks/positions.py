"""Checks for 08_positions_and_masks.

Oracles: sinusoids built as complex exponentials (``torch.polar``), index comparison
for the causal mask, and torch's ``scaled_dot_product_attention(is_causal=True)``,
turned off while the student's code runs.
"""

from __future__ import annotations

import copy
import math
import random

import torch
import torch.nn.functional as F

from .. import models
from ..hints import hint as hint  # the notebook's check.hint("<exercise>")
from ..i18n import N_, mistakes_of, say, with_keys
from ..worked import worked as worked  # check.worked("<exercise>"), once tried
from . import attention_steps as steps_
from . import call, equal, expect_close, expect_shape, fail
from .calls import CaseVerdicts, CheckFailed, both, call_naming
from .compare import expect_bool_mask
from .lessons import FUSED_ATTENTION, Lesson
from .mistaken import Step, mistaken
from .oracles import BY_D, BY_LENGTH, NO_SCALE, OVER_QUERIES, PROBS_T

POSITIONS_FROM_1 = N_(
    "the positions start at 1: row p must encode position p, so the first row is "
    "position 0 (sin 0 = 0, cos 0 = 1).",
    mistake="pe-from-1",
)


def sinusoid_oracle(max_len: int, d_model: int) -> torch.Tensor:
    """PE[p, 2i] = sin(p w_i), PE[p, 2i+1] = cos(p w_i), w_i = 10000^(-2i/d)."""
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    freq = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    z = torch.polar(torch.ones(max_len, freq.numel(), dtype=torch.float64), pos * freq)
    pairs = torch.stack([z.imag, z.real], dim=-1).reshape(
        max_len, -1
    )  # sin, cos interleaved
    return pairs[:, :d_model]


def _encoding(fn, max_len: int, d_model: int) -> torch.Tensor:
    """The student's encoding; where an odd width fails, the verdict says what an
    odd width needs."""
    if d_model % 2 == 0:
        return call(fn, max_len, d_model, name="sinusoidal_encoding")
    return call_naming(
        fn,
        max_len,
        d_model,
        name="sinusoidal_encoding",
        case=N_(
            "sinusoidal_encoding({max_len}, {d_model}) fails for an odd d_model: "
            "it has one more sin column than cos columns (sin in columns 0, 2, "
            "..., {last}; cos in 1, 3, ..., {before}), so fill the cos columns "
            "with the first d_model // 2 frequencies only. {verdict}"
        ),
        max_len=max_len,
        d_model=d_model,
        last=d_model - 1,
        before=d_model - 2,
    )


def _expect_pe(fn, max_len: int, d_model: int) -> None:
    got = _encoding(fn, max_len, d_model)
    want = sinusoid_oracle(max_len, d_model)
    expect_shape(
        got,
        want.shape,
        f"sinusoidal_encoding({max_len}, {d_model})",
        say("(max_len, d_model)."),
    )
    sin, cos = want[:, 0::2], want[:, 1::2]  # (max_len, ceil(d/2)), (.., d//2)
    from_1 = sinusoid_oracle(max_len + 1, d_model)[1:]  # positions 1..max_len
    n = (d_model + 1) // 2  # frequencies; an odd width drops the last cos
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    w = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    idx = torch.arange(d_model, dtype=torch.float64)
    angle = torch.arange(max_len, dtype=torch.float64)[:, None] * 10000.0 ** (
        -idx / d_model
    )
    swapped = torch.stack([(pos * w).cos(), (pos * w).sin()], -1).reshape(
        max_len, 2 * n
    )
    slow = 10000.0 ** (-torch.arange(n, dtype=torch.float64) / d_model)  # i/d
    by_pair = torch.stack([(pos * slow).sin(), (pos * slow).cos()], -1).reshape(
        max_len, 2 * n
    )
    diagnose = {
        say(
            "sin and cos are swapped: even columns are sin, odd columns cos.",
            mistake="sin-cos-swapped",
        ): swapped[:, :d_model],
        say(
            "sin and cos are concatenated (all sin, then all cos); they "
            "alternate: column 2i is sin, 2i+1 is cos.",
            mistake="concatenated",
        ): torch.cat([sin, cos], -1),
        say(
            "the frequency uses the column index j; it uses 2i, the same for "
            "columns 2i and 2i+1: 10000^(-2i/d).",
            mistake="frequency",
        ): torch.where(idx % 2 == 0, angle.sin(), angle.cos()),
        say(
            "the frequency of pair i uses i/d; the exponent is 2i/d, 10000^(-2i/d) "
            "(2i is the pair's sin column); with i/d they fall half as fast.",
            mistake="frequency-pair",
        ): by_pair[:, :d_model],
        POSITIONS_FROM_1: from_1,
    }
    expect_close(
        got,
        want,
        f"sinusoidal_encoding({max_len}, {d_model})",
        diagnose=diagnose,
        what=say("the sinusoid formula"),
        atol=1e-4,
    )


def sinusoidal_shape(fn) -> None:
    """sinusoidal_encoding(50, 16) has shape (50, 16) and row 0 is [0, 1, 0, 1, ...]."""
    got = call(fn, 50, 16, name="sinusoidal_encoding")
    expect_shape(got, (50, 16), "sinusoidal_encoding(50, 16)")
    expect_close(
        got[0],
        sinusoid_oracle(1, 16)[0],
        say("row 0 (position 0)"),
        diagnose={POSITIONS_FROM_1: sinusoid_oracle(2, 16)[1]},
        what=say("sin(0) = 0, cos(0) = 1"),
    )


def sinusoidal_values(fn) -> None:
    """sinusoidal_encoding(50, 16) equals the formula."""
    _expect_pe(fn, 50, 16)


#: The widths sinusoidal_random tries: three even ones (the first with several
#: (sin, cos) pairs, which alternated or concatenated differ), then an odd one.
FIRST_WIDTHS = (6, 32, 128)
EVEN_WIDTHS = (2, 6, 32, 128)
ODD_WIDTHS = (3, 5, 7, 33)


def sinusoidal_random(fn, seed: int) -> None:
    """Other lengths and widths, an odd width always among them (last: a mistake
    that shows at every width is named first)."""
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    widths = [rng.choice(FIRST_WIDTHS), rng.choice(EVEN_WIDTHS)]
    widths += [rng.choice(EVEN_WIDTHS), rng.choice(ODD_WIDTHS)]
    for d_model in widths:
        with verdicts:
            _expect_pe(fn, rng.randint(1, 200), d_model)
    verdicts.fail_if_any()


class AddPositions(torch.nn.Module):
    """A layer that adds sinusoidal positions before a BERT layer: order-aware."""

    def __init__(self, layer, d_model: int):
        super().__init__()
        self.layer, self.d_model = layer, d_model

    def forward(self, hidden):
        pe = sinusoid_oracle(hidden.shape[-2], self.d_model).to(hidden.dtype)
        return self.layer(hidden + pe)


TOO_TIGHT = N_(
    "permutation_check said False for {what}, and True for the same layer and "
    "input in float64: it compared too tightly. In float32, reordering the tokens "
    "changes the outputs by float rounding (about 1e-6 here), and "
    "torch.allclose's defaults (atol=1e-8, rtol=1e-5) are tighter than that for "
    "outputs near zero: use atol=1e-5, rtol=1e-4, as the notebook says.",
    mistake="tolerance-too-tight",
)


def _expect_perm(fn, layer, hidden, perm, *, truth: bool, what: str) -> None:
    got = call(fn, layer, hidden.clone(), perm, name="permutation_check")
    if isinstance(got, torch.Tensor) and got.numel() == 1:
        got = bool(got)
    if not isinstance(got, bool):
        fail(
            "permutation_check should return a bool, not {type_name}.",
            type_name=type(got).__name__,
        )
    if got == truth:
        return
    if truth and hidden.dtype == torch.float32:  # right in float64: too tight
        wider = copy.deepcopy(layer).to(torch.float64)
        try:  # an answer that fails in float64 is judged on what it was shown
            widened = bool(
                call(fn, wider, hidden.double(), perm.clone(), name="permutation_check")
            )
        except CheckFailed:
            widened = False
        if widened:
            fail(TOO_TIGHT, what=what)
    if truth:
        # An exactly equivariant layer (copying its input) tells the two mistakes apart.
        exact = call(
            fn, lambda h: h.clone(), hidden.clone(), perm, name="permutation_check"
        )
        if bool(exact):
            fail(
                "permutation_check said False for {what}, whose outputs "
                "agree up to float rounding: compare with a tolerance "
                "(torch.allclose); reordering tokens reorders float sums.",
                mistake="exact",
                what=what,
            )
        reverse = torch.arange(hidden.shape[1] - 1, -1, -1)  # undoes itself
        if not equal(perm, reverse) and bool(
            call(
                fn,
                lambda h: h.clone(),
                hidden.clone(),
                reverse,
                name="permutation_check",
            )
        ):
            fail(
                "permutation_check said False for {what}: it permutes the output "
                "the other way, by the inverse permutation (argsort(perm)), which is "
                "right only for a permutation that undoes itself, such as a "
                "reversal. Compare layer(x[:, perm]) with layer(x)[:, perm].",
                mistake="inverse-permutation",
                what=what,
            )
        fail(
            "permutation_check said False for {what}: compare layer(x[:, "
            "perm]) with layer(x)[:, perm] — the output permuted the "
            "same way.",
            what=what,
        )
    # A layer whose output moves by 100 per position when the tokens move: only a
    # comparison that cannot say False says True for it.
    far = call(
        fn,
        lambda h: h + 100 * torch.arange(h.shape[1], dtype=h.dtype)[:, None],
        hidden.clone(),
        perm,
        name="permutation_check",
    )
    if not bool(far):  # it can say False: only its tolerance is too loose
        fail(
            "permutation_check said True for {what}, which does see token order. "
            "Its tolerance is too loose: it tells apart outputs 100 apart, but not "
            "these. Compare with torch.allclose's usual tolerances (e.g. atol=1e-5, "
            "rtol=1e-4).",
            mistake="tolerance-too-loose",
            what=what,
        )
    fail(
        "permutation_check said True for {what}, which does see token order: it "
        "says True even where the outputs differ by 100, so it never says False. "
        "Compare the two outputs, layer(x[:, perm]) and layer(x)[:, perm], and "
        "return whether they are close.",
        mistake="never-false",
        what=what,
    )


#: The dtype of every layer and input the permutation checks give a student's
#: ``permutation_check`` but one. In float64 reordering the tokens changes a BERT
#: layer's output by about 1e-15, so any usual comparison (``torch.allclose`` with
#: its defaults ``atol=1e-8, rtol=1e-5``, or the ``atol=1e-5, rtol=1e-4`` the
#: notebook states) says True, while exact equality still says False and adding
#: positions changes the output by O(1). In float32 the defaults fail near-zero
#: outputs: permutation_check_random's last case (:data:`FLOAT32_CASE`) is float32,
#: and names a comparison that tight (it says True for the same case in float64).
PERM_DTYPE = torch.float64


def _bert_layer(seed: int, heads: int = 4):
    model = models.tiny_bert(seed=seed, num_layers=1, num_heads=heads)
    return model.encoder.layer[0].to(PERM_DTYPE)


def permutation_check_bert(fn) -> None:
    """A BERT layer without positions: True (it cannot see order)."""
    layer = _bert_layer(0)
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(2, 6, 32, generator=g, dtype=PERM_DTYPE)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    _expect_perm(fn, layer, hidden, perm, truth=True, what=say("a BERT layer"))


def permutation_check_positions(fn) -> None:
    """The same layer with sinusoidal positions added: False."""
    layer = AddPositions(_bert_layer(0), 32)
    g = torch.Generator().manual_seed(1)
    hidden = torch.randn(2, 6, 32, generator=g, dtype=PERM_DTYPE)
    _expect_perm(
        fn,
        layer,
        hidden,
        torch.tensor([3, 0, 5, 1, 4, 2]),
        truth=False,
        what=say("a layer that adds positions"),
    )


#: The float32 case: a BERT layer of 4 heads of 16 on 4 x 128 tokens. Reordering
#: them changes its outputs by float32 rounding, up to about 1e-6: some 70 to 200
#: times less than atol=1e-5, rtol=1e-4 allow, while torch.allclose's defaults say
#: False on every draw tried (80 of 80 seeds), for the outputs near zero.
FLOAT32_CASE = {"heads": 4, "head_size": 16, "B": 4, "T": 128}


def _float32_case(seed: int):
    """``(layer, hidden, perm)`` in float32, drawn from ``seed``, on which the
    notebook's tolerance (atol=1e-5, rtol=1e-4) says True with a margin of 10 (the
    first of a few draws that does; None if none does)."""
    c = FLOAT32_CASE
    model = models.tiny_bert(
        seed=seed, num_layers=1, num_heads=c["heads"], head_size=c["head_size"]
    )
    layer = model.encoder.layer[0].eval()
    g = torch.Generator().manual_seed(seed)
    for _ in range(5):
        hidden = torch.randn(c["B"], c["T"], c["heads"] * c["head_size"], generator=g)
        perm = torch.randperm(c["T"], generator=g)
        with torch.no_grad():
            moved, plain = layer(hidden[:, perm]), layer(hidden)[:, perm]
        gap = (moved - plain).abs() / (1e-5 + 1e-4 * plain.abs())
        if float(gap.max()) <= 0.1:
            return layer, hidden, perm
    return None


def permutation_check_random(fn, seed: int) -> None:
    """Other layers, sizes and permutations (the identity included), and a BERT
    layer in float32, where the notebook's tolerance says True."""
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    for i in range(3):
        with verdicts:
            heads = rng.choice([1, 2, 4])
            # 12+ tokens: reordering them changes float sums, so exact equality fails
            layer, T = _bert_layer(seed + i, heads), rng.randint(12, 20)
            size = (rng.randint(1, 3), T, heads * 8)
            hidden = torch.randn(size, generator=g, dtype=PERM_DTYPE) * 0.5
            perm = torch.randperm(T, generator=g)
            while equal(perm, torch.arange(T)):
                perm = torch.randperm(T, generator=g)
            _expect_perm(fn, layer, hidden, perm, truth=True, what=say("a BERT layer"))
            _expect_perm(
                fn,
                AddPositions(layer, heads * 8),
                hidden,
                perm,
                truth=False,
                what=say("a layer that adds positions"),
            )
            _expect_perm(
                fn,
                AddPositions(layer, heads * 8),
                hidden,
                torch.arange(T),
                truth=True,
                what=say("the identity permutation"),
            )
    with verdicts:
        case = _float32_case(seed)
        if case is not None:
            what = say("a BERT layer in float32")
            _expect_perm(fn, *case, truth=True, what=what)
    verdicts.fail_if_any()


# --- the masks: the causal mask and causal attention ----------------------------------


_sdpa = F.scaled_dot_product_attention
SWAPPED = N_(
    "the causal mask is upper/lower swapped: query i may attend keys j <= i, "
    "the lower triangle (True on and below the diagonal).",
    mistake="causal-upper-lower",
)

CAUSAL = N_(
    "Build the causal attention yourself (scores, mask, softmax): torch's "
    "fused attention is turned off for this exercise."
)
LESSONS = {"causal_attention": Lesson(CAUSAL, FUSED_ATTENTION)}


MASK_DIMS = N_(
    "causal_mask({T}) has shape {got}: the (T, T) mask with leading dims of size "
    "1 added (like minGPT's (1, 1, T, T) bias buffer). Return the ({T}, {T}) mask "
    "itself: where it is used, it broadcasts over batch and heads.",
    mistake="causal-mask-dims",
)


def _shape_verdict(got, T: int) -> str:
    """What is wrong with the shape of a causal mask ``got`` (a tensor of any
    dtype), said; "" for (T, T)."""
    shape = tuple(got.shape)
    if shape == (T, T):
        return ""
    if len(shape) > 2 and shape[-2:] == (T, T) and set(shape[:-2]) == {1}:
        return say(MASK_DIMS, T=T, got=shape)
    name = f"causal_mask({T})"
    return say(
        "{name} should have shape {shape}, but it has shape {got}.",
        name=name,
        shape=(T, T),
        got=shape,
    )


def _expect_causal(fn, T: int) -> None:
    got = call(fn, T, name="causal_mask")
    try:
        got = expect_bool_mask(got, f"causal_mask({T})")
    except CheckFailed as err:  # a 0/1 mask: its shape may be wrong too
        shape = _shape_verdict(got, T) if isinstance(got, torch.Tensor) else ""
        if not mistakes_of(shape):
            raise
        fail(both(with_keys(str(err), err.mistakes), shape))
    shape = _shape_verdict(got, T)
    if shape:
        fail(shape)
    i = torch.arange(T)
    want = i[:, None] >= i[None, :]
    if equal(got, want):
        return
    if equal(got, want.T):
        fail(SWAPPED)
    if equal(got, i[:, None] > i[None, :]):
        fail(
            "the diagonal is masked: a token may attend to itself (j <= i, not j < i).",
            mistake="no-diagonal",
        )
    if equal(got, ~want):
        fail(
            "True and False are the wrong way round: True means the "
            "query may attend that key.",
            mistake="causal-inverted",
        )
    fail("causal_mask({T}) is not the lower triangle (True where key <= query).", T=T)


def causal_mask_small(fn) -> None:
    """causal_mask(4) is the (4, 4) lower triangle of True."""
    _expect_causal(fn, 4)


def causal_mask_random(fn, seed: int) -> None:
    """Other lengths, 1 included."""
    verdicts = CaseVerdicts()
    for T in (1, 2, 7, 1 + seed % 13):
        with verdicts:
            _expect_causal(fn, T)
    verdicts.fail_if_any()


AFTER_SOFTMAX = N_(
    "the mask was applied after the softmax: rows no longer sum to 1. Mask the "
    "scores (-inf) before the softmax.",
    mistake="after-softmax",
)
CAUSAL_MISSING = N_(
    "the causal mask is missing: query i must not see keys after i.",
    mistake="causal-missing",
)
FILL_ZERO = N_(
    "the future scores were set to 0, not -inf: exp(0) = 1, so the keys after i "
    "still get weight. Fill them with -inf (or the dtype's min).",
    mistake="fill-zero",
)
CAUSAL_INVERTED = N_(
    "the causal mask is the wrong way round: it hides the keys a query may see "
    "(j <= i) and keeps the later ones, so the last query has none left (a row of "
    "NaN, or of equal weights). Mask where j > i.",
    mistake="causal-attention-inverted",
)
NO_DIAGONAL = N_(
    "the diagonal is masked too: a query may attend to itself, keys j <= i, so "
    "only the keys after it (j > i) are masked, and the first query keeps key 0.",
    mistake="attention-no-diagonal",
)
_WEIGH = steps_.weigh(probs_transposed=PROBS_T)


def _tril(T: int) -> torch.Tensor:
    """(T, T), True where key j <= query i: where a query may attend (by index
    comparison, as the causal_mask oracle)."""
    i = torch.arange(T)
    return i[:, None] >= i[None, :]


def _causal_steps(T: int, d: int) -> list[Step]:
    """Causal attention's probs, step by step, with the ways each step goes wrong
    (every way of masking, the scale, the softmax's dim)."""
    scales = {NO_SCALE: 1.0, BY_D: float(d)}
    if T != d:  # T = d: no mistake; T = 1: no scale, T = d * d: by d (both named)
        scales[BY_LENGTH] = math.sqrt(T)

    def masked_where(blocked: torch.Tensor, fills=(-math.inf,)):
        ways = tuple(
            lambda st, fill=fill: {**st, "s": st["scaled"].masked_fill(blocked, fill)}
            for fill in fills
        )
        return ways if len(ways) > 1 else ways[0]

    tril = _tril(T)
    mask = steps_.fill_mask(
        ignored=CAUSAL_MISSING,
        inverted=CAUSAL_INVERTED,
        multiplied=FILL_ZERO,  # a future score times 0 is a future score set to 0
        after_softmax=AFTER_SOFTMAX,
    )
    wrong = {NO_DIAGONAL: masked_where(~tril.tril(-1), (-math.inf, -1e9))}
    if T > 1:  # with one token the lower and the upper triangle are one
        wrong[SWAPPED] = masked_where(~tril.T)
    mask = Step(right=mask.right, wrong=mask.wrong | wrong)
    return [steps_.scale(d, scales), mask, steps_.softmax({OVER_QUERIES: -2})]


def _expect_causal_attention(
    fn, Q, K, V, part: str, said: tuple[str, ...] = ()
) -> None:
    """Compare ``fn(Q, K, V)``'s probs, context or both (``part``) with torch's
    causal attention; ``said``: the mistakes an earlier case named."""
    with LESSONS["causal_attention"].enforced():
        got = _unbatched_named(fn, Q, K, V)
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        fail("causal_attention should return a pair (probs, context).")
    probs, context = got
    T = Q.shape[-2]
    if Q.dim() == 2 and getattr(probs, "shape", None) != (T, T):
        fail(
            "causal_attention on an unbatched (T, d) input, Q of shape {shape}, "
            "returned probs of shape {got}; want ({T}, {T}): take T and the "
            "transpose from the last two dims only, and give the mask no batch "
            "dim of its own.",
            shape=tuple(Q.shape),
            got=tuple(getattr(probs, "shape", ())),
            T=T,
        )
    eye = torch.eye(T, dtype=torch.float64).expand(*Q.shape[:-2], T, T)
    want_p = _sdpa(Q.double(), K.double(), eye, is_causal=True)
    want_c = _sdpa(Q.double(), K.double(), V.double(), is_causal=True)
    start = {"q": Q.double(), "k": K.double(), "v": V.double(), "keep": _tril(T)}
    steps = _causal_steps(T, Q.shape[-1])
    if part in ("probs", "all"):
        expect_close(
            probs,
            want_p,
            "probs",
            diagnose=lambda: mistaken(
                start, steps, result=lambda st: st["p"], said=said
            ),
            what=say("torch's causal attention"),
        )
    if part in ("context", "all"):
        expect_close(
            context,
            want_c,
            "context",
            diagnose=lambda: mistaken(
                start, [*steps, _WEIGH], result=lambda st: st["c"], said=said
            ),
            what=say("torch's causal attention"),
        )


def _unbatched_named(fn, Q, K, V):
    """The student's (probs, context); where an unbatched (T, d) input fails, the
    verdict says it is the unbatched input."""
    args = Q.clone(), K.clone(), V.clone()
    if Q.dim() != 2:
        return call(fn, *args, name="causal_attention")
    return call_naming(
        fn,
        *args,
        name="causal_attention",
        case=N_(
            "causal_attention fails on an unbatched (T, d) input, Q of shape "
            "{shape}: Q, K, V are (..., T, d), with any number of batch dims, "
            "none too. {verdict}"
        ),
        shape=tuple(Q.shape),
    )


#: The batch dims causal_attention_random tries, in order: (B, H), (B,), none
#: (an unbatched (T, d) input), then drawn ones.
BATCH_DIMS = (2, 1, 0)


def _qkv(seed, *shape):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) for _ in range(3))


def causal_attention_probs(fn) -> None:
    """probs equal torch's causal attention weights (B=2, H=3, T=5, d=8)."""
    _expect_causal_attention(fn, *_qkv(0, 2, 3, 5, 8), part="probs")


def causal_attention_context(fn) -> None:
    """context equals torch's causal attention output."""
    _expect_causal_attention(fn, *_qkv(1, 2, 3, 5, 8), part="context")


def causal_attention_random(fn, seed: int) -> None:
    """Other shapes: two batch dims, one, none (an unbatched (T, d) input), then
    drawn ones, the last longer than 64 tokens (no block size caps T)."""
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    counts = [*BATCH_DIMS, rng.randint(0, 2)]
    for i, count in enumerate(counts):
        with verdicts:
            shape = [rng.randint(1, 3) for _ in range(count)]
            # the first is three tokens long at least: a second mistake shows
            last = i == len(counts) - 1
            T = rng.randint(65, 100) if last else rng.randint(3 if i == 0 else 1, 8)
            shape += [T, rng.choice([2, 16])]
            _expect_causal_attention(
                fn, *_qkv(seed + i, *shape), part="all", said=verdicts.said
            )
    verdicts.fail_if_any()
