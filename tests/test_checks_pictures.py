"""course.checks.pictures: notebook 10's checks (the heatmap read back off its
Axes, the top-attended tokens, previous-token heads), called directly with
answers written here."""

import matplotlib.pyplot as plt
import pytest
import torch

from course.checks import CheckFailed
from course.checks import pictures as check


def _heatmap(probs, tokens, ax=None, *, transpose=False, labels=None):
    if ax is None:
        _, ax = plt.subplots()
    ax.imshow((probs.T if transpose else probs).numpy())
    labels = tokens if labels is None else labels
    ax.set_xticks(range(len(tokens)), labels)
    ax.set_yticks(range(len(tokens)), labels)
    return ax


def _top(probs, tokens, q, k):
    order = sorted(range(len(tokens)), key=lambda j: -float(probs[q, j]))
    return [tokens[j] for j in order[:k]]


def _prev(
    attentions, threshold, *, offset=-1, over_t=False, first=False, gt=False, wrap=False
):
    """The mean weight each query puts on the key ``offset`` from it, by loops
    (``wrap``: query 0 too, its key -1 read as Python reads it, the last)."""
    found = []
    for layer, probs in enumerate(attentions):
        B, H, T, _ = probs.shape
        rows = range(1) if first else range(B)
        queries = [i for i in range(T) if 0 <= i + offset < T]
        if wrap:
            queries, over = [*range(T)], len(queries)  # still divided by T - 1
        for head in range(H):
            total = sum(
                float(probs[b, head, i, i + offset]) for b in rows for i in queries
            )
            mean = total / (
                len(rows) * (T if over_t else over if wrap else len(queries))
            )
            if mean > threshold if gt else mean >= threshold:
                found.append((layer, head))
    return found


def test_diagonal_score_is_the_mean_weight_on_the_previous_token():
    """(L, H) scores: the mean of probs[b, h, i, i - 1] over the batch and the
    queries that have a previous token (and i + 1 for offset 1), by loops."""
    gen = torch.Generator().manual_seed(0)
    attentions = tuple(torch.rand(2, 3, 5, 5, generator=gen) for _ in range(2))
    for offset in (-1, 0, 1):
        got = check._diagonal_score(attentions, offset)
        assert got.shape == (2, 3)
        for layer, probs in enumerate(attentions):
            for head in range(3):
                cells = [
                    float(probs[b, head, i, i + offset])
                    for b in range(2)
                    for i in range(5)
                    if 0 <= i + offset < 5
                ]
                want = sum(cells) / len(cells)
                assert abs(float(got[layer, head]) - want) < 1e-6


def test_labels_match_needs_each_token_at_its_centre():
    """Labels at 0 .. T-1 in order match, empty labels aside; shifted by one,
    off centre or missing they do not."""
    tokens = ["a", "b", "c"]
    assert check._labels_match([(0.0, "a"), (1.0, "b"), (2.0, "c")], tokens)
    assert check._labels_match([(-1.0, ""), (0, "a"), (1, "b"), (2, "c")], tokens)
    assert not check._labels_match([(-1.0, "a"), (0, "b"), (1, "c")], tokens)
    assert not check._labels_match([(0.5, "a"), (1.5, "b"), (2.5, "c")], tokens)
    assert not check._labels_match([(0.0, "a"), (1.0, "b")], tokens)
    assert check._in_view([(-1.0, "x"), (0.0, "a"), (3.0, "y")], (2.5, -0.5)) == [
        (0.0, "a")
    ]


def test_probs_tokens_of_a_bert_input():
    """A BERT input's tokens start with [CLS], end with a full stop and [SEP],
    and each row of probs sums to 1."""
    probs, tokens = check._probs_tokens(3, 7, bert=True)
    assert tokens[0] == "[CLS]" and tokens[-2:] == [".", "[SEP]"] and len(tokens) == 7
    torch.testing.assert_close(probs.sum(-1), torch.ones(7))
    assert check._probs_tokens(3, 7)[1] == [f"tok{i}" for i in range(7)]


def test_heatmap_passes_and_names_mistakes():
    """imshow(probs) with the tokens as ticks passes, on a given Axes too; the
    transposed image, another Axes and labels one off are each said."""
    check.heatmap_image(_heatmap)
    check.heatmap_given_ax(_heatmap)
    check.heatmap_random(_heatmap, seed=1)
    with pytest.raises(CheckFailed) as err:
        check.heatmap_image(lambda p, t, ax=None: _heatmap(p, t, transpose=True))
    assert err.value.mistakes == ("heatmap-transposed",)
    with pytest.raises(CheckFailed, match="drew elsewhere") as err:
        check.heatmap_given_ax(lambda p, t, ax=None: _heatmap(p, t))
    assert err.value.mistakes == ("other-axes",)
    with pytest.raises(CheckFailed, match="one column off"):
        check.heatmap_image(lambda p, t, ax=None: _heatmap(p, t, labels=t[1:] + [""]))
    with pytest.raises(CheckFailed, match="should be the tokens"):
        check.heatmap_image(lambda p, t, ax=None: _heatmap(p, t, labels=t[::-1]))


def _drawn_with_plt(probs, tokens, ax=None):
    """Draws with plt.* on the current Axes, whatever ax it is given."""
    plt.imshow(probs.numpy())
    plt.xticks(range(len(tokens)), tokens)
    plt.yticks(range(len(tokens)), tokens)
    return plt.gca()


def test_heatmap_drawn_with_plt_on_the_current_axes_is_said():
    """The given Axes is not the current one when the answer runs (as one Axes of
    a grid is not): plt.* draws elsewhere, and that is said. Control: drawing on
    ax, or making it current first (plt.sca), passes."""
    for seed in range(3):
        with pytest.raises(CheckFailed, match="drew elsewhere") as err:
            check.heatmap_random(_drawn_with_plt, seed=seed)
        assert err.value.mistakes == ("other-axes",)
    with pytest.raises(CheckFailed, match="drew elsewhere"):
        check.heatmap_given_ax(_drawn_with_plt)
    check.heatmap_image(_drawn_with_plt)  # no ax given: the current one is right

    def made_current(probs, tokens, ax=None):
        if ax is not None:
            plt.sca(ax)
        return _drawn_with_plt(probs, tokens)

    check.heatmap_given_ax(made_current)
    check.heatmap_random(made_current, seed=1)
    check.heatmap_given_ax(_heatmap)


def test_heatmap_that_returns_no_axes_or_no_image_is_said():
    """Returning the figure, or an Axes with nothing drawn, fails with its own
    sentence."""
    with pytest.raises(CheckFailed, match="should return the matplotlib Axes"):
        check.heatmap_image(lambda p, t, ax=None: _heatmap(p, t).figure)
    with pytest.raises(CheckFailed, match="drew no image"):
        check.heatmap_image(lambda p, t, ax=None: plt.subplots()[1])


def test_top_attended_passes_and_names_mistakes():
    """The row sorted, most attended first, passes; the column, the reversed
    order and a ranking without special tokens are each named."""
    check.top_attended_small(_top)
    check.top_attended_random(_top, seed=2)
    probs = torch.tensor(
        [
            [0.1, 0.2, 0.1, 0.6],
            [0.1, 0.1, 0.3, 0.5],
            [0.3, 0.1, 0.4, 0.2],
            [0.5, 0.1, 0.2, 0.2],
        ]
    )
    tokens = ["[CLS]", "cat", "sat", "[SEP]"]
    check._expect_top(_top, probs, tokens, q=0, k=2)

    def column(p, t, q, k):
        return _top(p.T, t, q, k)

    def words_only(p, t, q, k):
        return [w for w in _top(p, t, q, len(t)) if w not in check.SPECIAL][:k]

    def reversed_order(p, t, q, k):
        return _top(p, t, q, k)[::-1]

    for key, wrong in (
        ("column", column),
        ("skips-special", words_only),
        ("order", reversed_order),
    ):
        with pytest.raises(CheckFailed) as err:
            check._expect_top(wrong, probs, tokens, q=0, k=2)
        assert err.value.mistakes == (key,)


def test_positions_returned_are_said_and_then_judged_as_their_tokens():
    """Positions (a list of ints or a tensor of them) for tokens: the type is said,
    and what the tokens at those positions rank is judged too (the column named);
    the row's positions get the type alone. Control: the tokens pass."""
    probs, tokens = check._probs_tokens(2, 6)

    def column_positions(p, t, q, k):
        return torch.topk(p[:, q], k).indices.tolist()

    def row_positions(p, t, q, k):
        return torch.topk(p[q], k).indices

    for fn in (column_positions, lambda *a: torch.tensor(column_positions(*a))):
        with pytest.raises(CheckFailed) as err:
            check._expect_top(fn, probs, tokens, q=2, k=3)
        assert str(err.value).startswith("top_attended should return a list")
        assert err.value.mistakes == ("column",), str(err.value)
    with pytest.raises(CheckFailed) as err:
        check.top_attended_random(column_positions, seed=4)
    assert err.value.mistakes == ("column",)
    with pytest.raises(CheckFailed) as err:
        check.top_attended_random(row_positions, seed=4)
    assert err.value.mistakes == () and "Also" not in str(err.value)
    check._expect_top(_top, probs, tokens, q=2, k=3)


def test_previous_token_heads_passes_and_names_each_mistake():
    """The mean over the batch and the T - 1 queries with a previous token, kept
    at >= threshold, passes (model and planted heads); the next token, >, a mean
    over T, the first example, (head, layer) pairs and the diagonal are named."""
    check.previous_token_heads_model(_prev)
    check.previous_token_heads_random(_prev, seed=0)

    wrongs = {
        "next": lambda a, t: _prev(a, t, offset=1),
        "over-t": lambda a, t: _prev(a, t, over_t=True),
        "first-example": lambda a, t: _prev(a, t, first=True),
        "head-layer": lambda a, t: [(h, ly) for ly, h in _prev(a, t)],
        "diagonal": lambda a, t: _prev(a, t, offset=0),
        "strict": lambda a, t: _prev(a, t, gt=True),
        "wraps-to-last": lambda a, t: _prev(a, t, wrap=True),
    }
    for key, wrong in wrongs.items():
        with pytest.raises(CheckFailed) as err:
            check.previous_token_heads_random(wrong, seed=0)
        assert key in err.value.mistakes, (key, str(err.value))


@pytest.mark.parametrize("seed", range(3))
def test_query_0_wrapped_to_the_last_key_is_named_alone_and_with_head_layer(seed):
    """Query 0 counted with its key -1 (the last): named on every seed, and
    beside (head, layer) pairs as both (student-14's a10_5)."""
    for keys, wrong in (
        (("wraps-to-last",), lambda a, t: _prev(a, t, wrap=True)),
        (
            ("wraps-to-last", "head-layer"),
            lambda a, t: [(h, ly) for ly, h in _prev(a, t, wrap=True)],
        ),
        (("wraps-to-last", "over-t"), lambda a, t: _prev(a, t, wrap=True, over_t=True)),
    ):
        with pytest.raises(CheckFailed) as err:
            check.previous_token_heads_random(wrong, seed=seed)
        assert err.value.mistakes == keys, str(err.value)
