"""course.checks.calls: the verdicts of a check's parts, each part tried even after
one failed (CaseVerdicts), so that a second mistake is named too."""

import math

import pytest
import torch
import torch.nn.functional as F

from course import i18n
from course.checks import CheckFailed, ShortcutUsed, fail, positions
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
    assert "另外：" in str(err)


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
