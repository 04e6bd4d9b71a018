"""Checks for 13_decoding: cross-attention, a KV cache, greedy decoding, sampling.

Oracles are transformers' and torch's own code: the cross-attention modules of a
random ``EncoderDecoderModel`` made of two BERTs (what each returns, captured by
forward hooks, and the module called by the checks); torch's causal
``scaled_dot_product_attention`` over the whole sequence for the cache; a random
Llama's ``generate`` (greedy) and its logits for decoding; ``torch.softmax`` of
the tempered logits for sampling, against the student's draws counted.
A known mistake's numbers are made from the same library pieces, fed what the
mistake changes.
"""

from __future__ import annotations

import functools
import math
import random

import torch

from .. import models
from ..hints import hint as hint  # the notebook's check.hint("<exercise>")
from ..i18n import N_, say
from ..worked import worked as worked  # check.worked("<exercise>"), once tried
from . import CheckFailed, call, expect_close, expect_shape, expect_tensor, fail
from . import attention_steps as steps_
from .calls import CaseVerdicts, runs
from .compare import fail_mistaken, is_close, with_hint
from .lessons import FUSED_ATTENTION, Lesson
from .mistaken import Step, mistaken
from .oracles import BY_D, BY_WIDTH, NO_SCALE, additive_mask, eager_attention

_Tensor = torch.Tensor  # taken at import, before any student code runs
_equal = torch.equal
F = torch.nn.functional

SWAPPED = N_(
    "the queries and the keys/values are swapped: queries come from x (the "
    "decoder), keys and values from memory (the encoder's output).",
    mistake="query-memory-swapped",
)
SELF_ATTENTION = N_(
    "the keys and values both come from x, so this is self-attention over x and "
    "memory is never read. In cross-attention only the queries come from x; the "
    "keys and values come from memory.",
    mistake="kv-from-x",
)
KEYS_FROM_X = N_(
    "the keys come from x: in cross-attention only the queries come from x (the "
    "decoder); keys and values both come from memory (the encoder's output).",
    mistake="keys-from-x",
)
VALUES_FROM_X = N_(
    "the values come from x: in cross-attention only the queries come from x "
    "(the decoder); keys and values both come from memory (the encoder's output).",
    mistake="values-from-x",
)
VALUES_BY_KEY = N_(
    "the values were made with attn.key: each of Q, K and V has its own Linear, "
    "and V is attn.value applied to memory.",
    mistake="values-by-key",
)
VALUE_BIAS_MISSING = N_(
    "the values are missing their bias: V = memory @ W_v.T + b_v, which calling "
    "attn.value(memory) gives.",
    mistake="value-no-bias",
)
MEMORY_MASK_IGNORED = N_(
    "memory_mask is ignored: padded source tokens must get no weight.",
    mistake="memory-mask-ignored",
)
MEMORY_MASK_INVERTED = N_(
    "memory_mask is read the wrong way round: 1 marks a real token that may be "
    "attended, 0 a padded one.",
    mistake="memory-mask-inverted",
)
MEMORY_MASK_MULTIPLIED = N_(
    "memory_mask was multiplied into the scores: a padded key then scores 0, and a "
    "score of 0 still gets weight. Where memory_mask is 0, fill the score with "
    "-inf (or the dtype's lowest number) instead.",
    mistake="memory-mask-multiplied",
)
MEMORY_MASK_ADDED = N_(
    "memory_mask was added to the scores as it is: a real token's score gets 1 "
    "more and a padded one's nothing, so padded keys keep their weight. Where "
    "memory_mask is 0, fill the score with -inf (or the dtype's lowest number) "
    "instead.",
    mistake="memory-mask-added",
)
MASK_ON_QUERIES = N_(
    "memory_mask was laid along the queries (B, 1, Tk, 1): it masks keys, the "
    "memory's positions, so it goes along the last dim, (B, 1, 1, Tk).",
    mistake="mask-on-queries",
)
CROSS_CAUSAL = N_(
    "a causal mask in cross-attention: the whole source is known before decoding "
    "starts, so every target position may see every real source token.",
    mistake="causal",
)
CROSS_BY_HAND = N_(
    "Compute cross-attention by hand from attn.query, attn.key and attn.value: "
    "calling the module (or torch's fused attention) is the shortcut this "
    "exercise turns off."
)
NOT_OFFSET = N_(
    "the causal mask is not offset by the cache: new token i sits at position "
    "P + i (P tokens cached) and sees keys 0 to P + i, the last t rows of the "
    "(P + t, P + t) causal mask.",
    mistake="not-offset",
)
NO_CAUSAL = N_(
    "no causal mask: when several new tokens come at once (the prefill), each may "
    "see only itself and the tokens before it.",
    mistake="no-causal",
)
NO_SELF = N_(
    "a token does not see itself: query i may attend to keys 0 to i, i included.",
    mistake="no-self",
)
PREPENDED = N_(
    "the new keys and values are put before the cached ones: append them after, "
    "where their positions are.",
    mistake="prepended",
)
CACHE_NEW_ONLY = N_(
    "the returned cache holds only the new keys and values: it must hold every "
    "token's so far, the cached ones followed by the new ones, (B, H, P + t, d), "
    "for the next step to attend over.",
    mistake="cache-new-only",
)
WRONG_AXIS = N_(
    "the cache grows on the wrong axis: K and V are (B, H, T, d), and new tokens "
    "are appended along T (dim -2).",
    mistake="wrong-axis",
)
CACHE_BY_HAND = N_(
    "Keep the cache and attend by hand: torch's fused attention is turned off "
    "for this exercise."
)
CACHE_IGNORED = N_(
    "with use_cache=True every step still feeds the whole sequence: keep "
    "out.past_key_values and give the model only the new token with it.",
    mistake="cache-ignored",
)
WHOLE_WITH_CACHE = N_(
    "each step feeds the whole sequence and the cache: the cache already holds "
    "the earlier tokens, so the model reads them twice; feed only the new token.",
    mistake="whole-with-cache",
)
ONE_TOKEN_NO_CACHE = N_(
    "a step feeds one token without the cache: the model then sees that token "
    "alone; pass past_key_values (the cache the model returned).",
    mistake="one-token-no-cache",
)
FIRST_POSITION = N_(
    "the next token is taken from the first position's logits: the model predicts "
    "what follows the sequence at its last position, logits[:, -1].",
    mistake="first-position",
)
STALE_TOKEN = N_(
    "a cached step read another token than the one just chosen: with the cache "
    "each step feeds only the newest token, the one the step before picked "
    "(the last column of the sequence so far).",
    mistake="stale-token",
)
NEW_ONLY = N_(
    "only the new tokens are returned: return the prompt followed by them, "
    "(B, T + max_new_tokens).",
    mistake="new-only",
)
GENERATE_BY_HAND = N_(
    "Write the decoding loop by hand: model.generate is turned off for this exercise."
)
LESSONS = {
    # cross_attention(x, memory, attn, memory_mask): BERT's own eager attention too
    "cross_attention": Lesson(
        CROSS_BY_HAND, FUSED_ATTENTION | {"eager_attention_forward"}, whole=("2",)
    ),
    "cached_attention": Lesson(CACHE_BY_HAND, FUSED_ATTENTION),
    "greedy_generate": Lesson(GENERATE_BY_HAND, frozenset({"generate"})),
}
TEMPERATURE_AFTER = N_(
    "the temperature has no effect on the draws: divide the logits by it before "
    "the softmax (probabilities divided after the softmax are the same once "
    "renormalised).",
    mistake="temperature-after-softmax",
)
TEMPERATURE_TIMES = N_(
    "the logits are multiplied by the temperature: divide them by it (a high "
    "temperature flattens the distribution, a low one sharpens it).",
    mistake="times",
)
ALWAYS_ARGMAX = N_(
    "every draw is the most likely token: with temperature > 0 draw from the "
    "distribution (torch.multinomial), take the argmax only at temperature 0.",
    mistake="argmax",
)
NOT_LOGITS = N_(
    "the draws do not follow the logits at all: softmax(logits / temperature) "
    "gives each token's probability.",
    mistake="not-logits",
)
ZERO_TEMPERATURE = N_(
    "Hint: temperature=0 means the argmax; dividing by 0 gives inf and NaN, so "
    "handle it before dividing."
)
IGNORES_GENERATOR = N_(
    "the draws ignore `generator`: the same generator state must give the same "
    "tokens, and another state other tokens (pass generator= to the sampling "
    "call).",
    mistake="generator",
)

# --- cross-attention --------------------------------------------------------------


def course_translator():
    """The notebook's encoder-decoder: two random 2-layer BERTs with the course
    model's heads and vocabulary."""
    config = models.oracle_model().config
    H = config.num_attention_heads
    return _course_translator(H, config.hidden_size // H, config.vocab_size)


@functools.lru_cache(maxsize=2)
def _course_translator(H: int, d: int, vocab_size: int):
    return models.tiny_encoder_decoder(
        seed=13, num_heads=H, head_size=d, vocab_size=vocab_size
    )


def cross_attention_io(model, input_ids, attention_mask, decoder_input_ids) -> list:
    """What each cross-attention module of an encoder-decoder is given and returns
    when the model reads a batch (forward hooks): ``[(attn, x, memory, memory_mask,
    context)]``, ``memory_mask`` the encoder's ``attention_mask``."""
    seen = []

    def keep(module, args, kwargs, out) -> None:  # returns None: output unchanged
        x = args[0] if args else kwargs["hidden_states"]
        memory = kwargs["encoder_hidden_states"]
        seen.append((module, x, memory, attention_mask, out[0]))

    hooks = [
        layer.crossattention.self.register_forward_hook(keep, with_kwargs=True)
        for layer in model.decoder.bert.encoder.layer
    ]
    try:
        with torch.no_grad():
            model(
                input_ids=input_ids,
                attention_mask=attention_mask,
                decoder_input_ids=decoder_input_ids,
            )
    finally:
        for h in hooks:
            h.remove()
    return seen


def _module_context(attn, x, memory, mask: _Tensor | None, scale=True) -> _Tensor:
    """What the cross-attention module returns for ``x`` over ``memory``; ``mask``
    bool (B, Tq, Tk) or (B, Tk), True = may attend; ``scale=False``: no 1/sqrt(d)."""
    if mask is not None and mask.ndim == 2:
        mask = mask[:, None, :]  # (B, 1, Tk)
    additive = additive_mask(mask, torch.float32)  # (B, Tq or 1, Tk)
    if additive is not None:
        additive = additive[:, None]  # (B, 1, Tq or 1, Tk)
    saved = attn.scaling
    attn.scaling = saved if scale else 1.0
    try:
        with torch.no_grad():
            return attn(x, encoder_hidden_states=memory, attention_mask=additive)[0]
    finally:
        attn.scaling = saved


def _cross_steps(attn, x, memory, mask: _Tensor | None) -> list[Step]:
    """Cross-attention step by step from the module's own projections, with the
    ways each step goes wrong; ``mask`` the memory mask as bool (B, Tk) or None.
    A way is left out where its mistake would not give the right shape (inputs
    swapped, or keys or values from x, where Tq != Tk)."""
    B, Tq, D = x.shape
    Tk = memory.shape[1]
    H = attn.num_attention_heads

    def heads(linear, inputs):  # (B, T, D) -> (B, H, T, d)
        with torch.no_grad():
            return linear(inputs).view(B, inputs.shape[1], H, -1).transpose(1, 2)

    def project(queries_from, keys_from, values_from, values_by=attn.value):
        def way(st):
            q, k, v = (
                heads(linear, inputs)
                for linear, inputs in (
                    (attn.query, queries_from),
                    (attn.key, keys_from),
                    (values_by, values_from),
                )
            )
            if k.shape[-2] != Tk:  # keys from x: the memory mask cannot fit them
                return {**st, "q": q, "k": k, "v": v, "keep": None}
            return {**st, "q": q, "k": k, "v": v}

        return way

    same = Tq == Tk  # only then do swapped inputs keep the shape
    projections = {
        SELF_ATTENTION: project(x, x, x),
        VALUES_BY_KEY: project(x, memory, memory, values_by=attn.key),
        VALUE_BIAS_MISSING: project(
            x, memory, memory, values_by=lambda m: F.linear(m, attn.value.weight)
        ),
    }
    if same:
        projections |= {
            SWAPPED: project(memory, x, x),
            KEYS_FROM_X: project(x, x, memory),
            VALUES_FROM_X: project(x, memory, x),
        }
    fill = steps_.fill_mask(
        ignored=MEMORY_MASK_IGNORED,
        inverted=MEMORY_MASK_INVERTED,
        multiplied=MEMORY_MASK_MULTIPLIED,
        added=MEMORY_MASK_ADDED,
    )
    masks = dict(fill.wrong)

    def causal(st):  # a causal mask as well: query i sees keys j <= i only
        below = torch.ones(st["scaled"].shape[-2:], dtype=torch.bool).tril()
        keep = below if st["keep"] is None else st["keep"] & below
        return fill.right({**st, "keep": keep})

    if Tq > 1:
        masks[CROSS_CAUSAL] = causal
    if same and mask is not None and not bool(mask.all()):
        masks[MASK_ON_QUERIES] = _on_queries(mask)
    d = D // H
    scales = {NO_SCALE: 1.0, BY_D: float(d)}
    if H > 1:  # one head: the width is the head size
        scales[BY_WIDTH] = math.sqrt(D)
    return [
        Step(right=project(x, memory, memory), wrong=projections),
        steps_.scale(d, scales),
        Step(right=fill.right, wrong=masks),
        steps_.softmax({}),
        steps_.weigh(),
        steps_.merge(),
    ]


def _on_queries(mask: _Tensor) -> tuple:
    """The ways of laying the memory mask (B, Tk) along the queries, (B, 1, Tk, 1),
    for Tq = Tk: a padded position's query row gets one number added to all its
    scores (which a softmax ignores, up to float32's rounding of the sum), or is
    filled with it (a row of equal weights, or of NaN)."""
    blocked = ~mask[:, None, :, None]  # (B, 1, Tq, 1)

    def added(st):
        return {**st, "s": st["scaled"] + blocked.to(st["scaled"].dtype) * -10000.0}

    def filled(value):
        return lambda st: {**st, "s": st["scaled"].masked_fill(blocked, value)}

    return added, filled(-1e9), filled(-float("inf"))


def _cross_tiers(
    attn, x, memory, mask: _Tensor | None, said: tuple[str, ...] = ()
) -> list[dict]:
    """What cross-attention gives with one, then two, of the known mistakes
    (``said``: those an earlier case named, left out of a combination)."""
    keep = None if mask is None else mask[:, None, None, :]  # (B, 1, 1, Tk)
    steps = _cross_steps(attn, x, memory, mask)
    # three at once too: the steps are few and cheap (a project, a scale and a mask
    # mistake: no scale, the mask inverted, no value bias, say)
    return mistaken({"keep": keep}, steps, result=lambda st: st["c"], most=3, said=said)


def _one_per_key(got, attn, x, memory, memory_mask) -> str:
    """Why an answer gave one context per key, (B, Tk, D): the inputs swapped, or,
    for a single query, a memory mask laid along the queries, (B, 1, Tk, 1), which
    broadcasts the scores to (B, H, Tk, Tk), each real position's row the
    unmasked context (its padding added to a whole row, which a softmax ignores)."""
    if x.shape[1] != 1 or memory_mask is None:
        return SWAPPED
    real = memory_mask.bool()  # (B, Tk)
    plain = _module_context(attn, x, memory, None).expand_as(got)  # (B, Tk, D)
    if is_close(got[real], plain[real], atol=1e-3, rtol=1e-3):  # float32 rounding
        return MASK_ON_QUERIES
    return SWAPPED


def _expect_cross(
    fn,
    attn,
    x,
    memory,
    memory_mask,
    want: _Tensor | None = None,
    shape_only=False,
    said: tuple[str, ...] = (),
):
    """Compare ``fn(x, memory, attn, memory_mask)`` with the module's own output
    (or ``want``, what it returned inside the model); ``shape_only``: its shape;
    ``said``: the mistakes an earlier case named."""
    B, Tq, D = x.shape
    Tk = memory.shape[1]
    mask = None if memory_mask is None else memory_mask.clone()
    args = (x.clone(), memory.clone(), attn, mask)
    with LESSONS["cross_attention"].enforced(args):
        got = call(fn, *args, name="cross_attention")
    name = "cross_attention(x, memory, attn, memory_mask)"
    got = expect_tensor(got, name)
    if Tq != Tk and tuple(got.shape) == (B, Tk, D):
        fail_mistaken(name, _one_per_key(got, attn, x, memory, memory_mask))
    expect_shape(got, (B, Tq, D), name, N_("One context per query: (B, Tq, D)."))
    if shape_only:
        return
    mask = None if memory_mask is None else memory_mask.bool()
    expect_close(
        got,
        _module_context(attn, x, memory, mask) if want is None else want,
        name,
        diagnose=lambda: _cross_tiers(attn, x, memory, mask, said),
        what=say("the cross-attention module's own output"),
    )


def _source_batch(vocab: int, B: int, Tk: int, Tq: int, seed: int):
    """Random source ids with padding at the end of all rows but the first, their
    attention mask (1 = real token), and random target ids."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(1, vocab, (B, Tk), generator=gen)
    mask = torch.ones(B, Tk, dtype=torch.long)
    for row in range(1, B):
        mask[row, torch.randint(1, Tk, (1,), generator=gen).item() :] = 0
    src = src * mask  # pad id 0
    tgt = torch.randint(1, vocab, (B, Tq), generator=gen)
    return src, mask, tgt


def cross_attention_shape(fn) -> None:
    """cross_attention gives one context per query, (B, Tq, D), for Tq != Tk."""
    attn = course_translator().decoder.bert.encoder.layer[0].crossattention.self
    D = attn.all_head_size
    gen = torch.Generator().manual_seed(1300)
    x, memory = torch.randn(2, 4, D, generator=gen), torch.randn(2, 9, D, generator=gen)
    _expect_cross(fn, attn, x, memory, None, shape_only=True)


def cross_attention_translator(fn) -> None:
    """cross_attention gives what every cross-attention module of the notebook's
    encoder-decoder returns, on a padded source batch as long as the target (the
    shape test has other lengths)."""
    model = course_translator()
    src, mask, tgt = _source_batch(model.config.encoder.vocab_size, 3, 8, 8, 1301)
    for attn, x, memory, memory_mask, out in cross_attention_io(model, src, mask, tgt):
        _expect_cross(fn, attn, x, memory, memory_mask, want=out)


def _with_biases(model, seed: int):
    """``model`` with every Linear's bias drawn (BERT's init leaves them 0, where
    an answer that drops a bias would pass)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.Linear) and module.bias is not None:
                module.bias.copy_(0.5 * torch.randn(module.bias.shape, generator=gen))
    return model


def cross_attention_random(fn, seed: int) -> None:
    """Other random encoder-decoders (heads, sizes), lengths and padding; equal
    source and target lengths too."""
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    for case in range(3):  # the first: equal lengths, where a swap keeps the shape,
        with verdicts:  # and several heads, where sqrt(D) is not sqrt(d)
            model = _with_biases(
                models.tiny_encoder_decoder(
                    seed=rng.randint(0, 999),
                    num_layers=1,
                    num_heads=rng.choice([2, 3] if case == 0 else [1, 2, 3]),
                    head_size=rng.choice([4, 8]),
                ),
                seed,
            )
            Tk = rng.randint(3, 9)
            Tq = Tk if case == 0 else rng.randint(1, 9)
            src, mask, tgt = _source_batch(
                100, rng.randint(2, 3), Tk, Tq, rng.randint(0, 99)
            )
            for attn, x, memory, memory_mask, out in cross_attention_io(
                model, src, mask, tgt
            ):
                _expect_cross(
                    fn, attn, x, memory, memory_mask, want=out, said=verdicts.said
                )
    verdicts.fail_if_any()


# --- a KV cache -------------------------------------------------------------------


def _causal_rows(Q, K, V, past: int, *, offset=True, self_too=True, fill=None):
    """Attention of the last t queries over all P + t keys: ``offset`` (query i
    at position P + i) or not (the mask's first t rows), ``self_too`` (a query
    sees its own key) or not; transformers' eager attention, (B, H, t, d)."""
    t, total = Q.shape[-2], K.shape[-2]
    rows = torch.arange(t)[:, None] + (past if offset else 0)
    keys = torch.arange(total)[None, :]
    mask = keys <= rows if self_too else keys < rows
    return eager_attention(Q, K, V, mask, fill=fill)


def _step_mistakes(q, K, V, past: int) -> dict:
    """``{mistake: context}`` for new queries ``q`` (B, H, t, d) over the right
    keys ``K``, ``V`` (B, H, P + t, d)."""
    t = q.shape[-2]
    diagnose = {
        NO_SELF: tuple(
            _causal_rows(q, K, V, past, self_too=False, fill=f)
            for f in (None, float("-inf"))
        )
    }
    if t > 1:
        diagnose[NO_CAUSAL] = eager_attention(q, K, V)
    if past > 0:
        diagnose[NOT_OFFSET] = _causal_rows(q, K, V, past, offset=False)
    if past > 0:  # masked only: unmasked, key order changes nothing (NO_CAUSAL);
        # the cache's own check names the order then
        order = torch.cat([torch.arange(past, past + t), torch.arange(past)])
        diagnose[PREPENDED] = _causal_rows(q, K[..., order, :], V[..., order, :], past)
    return diagnose


def _wrong_axis_shapes(B: int, H: int, total: int, d: int, t: int) -> set:
    """Cache shapes that a concatenation on another axis would give."""
    past = total - t
    return {
        (B + B * (past > 0), H, t, d),
        (B, H + H * (past > 0), t, d),
        (B, H, t, d + d * (past > 0)),
    } - {(B, H, total, d)}


def _expect_step(fn, q, k, v, cache, K_all, V_all, label: str, verdicts):
    """One call of ``fn(q, k, v, cache)`` against torch's causal attention over
    every token so far (``K_all``, ``V_all``); returns the student's new cache.
    A wrong context or cache goes to ``verdicts`` (a CaseVerdicts), so that the
    steps after it are judged too; a wrong shape fails at once."""
    B, H, t, d = q.shape
    total, past = K_all.shape[-2], K_all.shape[-2] - t
    with LESSONS["cached_attention"].enforced():
        got = call(fn, q.clone(), k.clone(), v.clone(), cache, name="cached_attention")
    name = say("cached_attention(q, k, v, cache) {label}", label=label)
    if not (isinstance(got, tuple) and len(got) == 2):
        fail("{name} should return a pair (context, cache).", name=name)
    context, new_cache = got
    if not (isinstance(new_cache, tuple) and len(new_cache) == 2):
        fail("{name} should return the cache as a pair (K, V).", name=name)
    for part in new_cache:
        part = expect_tensor(part, say("the cache of {name}", name=name))
        if tuple(part.shape) in _wrong_axis_shapes(B, H, total, d, t):
            fail_mistaken(name, WRONG_AXIS)
    expect_shape(
        context, (B, H, t, d), name, N_("One context per new query: (B, H, t, d).")
    )
    with torch.no_grad():
        want = F.scaled_dot_product_attention(
            q.double(),
            K_all.double(),
            V_all.double(),
            is_causal=False,
            attn_mask=torch.arange(total)[None, :]
            <= torch.arange(past, total)[:, None],
        )
    with verdicts:
        expect_close(
            context,
            want,
            name,
            diagnose=_step_mistakes(q, K_all, V_all, past),
            what=say("torch's causal attention over every token so far"),
        )
    for part, right, what in zip(new_cache, (K_all, V_all), "KV", strict=True):
        with verdicts:
            named = say("the cached {what} {label}", what=what, label=label)
            _expect_not_new_only(part, right, past, named)
            expect_close(
                part,
                right,
                named,
                diagnose={
                    PREPENDED: torch.cat(
                        [right[..., past:, :], right[..., :past, :]], -2
                    )
                },
                what=say("every token's keys and values so far, in order"),
            )
    return new_cache


def _expect_not_new_only(part: _Tensor, right: _Tensor, past: int, name: str) -> None:
    """Name a cache ``part`` that is the new tokens' keys or values alone (the
    last t of ``right``, (B, H, P + t, d)), where something was cached before."""
    if past and is_close(part, right[..., past:, :]):  # (B, H, t, d)
        fail_mistaken(name, CACHE_NEW_ONLY)


def _run_steps(fn, chunks: list[int], B: int, H: int, d: int, seed: int) -> None:
    """Feed ``fn`` the tokens in chunks of the given sizes, its own cache each time."""
    gen = torch.Generator().manual_seed(seed)
    T = sum(chunks)
    Q, K, V = (torch.randn(B, H, T, d, generator=gen) for _ in range(3))
    cache, start = None, 0
    verdicts = CaseVerdicts()  # no causal mask, and the cache out of order: both
    for step, t in enumerate(chunks):
        end = start + t
        label = (
            say("for a prefill of {t} tokens", t=t)
            if step == 0
            else say(
                "at step {step} ({t} new after {past} cached)",
                step=step,
                t=t,
                past=start,
            )
        )
        given, cache = cache, None
        with verdicts:  # a wrong shape: no later step can be judged
            cache = _expect_step(
                fn,
                Q[..., start:end, :],
                K[..., start:end, :],
                V[..., start:end, :],
                given,
                K[..., :end, :],
                V[..., :end, :],
                label,
                verdicts,
            )
        if cache is None:
            break
        start = end
    verdicts.fail_if_any()


def cached_attention_prefill(fn) -> None:
    """cached_attention with no cache: causal attention over the prompt, and the
    prompt's K and V as the cache."""
    _run_steps(fn, [6], B=2, H=3, d=8, seed=1302)


def cached_attention_steps(fn) -> None:
    """A prefill, then one token at a time, then a chunk of two: the same context
    as attention over every token, and a cache that grows along T."""
    _run_steps(fn, [4, 1, 1, 2], B=1, H=2, d=8, seed=1303)


def cached_attention_random(fn, seed: int) -> None:
    """Other batches, heads, sizes and chunk sizes (chunks as long as the cache
    too, where a wrong axis keeps going)."""
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    for case in range(3):  # the first: chunks of several tokens after a cache
        with verdicts:
            first = rng.randint(2, 5)
            chunks = [first, first] if case == 0 else [rng.randint(1, 5)]
            chunks += [rng.choice([1, 1, 2, 3]) for _ in range(rng.randint(1, 3))]
            # the first with one sequence and one head: a cat on the batch or the
            # head axis then runs, and its cache shows the axis
            B, H = (1, 1) if case == 0 else (rng.randint(1, 3), rng.randint(1, 3))
            _run_steps(
                fn, chunks, B=B, H=H, d=rng.choice([4, 8]), seed=rng.randint(0, 999)
            )
    verdicts.fail_if_any()


# --- greedy decoding --------------------------------------------------------------


def course_decoder():
    """The notebook's decoder: a random 2-layer Llama with the course model's query
    heads (half as many K/V heads where it has an even number) and vocabulary."""
    config = models.oracle_model().config
    H = config.num_attention_heads
    return _course_decoder(H, config.hidden_size // H, config.vocab_size)


@functools.lru_cache(maxsize=2)
def _course_decoder(H: int, d: int, vocab_size: int):
    return _decoder(13, H, H // 2 if H % 2 == 0 else H, d, vocab_size, 2)


def _decoder(seed: int, H: int, H_kv: int, d: int, vocab: int, layers: int):
    model = models.tiny_llama(
        seed=seed,
        num_layers=layers,
        num_heads=H,
        num_kv_heads=H_kv,
        head_size=d,
        vocab_size=vocab,
    )
    model.generation_config.eos_token_id = None  # generate every token asked for
    return model


class _Watch:
    """While a student's loop runs: what each call of the model fed its first
    attention layer (new tokens, keys attended), the token ids it read and the last
    position's logits."""

    def __init__(self, model):
        self.model, self.fed, self.ids, self.logits = model, [], [], []

    def __enter__(self):
        attn = self.model.model.layers[0].self_attn

        def fed(_module, args, kwargs, _out) -> None:
            hidden = args[0] if args else kwargs["hidden_states"]
            cache = kwargs.get("past_key_values")
            keys = hidden.shape[1] if cache is None else cache.get_seq_length()
            self.fed.append((int(hidden.shape[1]), int(keys)))

        def logits(_module, _args, out) -> None:
            self.logits.append(out[:, -1].detach().clone())

        def ids(_module, args, _out) -> None:
            self.ids.append(args[0].detach().clone() if args else None)

        self.hooks = [
            attn.register_forward_hook(fed, with_kwargs=True),
            self.model.lm_head.register_forward_hook(logits),
            self.model.model.embed_tokens.register_forward_hook(ids),
        ]
        return self

    def __exit__(self, *exc):
        for h in self.hooks:
            h.remove()

    def probe(self, tokens, *_args) -> dict:
        """The call's result with what the loop fed: the evidence a check reads."""
        fed = {"fed": list(self.fed), "ids": list(self.ids)}
        return {"tokens": tokens, **fed, "logits": list(self.logits)}


def tokens_read(model, run):
    """``(run(), reads)``: what ``run()`` returned, and how many new tokens each
    call of the decoder ``model`` read while it ran."""
    with _Watch(model) as watch:
        result = run()
    return result, [new for new, _ in watch.fed]


def _generated(model, ids: _Tensor, n: int):
    """transformers' greedy ``generate``: the tokens and each step's logits."""
    with torch.no_grad():
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=n,
            do_sample=False,
            output_logits=True,
            return_dict_in_generate=True,
        )
    return out.sequences, [step.double() for step in out.logits]


def _decisive_prompt(model, B: int, T: int, n: int, gen) -> tuple[_Tensor, tuple]:
    """A prompt whose greedy steps have a clear winner (top two logits apart by
    1e-4 or more), so float32 rounding cannot change a token; with what
    :func:`_generated` gives for it."""
    vocab = model.config.vocab_size
    for _ in range(20):
        ids = torch.randint(1, vocab, (B, T), generator=gen)
        truth = _generated(model, ids, n)
        top = torch.stack([s.topk(2, dim=-1).values for s in truth[1]])  # (n, B, 2)
        if float((top[..., 0] - top[..., 1]).min()) > 1e-4:
            break
    return ids, truth


def _feeding_mistake(fed: list, T: int, use_cache: bool) -> str | None:
    """The way of feeding the model that ``fed`` shows, if it is a known mistake."""
    steps = fed[1:]
    if not use_cache or not steps:
        return None
    if all(new > 1 and keys == new for new, keys in steps):
        return CACHE_IGNORED
    if any(new > 1 and keys > new for new, keys in steps):
        return WHOLE_WITH_CACHE
    if any(new == 1 and keys == 1 for new, keys in steps):
        return ONE_TOKEN_NO_CACHE
    return None


def _fed_stale(fed_ids: list, tokens: _Tensor, T: int) -> bool:
    """Whether a cached step (one new token) read another token than the one the
    step before it chose, ``tokens[:, T + k - 1]`` at step k."""
    for step, ids in enumerate(fed_ids[1:], 1):
        if ids is None or ids.ndim != 2 or ids.shape[1] != 1:
            continue
        if T + step - 1 < tokens.shape[1] and not _equal(
            ids[:, 0].long(), tokens[:, T + step - 1]
        ):
            return True
    return False


#: Where a call raises with the cache and runs without: the cached steps' cause.
CACHED_STEP_FAILS = N_(
    "greedy_generate fails with use_cache=True and runs without the cache: look at "
    "the steps after the first, which feed the model only the new token. Feed it "
    "as (B, 1) ids, generated[:, -1:] (generated[:, -1] drops the token dim), with "
    "the past_key_values the step before returned. {verdict}",
    mistake="cached-step-fails",
)


def _expect_greedy(
    fn, model, prompt: tuple[_Tensor, tuple], n: int, use_cache: bool, label: str
):
    """``fn`` against transformers' greedy ``generate`` on ``prompt``: the ids and
    what generate gives for them (:func:`_decisive_prompt`)."""
    ids, (want, want_logits) = prompt
    B, T = ids.shape
    with _Watch(model) as watch, LESSONS["greedy_generate"].enforced():
        try:
            seen = call(
                fn, model, ids, n, use_cache, name="greedy_generate", probe=watch.probe
            )
        except CheckFailed as err:
            if use_cache and runs(fn, model, ids, n, False, name="greedy_generate"):
                fail(CACHED_STEP_FAILS, verdict=str(err))
            raise
    name = say(
        "greedy_generate(model, input_ids, {n}, use_cache={use_cache}) {label}",
        n=n,
        use_cache=use_cache,
        label=label,
    )
    tokens = expect_tensor(seen["tokens"], name)
    if tuple(tokens.shape) == (B, n):
        fail_mistaken(name, NEW_ONLY)
    expect_shape(tokens, (B, T + n), name)
    mistake = _feeding_mistake(seen["fed"], T, use_cache)
    if mistake:
        fail_mistaken(name, mistake)
    if _equal(tokens.long(), want):
        _expect_logits(seen["logits"], want_logits, name)
        return tokens
    if use_cache and _fed_stale(seen["ids"], tokens.long(), T):
        fail_mistaken(name, STALE_TOKEN)
    with torch.no_grad():
        first = model(ids).logits[:, 0].argmax(-1)  # (B,)
    # fed whole sequences, position 0 predicts the same token every step
    if not use_cache and _equal(tokens[:, T:].long(), first[:, None].expand(B, n)):
        fail_mistaken(name, FIRST_POSITION)
    row, step = (tokens.long() != want).nonzero()[0].tolist()
    fail(
        "{name} differs from transformers' greedy generate at row {row}, token "
        "{step}: yours is {yours}, generate's {theirs}.",
        name=name,
        row=row,
        step=step,
        yours=int(tokens[row, step]),
        theirs=int(want[row, step]),
    )


def _expect_logits(logits: list, want: list, name: str) -> None:
    """Each step's last-position logits, as the loop computed them, against
    generate's (the first ``len(want)`` model calls)."""
    for step, right in enumerate(want):
        if step >= len(logits):
            return
        expect_close(
            logits[step],
            right,
            say("the logits of {name} at step {step}", name=name, step=step),
            what=say("transformers' generate"),
        )


def greedy_generate_no_cache(fn) -> None:
    """greedy_generate(use_cache=False) gives transformers' greedy tokens."""
    model = course_decoder()
    gen = torch.Generator().manual_seed(1304)
    prompt = _decisive_prompt(model, 2, 5, 6, gen)
    _expect_greedy(fn, model, prompt, 6, False, say("on the notebook's decoder"))


def greedy_generate_cache(fn) -> None:
    """greedy_generate(use_cache=True) gives the same tokens, one new token a step."""
    model = course_decoder()
    gen = torch.Generator().manual_seed(1305)
    prompt = _decisive_prompt(model, 2, 5, 6, gen)
    _expect_greedy(fn, model, prompt, 6, True, say("on the notebook's decoder"))


def greedy_generate_random(fn, seed: int) -> None:
    """Other random Llamas, batches and lengths: with and without the cache, the
    same tokens and logits as generate."""
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    for case in range(2):
        with verdicts:
            H_kv = rng.choice([1, 2])
            model = _decoder(
                rng.randint(0, 999),
                H_kv * rng.choice([1, 2]),
                H_kv,
                rng.choice([4, 8]),
                100,
                rng.randint(1, 2),
            )
            gen = torch.Generator().manual_seed(rng.randint(0, 999))
            B, T, n = rng.randint(1, 3), rng.randint(2, 6), rng.randint(3, 7)
            prompt = _decisive_prompt(model, B, T, n, gen)
            label = say("on a random Llama")
            for use_cache in (case != 0, case == 0):  # the first: no cache first
                _expect_greedy(fn, model, prompt, n, use_cache, label)
    verdicts.fail_if_any()


# --- sampling ---------------------------------------------------------------------

DRAWS = 4000  # per row of logits: the counts' noise is about 0.01 in total variation
TOLERANCE = 0.05  # total variation distance a right answer stays within


def _spread_logits(rows: int, vocab: int, gen) -> _Tensor:
    """Logits from -3 to 3 in a random order per row: every temperature's
    distribution is far from the others'."""
    base = torch.linspace(-3.0, 3.0, vocab)
    return torch.stack(
        [base[torch.randperm(vocab, generator=gen)] for _ in range(rows)]
    )


def _frequencies(tokens: _Tensor, rows: int, vocab: int) -> _Tensor:
    """How often each token was drawn for each of ``rows`` rows repeated DRAWS
    times: (rows, vocab)."""
    counts = torch.zeros(rows, vocab, dtype=torch.float64)
    owner = torch.arange(rows).repeat_interleave(DRAWS)
    counts.index_put_(
        (owner, tokens.long().clamp(0, vocab - 1)),
        torch.ones(len(owner)).double(),
        accumulate=True,
    )
    return counts / DRAWS


def _distance(p: _Tensor, q: _Tensor) -> float:
    """The largest total variation distance between two rows of distributions."""
    return float(0.5 * (p - q).abs().sum(-1).max())


def _draw(
    fn,
    logits: _Tensor,
    temperature: float,
    seed: int,
    name: str,
    hint: str = "",
    column: bool = False,
) -> _Tensor:
    """``fn(logits, temperature, generator)`` with a generator seeded ``seed``;
    ``hint`` follows the verdict where the call raised; ``column``: a (B, 1)
    column is taken as its (B,) tokens (where the shape is another check's
    question)."""
    try:
        got = call(
            fn,
            logits.clone(),
            temperature,
            torch.Generator().manual_seed(seed),
            name="sample_next",
        )
    except CheckFailed as err:
        if not hint:
            raise
        raise CheckFailed(with_hint(str(err), hint)) from None
    rows = logits.shape[0]
    if column and isinstance(got, _Tensor) and tuple(got.shape) == (rows, 1):
        got = got[:, 0]
    got = expect_shape(
        got, (logits.shape[0],), name, N_("One token per row of logits: (B,).")
    )
    if got.is_floating_point() or got.dtype == torch.bool:
        fail(
            "{name} should hold token ids (a LongTensor), but its dtype is {dtype}.",
            name=name,
            dtype=got.dtype,
        )
    return got


def _sampling_mistakes(logits: _Tensor, temperature: float) -> dict:
    """``{mistake: the distribution it draws from}``, (rows, vocab) each."""
    rows, vocab = logits.shape
    return {
        TEMPERATURE_AFTER: torch.softmax(logits.double(), dim=-1),
        TEMPERATURE_TIMES: torch.softmax(logits.double() * temperature, dim=-1),
        ALWAYS_ARGMAX: F.one_hot(logits.argmax(-1), vocab).double(),
        NOT_LOGITS: torch.full((rows, vocab), 1.0 / vocab, dtype=torch.float64),
    }


def _separated(logits: _Tensor, temperature: float) -> bool:
    """Every mistake's distribution is far (3 tolerances) from the right one."""
    want = torch.softmax(logits.double() / temperature, dim=-1)
    wrong = _sampling_mistakes(logits, temperature).values()
    return all(_distance(p, want) > 3 * TOLERANCE for p in wrong)


def _expect_distribution(
    fn, logits: _Tensor, temperature: float, seed: int, column: bool = False
) -> None:
    """DRAWS draws of each row against softmax(logits / temperature); ``column``:
    a (B, 1) column of draws is judged as its (B,) tokens."""
    rows, vocab = logits.shape
    name = say("sample_next(logits, {t}, generator)", t=temperature)
    many = logits.repeat_interleave(DRAWS, dim=0)  # (rows * DRAWS, vocab)
    drawn = _draw(fn, many, temperature, seed, name, column=column)
    got = _frequencies(drawn, rows, vocab)
    want = torch.softmax(logits.double() / temperature, dim=-1)
    if _distance(got, want) <= TOLERANCE:
        return
    mistakes = _sampling_mistakes(logits, temperature)
    named = [m for m, p in mistakes.items() if _distance(got, p) <= TOLERANCE]
    if named:
        fail_mistaken(name, *named)
    token = int((got - want).abs()[0].argmax())
    fail(
        "{name} does not draw from softmax(logits / temperature): in {draws} draws "
        "of row 0, token {token} came {got:.1%} of the time, not {want:.1%}.",
        name=name,
        draws=DRAWS,
        token=token,
        got=float(got[0, token]),
        want=float(want[0, token]),
    )


def _expect_argmax(fn, logits: _Tensor) -> None:
    name = say("sample_next(logits, 0, generator)")
    got = _draw(fn, logits, 0.0, 0, name, hint=ZERO_TEMPERATURE)
    want = logits.argmax(-1)
    if not _equal(got.long(), want):
        row = int((got.long() != want).nonzero()[0])
        fail(
            "{name} should be the argmax of each row: row {row} gives {yours}, the "
            "argmax is {argmax}.",
            name=name,
            row=row,
            yours=int(got[row]),
            argmax=int(want[row]),
        )


def _expect_reproducible(fn, logits: _Tensor, temperature: float) -> None:
    """Two generators in the same state give the same draws, others others. A
    (B, 1) column is read as its tokens here: the draws before name its shape, and
    this check names a generator ignored as well."""
    name = say("sample_next(logits, {t}, generator)", t=temperature)
    first, again, other = (
        _draw(fn, logits, temperature, seed, name, column=True) for seed in (7, 7, 8)
    )
    if not _equal(first, again) or _equal(first, other):
        fail_mistaken(name, IGNORES_GENERATOR)


def sample_next_shape(fn) -> None:
    """sample_next gives one token id per row, a LongTensor of shape (B,), one row
    too (where ``squeeze()`` leaves no dim at all)."""
    logits = _spread_logits(3, 7, torch.Generator().manual_seed(1306))
    _draw(fn, logits, 1.0, 0, "sample_next(logits, 1.0, generator)")
    _draw(fn, logits[:1], 1.0, 0, "sample_next(logits, 1.0, generator)")


def sample_next_greedy(fn) -> None:
    """At temperature 0, sample_next is the argmax of each row."""
    _expect_argmax(fn, _spread_logits(5, 11, torch.Generator().manual_seed(1307)))


def sample_next_distribution(fn) -> None:
    """At temperatures 0.5 and 2, the draws follow softmax(logits / temperature),
    and the generator decides them."""
    logits = _spread_logits(2, 6, torch.Generator().manual_seed(1308))
    for temperature in (0.5, 2.0):
        _expect_distribution(fn, logits, temperature, seed=int(temperature * 10))
    _expect_reproducible(fn, logits.repeat(50, 1), 1.0)


def sample_next_random(fn, seed: int) -> None:
    """Other vocabularies, rows and temperatures (far from 1, where mistakes show)."""
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    with verdicts:  # the shape first: the draws below are judged whatever it is
        _draw(
            fn,
            _spread_logits(3, 5, gen),
            1.0,
            0,
            "sample_next(logits, 1.0, generator)",
        )
    for _ in range(2):
        with verdicts:
            logits = _spread_logits(rng.randint(1, 3), rng.randint(4, 9), gen)
            temperature = rng.choice([0.4, 0.6, 1.8, 2.5])
            while not _separated(logits, temperature):  # e.g. 4 tokens at 0.4: argmax
                logits = _spread_logits(rng.randint(1, 3), rng.randint(4, 9), gen)
                temperature = rng.choice([0.4, 0.6, 1.8, 2.5])
            _expect_distribution(
                fn, logits, temperature, seed=rng.randint(0, 999), column=True
            )
    with verdicts:
        _expect_argmax(fn, _spread_logits(rng.randint(2, 6), rng.randint(3, 20), gen))
    # 200 rows: two generators agree on them all by chance with p < 1e-20 (40 rows
    # at T = 0.7 agreed with p = 1e-4, enough to pass the generator ignored)
    with verdicts:
        _expect_reproducible(fn, _spread_logits(200, 5, gen), rng.choice([0.7, 1.5]))
    verdicts.fail_if_any()
