"""Hints that cost points: charged into a real nbgrader gradebook as negative extra
credit on the exercise's test cells, and counted in the class report."""

from collections import Counter

import pytest

from course import hintbook
from course.grading import hintcharge, report

A = "01_config"
TESTS = hintbook.book()[A]["count_parameters"]["tests"]  # two cells


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
            gb.add_submission(A, student)
            for test, score in zip(TESTS, scores, strict=True):
                grade = gb.find_grade(test, A, A, student)
                grade.auto_score = score
        gb.db.commit()
    return url


def _scores(url: str) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(url) as gb:
        return {s: gb.find_submission(A, s).score for s in ("ana", "ben")}


def test_each_hint_costs_its_points_never_more_than_the_exercise_scored(gradebook):
    counts = Counter({("ana", A, "count_parameters"): 3,
                      ("ben", A, "count_parameters"): 4})  # fmt: skip
    charged = hintcharge.charge(db_url=gradebook, counts=counts, points_per_hint=0.5)
    assert charged == {("ana", A, "count_parameters"): 1.5,
                       ("ben", A, "count_parameters"): 1.0}  # fmt: skip
    assert _scores(gradebook) == {"ana": 0.5, "ben": 0.0}
    # Charged again (the next ``course grade``): the same, not twice as much.
    hintcharge.charge(db_url=gradebook, counts=counts, points_per_hint=0.5)
    assert _scores(gradebook) == {"ana": 0.5, "ben": 0.0}


def test_the_class_report_counts_hints_per_exercise(tmp_path):
    counts = Counter({("ana", A, "count_parameters"): 3,
                      ("ben", A, "count_parameters"): 1,
                      ("ben", A, "query_linear"): 2})  # fmt: skip
    charged = {("ana", A, "count_parameters"): 1.5}
    hintcharge.write(tmp_path, counts, charged)
    assert hintcharge.by_exercise(tmp_path, A) == {
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
        "c.HintPolicy.record = 'http://127.0.0.1:9'\n"
    )
    code, said = hintcharge.settle(root=tmp_path, assignments=[A], db_url="sqlite://")
    assert code == 1 and "could not be read" in said
