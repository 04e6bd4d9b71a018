"""What the hub makes private from students, checked by a real other account."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest
import services

from course import hintbook
from course.grading import private

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
