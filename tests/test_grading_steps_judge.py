"""The judge decides a test cell from its evidence, in the grader's own process."""

import json

import pytest
import torch
from nbformat import NotebookNode

from course import models
from course.checks import config as config_checks
from course.checks import evidence
from course.grading import enames
from course.grading.steps import flags, judge


def _recorded(check, fn, monkeypatch) -> list[dict]:
    """The evidence a grading kernel publishes while ``check(fn)`` runs."""
    out = []
    monkeypatch.setenv(evidence.ENV, "1")
    monkeypatch.setattr(
        evidence, "_publish", lambda r: out.append(json.loads(json.dumps(r)))
    )
    check(fn)
    monkeypatch.delenv(evidence.ENV)
    return out


def _test_cell(source: str, records: list[dict]) -> NotebookNode:
    outputs = [
        NotebookNode(output_type="display_data", data={evidence.MIME: r}, metadata={})
        for r in records
    ]
    return NotebookNode(cell_type="code", source=source, outputs=outputs)


def test_what_a_student_call_does_to_the_oracle_model_ends_with_the_check(
    monkeypatch,
):
    """A query_linear that also zeroes a weight and changes the config of the model
    it is given: replayed, the check still sees it, later checks do not."""
    oracle = models.oracle_model()
    value = oracle.encoder.layer[0].attention.self.value
    heads = oracle.config.num_attention_heads

    def query_linear(model, layer_index):
        value = model.encoder.layer[0].attention.self.value
        value.weight.data = torch.zeros_like(value.weight)
        model.config.num_attention_heads = 1
        return model.encoder.layer[layer_index].attention.self.query

    kept = value.weight.data
    records = _recorded(
        config_checks.query_linear_first_layer, query_linear, monkeypatch
    )
    value.weight.data, oracle.config.num_attention_heads = kept, heads  # a new process
    assert records and records[0]["effects"]  # the kernel saw the change

    cell = _test_cell("check.query_linear_first_layer(query_linear)", records)
    outputs, line = judge.verdict(cell, {"check": config_checks})

    assert (outputs, line) == ([], "ok")
    assert value.weight.data_ptr() == kept.data_ptr()
    assert torch.equal(value.weight, kept)
    assert oracle.config.num_attention_heads == heads


def test_an_answer_is_judged_against_what_the_check_had_before_calling_it(
    monkeypatch,
):
    """A head_params that zeroes the Linear it is handed, in place, and returns
    the zeros (the attack: full marks, the check compared with the zeroed module).
    The check's truth is taken before the call: it fails, in the kernel and in
    the grader's replay alike."""
    import pytest

    from course.checks import CheckFailed, heads

    def head_params(linear, head, d):
        with torch.no_grad():
            linear.weight.zero_()
            linear.bias.zero_()
        return linear.weight[head * d : (head + 1) * d], linear.bias[:d]

    query = models.oracle_model().encoder.layer[0].attention.self.query
    kept = query.weight.detach().clone(), query.bias.detach().clone()
    try:
        with pytest.raises(CheckFailed, match="W_h"):
            records = []
            monkeypatch.setattr(
                evidence,
                "_publish",
                lambda r: records.append(json.loads(json.dumps(r))),
            )
            monkeypatch.setenv(evidence.ENV, "1")
            heads.head_params_weight(head_params)
    finally:  # a new process: the grader's own module, as it was
        monkeypatch.delenv(evidence.ENV)
        with torch.no_grad():
            query.weight.copy_(kept[0])
            query.bias.copy_(kept[1])
    assert records and records[0]["effects"]  # the kernel saw the change
    cell = _test_cell("check.head_params_weight(head_params)", records)
    outputs, line = judge.verdict(cell, {"check": heads})
    assert line != "ok" and "W_h" in line, line
    assert torch.equal(query.weight, kept[0])  # and the module is the grader's again


def _kernel_and_judge(check_module, call: str, answer: str, monkeypatch):
    """``(kernel's verdict, judge's log line)`` of the test cell ``call`` on the
    answer cell ``answer``: recorded as a grading kernel runs it, then replayed."""
    from course.checks import CheckFailed

    student = {"__name__": "student"}
    exec(answer, student)  # noqa: S102 - the test's own answer
    student["check"] = check_module
    records = []
    monkeypatch.setattr(
        evidence, "_publish", lambda r: records.append(json.loads(json.dumps(r)))
    )
    monkeypatch.setenv(evidence.ENV, "1")
    try:
        exec(call, student)  # noqa: S102
        kernel = "ok"
    except CheckFailed as err:
        kernel = str(err)
    finally:
        monkeypatch.delenv(evidence.ENV)
    _, line = judge.verdict(_test_cell(call, records), {"check": check_module})
    return kernel, line


HEAD_OFFSET_THEN_ZERO = """
import torch
def head_params(linear, head, d):
    W_h = linear.weight[head:head + d].detach().clone()  # rows [h:h+d]: head 0 only
    b_h = linear.bias[head:head + d].detach().clone()
    with torch.no_grad():
        linear.weight.zero_(); linear.bias.zero_()  # so head 5's truth is zeros
    return W_h, b_h
"""
QUERY_IS_A_COPY_OF_KEY = """
import copy
def query_linear(model, layer_index):
    attn = model.encoder.layer[layer_index].attention.self
    attn.query = copy.deepcopy(attn.key)
    return attn.query
"""
ENCODER_WITHOUT_EMBEDDINGS = """
import torch
def bert_encoder(input_ids, token_type_ids, model, attention_mask):
    with torch.no_grad():
        out = model(input_ids=input_ids, token_type_ids=token_type_ids,
                    attention_mask=attention_mask, output_hidden_states=True)
    model.config.num_hidden_layers -= 1  # the config now agrees with L tensors
    return tuple(out.hidden_states[1:])
"""
MHSA_ON_A_ZEROED_INPUT = """
import torch
from torch import nn
class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h = num_heads
        self.q_proj, self.k_proj = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.v_proj, self.out_proj = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
    def forward(self, x, mask=None):
        B, T, D = x.shape
        x.zero_()  # what any attention gives on zeros: even weights, out_proj(v bias)
        allowed = torch.ones(T, T) if mask is None else mask.float()
        allowed = allowed.expand(B, T, T) if allowed.dim() == 2 else allowed
        probs = (allowed / allowed.sum(-1, keepdim=True))[:, None].expand(B, self.h, T, T)
        return self.out_proj(self.v_proj.bias).expand(B, T, D).clone(), probs.clone()
"""


@pytest.mark.parametrize(
    ("module", "call", "answer", "named"),
    [
        (
            "heads",
            "check.head_params_weight(head_params)",
            HEAD_OFFSET_THEN_ZERO,
            "h*d",
        ),
        ("heads", "check.head_params_bias(head_params)", HEAD_OFFSET_THEN_ZERO, "b_h"),
        (
            "config",
            "check.query_linear_first_layer(query_linear)",
            QUERY_IS_A_COPY_OF_KEY,
            "query",
        ),
        (
            "layer",
            "check.bert_encoder_length(bert_encoder)",
            ENCODER_WITHOUT_EMBEDDINGS,
            "L + 1",
        ),
        (
            "transformer",
            "check.mhsa_values(MultiHeadSelfAttention)",
            MHSA_ON_A_ZEROED_INPUT,
            "probs",
        ),
        (
            "transformer",
            "check.mhsa_mask(MultiHeadSelfAttention)",
            MHSA_ON_A_ZEROED_INPUT,
            "probs",
        ),
    ],
    ids=[
        "head_params weight",
        "head_params bias",
        "query_linear",
        "bert_encoder",
        "mhsa",
        "mhsa mask",
    ],
)
def test_a_wrong_answer_that_changes_its_inputs_in_place_fails(
    module, call, answer, named, monkeypatch
):
    """Each of these earned full marks when the check handed the student its own
    objects and read its truth from them after the call (an attacker's review: the
    second head's truth zeroed by the first call, the key installed as the query,
    the config told one layer fewer, the input zeroed before the reference saw
    it). The student's code gets copies; kernel and grader both fail it."""
    import importlib

    checks = importlib.import_module(f"course.checks.{module}")
    kernel, line = _kernel_and_judge(checks, call, answer, monkeypatch)
    assert kernel != "ok" and named in kernel, kernel
    assert line != "ok", line


@pytest.mark.parametrize(
    ("module", "call", "answer"),
    [
        (
            "debugging",
            "check.key_mask_values(key_mask)",
            "def key_mask(attention_mask):\n"
            "    attention_mask.unsqueeze_(1).unsqueeze_(1)\n"
            "    return attention_mask == 1\n",
        ),
        (
            "layer",
            "check.feed_forward_values(feed_forward)",
            "import torch.nn.functional as F\n"
            "def feed_forward(a, layer):\n"
            "    a += layer.output.dense(F.gelu(layer.intermediate.dense(a)))\n"
            "    return layer.output.LayerNorm(a)\n",
        ),
    ],
    ids=["key_mask unsqueeze_", "feed_forward +="],
)
def test_a_right_answer_that_changes_its_own_arguments_passes(
    module, call, answer, monkeypatch
):
    """Right answers written in place: one was told "gave no result" by the grader
    (its inputs' digest was taken after the call in the kernel, before it in the
    replay), the other "dropout is active" (both calls shared one input)."""
    import importlib

    checks = importlib.import_module(f"course.checks.{module}")
    assert _kernel_and_judge(checks, call, answer, monkeypatch) == ("ok", "ok")


def _cell(source: str, grade_id: str, *, test: bool, error: str | None = None):
    """A code cell of an answer or a test, with a kernel error output if given."""
    meta = {"grade_id": grade_id, "grade": test, "solution": not test}
    meta |= {"locked": test, "points": 1} if test else {"locked": False}
    outputs = []
    if error is not None:
        ename, _, evalue = error.partition(": ")
        outputs = [{"output_type": "error", "ename": ename, "evalue": evalue}]
    return NotebookNode(
        cell_type="code",
        source=source,
        metadata={"nbgrader": meta},
        outputs=[NotebookNode(o) for o in outputs],
    )


def _notebook(head_params_fails: bool) -> NotebookNode:
    return NotebookNode(
        cells=[
            _cell("def head_params(linear, h, d):\n    return 1, 2", "head_params", test=False),
            _cell(
                "check.head_params_weight(head_params)",
                "test_head_params_weight",
                test=True,
                error="CheckFailed: the head lives in rows" if head_params_fails else None,
            ),
            _cell(
                "def project_head(x, linear, h, d):\n    W, b = head_params(linear, h, d)\n    return x @ W.T + b",
                "project_head",
                test=False,
            ),
            _cell(
                "check.project_head_course(project_head)",
                "test_project_head_course",
                test=True,
                error="CheckFailed: project with `x @ W_h.T`",
            ),
            _cell("Q = project_head(x, q, 0, d)", "first_head_qkv", test=False, error="RuntimeError: shapes"),
            _cell("check.first_head_q(Q)", "test_first_head_qkv_q", test=True, error="NameError: name 'Q' is not defined"),
        ],
        metadata={},
    )  # fmt: skip


def test_a_verdict_names_the_earlier_exercise_it_builds_on():
    """03: after a wrong head_params, project_head's verdict starts with that cause;
    with head_params right it is project_head's own verdict alone."""
    from course.grading.steps.scan import read

    for fails in (True, False):
        nb = _notebook(head_params_fails=fails)
        judge.name_upstream_causes(nb, read(nb).needs)
        said = nb.cells[3].outputs[0]["evalue"]
        cause = "`head_params`, which `project_head` builds on, fails its own tests"
        assert said.startswith(cause) == fails, said
        assert said.endswith("project with `x @ W_h.T`")
        assert nb.cells[1].outputs[0]["evalue"] if fails else not nb.cells[1].outputs


def test_an_undefined_name_says_its_answer_cell_raised():
    nb = _notebook(head_params_fails=False)
    raised = judge.raised_before_defining(nb)
    assert raised == {"Q": "RuntimeError"}
    said = judge._kernel_error(nb.cells[5], raised)["evalue"]
    assert "`Q` is not defined: its answer cell raised RuntimeError" in said
    assert "write and run" in judge._kernel_error(nb.cells[5], {})["evalue"]


def test_what_a_student_shows_in_a_test_cell_is_not_its_verdict(monkeypatch):
    """A wrong softmax that, called by the check, shows "all tests passed" in the
    test cell and publishes a forged record of the right answer for its own call
    (the digest is the kernel's to compute): the test cell's outputs are the
    judge's alone, and the forged record buys nothing."""
    from course.checks import CheckFailed
    from course.checks import softmax as softmax_checks

    shown = [
        NotebookNode(
            output_type="display_data",
            data={"text/html": "<b>All tests passed</b>"},
            metadata={},
        ),
        NotebookNode(output_type="stream", name="stdout", text="All tests passed\n"),
    ]

    def right(x, dim):
        e = (x - x.amax(dim, keepdim=True)).exp()
        return e / e.sum(dim, keepdim=True)

    def softmax(x, dim=-1):
        forged = {
            "name": "softmax",
            "digest": evidence.digest("softmax", (x, dim), {}),
            "outcome": evidence.to_wire(evidence.Returned(right(x, dim)), (x, dim)),
            "rng": None,
            "effects": {},
        }
        evidence._publish(forged)
        return x.exp() / x.exp().sum(0, keepdim=True)  # over dim 0: wrong

    def rows(fn):
        with pytest.raises(CheckFailed):  # in the kernel too, it fails
            softmax_checks.softmax_rows(fn)

    records = _recorded(rows, softmax, monkeypatch)
    assert len(records) == 2 and records[0]["outcome"] != records[1]["outcome"]
    cell = _test_cell("check.softmax_rows(softmax)", records)
    cell.outputs = shown + cell.outputs
    cell.metadata = {"nbgrader": {"grade": True, "grade_id": "t", "points": 1}}
    nb = NotebookNode(cells=[cell], metadata={})
    monkeypatch.setattr(judge, "check_modules", lambda nb: {"check": softmax_checks})
    judge.JudgeEvidence().preprocess(nb, {})

    texts = json.dumps(cell.outputs)
    assert "All tests passed" not in texts
    assert [o.ename for o in cell.outputs] == [enames.TAMPERED]
    assert flags.flags(nb) == [
        "tampering: this test cell holds a result its check "
        "never asked for, published by the answer's own code"
    ]
    # the control: alone, the forged record is a right answer's
    forged = _test_cell("check.softmax_rows(softmax)", records[:1])
    assert judge.verdict(forged, {"check": softmax_checks}) == ([], "ok")


def test_a_failed_verdict_keeps_the_keys_of_the_mistakes_it_names(
    monkeypatch, tmp_path
):
    """The replayed check names softmax over dim 0: the cell's metadata keeps its
    key, and what ``course check`` reads of the graded notebook carries it."""
    from course.checks import CheckFailed
    from course.checks import softmax as softmax_checks
    from course.grading import cells
    from course.i18n import mistakes_of

    def softmax(x, dim=-1):
        return x.exp() / x.exp().sum(0, keepdim=True)

    def rows(fn):
        with pytest.raises(CheckFailed):
            softmax_checks.softmax_rows(fn)

    cell = _test_cell(
        "check.softmax_rows(softmax)", _recorded(rows, softmax, monkeypatch)
    )
    cell.metadata = {"nbgrader": {"grade": True, "grade_id": "t", "points": 1}}
    cell.outputs, _ = judge.verdict(cell, {"check": softmax_checks})
    assert cell.metadata[cells.MISTAKES] == ["wrong-dim"]
    path = tmp_path / "graded.ipynb"
    path.write_text(json.dumps({"cells": [cell]}))
    assert mistakes_of(cells.error_messages(path)["t"]) == ("wrong-dim",)
    # the control: replayed right, the cell names nothing (a key left from an
    # earlier verdict goes)
    right = _test_cell(
        "check.softmax_rows(softmax)",
        _recorded(
            softmax_checks.softmax_rows,
            lambda x, dim=-1: (
                (e := (x - x.amax(dim, keepdim=True)).exp()) / e.sum(dim, keepdim=True)
            ),
            monkeypatch,
        ),
    )
    right.metadata = {cells.MISTAKES: ["wrong-dim"]}
    assert judge.verdict(right, {"check": softmax_checks}) == ([], "ok")
    assert cells.MISTAKES not in right.metadata
