"""The class report counts students, groups verdicts by exercise and lists the
submissions the instructor should review."""

import csv
from collections import Counter

from course.grading.run import report

ANSWERS = ["split_heads", "merge_heads"]
SAME = "CheckFailed: split_heads without a transpose mixes heads (your input was x)"


def test_a_verdict_counts_each_student_once_per_exercise():
    messages = {  # each student fails three test cells of one exercise alike
        s: {f"test_split_heads_{k}": SAME for k in ("shape", "bertviz", "random")}
        for s in ("ana", "ben", "chen")
    }
    messages["ana"]["test_merge_heads_values"] = "CheckFailed: transpose back\nmore"
    got = report.verdicts_by_exercise(messages, ANSWERS)
    assert got["split_heads"] == {SAME: 3}  # students, not test cells (9)
    assert got["merge_heads"] == {"CheckFailed: transpose back": 1}
    table = report._verdict_table(got, ANSWERS)
    assert "(your input was x)" in table  # whole, never cut mid-word
    assert table.index("split_heads") < table.index("merge_heads")  # course order


def test_the_verdict_table_does_not_depend_on_the_counting_order():
    """Tied verdicts come in one order: two runs that give the same verdicts give
    the same report, whatever order a set of messages was counted in."""
    verdicts = [f"CheckFailed: mistake {k}" for k in "fedcbagh"]
    tables = {
        report._verdict_table({"split_heads": Counter(dict.fromkeys(order, 1))}, [])
        for order in (verdicts, verdicts[::-1], sorted(verdicts))
    }
    assert len(tables) == 1
    (table,) = tables
    assert "mistake a" in table and "mistake f" not in table  # five, a to e


def test_flagged_and_failed_submissions_are_listed_with_their_reasons(tmp_path):
    rows = [
        ("ana", "01_config", "graded", "3.0", ""),
        ("ben", "01_config", "flagged", "4.0", "output was truncated"),
        ("chen", "01_config", "failed", "1.0", "no notebook 01_config.ipynb"),
        ("dan", "02_outputs", "flagged", "2.0", "tampering: x"),
    ]
    with open(tmp_path / report.LOG_FILE, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["student", "assignment", "status", "seconds", "reasons"])
        out.writerows(rows)
    html = report._to_review(tmp_path, "01_config")
    assert "ben" in html and "output was truncated" in html
    assert "chen" in html and "no notebook" in html
    assert "ana" not in html and "dan" not in html
    assert report._to_review(tmp_path / "nowhere", "01_config") == ""
