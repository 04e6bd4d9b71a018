"""course.checks.layer: notebook 07's checks (embeddings, attention block,
feed-forward, a layer, the encoder), called directly with a BERT layer written
here from its parts; the oracle is the model's own outputs."""

import functools
import math

import pytest
import torch
import torch.nn.functional as F

from course.checks import CheckFailed
from course.checks import layer as check


def _embed(ids, types, emb):
    T = ids.shape[1]
    x = emb.word_embeddings(ids) + emb.position_embeddings(torch.arange(T))
    return emb.LayerNorm(x + emb.token_type_embeddings(types))


def _self_attention(x, sa, mask=None, *, scale=True):
    B, T, D = x.shape
    H = sa.num_attention_heads
    q, k, v = (
        lin(x).view(B, T, H, D // H).transpose(1, 2)
        for lin in (sa.query, sa.key, sa.value)
    )
    s = q @ k.mT / (math.sqrt(D // H) if scale else 1.0)
    if mask is not None:
        s = s.masked_fill(mask[:, None, None, :] == 0, float("-inf"))
    return (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, D)


def _attention_block(h, att, mask=None):
    out = att.output
    return out.LayerNorm(out.dense(_self_attention(h, att.self, mask)) + h)


def _feed_forward(a, layer, act=F.gelu):
    up, out = layer.intermediate.dense, layer.output
    return out.LayerNorm(out.dense(act(up(a))) + a)


def _layer(h, layer, mask=None):
    return _feed_forward(_attention_block(h, layer.attention, mask), layer)


def _encoder(ids, types, model, mask=None, *, pass_mask=True, chain=True):
    states = [_embed(ids, types, model.embeddings)]
    for block in model.encoder.layer:
        x = states[-1] if chain else states[0]
        states.append(_layer(x, block, mask if pass_mask else None))
    return tuple(states)


def _with_types(seed=0):
    """A random case whose batch has token types 0 and 1."""
    for case in check.random_cases(seed, n=6):
        if bool(case.types.any()) and not bool(case.mask.all()):
            return case
    raise AssertionError("no case with token types and padding")


def test_context_at_scale_one_over_d_is_the_model_self_attention():
    """The by-hand self-attention the wrong scales are made from gives, at the
    right scale, the module's own output, for each random case."""
    for case in check.random_cases(seed=1):
        torch.testing.assert_close(
            check._context(case, case.hidden, scale=1 / case.d), case.context
        )
        torch.testing.assert_close(
            _self_attention(case.hidden, case.self_attn, case.mask), case.context
        )


def test_block_unmasked_is_the_block_without_a_mask():
    """What a dropped mask gives is the attention block run with no mask, and
    differs from the masked block on a padded batch."""
    case = _with_types()
    unmasked = check._block_unmasked(case)
    torch.testing.assert_close(
        unmasked, _attention_block(case.hidden, case.block.attention)
    )
    assert not torch.allclose(unmasked, case.attn_out, atol=1e-4)


def test_fresh_norm_is_a_new_layernorm_at_both_eps():
    """A new LayerNorm's output: nn.LayerNorm(D) at BERT's eps and at its own."""
    x = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(0))
    got = check._fresh_norm(x)
    for value, eps in zip(got, (1e-12, 1e-5), strict=True):
        torch.testing.assert_close(value, torch.nn.LayerNorm(8, eps=eps)(x))


def test_wrong_embeddings_are_each_sum_written_out():
    """The embeddings a missing table gives are LayerNorm of the other two; the
    type-0 mistake is there only where some token has type 1."""
    case = _with_types()
    emb, T = case.model.embeddings, case.ids.shape[1]
    w = emb.word_embeddings(case.ids)
    p = emb.position_embeddings(torch.arange(T))
    t = emb.token_type_embeddings(case.types)
    with torch.no_grad():
        wrong = check._wrong_embeddings(case)
        want = {
            "no-positions": emb.LayerNorm(w + t),
            "no-types": emb.LayerNorm(w + p),
            "types-ignored": emb.LayerNorm(w + p + emb.token_type_embeddings.weight[0]),
        }
    compared = 0
    for message, value in wrong.items():
        if len(message.mistakes) == 1 and message.mistakes[0] in want:
            torch.testing.assert_close(value, want[message.mistakes[0]])
            compared += 1
    assert compared == len(want)
    keys = {k for m in wrong for k in m.mistakes}
    assert set(want) <= keys
    case.types = torch.zeros_like(case.types)
    with torch.no_grad():
        no_types = check._wrong_embeddings(case)
    assert "types-ignored" not in {k for m in no_types for k in m.mistakes}


def test_embeddings_forward_passes_and_names_mistakes():
    """The sum of the three tables, normalised, passes; a missing position table
    and a fresh LayerNorm are named; calling the module is the shortcut."""
    check.embeddings_forward_random(_embed, seed=2)

    def no_positions(ids, types, emb):
        return emb.LayerNorm(
            emb.word_embeddings(ids) + emb.token_type_embeddings(types)
        )

    def fresh(ids, types, emb):
        x = emb.word_embeddings(ids) + emb.position_embeddings(
            torch.arange(ids.shape[1])
        )
        x = x + emb.token_type_embeddings(types)
        return F.layer_norm(x, x.shape[-1:], eps=1e-12)

    for wrong, key in ((no_positions, "no-positions"), (fresh, "fresh-layernorm")):
        with pytest.raises(CheckFailed) as err:
            check.embeddings_forward_random(wrong, seed=2)
        assert key in err.value.mistakes
    with pytest.raises(CheckFailed, match="Build it from its parts"):
        check.embeddings_forward_random(
            lambda ids, types, emb: emb(input_ids=ids, token_type_ids=types), seed=2
        )


def test_attention_block_passes_and_names_mistakes():
    """The block by hand passes, masked; a dropped mask, pre-LN and a missing
    residual are each named."""
    check.attention_block_random(_attention_block, seed=3)

    def unmasked(h, att, mask=None):
        return _attention_block(h, att)

    def pre_ln(h, att, mask=None):
        out = att.output
        return h + out.dense(_self_attention(out.LayerNorm(h), att.self, mask))

    def no_residual(h, att, mask=None):
        out = att.output
        return out.LayerNorm(out.dense(_self_attention(h, att.self, mask)))

    wrongs = {"mask-dropped": unmasked, "pre-ln": pre_ln, "no-residual": no_residual}
    for key, wrong in wrongs.items():
        with pytest.raises(CheckFailed) as err:
            check.attention_block_random(wrong, seed=3)
        assert key in err.value.mistakes


def test_attention_block_names_a_missing_scale_and_active_dropout():
    """Scores not divided by sqrt(d) are named; dropout left on changes the
    result from call to call and is named."""

    def no_scale(h, att, mask=None):
        out = att.output
        return out.LayerNorm(
            out.dense(_self_attention(h, att.self, mask, scale=False)) + h
        )

    def dropout(h, att, mask=None):
        out = att.output
        sub = F.dropout(out.dense(_self_attention(h, att.self, mask)), 0.5, True)
        return out.LayerNorm(sub + h)

    with pytest.raises(CheckFailed) as err:
        check.attention_block_random(no_scale, seed=3)
    assert "no-scale" in err.value.mistakes
    with pytest.raises(CheckFailed, match="dropout is active") as err:
        check.attention_block_random(dropout, seed=3)
    assert err.value.mistakes == ("dropout",)


def test_attention_block_names_a_missing_scale_beside_the_residual_after_ln():
    """Two mistakes at once, the scores never scaled and the residual added after
    the LayerNorm, are both named; the right block passes on the same seed."""
    check.attention_block_random(_attention_block, seed=4)

    def unscaled_after_ln(h, att, mask=None):
        out = att.output
        sub = out.dense(_self_attention(h, att.self, mask, scale=False))
        return out.LayerNorm(sub) + h

    with pytest.raises(CheckFailed) as err:
        check.attention_block_random(unscaled_after_ln, seed=4)
    assert set(err.value.mistakes) == {"no-scale", "residual-after-ln"}, str(err.value)


def test_feed_forward_passes_and_names_mistakes():
    """GELU, the layer's output LayerNorm and the residual pass; ReLU, GELU's
    tanh form and the attention block's LayerNorm are named."""
    check.feed_forward_random(_feed_forward, seed=4)

    def other_ln(a, layer):
        up, out = layer.intermediate.dense, layer.output
        return layer.attention.output.LayerNorm(out.dense(F.gelu(up(a))) + a)

    wrongs = {
        "relu": lambda a, layer: _feed_forward(a, layer, F.relu),
        "tanh-gelu": lambda a, layer: _feed_forward(
            a, layer, lambda v: F.gelu(v, approximate="tanh")
        ),
        "other-layernorm": other_ln,
    }
    for key, wrong in wrongs.items():
        with pytest.raises(CheckFailed) as err:
            check.feed_forward_random(wrong, seed=4)
        assert key in err.value.mistakes


def test_bert_layer_passes_and_names_mistakes():
    """The block then the feed-forward passes; the feed-forward fed the layer's
    input, and a dropped mask, are named; calling the layer is the shortcut."""
    check.bert_layer_random(_layer, seed=5)

    def ff_from_input(h, layer, mask=None):
        a = _attention_block(h, layer.attention, mask)
        up, out = layer.intermediate.dense, layer.output
        return out.LayerNorm(a + out.dense(F.gelu(up(h))))

    def unmasked(h, layer, mask=None):
        return _layer(h, layer)

    for key, wrong in (("ff-from-input", ff_from_input), ("mask-dropped", unmasked)):
        with pytest.raises(CheckFailed) as err:
            check.bert_layer_random(wrong, seed=5)
        assert key in err.value.mistakes
    with pytest.raises(CheckFailed, match="Build it from its parts"):
        check.bert_layer_random(lambda h, layer, mask=None: layer(h), seed=5)


def test_bert_encoder_passes_and_names_mistakes():
    """Every hidden state by hand passes; no embedding output, the mask not
    passed on, every layer fed the embeddings, and a raise without a mask are each
    named."""
    check.bert_encoder_random(_encoder, seed=6)
    wrongs = {
        "no-embeddings": lambda *a: _encoder(*a)[1:],
        "mask-not-passed": lambda *a: _encoder(*a, pass_mask=False),
        "fed-embeddings": lambda *a: _encoder(*a, chain=False),
        "mask-none-fails": lambda i, t, m, mask=None: _encoder(i, t, m, mask[:, :]),
    }
    for key, wrong in wrongs.items():
        with pytest.raises(CheckFailed) as err:
            check.bert_encoder_random(wrong, seed=6)
        assert key in err.value.mistakes


def test_random_cases_start_with_several_heads_and_two_layers_when_asked():
    """The first case has several heads (one head hides a scale by sqrt(D)), and
    fewest_layers=2 gives models of two layers or more, on any seed."""
    for seed in range(15):
        cases = list(check.random_cases(seed, fewest_layers=2))
        assert cases[0].H > 1
        assert all(c.model.config.num_hidden_layers >= 2 for c in cases)


def test_the_course_model_checks_pass_the_layer_by_hand():
    """On the course model (sentence pair, sample text, padded batch) every
    visible check passes the answers written here; a dropped mask is named."""
    check.embeddings_forward_shape(_embed)
    check.embeddings_forward_values(_embed)
    check.attention_block_values(_attention_block)
    check.attention_block_mask(_attention_block)
    check.feed_forward_values(_feed_forward)
    check.bert_layer_values(_layer)
    check.bert_layer_mask(_layer)
    check.bert_encoder_length(_encoder)
    check.bert_encoder_values(_encoder)
    with pytest.raises(CheckFailed) as err:
        check.attention_block_mask(lambda h, att, mask=None: _attention_block(h, att))
    assert "mask-dropped" in err.value.mistakes


@pytest.mark.parametrize("k", [1, 2, 5])
def test_positions_from_any_offset_are_named_with_it(k):
    """Positions k to k + T - 1 (from 1, RoBERTa's padding_idx + 1 = 2, or any
    other offset the table has rows for): named with the offset and its key, on
    the random cases and the course model; the control (from 0) passes."""

    def offset(ids, types, emb):
        T = ids.shape[1]
        x = emb.word_embeddings(ids) + emb.position_embeddings(torch.arange(k, T + k))
        return emb.LayerNorm(x + emb.token_type_embeddings(types))

    for run in (
        lambda fn: check.embeddings_forward_random(fn, seed=2),
        check.embeddings_forward_values,
    ):
        with pytest.raises(CheckFailed) as err:
            run(offset)
        assert f"the positions start at {k}:" in str(err.value)
        assert err.value.mistakes == ("positions-offset",)
    check.embeddings_forward_random(_embed, seed=2)


def test_a_mask_built_when_none_is_given_loses_the_random_checks():
    """attention_block and bert_layer that index attention_mask unconditionally
    raise on the random checks' case without a mask, with the None hint; the
    controls (a mask only when one is given) pass."""

    def block(h, att, mask=None):
        return _attention_block(h, att, mask[:, :])

    def layer(h, block_, mask=None):
        return _layer(h, block_, mask[:, :])

    for run, wrong, right in (
        (check.attention_block_random, block, _attention_block),
        (check.bert_layer_random, layer, _layer),
    ):
        with pytest.raises(CheckFailed, match="is None") as err:
            run(wrong, seed=3)
        assert "none-default" in err.value.mistakes
        run(right, seed=3)


def test_bert_layer_names_a_mask_along_the_queries_and_the_other_layernorm():
    """The padding laid along the queries, the feed-forward ended by the
    attention block's LayerNorm: each named, and both at once; the right layer
    passes."""

    def layer_of(h, layer, mask=None, *, along=False, other_ln=False):
        if mask is not None and along:  # a padded query's row blanked, not the key
            B, T, D = h.shape
            sa = layer.attention.self
            q, k, v = (
                lin(h).view(B, T, -1, sa.attention_head_size).transpose(1, 2)
                for lin in (sa.query, sa.key, sa.value)
            )
            s = q @ k.mT / math.sqrt(sa.attention_head_size)
            s = s.masked_fill(mask[:, None, :, None] == 0, -1e9)
            ctx = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D)
            out = layer.attention.output
            a = out.LayerNorm(out.dense(ctx) + h)
        else:
            a = _attention_block(h, layer.attention, mask)
        up, out = layer.intermediate.dense, layer.output
        ln = layer.attention.output.LayerNorm if other_ln else out.LayerNorm
        return ln(a + out.dense(F.gelu(up(a))))

    check.bert_layer_random(layer_of, seed=5)
    check.bert_layer_mask(layer_of)
    for how, keys in (
        ({"along": True}, ("mask-along-queries",)),
        ({"other_ln": True}, ("other-layernorm",)),
        ({"along": True, "other_ln": True}, ("mask-along-queries", "other-layernorm")),
    ):
        wrong = functools.partial(layer_of, **how)
        for run in (check.bert_layer_mask, lambda f: check.bert_layer_random(f, 5)):
            with pytest.raises(CheckFailed) as err:
                run(wrong)
            assert err.value.mistakes == keys


def test_bert_encoder_names_the_states_one_layer_late():
    """Each layer's input kept instead of its output: named as states one layer
    late, on the course model and on random ones."""

    def late(ids, types, model, mask=None):
        states = _encoder(ids, types, model, mask)
        return (states[0], *states[:-1])

    for run in (check.bert_encoder_values, lambda f: check.bert_encoder_random(f, 6)):
        with pytest.raises(CheckFailed, match="one layer late") as err:
            run(late)
        assert err.value.mistakes == ("states-shifted",)
