"""course.checks.heads: notebook 03's checks (one head's rows of a projection, its
projection, the first head's Q, K and V), called directly with answers written here."""

import pytest
import torch

from course import data, models
from course.checks import CheckFailed
from course.checks import heads as check


def _head_params(linear, head, d):
    rows = slice(head * d, (head + 1) * d)
    return linear.weight[rows], linear.bias[rows]


def _project_head(x, linear, head, d):
    W_h, b_h = _head_params(linear, head, d)
    return x @ W_h.T + b_h


def test_head_truth_is_the_layer_own_rows():
    """The weight and bias recovered from the module's outputs alone are the
    module's own parameters, rows h*d:(h+1)*d, for every head of a random layer."""
    for linear, H, d, _ in check._random_linears(seed=4):
        for head in range(H):
            W_h, b_h = check._head_truth(linear, head, d)
            want_W, want_b = _head_params(linear, head, d)
            torch.testing.assert_close(W_h, want_W, atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(b_h, want_b, atol=1e-5, rtol=1e-5)


def test_random_linears_start_away_from_head_zero():
    """The first layer's head is never 0 (where an offset mistake hides), on any
    seed; the sizes are H * d square layers."""
    for seed in range(30):
        first = next(check._random_linears(seed))
        linear, H, d, head = first
        assert head >= 1 and linear.in_features == linear.out_features == H * d


def test_head_params_passes_the_rows_and_names_columns_and_offset():
    """The head's rows pass; its columns and the rows starting at h are named with
    their keys."""
    check.head_params_random(_head_params, seed=4)

    def columns(linear, head, d):
        return linear.weight[:, head * d : (head + 1) * d], _head_params(
            linear, head, d
        )[1]

    def offset(linear, head, d):
        return linear.weight[head : head + d], _head_params(linear, head, d)[1]

    with pytest.raises(CheckFailed, match="the head lives in rows") as err:
        check.head_params_random(columns, seed=4)
    assert err.value.mistakes == ("columns",)
    with pytest.raises(CheckFailed, match="head h starts at row h\\*d") as err:
        check.head_params_random(offset, seed=4)
    assert err.value.mistakes == ("start",)


def test_head_params_says_a_missing_bias_and_a_wrong_return():
    """No bias, or a single tensor instead of a pair, fails with its sentence."""
    with pytest.raises(CheckFailed, match="b_h is None"):
        check.head_params_random(
            lambda lin, h, d: (_head_params(lin, h, d)[0], None), 1
        )
    with pytest.raises(CheckFailed, match="a pair \\(W_h, b_h\\)"):
        check.head_params_random(lambda lin, h, d: _head_params(lin, h, d)[0], 1)


def test_project_head_passes_and_names_a_missing_bias():
    """x @ W_h.T + b_h passes on every batch shape; without the bias it is named."""
    check.project_head_random(_project_head, seed=6)

    def no_bias(x, linear, head, d):
        return x @ _head_params(linear, head, d)[0].T

    with pytest.raises(CheckFailed, match="the bias is missing") as err:
        check.project_head_random(no_bias, seed=6)
    assert err.value.mistakes == ("no-bias",)


def test_project_head_names_columns_and_a_bias_from_h():
    """The head's columns with the bias sliced from h (not h*d) name both mistakes;
    the rows with the bias from h*d pass (the control)."""
    check.project_head_random(_project_head, seed=6)

    def columns_bias_from_h(x, linear, head, d):
        W_h = linear.weight[:, head * d : (head + 1) * d]
        return x @ W_h + linear.bias[head : head + d]

    with pytest.raises(
        CheckFailed, match=r"Also: the bias added is b\[h:h\+d\]"
    ) as err:
        check.project_head_random(columns_bias_from_h, seed=6)
    assert err.value.mistakes == ("weight-columns", "bias-start")


def test_project_head_without_transpose_says_how_linear_stores_w():
    """x @ W_h (no .T) cannot multiply a (d, D) weight: the verdict says how
    Linear stores W."""

    def no_transpose(x, linear, head, d):
        W_h, b_h = _head_params(linear, head, d)
        return x @ W_h + b_h

    with pytest.raises(CheckFailed, match="x @ W_h.T, not x @ W_h"):
        check.project_head_random(no_transpose, seed=6)


def test_project_head_by_the_whole_layer_is_the_shortcut():
    """Calling the whole layer and slicing its output is turned off (the lesson)."""

    def whole(x, linear, head, d):
        return linear(x)[..., head * d : (head + 1) * d]

    with pytest.raises(CheckFailed, match="calling the whole layer"):
        check.project_head_random(whole, seed=6)


def test_first_head_checks_read_the_model():
    """Head 0's Q, K and V of layer 0, computed here from the model's own linears
    on its embedding output, pass; Q given as K is named as Q."""
    model, tok = models.oracle_model(), models.load_tokenizer()
    sa = model.encoder.layer[0].attention.self
    d = model.config.hidden_size // model.config.num_attention_heads
    with torch.no_grad():
        hidden = model(**tok(data.SAMPLE_TEXT, return_tensors="pt")).hidden_states[0]
        Q, K, V = (lin(hidden[0])[:, :d] for lin in (sa.query, sa.key, sa.value))
    check.first_head_q(Q)
    check.first_head_k(K)
    check.first_head_v(V)
    with pytest.raises(CheckFailed, match="this is Q, not K"):
        check.first_head_k(Q)
    with pytest.raises(CheckFailed, match="does not match"):
        check.first_head_v(K)
