"""Real nbgrader autograde runs over fixture submissions, one assignment per test.

Per assignment: the reference solution earns every test cell's points, the untouched
release earns 0 everywhere and fails with a sentence (CheckFailed), the correct
alternatives earn full marks, and each misconception loses exactly the test cells it
names, with its message there.
"""

import json

import pytest
from harness import (
    autograde,
    drawn_seeds,
    fixture_module,
    graded_cells,
    has_piece,
    submissions,
)

from course import grading
from course.grading import cells

pytestmark = pytest.mark.slow  # a nbgrader autograde per fixture round


def _has_fixtures(assignment: str) -> bool:
    try:
        fixture_module(assignment)
    except ModuleNotFoundError:
        return False
    return True


def _problems(student, cells, scores, messages, expected, seeds):
    for cell in cells:
        score, max_score = scores[cell]
        message = messages.get(cell, "")
        drawn = f" [{seeds[cell]}]" if cell in seeds else ""  # to rerun it by hand
        if expected is None:  # the untouched release
            if score != 0 or not message.startswith("CheckFailed"):
                yield f"blank/{cell}{drawn}: {score}/{max_score} {message[:200]!r}"
        elif cell in expected:
            if score != 0 or not has_piece(message, expected[cell]):
                yield (
                    f"{student}/{cell}{drawn}: want 0 and {expected[cell]!r}, "
                    f"got {score}/{max_score} {message[:300]!r}"
                )
        elif score != max_score:
            yield f"{student}/{cell}{drawn}: lost points: {message[:300]!r}"


GRADED = [a for a in grading.assignments() if _has_fixtures(a)]


@pytest.mark.parametrize("assignment", GRADED)
def test_every_test_cell_is_lost_by_some_mutant(assignment):
    """No test cell promises what nothing tries: each autograded test cell is one
    a wrong answer of the fixtures must lose (08's odd widths were never tried)."""
    nb = json.loads(
        grading.notebook_path(grading.ROOT, "source", assignment).read_text()
    )
    tests = [
        cells.grade_id(c)
        for c in nb["cells"]
        if cells.is_test(c) and cells.is_test_id(cells.grade_id(c))
    ]
    lost = {t for m in fixture_module(assignment).MUTANTS for t in m.fails}
    assert [t for t in tests if t not in lost] == []


@pytest.mark.parametrize("assignment", GRADED)
def test_fixture_submissions_land_where_they_should(assignment, tmp_path, warm_env):
    root = grading.make_course(tmp_path / "course")
    grading.release([assignment], root)
    subs = submissions(root, assignment)
    release = grading.notebook_path(root, "release", assignment).read_text()
    subs["blank"] = (json.loads(release), None)
    scores, messages = autograde(root, assignment, subs, warm_env=warm_env)
    cells = graded_cells(scores["reference"])
    assert len(cells) >= 2, "the assignment has too few autograded test cells"
    problems = [
        line
        for student, (_, expected) in subs.items()
        for line in _problems(
            student,
            cells,
            scores[student],
            messages[student],
            expected,
            drawn_seeds(root, assignment, student),
        )
    ]
    assert not problems, "\n".join(problems)


def test_feedback_shows_verdicts_but_no_hidden_test_source(tmp_path, warm_env):
    """Feedback of a wrong submission: the message is there, the hidden code is not."""
    assignment = GRADED[0]
    root = grading.make_course(tmp_path / "course")
    grading.release([assignment], root)
    subs = {k: v for k, v in submissions(root, assignment).items() if k == "mutants0"}
    autograde(root, assignment, subs, warm_env=warm_env)
    grading.nbgrader("generate_feedback", assignment, "--force", root=root)
    html = (
        root / "feedback" / "mutants0" / assignment / f"{assignment}.html"
    ).read_text()
    assert "CheckFailed" in html
    for secret in ("BEGIN HIDDEN", "seed=", "most recent call last", "course/checks"):
        assert secret not in html, f"feedback shows {secret!r}"
