"""course.checks.evidence: what leaves the kernel, and how the grader reads it back."""

import json

import pytest
import torch

from course.checks import CheckFailed, call, evidence


@pytest.fixture
def records(monkeypatch):
    """Record mode, as in a grading kernel; the records as nbformat stores them."""
    out = []
    monkeypatch.setenv(evidence.ENV, "1")
    monkeypatch.setattr(
        evidence, "_publish", lambda r: out.append(json.loads(json.dumps(r)))
    )
    return out


def test_replay_answers_calls_in_order_and_knows_their_inputs(records, monkeypatch):
    x = torch.randn(3)
    assert torch.equal(call(torch.exp, x, name="f"), x.exp())
    with pytest.raises(CheckFailed, match="raised ValueError: no"):
        call(_raises, x, name="g")
    monkeypatch.delenv(evidence.ENV)
    with evidence.replaying(records):
        assert torch.equal(call(None, x, name="f"), x.exp())  # fn is not run
        with pytest.raises(CheckFailed, match="raised ValueError: no"):
            call(None, x, name="g")
    with evidence.replaying(records), pytest.raises(evidence.Missing):
        call(None, torch.zeros(4), name="f")  # other inputs: not this record
    with evidence.replaying([]), pytest.raises(evidence.Missing):
        call(None, x, name="f")


def test_a_shared_argument_s_change_reaches_the_grader_s_object(records, monkeypatch):
    """A check that hands over its own object (``share=True``: is the original
    left as it was?) sees in the replay what the call did to it in the kernel."""
    kernel_side = torch.zeros(3)
    call(lambda t: t.add_(1), kernel_side, name="f", share=True)
    assert torch.equal(kernel_side, torch.ones(3))
    monkeypatch.delenv(evidence.ENV)
    grader_side = torch.zeros(3)
    with evidence.replaying(records):
        call(None, grader_side, name="f", share=True)
    assert torch.equal(grader_side, torch.ones(3))


def test_by_default_the_student_s_code_changes_only_its_own_copy(records, monkeypatch):
    kernel_side = torch.zeros(3)
    assert torch.equal(call(lambda t: t.add_(1), kernel_side, name="f"), torch.ones(3))
    assert torch.equal(kernel_side, torch.zeros(3))
    monkeypatch.delenv(evidence.ENV)
    grader_side = torch.zeros(3)
    with evidence.replaying(records):
        assert torch.equal(call(None, grader_side, name="f"), torch.ones(3))
    assert torch.equal(grader_side, torch.zeros(3))


def _raises(x):
    raise ValueError("no")
