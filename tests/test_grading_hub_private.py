"""What the hub makes private from students, checked by a real other account."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest
import services

from course import hintbook
from course.grading.hub import private

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="reads as nobody (root)")


def _nobody_reads(path: Path) -> bool:
    return services.can_read("nobody", path)


@pytest.fixture
def project():
    """A project folder as a checkout leaves it: everything readable by all."""
    folder = Path(tempfile.mkdtemp(prefix="course-private-"))
    folder.chmod(0o755)
    for rel in ("source/01/01.py", "tests/fixtures/a01.py", ".git/HEAD",
                "course/checks.py", "release/01/01.ipynb", "gradebook.db"):  # fmt: skip
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
        for p in [path, *path.relative_to(folder).parents]:
            (folder / p).chmod(0o755 if (folder / p).is_dir() else 0o644)
    yield folder
    shutil.rmtree(folder)


def test_the_instructor_s_parts_are_sealed_the_student_s_left(project):
    found = private.secrets(project=project, course_root=project, state=project / "x")
    mine = {p.relative_to(project).as_posix() for p in found if project in p.parents}
    assert mine == {"source", "tests", ".git", "gradebook.db"}
    assert hintbook.TEXTS in found  # and the hints' texts, with their translation
    assert any(p.name == "hinttexts.mo" for p in found)
    assert {p.name for p in found} >= {"worked.json"}  # and the worked answers
    ours = [p for p in found if project in p.parents]
    assert _nobody_reads(project / "source" / "01" / "01.py")  # before
    assert sorted(private.seal(ours)) == sorted(ours)
    assert not _nobody_reads(project / "source" / "01" / "01.py")
    assert not _nobody_reads(project / "tests" / "fixtures" / "a01.py")
    assert not _nobody_reads(project / "gradebook.db")
    assert not _nobody_reads(project / ".git" / "HEAD")
    # What a student's server runs stays readable; sealing again changes nothing.
    assert _nobody_reads(project / "course" / "checks.py")
    assert _nobody_reads(project / "release" / "01" / "01.ipynb")
    assert private.seal(ours) == []
    # A course folder of the instructor's own is private as a whole.
    elsewhere = project / "home" / "lin" / "course"
    elsewhere.mkdir(parents=True)
    found = private.secrets(project=project, course_root=elsewhere, state=project)
    assert elsewhere in found


def test_the_class_s_work_is_private_before_it_is_written(project):
    """The folders of the class's work are made private as the hub starts, so a
    feedback page or a collected notebook written later is too."""
    control = project / "reports"  # as nbgrader makes it, at a umask of 022
    control.mkdir(mode=0o755)
    (control / "report.html").write_text("grades")
    assert _nobody_reads(control / "report.html")
    shutil.rmtree(control)
    made = private.make_work_folders(project=project, course_root=project)
    assert sorted(p.name for p in made) == sorted(private.WORK)
    report = project / "reports" / "report.html"
    report.write_text("grades")
    report.chmod(0o644)
    assert not _nobody_reads(report)
    assert private.make_work_folders(project=project, course_root=project) == []
    # Owned as their course folder is: the instructor's, not the hub's (root).
    other = project / "elsewhere"
    other.mkdir()
    os.chown(other, 1, 1)
    made = private.make_work_folders(project=project, course_root=other)
    assert {p.parent for p in made} == {other}
    assert {p.stat().st_uid for p in made} == {1}


def test_a_home_folder_is_its_account_s_alone(project):
    """``useradd`` on Debian leaves a home folder 0755: a classmate reads it."""
    with services.unix_accounts(["prv-ana"], project, "x") as homes:
        answer = homes["prv-ana"] / "answer.txt"
        answer.write_text("mine")
        answer.chmod(0o644)
        homes["prv-ana"].chmod(0o755)
        assert _nobody_reads(answer)  # the control: open as useradd made it
        assert private.keep_home_private("prv-ana")
        assert not _nobody_reads(answer)
        assert services.can_read("prv-ana", answer)
        assert not private.keep_home_private("prv-ana")  # already private
    assert not private.keep_home_private("prv-no-such-account")
