"""course.checks.softmax: notebook 05's checks (softmax by hand, scores, weights,
why divide by sqrt(d)), called directly with answers written here; the oracles
here are torch's softmax and Q K^T / sqrt(d) written out."""

import math

import pytest
import torch

from course.checks import CheckFailed
from course.checks import softmax as check


def _softmax(x, dim):
    e = (x - x.amax(dim, keepdim=True)).exp()
    return e / e.sum(dim, keepdim=True)


def _scores(Q, K):
    return Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])


def _weights(Q, K):
    return torch.softmax(_scores(Q, K), -1)


def _qk(B=2, H=3, Tq=4, Tk=4, d=8, seed=0):
    gen = torch.Generator().manual_seed(seed)
    Q = torch.randn(B, H, Tq, d, generator=gen, dtype=torch.float64)
    return Q, torch.randn(B, H, Tk, d, generator=gen, dtype=torch.float64)


def _std(d_k, n, seed):
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, n, d_k, generator=gen)
    s = (q * k).sum(-1)
    return s.std().item(), (s / math.sqrt(d_k)).std().item()


def test_other_dims_names_the_first_the_one_before_last_and_the_last():
    """The dims a softmax is taken along by mistake: 0 and -2 where the last is
    asked, the last where another is, never the dim asked; none in 1-D."""
    x = torch.zeros(2, 3, 4)
    assert check._other_dims(x, -1) == [(0, check.WRONG_DIM), (1, check.ROWS_DIM)]
    assert check._other_dims(x, 2) == check._other_dims(x, -1)
    assert check._other_dims(x, 0) == [(2, check.LAST_DIM)]
    assert check._other_dims(x, 1) == [(0, check.WRONG_DIM), (2, check.LAST_DIM)]
    assert check._other_dims(torch.zeros(5), 0) == []


def test_softmax_atol_covers_float32_rounding_of_large_scores():
    """A correct float32 formula on scores of 3e4 is within the tolerance of
    torch's float64 softmax; scores of about 1 get 1e-5."""
    x = torch.randn(4, 7, generator=torch.Generator().manual_seed(1)) * 3e4
    right = (x - x.logsumexp(-1, keepdim=True)).exp()
    err = (right.double() - torch.softmax(x.double(), -1)).abs().max()
    assert 1e-5 < check._softmax_atol(x) and err <= check._softmax_atol(x)
    assert check._softmax_atol(torch.randn(3, 3).clamp(-1, 1)) == 1e-5


def test_softmax_by_hand_passes_every_softmax_check():
    """exp(x - max) / sum along dim passes the fixed and the random checks."""
    check.softmax_rows(_softmax)
    check.softmax_stable(_softmax)
    for seed in (0, 1):
        check.softmax_random(_softmax, seed)


def test_softmax_names_the_dim_it_normalised_over():
    """A softmax over dim 0, or always over the last dim, is named with its key."""
    with pytest.raises(CheckFailed, match="not dim 0") as err:
        check.softmax_rows(lambda x, dim: _softmax(x, 0))
    assert err.value.mistakes == ("wrong-dim",)
    with pytest.raises(CheckFailed) as err:
        check.softmax_random(lambda x, dim: _softmax(x, -1), seed=0)
    assert "fixed-dim" in err.value.mistakes


def test_softmax_names_overflow_global_max_and_global_sum():
    """exp without a max overflows; one max for the whole tensor underflows a
    far row to NaN; a sum over every element is named too."""

    def no_max(x, dim):
        return x.exp() / x.exp().sum(dim, keepdim=True)

    def global_max(x, dim):
        e = (x - x.max()).exp()
        return e / e.sum(dim, keepdim=True)

    def global_sum(x, dim):
        e = (x - x.amax(dim, keepdim=True)).exp()
        return e / e.sum()

    with pytest.raises(CheckFailed, match="exp overflows") as err:
        check.softmax_stable(no_max)
    assert err.value.mistakes == ("overflow",)
    with pytest.raises(CheckFailed) as err:
        check.softmax_random(global_max, seed=0)
    assert "global-max" in err.value.mistakes
    with pytest.raises(CheckFailed) as err:
        check.softmax_rows(global_sum)
    assert "global-sum" in err.value.mistakes


def test_torch_softmax_is_the_shortcut_while_the_answer_runs():
    """torch.softmax and Tensor.softmax raise the lesson inside the check, and are
    back afterwards."""
    for shortcut in (
        lambda x, dim: torch.softmax(x, dim),
        lambda x, dim: x.softmax(dim),
        lambda x, dim: torch.nn.functional.softmax(x, dim),
    ):
        with pytest.raises(CheckFailed, match="by hand") as err:
            check.softmax_rows(shortcut)
        assert err.value.mistakes == ("softmax-shortcut",)
    x = torch.randn(3, 4)
    torch.testing.assert_close(torch.softmax(x, -1), _softmax(x, -1))


def test_scores_oracle_is_q_k_transposed_over_sqrt_d():
    """The scores read off torch's fused attention are Q K^T / sqrt(d), batched or
    not, Tq != Tk."""
    Q, K = _qk(Tq=3, Tk=5, d=16)
    torch.testing.assert_close(check.scores_oracle(Q, K), _scores(Q, K))
    torch.testing.assert_close(
        check.scores_oracle(Q[0, 0], K[0, 0]), _scores(Q[0, 0], K[0, 0])
    )


def test_diagnose_scores_are_each_scale_written_out():
    """Each scaling mistake's scores are Q K^T over its own divisor: none, d,
    sqrt(D), sqrt(H) and sqrt(Tk); transposed where Tq == Tk, not where they
    differ."""
    Q, K = _qk(H=3, Tq=4, Tk=4, d=8)
    raw = Q @ K.mT
    by_key = check._diagnose_scores(Q, K, _scores(Q, K))
    keys = {k for m in by_key for k in m.mistakes}
    assert keys == {
        "no-scale-qk",
        "by-d",
        "scaled-by-width",
        "scaled-by-heads",
        "scaled-by-length",
        "scores-transposed",
    }
    want = {
        "no-scale-qk": raw,
        "by-d": raw / 8,
        "scaled-by-width": raw / math.sqrt(24),
        "scaled-by-heads": raw / math.sqrt(3),
        "scaled-by-length": raw / math.sqrt(4),
        "scores-transposed": _scores(Q, K).mT,
    }
    for message, value in by_key.items():
        torch.testing.assert_close(value, want[message.mistakes[0]])
    Q, K = _qk(Tq=3, Tk=5)
    other = check._diagnose_scores(Q, K, _scores(Q, K))
    assert "scores-transposed" not in {k for m in other for k in m.mistakes}


def test_attention_scores_passes_and_names_each_scale():
    """Q K^T / sqrt(d) passes; no scale, a scale by d and by sqrt(Tk) are named."""
    check.attention_scores_shape(_scores)
    check.attention_scores_random(_scores, seed=3)
    wrongs = {
        "no-scale-qk": lambda Q, K: Q @ K.mT,
        "by-d": lambda Q, K: Q @ K.mT / Q.shape[-1],
        "scaled-by-length": lambda Q, K: Q @ K.mT / math.sqrt(K.shape[-2]),
    }
    for key, wrong in wrongs.items():
        with pytest.raises(CheckFailed) as err:
            check.attention_scores_random(wrong, seed=3)
        assert key in err.value.mistakes


def test_attention_scores_shape_says_transposed_scores():
    """K Q^T has shape (..., Tk, Tq) and is called transposed."""
    with pytest.raises(CheckFailed, match="transposed"):
        check.attention_scores_shape(lambda Q, K: _scores(K, Q))


def test_attention_weights_names_a_wrong_dim_and_two_mistakes_at_once():
    """softmax over the keys passes; over the queries or the heads is named; a
    wrong dim with no scale names both."""
    check.attention_weights_random(_weights, seed=4)

    def wrong_dim(dim, scale=True):
        def fn(Q, K):
            s = Q @ K.mT / (math.sqrt(Q.shape[-1]) if scale else 1.0)
            return torch.softmax(s, dim)

        return fn

    for dim, key in ((-2, "query-dim"), (1, "heads-dim")):
        with pytest.raises(CheckFailed) as err:
            check.attention_weights_random(wrong_dim(dim), seed=4)
        assert key in err.value.mistakes
    with pytest.raises(CheckFailed, match="Also") as err:
        check.attention_weights_random(wrong_dim(-2, scale=False), seed=4)
    assert {"query-dim", "no-scale-qk"} <= set(err.value.mistakes)


def test_expect_rows_tells_columns_from_another_dim():
    """Weights whose columns sum to 1 are the queries' dim; over the batch, the
    wrong dim; rows summing to 1 pass."""
    Q, K = _qk(B=2, H=2, Tq=5, Tk=5)
    check._expect_rows(_weights, Q, K)
    with pytest.raises(CheckFailed) as err:
        check._expect_rows(lambda Q, K: torch.softmax(_scores(Q, K), -2), Q, K)
    assert err.value.mistakes == ("query-dim",)
    with pytest.raises(CheckFailed) as err:
        check._expect_rows(lambda Q, K: torch.softmax(_scores(Q, K), 0), Q, K)
    assert err.value.mistakes == ("wrong-dim",)


def test_dot_product_std_passes_and_names_each_mistake():
    """The std of seeded dot products and of the scaled ones passes; the
    variance, an unseeded draw, a scale by d and the single products' std are
    each named."""
    check.dot_product_std_values(_std)

    def variance(d_k, n, seed):
        a, b = _std(d_k, n, seed)
        return a**2, b**2

    def by_d(d_k, n, seed):
        a, _ = _std(d_k, n, seed)
        return a, a / d_k

    def unseeded(d_k, n, seed):
        return _std(d_k, n, int(torch.randint(0, 10**6, ())))

    def products(d_k, n, seed):
        gen = torch.Generator().manual_seed(seed)
        p = torch.randn(n, d_k, generator=gen) * torch.randn(n, d_k, generator=gen)
        return p.std().item(), (p / math.sqrt(d_k)).std().item()

    wrongs = {
        "variance": variance,
        "std-by-d": by_d,
        "std-unseeded": unseeded,
        "std-of-products": products,
    }
    for key, wrong in wrongs.items():
        with pytest.raises(CheckFailed) as err:
            check.dot_product_std_values(wrong)
        assert err.value.mistakes == (key,)


def _expect_named_by_both_checks(wrong, *, match: str, key: str) -> None:
    """``wrong`` fails dot_product_std's fixed and random checks, named by ``key``;
    the right answer passes (the control)."""
    for check_fn, args in (
        (check.dot_product_std_values, ()),
        (check.dot_product_std_random, (3,)),
    ):
        with pytest.raises(CheckFailed, match=match) as err:
            check_fn(wrong, *args)
        assert err.value.mistakes == (key,)
    check.dot_product_std_random(_std, seed=3)


def test_dot_product_std_names_k_drawn_as_q():
    """k drawn as the same numbers as q (two generators seeded alike, or k = q)
    gives the stds of |q|^2, sqrt(2 d_k) and sqrt(2): named, on every d_k the
    random check tries; independent draws, on many seeds, are far from it."""

    def k_is_q(d_k, n, seed):
        q, k = (
            torch.randn(n, d_k, generator=torch.Generator().manual_seed(seed))
            for _ in range(2)
        )
        s = (q * k).sum(-1)
        return s.std().item(), (s / math.sqrt(d_k)).std().item()

    def k_is_q_copied(d_k, n, seed):
        q = torch.randn(n, d_k, generator=torch.Generator().manual_seed(seed))
        s = (q * q.clone()).sum(-1)
        return s.std().item(), (s / math.sqrt(d_k)).std().item()

    for wrong in (k_is_q, k_is_q_copied):
        _expect_named_by_both_checks(wrong, match="so k is q", key="k-is-q")
    n, tol = 20000, 5 * math.sqrt(2 / 20000)
    for seed in range(40):
        for d_k in (1, 5, 32):
            _, scaled = _std(d_k, n, seed)
            assert abs(scaled / math.sqrt(2) - 1) > 4 * tol, (seed, d_k, scaled)


def test_dot_product_std_names_a_mean_over_d_k():
    """q·k taken as a mean over d_k, not a sum, gives stds 1/sqrt(d_k) and 1/d_k:
    named on every d_k > 1 the checks try; independent sums, on many seeds, are
    far from it."""

    def mean(d_k, n, seed):
        gen = torch.Generator().manual_seed(seed)
        q, k = torch.randn(2, n, d_k, generator=gen)
        s = (q * k).mean(-1)
        return s.std().item(), (s / math.sqrt(d_k)).std().item()

    _expect_named_by_both_checks(
        mean, match="mean over the d_k products", key="dot-mean"
    )
    n, tol = 20000, 5 * math.sqrt(2 / 20000)
    for seed in range(40):
        for d_k in (2, 5, 32):
            unscaled, scaled = _std(d_k, n, seed)
            assert abs(unscaled * math.sqrt(d_k) - 1) > 4 * tol, (seed, d_k)
            assert abs(scaled * d_k - 1) > 4 * tol, (seed, d_k)


def test_softmax_names_a_max_along_another_dim():
    """exp(x - max along the last dim) normalised along dim -2: not a constant
    shift along dim, so named; the max along dim itself is the control."""

    def max_of_last(scores, dim=-1):
        e = (scores - scores.amax(-1, keepdim=True)).exp()
        return e / e.sum(dim, keepdim=True)

    def max_of_dim(scores, dim=-1):
        e = (scores - scores.amax(dim, keepdim=True)).exp()
        return e / e.sum(dim, keepdim=True)

    x = torch.randn(2, 4, 5, generator=torch.Generator().manual_seed(0))
    check._expect_softmax(max_of_dim, x, -2)
    with pytest.raises(CheckFailed, match="along another dim") as err:
        check._expect_softmax(max_of_last, x, -2)
    assert err.value.mistakes == ("max-other-dim",)


def test_dot_product_std_names_a_sum_over_the_samples():
    """q*k summed over dim 0 gives d_k sums of n_samples products, std about
    sqrt(n_samples): named on every d_k > 1 the checks try, d_k = 1's NaN (a
    std of one value) is not called unseeded."""

    def over_samples(d_k, n, seed):
        g = torch.Generator().manual_seed(seed)
        q, k = torch.randn(n, d_k, generator=g), torch.randn(n, d_k, generator=g)
        dots = (q * k).sum(0)
        return dots.std().item(), (dots / math.sqrt(d_k)).std().item()

    with pytest.warns(UserWarning):  # torch: the std of one value
        _expect_named_by_both_checks(
            over_samples, match="summed over the samples", key="sum-over-samples"
        )
