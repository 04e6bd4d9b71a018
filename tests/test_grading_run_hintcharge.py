"""Hints that cost points: charged into a real nbgrader gradebook as negative extra
credit on the exercise's test cells, and counted in the class report."""

from datetime import UTC, datetime

import pytest

from course import hintbook
from course.grading.run import hintcharge, report

A = "01_config"
TESTS = hintbook.book()[A]["count_parameters"]["tests"]  # two cells
STAMP = "2026-12-01 10:00:00 UTC"  # when the graded submissions were made
SUBMITTED = datetime(2026, 12, 1, 10, tzinfo=UTC).timestamp()


@pytest.fixture
def gradebook(tmp_path):
    """01's count_parameters cells, 1 point each: ana got both, ben one."""
    from nbgrader.api import Gradebook

    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(url) as gb:
        gb.add_assignment(A)
        gb.add_notebook(A, A)
        for test in TESTS:
            gb.add_grade_cell(test, A, A, max_score=1, cell_type="code")
        for student, scores in {"ana": [1, 1], "ben": [0, 1]}.items():
            gb.add_student(student)
            gb.add_submission(A, student, timestamp=STAMP)
            for test, score in zip(TESTS, scores, strict=True):
                grade = gb.find_grade(test, A, A, student)
                grade.auto_score = score
        gb.db.commit()
    return url


def _scores(url: str) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(url) as gb:
        return {s: gb.find_submission(A, s).score for s in ("ana", "ben")}


def _rows(student: str, n: int, cost: float, at: float = SUBMITTED - 60) -> list:
    """``n`` hints on count_parameters, as the service's record gives them."""
    return [
        {"time": at + i, "student": student, "assignment": A,
         "exercise": "count_parameters", "hint": str(i + 1), "cost": cost}
        for i in range(n)
    ]  # fmt: skip


def test_each_hint_costs_its_price_never_more_than_the_exercise_scored(gradebook):
    rows = _rows("ana", 3, 0.5) + _rows("ben", 4, 0.5)
    charged = hintcharge.charge(db_url=gradebook, rows=rows)
    assert charged == {("ana", A, "count_parameters"): 1.5,
                       ("ben", A, "count_parameters"): 1.0}  # fmt: skip
    assert _scores(gradebook) == {"ana": 0.5, "ben": 0.0}
    # Charged again (the next ``course grade``): the same, not twice as much.
    hintcharge.charge(db_url=gradebook, rows=rows)
    assert _scores(gradebook) == {"ana": 0.5, "ben": 0.0}


def test_a_hint_asked_after_the_submission_costs_it_nothing(gradebook):
    rows = _rows("ana", 1, 0.5) + _rows("ana", 2, 0.25, at=SUBMITTED + 60)
    charged = hintcharge.charge(db_url=gradebook, rows=rows)
    assert charged == {("ana", A, "count_parameters"): 0.5}
    assert hintcharge.tally(rows) == {("ana", A, "count_parameters"): (3, 1.0)}


def test_an_instructor_s_waiver_stays(gradebook):
    """Extra credit of zero or more on a cell is the instructor's: left as it is."""
    from nbgrader.api import Gradebook

    with Gradebook(gradebook) as gb:
        gb.find_grade(TESTS[0], A, A, "ana").extra_credit = 0.0  # waived
        gb.db.commit()
    assert hintcharge.charge(db_url=gradebook, rows=_rows("ana", 3, 0.5)) == {
        ("ana", A, "count_parameters"): 1.0  # only what the other cell scored
    }
    assert _scores(gradebook)["ana"] == 1.0


def test_the_class_report_counts_hints_per_exercise(tmp_path):
    tally = {("ana", A, "count_parameters"): (3, 1.5),
             ("ben", A, "count_parameters"): (1, 0.0),
             ("ben", A, "query_linear"): (2, 0.0)}  # fmt: skip
    charged = {("ana", A, "count_parameters"): 1.5}
    path = hintcharge.write(tmp_path, tally, charged, assignments=[A])
    assert path.stat().st_mode & 0o777 == 0o600
    assert report.hints_by_exercise(tmp_path, A) == {
        "count_parameters": (4, 2, 1.5),
        "query_linear": (2, 1, 0.0),
    }
    table = report._hint_table(tmp_path, A, ["count_parameters", "query_linear"])
    assert table.index("count_parameters") < table.index("query_linear")
    assert report._hint_table(tmp_path, "05_softmax_and_scaling", []) == ""


def test_costly_hints_without_a_record_charge_nothing_and_say_so(tmp_path):
    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()\nc.HintPolicy.points_per_hint = 1.0\n"
    )
    code, said = hintcharge.settle(root=tmp_path, assignments=[A], db_url="sqlite://")
    assert code == 1 and "no hint was charged" in said
    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()\nc.HintPolicy.points_per_hint = 1.0\n"
        f"c.HintPolicy.record = '{tmp_path / 'no.sock'}'\n"
    )
    code, said = hintcharge.settle(root=tmp_path, assignments=[A], db_url="sqlite://")
    assert code == 1 and "could not be read" in said


def test_the_feedback_says_what_the_hints_took(gradebook):
    """Under a charged test cell, once, in the student's feedback."""
    import nbformat

    from course.grading.steps.feedback import ExplainHintCharges

    hintcharge.charge(db_url=gradebook, rows=_rows("ana", 1, 0.5))
    cells = [
        nbformat.v4.new_code_cell(
            "check.x()",
            id=test,
            metadata={
                "nbgrader": {
                    "grade": True,
                    "solution": False,
                    "locked": True,
                    "grade_id": test,
                    "points": 1,
                }
            },
        )  # fmt: skip
        for test in TESTS
    ]
    nb = nbformat.v4.new_notebook(cells=cells)
    ids = {"db_url": gradebook, "notebook": A, "assignment": A, "student": "ana"}
    for _ in range(2):  # nbgrader's steps and the HTML exporter's: said once
        ExplainHintCharges().preprocess(nb, {"nbgrader": ids})
    said = [[o["text"] for o in c.outputs] for c in nb.cells]
    assert said == [["Hints you asked on this exercise took 0.5 of this cell's "
                     "points (your instructor's hint policy).\n"], []]  # fmt: skip


def test_settling_one_assignment_keeps_the_other_s_rows(tmp_path):
    """``course feedback 05`` after ``course grade 01 05``: 01's rows stay."""
    other = "05_softmax_and_scaling"
    first = {
        ("ana", A, "count_parameters"): (2, 1.0),
        ("ana", other, "softmax"): (1, 0.5),
    }
    hintcharge.write(tmp_path, first, {}, assignments=[A, other])
    again = {("ben", other, "softmax"): (3, 1.5)}
    hintcharge.write(tmp_path, again, {("ben", other, "softmax"): 1.0},
                     assignments=[other])  # fmt: skip
    assert report.hints_by_exercise(tmp_path, A) == {"count_parameters": (2, 1, 0.0)}
    assert report.hints_by_exercise(tmp_path, other) == {"softmax": (3, 1, 1.0)}


def test_course_feedback_settles_the_charge_before_it_writes_a_page(
    tmp_path, capsys, monkeypatch
):
    """Costly hints without a record are said first, with exit status 1, as
    ``course grade`` does; each page is written after that."""
    from course import cli, grading

    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()\nc.HintPolicy.points_per_hint = 1.0\n"
    )
    assert cli.main(["feedback", A, f"--root={tmp_path}"]) == 0  # nothing graded
    assert "nothing autograded" in capsys.readouterr().out
    (tmp_path / "autograded").mkdir()
    said_before = []
    monkeypatch.setattr(
        grading, "nbgrader", lambda *a, **k: said_before.append(capsys.readouterr().out)
    )
    assert cli.main(["feedback", A, f"--root={tmp_path}"]) == 1
    assert len(said_before) == 1 and "no hint was charged" in said_before[0]
    # Free hints: nothing to charge, nothing said of them.
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\n")
    assert cli.main(["feedback", A, f"--root={tmp_path}"]) == 0
    assert "hint" not in said_before[-1]
