"""Checks for 07_full_layer: embeddings, attention block, feed-forward, layer, encoder.

Oracles: the model's ``hidden_states`` and each submodule's own output, computed
before the student's code runs with those modules' ``forward`` turned off
(:mod:`.layer_cases`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..hints import hint as hint  # the notebook's check.hint("<exercise>")
from ..i18n import say
from ..worked import worked as worked  # check.worked("<exercise>"), once tried
from . import call, expect_close, expect_shape, fail, forbid
from .layer_cases import (
    AFTER_LN,
    BY_HAND,
    FF_RESIDUAL,
    NO_RESIDUAL,
    PRE_LN,
    RELU,
    SCALED,
    TANH_GELU,
    UNPADDED,
    Case,
    blocked,
    course_case,
    random_cases,
    twice,
)


def _expect_embeddings(fn, case: Case) -> None:
    emb = case.model.embeddings
    with forbid(blocked(emb), BY_HAND):
        got = twice(fn, (case.ids, case.types, emb), "embeddings_forward")
    want = case.states[0]
    expect_shape(got, want.shape, "embeddings_forward(...)", "(B, T, D).")
    T = case.ids.shape[1]
    with torch.no_grad():
        w, p, t = (
            emb.word_embeddings(case.ids),
            emb.position_embeddings.weight[:T],
            emb.token_type_embeddings(case.types),
        )
        diagnose = {
            say(
                "the position embeddings are missing: add "
                "position_embeddings(arange(T))."
            ): emb.LayerNorm(w + t),
            say(
                "the token-type embeddings are missing: add "
                "token_type_embeddings(token_type_ids)."
            ): emb.LayerNorm(w + p),
            say(
                "the LayerNorm is missing: embeddings = LayerNorm(word + "
                "position + token type)."
            ): w + p + t,
        }
    expect_close(
        got,
        want,
        "embeddings_forward(...)",
        diagnose=diagnose,
        what=say("the model's hidden_states[0]"),
    )


def embeddings_forward_shape(fn) -> None:
    """embeddings_forward gives (B, T, D)."""
    case = course_case()
    emb = case.model.embeddings
    with forbid(blocked(emb), BY_HAND):
        got = call(fn, case.ids, case.types, emb, name="embeddings_forward")
    expect_shape(got, case.states[0].shape, "embeddings_forward(...)", "(B, T, D).")


def embeddings_forward_values(fn) -> None:
    """embeddings_forward equals hidden_states[0] on a sentence pair (token types 0 and 1)."""
    for texts in UNPADDED:
        _expect_embeddings(fn, course_case(texts=texts))


def embeddings_forward_random(fn, seed: int) -> None:
    """Other model sizes, batches and token types."""
    for case in random_cases(seed):
        _expect_embeddings(fn, case)


def _expect_attention_block(fn, case: Case, masked: bool) -> None:
    att = case.layer.attention
    args = (case.hidden.clone(), att) + ((case.mask,) if masked else ())
    with forbid(blocked(att, att.self, att.output), BY_HAND):
        got = twice(fn, args, "attention_block")
    h, out = case.hidden, att.output
    with torch.no_grad():
        sub = out.dense(case.context(h))
        diagnose = {
            SCALED: out.LayerNorm(sub / _keep(case) + h),
            PRE_LN: h + out.dense(case.context(out.LayerNorm(h))),
            AFTER_LN: out.LayerNorm(sub) + h,
            NO_RESIDUAL: out.LayerNorm(sub),
        }
    expect_close(
        got,
        case.attn_out,
        "attention_block(...)",
        diagnose=diagnose,
        what=say("the layer's attention output"),
    )


def attention_block_values(fn) -> None:
    """attention_block equals layer 2's attention output (course model, no padding)."""
    for texts in UNPADDED:
        _expect_attention_block(fn, course_case(texts=texts), masked=False)


def attention_block_mask(fn) -> None:
    """attention_block on a padded batch, with its mask."""
    _expect_attention_block(fn, course_case(padded=True), masked=True)


def attention_block_random(fn, seed: int) -> None:
    """Other models, layers, batches and padding."""
    for case in random_cases(seed):
        _expect_attention_block(fn, case, masked=True)


def _keep(case: Case) -> float:
    """1 - p: what dropout left on divides the sublayer's output by."""
    return 1.0 - case.model.config.hidden_dropout_prob


def _expect_feed_forward(fn, case: Case) -> None:
    layer, x = case.layer, case.attn_out
    with forbid(blocked(layer, layer.intermediate, layer.output), BY_HAND):
        got = twice(fn, (x.clone(), layer), "feed_forward")
    with torch.no_grad():
        want = case.after
        up, down, ln = (
            layer.intermediate.dense,
            layer.output.dense,
            layer.output.LayerNorm,
        )

        def ff(act):
            return down(act(up(x)))

        diagnose = {
            SCALED: ln(ff(F.gelu) / _keep(case) + x),
            RELU: ln(ff(F.relu) + x),
            TANH_GELU: ln(ff(lambda v: F.gelu(v, approximate="tanh")) + x),
            FF_RESIDUAL: ln(ff(F.gelu)),
            AFTER_LN: ln(ff(F.gelu)) + x,
            PRE_LN: x + down(F.gelu(up(ln(x)))),
        }
    expect_close(
        got,
        want,
        "feed_forward(...)",
        diagnose=diagnose,
        what=say("the layer's output"),
        atol=2e-4,
    )


def feed_forward_values(fn) -> None:
    """feed_forward equals layer 2's output given its attention output."""
    for texts in UNPADDED:
        _expect_feed_forward(fn, course_case(texts=texts))


def feed_forward_random(fn, seed: int) -> None:
    """Other models and layers."""
    for case in random_cases(seed):
        _expect_feed_forward(fn, case)


def _layer_modules(layer):
    att = layer.attention
    return layer, att, att.self, att.output, layer.intermediate, layer.output


def _expect_layer(fn, case: Case, masked: bool) -> None:
    args = (case.hidden.clone(), case.layer) + ((case.mask,) if masked else ())
    with forbid(blocked(*_layer_modules(case.layer)), BY_HAND):
        got = twice(fn, args, "bert_layer")
    expect_shape(got, case.after.shape, "bert_layer(...)", "(B, T, D).")
    a, out = case.attn_out, case.layer.output
    with torch.no_grad():  # the attention block right, the feed-forward's sum not
        no_ff_residual = out.LayerNorm(
            out.dense(F.gelu(case.layer.intermediate.dense(a)))
        )
    expect_close(
        got,
        case.after,
        "bert_layer(...)",
        diagnose={FF_RESIDUAL: no_ff_residual},
        what=say("the model's next hidden state"),
        atol=2e-4,
    )


def bert_layer_values(fn) -> None:
    """bert_layer maps hidden_states[2] to hidden_states[3] (course model)."""
    for texts in UNPADDED:
        _expect_layer(fn, course_case(texts=texts), masked=False)


def bert_layer_mask(fn) -> None:
    """bert_layer on a padded batch, with its mask."""
    _expect_layer(fn, course_case(padded=True), masked=True)


def bert_layer_random(fn, seed: int) -> None:
    """Other models, layers, batches and padding."""
    for case in random_cases(seed):
        _expect_layer(fn, case, masked=True)


def _expect_encoder(fn, case: Case) -> None:
    model = case.model
    modules = [model, model.embeddings, model.encoder] + [
        m for layer in model.encoder.layer for m in _layer_modules(layer)
    ]
    with forbid(blocked(*modules), BY_HAND):
        got = call(fn, case.ids, case.types, model, case.mask, name="bert_encoder")
    L = model.config.num_hidden_layers
    if not isinstance(got, (tuple, list)):
        fail(
            "bert_encoder should return a tuple of {count} tensors, not a {type_name}.",
            count=L + 1,
            type_name=type(got).__name__,
        )
    if len(got) == L:
        fail(
            "bert_encoder returned {L} tensors; hidden_states has L + 1 "
            "= {count}: the embedding output comes first.",
            L=L,
            count=L + 1,
        )
    if len(got) != L + 1:
        fail(
            "bert_encoder returned {got} tensors; it should return L + 1 = {count}.",
            got=len(got),
            count=L + 1,
        )
    with torch.no_grad():
        unmasked = model(input_ids=case.ids, token_type_ids=case.types).hidden_states
    for i, (g, want) in enumerate(zip(got, case.states, strict=True)):
        diagnose = (
            {
                say(
                    "the attention mask was not passed on: padded tokens are "
                    "attended to."
                ): unmasked[i]
            }
            if bool((case.mask == 0).any())
            else {}
        )
        expect_close(
            g,
            want,
            f"bert_encoder(...)[{i}]",
            diagnose=diagnose,
            what=say("the model's hidden_states[{i}]", i=i),
            atol=3e-4,
            rtol=3e-4,
        )


def bert_encoder_length(fn) -> None:
    """bert_encoder returns L + 1 tensors of shape (B, T, D)."""
    case = course_case()
    model = case.model
    got = call(fn, case.ids, case.types, model, case.mask, name="bert_encoder")
    L = model.config.num_hidden_layers
    if not isinstance(got, (tuple, list)) or len(got) != L + 1:
        n = len(got) if isinstance(got, (tuple, list)) else type(got).__name__
        fail(
            "bert_encoder should return a tuple of L + 1 = {count} "
            "tensors (embedding output first); got {n}.",
            count=L + 1,
            n=n,
        )
    for i, g in enumerate(got):
        expect_shape(g, case.states[0].shape, f"bert_encoder(...)[{i}]")


def bert_encoder_values(fn) -> None:
    """bert_encoder equals the model's hidden_states on a padded batch."""
    _expect_encoder(fn, course_case(padded=True))


def bert_encoder_random(fn, seed: int) -> None:
    """Other models, batches, token types and padding."""
    for case in random_cases(seed):
        _expect_encoder(fn, case)
