"""The gradebook: where it lives, and setting it up once before a class is graded.

SQLite in the course folder is the default. Any SQLAlchemy URL nbgrader accepts
works too; ``postgresql+psycopg://USER@HOST:PORT/DB`` is what several grading
machines share. A fresh PostgreSQL database must not see its first writes from
many processes at once (they race to create the tables and the assignment), so
:func:`prepare` runs in the coordinator, before any task starts: migrations, the
assignment (registered from ``source/`` if the gradebook does not know it yet),
and the students.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from .environment import tool_env
from .lean import import_jsonschema_lean
from .nbgrader_app import URL_ENV
from .runs import has_source, nbgrader


class NotReleased(Exception):
    """An assignment the gradebook does not know and ``source/`` does not hold."""


def url(root: Path, db: str | None = None) -> str:
    """The gradebook's SQLAlchemy URL: ``db``, or the one in the environment
    (:data:`~course.grading.nbgrader_app.URL_ENV`: where a password may be, as it
    may not be on a command line), or SQLite in ``root``.

    SQLite gets a long lock timeout: several nbgrader processes write to it.
    """
    if db or os.environ.get(URL_ENV):
        return db or os.environ[URL_ENV]
    return f"sqlite:///{root / 'gradebook.db'}?timeout=300"


def prepare(
    *, root: Path, db_url: str, students_by_assignment: dict[str, list[str]]
) -> list[str]:
    """Migrate the gradebook, register missing assignments, add the students.

    Returns the names of the assignments it registered. Raises
    :class:`NotReleased` (one sentence) for one it cannot register.
    """
    import_jsonschema_lean()
    from nbgrader.api import Gradebook, MissingEntry

    registered = []
    with tools_on_path(), Gradebook(db_url) as gb:  # it migrates with `alembic`
        known = {a.name for a in gb.assignments}
    for assignment in students_by_assignment:
        if assignment in known:
            continue
        if not has_source(root, assignment):
            names = sorted(known | {p.name for p in root.glob("source/*/")})
            raise NotReleased(
                f"{assignment} is neither in the gradebook nor in {root}/source/: "
                f"check the name (this course has {', '.join(names) or 'none'})."
            )
        register(root=root, db_url=db_url, assignment=assignment)
        registered.append(assignment)
    with Gradebook(db_url) as gb:
        for students in students_by_assignment.values():
            for student in students:
                try:
                    gb.find_student(student)
                except MissingEntry:
                    gb.add_student(student)
    return registered


@contextlib.contextmanager
def tools_on_path():
    """This interpreter's tools first on PATH for the block (nbgrader's Gradebook
    runs ``alembic`` from PATH); PATH as it was after it."""
    before = os.environ.get("PATH")
    os.environ["PATH"] = tool_env()["PATH"]
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PATH", None)
        else:
            os.environ["PATH"] = before


def register(*, root: Path, db_url: str, assignment: str) -> None:
    """Put ``assignment``'s notebooks and cells in the gradebook from ``source/``.

    This is ``nbgrader generate_assignment``, writing its student version to a
    scratch folder: ``release/`` is left as it is.
    """
    with tempfile.TemporaryDirectory(prefix="course-register-") as scratch:
        proc = nbgrader(
            "generate_assignment",
            assignment,
            "--force",
            f"--CourseDirectory.release_directory={scratch}",
            root=root,
            check=False,
            db_url=db_url,
        )
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
        raise NotReleased(
            f"{assignment} could not be registered from source/{assignment} "
            f"({last[0] if last else 'nbgrader failed'})."
        )


def cell_scores(
    root: Path, assignment: str, db_url: str | None = None
) -> dict[str, dict[str, tuple[float, float]]]:
    """``{student: {grade_id: (score, max_score)}}`` for one assignment, from the
    course's gradebook (``db_url``, default SQLite in ``root``: :func:`url`)."""
    from nbgrader.api import Gradebook

    out: dict[str, dict[str, tuple]] = {}
    with Gradebook(url(root, db_url)) as gb:
        for sub in gb.assignment_submissions(assignment):
            cells = out.setdefault(sub.student.id, {})
            for nb in sub.notebooks:
                for grade in nb.grades:
                    cells[grade.name] = (grade.score, grade.max_score)
    return out
