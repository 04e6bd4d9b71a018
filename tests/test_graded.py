"""One answer to "does nbgrader run this kernel?" for hints, worked answers and
progress."""

import pytest

from course import graded


@pytest.mark.parametrize(
    ("env", "runs"),
    [
        ({}, False),
        ({graded.NBGRADER: "validate"}, True),
        ({graded.NBGRADER: "autograde"}, True),
        ({graded.EVIDENCE: "1"}, True),
        ({graded.EVIDENCE: "0"}, False),
        ({graded.NBGRADER: ""}, False),
    ],
)
def test_nbgrader_runs_reads_nbgrader_s_and_the_grader_s_variables(
    monkeypatch, env, runs
):
    for name in (graded.NBGRADER, graded.EVIDENCE):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert graded.nbgrader_runs() is runs


def test_the_grader_s_evidence_variable_is_the_one_the_checks_read():
    from course.checks import evidence

    assert evidence.ENV == graded.EVIDENCE
