"""One work folder for every command: found from where a command runs, the
course folder it is given, or the folder ``course lab`` opened."""

import pytest

from course import cli, work

A = "05_softmax_and_scaling"


@pytest.fixture
def course(tmp_path, monkeypatch):
    """A course folder whose ``mywork/`` holds one assignment; a home of its own."""
    monkeypatch.delenv(work.ENV, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    (tmp_path / "course" / "mywork" / A).mkdir(parents=True)
    return tmp_path / "course"


def test_the_work_folder_is_found_from_inside_it(course):
    mine = course / "mywork"
    assert work.home(start=mine / A) == mine
    assert work.home(start=mine) == mine
    (mine / "notes").mkdir()
    assert work.home(start=mine / "notes") == mine


def test_outside_it_the_course_folder_then_lab_decides(course, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert work.home() == elsewhere / "mywork"  # nothing known yet
    assert work.home(root=course) == course / "mywork"
    assert work.home(root=course, lang="zh") == course / "mywork-zh"
    work.remember(course / "mywork", lang="en")
    assert work.home() == course / "mywork"
    assert work.home(lang="zh") == elsewhere / "mywork-zh"  # each edition its own
    monkeypatch.setenv(work.ENV, str(tmp_path / "set"))
    assert work.home(start=course / "mywork" / A) == tmp_path / "set"


def test_hint_and_progress_use_the_folder_check_records_in(course, monkeypatch):
    """Run from the course folder, from the work folder and from an assignment
    folder, ``hint`` and ``progress`` read the record ``check`` writes."""
    mine = course / "mywork"
    parser = cli.build_parser()
    for where in (course, mine, mine / A):
        monkeypatch.chdir(where)
        for command in (["hint", "softmax"], ["progress"]):
            args = parser.parse_args(command)
            assert cli._student_work(args) == mine, (where, command)
    monkeypatch.chdir(course.parent)
    args = parser.parse_args(["progress", f"--root={course}"])
    assert cli._student_work(args) == mine
