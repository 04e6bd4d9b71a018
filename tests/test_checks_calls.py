"""course.checks.calls: calling an answer (a sentence for what it raised, the hint
its inputs call for), and the verdicts of a check's parts, each part tried even after
one failed (CaseVerdicts), so that a second mistake is named too."""

import math

import pytest
import torch
import torch.nn.functional as F
from harness import run_cell

from course import checks, i18n
from course.checks import CheckFailed, ShortcutUsed, compare, fail, positions
from course.checks.calls import CaseVerdicts


def _verdict(*failures) -> CheckFailed:
    verdicts = CaseVerdicts()
    for message, key in failures:
        with verdicts:
            if message:
                fail(i18n.N_(message, mistake=key))
    with pytest.raises(CheckFailed) as err:
        verdicts.fail_if_any()
    return err.value


def test_a_later_input_names_a_second_mistake_after_the_first():
    err = _verdict(("first is wrong.", "one"), ("", None), ("second is wrong.", "two"))
    assert str(err) == "first is wrong. Also: second is wrong."
    assert err.mistakes == ("one", "two")


def test_a_mistake_named_twice_or_nothing_new_is_said_once():
    err = _verdict(("first.", "one"), ("first again.", "one"), ("vague.", None))
    assert str(err) == "first." and err.mistakes == ("one",)


def test_a_combined_verdict_adds_only_its_new_part_to_an_outer_one():
    """A part's verdict that names two mistakes (an inner CaseVerdicts), one of
    them named already: only the new one is said again."""
    outer = CaseVerdicts()
    with outer:
        fail(i18n.N_("first.", mistake="one"))
    with outer:
        raise _verdict(("first.", "one"), ("second.", "two"))
    with pytest.raises(CheckFailed) as err:
        outer.fail_if_any()
    assert str(err.value) == "first. Also: second."
    assert err.value.mistakes == ("one", "two")


def test_a_later_either_verdict_whose_mistake_was_named_is_left_out():
    """ "X. Or: Y" on a later input, where X was named on an earlier one: X alone
    explains those numbers, so nothing is added (a scale by sqrt(T) named, then
    T = 1, where sqrt(T) is no scale at all); an "Or" naming nothing known is
    added."""
    first = i18n.N_("by sqrt(T).", mistake="by-length")
    same = i18n.N_("no scale.", mistake="no-scale")
    other = i18n.N_("by d.", mistake="by-d")
    for later, said in (((same, first), "by sqrt(T)."), ((same, other), "Also:")):
        verdicts = CaseVerdicts()
        with verdicts:
            compare.fail_mistaken("scores", first)
        with verdicts:
            compare.fail_mistaken("scores", *later)
        with pytest.raises(CheckFailed) as err:
            verdicts.fail_if_any()
        assert said in str(err.value)
        assert (str(err.value) == "scores is wrong: by sqrt(T).") == (said != "Also:")
    assert verdicts.said == ("by-length", "no-scale", "by-d")


def test_an_either_part_of_a_combined_verdict_is_left_out_too():
    """An input's own verdict names two things, the second "X. Or: Y" (05's
    scores: transposed, and no scale or by sqrt(T)); where X was named on an
    earlier input, that part adds nothing."""
    shape = i18n.N_("transposed.", mistake="transposed")
    none = i18n.N_("no scale.", mistake="no-scale")
    length = i18n.N_("by sqrt(T).", mistake="by-length")

    def one_input(*scale):
        inner = CaseVerdicts()
        with inner:
            fail(shape)
        with inner:
            compare.fail_mistaken("scores", *scale)
        inner.fail_if_any()

    outer = CaseVerdicts()
    for scale in ((none,), (none, length)):
        with outer:
            one_input(*scale)
    with pytest.raises(CheckFailed) as err:
        outer.fail_if_any()
    assert str(err.value) == "transposed. Also: scores is wrong: no scale."


def test_no_failure_no_verdict_and_a_shortcut_stops_at_once():
    CaseVerdicts().fail_if_any()  # nothing failed: nothing raised
    verdicts, tried = CaseVerdicts(), []
    with pytest.raises(ShortcutUsed):
        for i in range(3):
            with verdicts:
                tried.append(i)
                raise ShortcutUsed("used the shortcut")
    assert tried == [0]


def test_the_second_mistake_is_said_in_chinese_too():
    with i18n.speaking("zh"):
        err = _verdict(("first is wrong.", "one"), ("second is wrong.", "two"))
    assert "另外，" in str(err)


def _causal_attention(Q, K, V):
    """Two bugs: a transpose right for 3-D inputs only, and sqrt(T) for sqrt(d)."""
    T = Q.size(-2)
    scores = torch.matmul(Q, K.transpose(1, 2)) / math.sqrt(T)
    mask = torch.tril(torch.ones(T, T)).bool()
    probs = F.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return probs, probs @ V


def test_an_answer_with_two_bugs_hears_of_both(monkeypatch):
    """08's causal attention raises on (B, H, T, d) inputs and scales by sqrt(T):
    the random test names the raise and, from a (B, T, d) input, the scale.
    Control: stopped at the first failed input, the scale goes unnamed."""
    with pytest.raises(CheckFailed) as err:
        positions.causal_attention_random(_causal_attention, seed=7)
    assert str(err.value).startswith("`causal_attention` raised RuntimeError")
    assert "scaled-by-length" in err.value.mistakes and "sqrt(T)" in str(err.value)
    monkeypatch.setattr(CaseVerdicts, "__exit__", lambda *_: False)
    with pytest.raises(CheckFailed) as first_only:
        positions.causal_attention_random(_causal_attention, seed=7)
    assert "sqrt(T)" not in str(first_only.value)


def test_call_turns_not_implemented_into_a_sentence():
    def todo(x):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="not written yet"):
        checks.call(todo, 1)


def test_call_reports_the_crash_and_not_a_deep_traceback():
    def broken(x):
        return x @ torch.ones(3, 2)

    with pytest.raises(CheckFailed, match="raised RuntimeError") as info:
        checks.call(broken, torch.ones(2, 2))
    assert info.value._render_traceback_()[0].startswith("CheckFailed: ")


# As a notebook cell holds them: the hint reads the failing line.
CELL: dict = {}
run_cell(
    """
def no_keepdim(scores):
    return scores - scores.max(-1).values  # (B, T, T) - (B, T)

def batch_T(Q):
    return Q @ Q.T

def masked(scores, mask):
    return scores + mask  # (B, H, T, T) + (B, T)

def shifted(scores):
    return scores[..., 1:] - scores

def heads_typed(x):
    return x.view(x.shape[0], 12, -1)  # the course model's head count

def d_typed(x):
    d = 64
    return x.view(x.shape[0], -1, d)

def three_typed(x):
    return x.view(x.shape[0], 3, -1)  # 3: no model size

def renamed_mask(scores, mask):
    ext = (1.0 - mask[:, None, :]) * -10000.0  # (B, 1, T): no head dim
    return scores + ext

def batch_indexed(x, scores, mask):
    return scores.masked_fill(~mask[:, None], 0.0)  # as if mask were (B, T, T)
""",
    CELL,
)


def _no_keepdim_here(scores):  # not a cell: no line to read, the general hint
    return scores - scores.max(-1).values


@pytest.mark.parametrize(
    "fn, inputs, hint, not_hint",
    [
        (CELL["no_keepdim"], (torch.randn(2, 4, 4),), "keepdim=True", "mask"),
        (CELL["batch_T"], (torch.randn(2, 3, 4, 5),), ".transpose(-2, -1)", "mask"),
        (CELL["batch_T"], (torch.randn(2, 3, 4, 5),), ".transpose(-2, -1)", "keepdim"),
        (CELL["masked"], (torch.randn(2, 3, 4, 4), torch.ones(2, 4)), "(B, 1, T, T)", "keepdim"),
        (CELL["masked"], (torch.randn(2, 3, 4, 4), torch.rand(2, 4) < 0.5), "(B, 1, T, T)", "keepdim"),
        (CELL["masked"], (torch.randn(2, 3, 4, 4), torch.tensor([[0.0, -1e9, 0, 0]] * 2)), "(B, 1, T, T)", "keepdim"),
        (CELL["masked"], (torch.randn(2, 3, 4, 4), torch.randn(2, 4)), "equal or 1", "keepdim"),
        (CELL["shifted"], (torch.randn(2, 4, 4),), "equal or 1", ".T "),
        (_no_keepdim_here, (torch.randn(2, 4, 4),), "equal or 1", "keepdim"),
        (CELL["heads_typed"], (torch.randn(2, 16),), "asks for 12, typed", ".shape'"),
        (CELL["d_typed"], (torch.randn(2, 16),), "asks for 64, typed", "12,"),
        (CELL["three_typed"], (torch.randn(2, 16),), "the tensor's own .shape", "typed"),
        (CELL["renamed_mask"], (torch.randn(2, 3, 4, 4), torch.ones(2, 4)), "(B, 1, T, T)", "keepdim"),
        (CELL["batch_indexed"], (torch.randn(2, 7, 8), torch.randn(2, 3, 7, 7), torch.ones(7, 7).tril().bool()), "this mask is (T, T)", "keepdim"),
        (CELL["batch_indexed"], (torch.randn(2, 7, 8), torch.randn(2, 3, 7, 7), torch.ones(3, 7, 7).bool()), "(B, 1, T, T)", "this mask is (T, T)"),
    ],
)  # fmt: skip
def test_a_shape_error_gets_the_hint_of_its_inputs(fn, inputs, hint, not_hint):
    """Each example of the broadcast hint only where its situation is present: the
    mask's where a mask was given (told by its values), .T where the failing line
    has it on a batched input, keepdim where it reduces without one; else the
    general rule alone. A line reads as the lines that assign its names too: a
    mask renamed before it fails is still the mask, and a reshape that asks for a
    size of the course's models typed in (on its line or in a name it uses) gets
    that size named."""
    with pytest.raises(CheckFailed) as info:
        checks.call(fn, *inputs, name="f")
    assert hint in str(info.value) and not_hint not in str(info.value)


def test_a_negative_step_on_a_tensor_gets_its_hint():
    """[::-1] on a torch tensor (a numpy habit) raises "step must be greater than
    zero": the hint says tensors take no negative step and what reverses one, and
    names its mistake. Control: the same on a list runs."""

    def reversed_order(scores):
        return scores.argsort()[::-1][:2]

    with pytest.raises(CheckFailed) as info:
        checks.call(reversed_order, torch.tensor([0.1, 0.5, 0.4]), name="f")
    assert "step must be greater than zero" in str(info.value)
    assert ".flip(dims)" in str(info.value) and "descending=True" in str(info.value)
    assert info.value.mistakes == ("negative-step",)
    assert checks.call(lambda xs: xs[::-1], [1, 2, 3], name="f") == [3, 2, 1]


def test_a_view_of_an_expand_gets_the_hint_of_expand():
    """.view after an expand (on its line, or in a name it uses) cannot merge the
    repeated dim: the hint says why (the repeats share memory) and what works;
    after a transpose, the general .contiguous() hint."""

    cell: dict = {}
    run_cell(
        """
def expanded(x):
    repeated = x[:, None].expand(2, 3, 4)
    return repeated.view(6, 4)

def transposed(x):
    return x.T.view(-1)
""",
        cell,
    )
    with pytest.raises(CheckFailed) as info:
        checks.call(cell["expanded"], torch.randn(2, 4), name="f")
    assert "expand copies nothing" in str(info.value)
    with pytest.raises(CheckFailed) as info:
        checks.call(cell["transposed"], torch.randn(2, 4), name="f")
    assert "after a transpose" in str(info.value)


def test_call_rejects_non_callables():
    with pytest.raises(CheckFailed, match="should be a function"):
        checks.call(42)


def test_a_loop_over_a_0d_tensor_gets_its_hint():
    """squeeze() on topk's one index leaves a 0-d tensor, which a loop cannot
    iterate: the hint says so and names its mistake. Control: k = 2 runs."""

    def top(scores, k):
        return [int(j) for j in scores.topk(k).indices.squeeze()]

    with pytest.raises(CheckFailed) as info:
        checks.call(top, torch.tensor([0.1, 0.5, 0.4]), 1, name="f")
    assert "squeeze only the dim you mean" in str(info.value)
    assert info.value.mistakes == ("iterate-0d",)
    assert checks.call(top, torch.tensor([0.1, 0.5, 0.4]), 2, name="f") == [1, 2]
