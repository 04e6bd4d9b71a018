"""The judge decides a test cell from its evidence, in the grader's own process."""

import json

import torch
from nbformat import NotebookNode

from course import models
from course.checks import config as config_checks
from course.checks import evidence
from course.grading import judge


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
    from course.grading.scan import read

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
