"""The hub's hint service, without the hub: what it gives, refuses and records
(the hub itself, its tokens and a browser: tests/test_classroom.py)."""

import os
import pwd
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
import services

from course import hintbook, hints
from course.grading.hub import hintservice
from course.grading.settings import HintPolicy

A = "05_softmax_and_scaling"


@pytest.fixture
def record(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_LANG", "en")
    return hintservice.Record(tmp_path / "state" / "hints.sqlite")


def _ask(record, policy, student="ana", **asked):
    status, answer = hintservice.give(
        record, policy, student=student, asked=hints.Asked(**asked)
    )
    return status, answer["hint"], answer["key"]


def test_the_record_is_the_hub_s_alone_and_holds_each_hint(record):
    assert record.path.stat().st_mode & 0o777 == 0o600
    policy = HintPolicy()
    keys = [_ask(record, policy, exercise="softmax")[2] for _ in range(4)]
    assert keys == ["1", "2", "3", None]  # the last one again: nothing new
    _ask(record, policy, student="ben", exercise="softmax")
    rows = record.rows(A)
    assert [(r["student"], r["hint"]) for r in rows] == [
        ("ana", "1"), ("ana", "2"), ("ana", "3"), ("ben", "1"),
    ]  # fmt: skip
    assert record.rows("01_config") == []
    assert {r["cost"] for r in rows} == {0.0}  # free when given: free for good


def test_the_mistake_the_kernel_names_comes_first(record):
    policy = HintPolicy()
    status, hint, key = _ask(record, policy, exercise="softmax", mistake="wrong-dim")
    assert (status, key) == (200, "mistake:wrong-dim")
    assert hint["text"] == hintbook.mistake_hint(A, "softmax", "wrong-dim")
    assert _ask(record, policy, exercise="softmax", mistake="wrong-dim")[2] == "1"


def test_a_hint_that_costs_says_so_and_the_record_keeps_its_price(record):
    policy = HintPolicy(points_per_hint=0.5)
    _, hint, _ = _ask(record, policy, exercise="softmax")
    assert "costs 0.5 points" in hint["note"]
    _, again, key = _ask(record, policy, exercise="softmax", number=1)
    assert key is None and "costs" not in again["note"]  # shown again: free
    _ask(record, HintPolicy(points_per_hint=2.0), exercise="softmax")
    assert [r["cost"] for r in record.rows()] == [0.5, 2.0]


def test_a_mistake_key_the_kernel_makes_up_is_no_mistake(record):
    status, _, key = _ask(record, HintPolicy(), exercise="softmax", mistake="made-up")
    assert (status, key) == (200, "1")


def test_after_failure_the_service_waits_for_the_kernel_s_failed_test(record):
    policy = HintPolicy(unlock="after-failure")
    assert _ask(record, policy, exercise="split_heads")[2] == "1"
    assert _ask(record, policy, exercise="split_heads")[2] is None
    asked = {"exercise": "split_heads", "failed_since": True}
    assert _ask(record, policy, **asked)[2] == "2"


def test_refused_when_off_or_unknown(record):
    status, hint, key = _ask(record, HintPolicy(available=False), exercise="softmax")
    assert (status, key) == (403, None) and "turned hints off" in hint["text"]
    assert _ask(record, HintPolicy(), exercise="sofmax")[0] == 404
    assert record.rows() == []


def test_a_student_asking_in_a_loop_is_told_to_wait_and_others_are_not(record):
    now = [0.0]
    pace = hintservice.Pace(most=3, seconds=60, clock=lambda: now[0])

    def ask(student):
        status, answer = hintservice.give(
            record,
            HintPolicy(),
            student=student,
            asked=hints.Asked(exercise="softmax"),
            pace=pace,
        )
        return status, answer

    assert [ask("ana")[0] for _ in range(3)] == [200, 200, 200]
    status, answer = ask("ana")
    assert (status, answer["key"]) == (429, None)
    assert "Wait a minute" in answer["hint"]["text"]
    assert ask("ben")[0] == 200  # another student is not held up
    now[0] = 60.5  # the minute is over
    assert ask("ana")[0] == 200
    # ana: steps 1-3 (the last shown again records nothing), ben: step 1; the
    # refused request recorded nothing
    assert [(r["student"], r["hint"]) for r in record.rows()] == [
        ("ana", "1"),
        ("ana", "2"),
        ("ana", "3"),
        ("ben", "1"),
    ]


def test_a_request_s_body_is_read_strictly():
    asked = hintservice._asked(b'{"exercise": "softmax", "number": "2", "x": 1}')
    assert asked == hints.Asked(exercise="softmax", number=2)
    with pytest.raises(ValueError):
        hintservice._asked(b'{"exercise": "softmax", "number": "two"}')


@pytest.mark.skipif(os.geteuid() != 0, reason="runs a file as its owner (root)")
def test_the_policy_is_read_as_its_file_s_owner_never_as_the_hub():
    """The hub's user (root) never runs a file another account can write: the
    course's nbgrader_config.py runs in a process of its owner."""
    folder = Path(tempfile.mkdtemp(prefix="course-policy-"))
    folder.chmod(0o755)
    config = folder / "nbgrader_config.py"
    config.write_text(
        "import os\nc = get_config()\n"
        "c.HintPolicy.points_per_hint = float(os.getuid())\n"
        "c.HintPolicy.unlock = 'after-failure'\n"
    )
    shutil.chown(config, "nobody")
    try:
        with services.reachable_by_all(
            Path(sys.executable), Path(sys.base_prefix) / "lib"
        ):
            policy = hintservice.policy_as_owner(folder)
    finally:
        shutil.rmtree(folder)
    assert policy.points_per_hint == float(pwd.getpwnam("nobody").pw_uid)
    assert policy.unlock == "after-failure"
