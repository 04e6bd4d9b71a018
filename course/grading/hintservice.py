"""The course hub's hint service: it serves every hint of a class and keeps the
record of who asked which, where no student can edit it.

JupyterHub starts it (``hub/jupyterhub_config.py``, a managed service named
``course-hints``) as the hub's own user. A student's kernel asks it with the
student's server token (:func:`course.hints.hint`); the hub says who that is. The
service applies the instructor's :class:`~course.grading.settings.HintPolicy`
(from the course's ``nbgrader_config.py``), chooses the hint as a student alone
gets it (:func:`course.hints.choose`), and records it in its own SQLite file
(``COURSE_HINT_RECORD``). ``course grade`` reads the record back as an instructor
(``GET api/record``) and charges what the policy says.

The student's kernel says which mistake its latest test named and whether a test
failed since the last hint: those choose which hint comes, never what one costs.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from dataclasses import asdict
from pathlib import Path

from .. import hintbook, hints
from ..i18n import tell
from .settings import HintPolicy, hint_policy

NAME = "course-hints"
RECORD_ENV = "COURSE_HINT_RECORD"  # the record's SQLite file
SCHEMA = """CREATE TABLE IF NOT EXISTS hints (time REAL NOT NULL,
    student TEXT NOT NULL, assignment TEXT NOT NULL, exercise TEXT NOT NULL,
    hint TEXT NOT NULL)"""


class Record:
    """The hints given to a class: one row per hint, in the service's file."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect():
            pass
        self.path.chmod(0o600)  # the hub's user's alone

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=10)
        db.execute(SCHEMA)
        return db

    def add(self, *, student: str, assignment: str, exercise: str, key: str) -> None:
        """Record one hint given."""
        with contextlib.closing(self._connect()) as db, db:
            db.execute(
                "INSERT INTO hints VALUES (?, ?, ?, ?, ?)",
                (time.time(), student, assignment, exercise, key),
            )

    def shown(self, *, student: str, exercise: str) -> list[str]:
        """The keys of the hints ``student`` got on ``exercise``, oldest first."""
        with contextlib.closing(self._connect()) as db:
            rows = db.execute(
                "SELECT hint FROM hints WHERE student = ? AND exercise = ? "
                "ORDER BY time, rowid",
                (student, exercise),
            )
            return [key for (key,) in rows]

    def rows(self, assignment: str | None = None) -> list[dict]:
        """Every hint given (of one assignment): time, student, assignment,
        exercise, hint."""
        where, args = (
            ("WHERE assignment = ?", (assignment,)) if assignment else ("", ())
        )
        with contextlib.closing(self._connect()) as db:
            db.row_factory = sqlite3.Row
            found = db.execute(f"SELECT * FROM hints {where} ORDER BY time", args)
            return [dict(row) for row in found]


def give(
    record: Record, policy: HintPolicy, *, student: str, asked: hints.Asked
) -> tuple[int, dict]:
    """The answer to one request: an HTTP status and ``{"hint", "key"}``."""

    def refuse(status: int, title: str, text: str) -> tuple[int, dict]:
        hint = hints.Hint(asked.exercise, title, text)
        return status, {"hint": asdict(hint), "key": None}

    if not policy.available:
        return refuse(
            403,
            tell("No hints in this class."),
            tell("Your instructor has turned hints off for graded work."),
        )
    found = hintbook.find(asked.exercise)
    if found is None:
        return refuse(
            404,
            tell("No exercise {exercise}.", exercise=asked.exercise),
            tell("The exercise ids are the names you write, e.g. `softmax`."),
        )
    assignment, _ = found
    shown = record.shown(student=student, exercise=asked.exercise)
    hint, key = hints.choose(
        asked,
        assignment=assignment,
        shown=shown,
        unlock=policy.unlock,
        cost=policy.points_per_hint,
    )
    if key is not None:
        record.add(
            student=student, assignment=assignment, exercise=asked.exercise, key=key
        )
    return 200, {"hint": asdict(hint), "key": key}


def _asked(body: bytes) -> hints.Asked:
    """A request's body as an :class:`~course.hints.Asked` (unknown fields dropped)."""
    data = json.loads(body or b"{}")
    number = data.get("number")
    return hints.Asked(
        exercise=str(data.get("exercise", "")),
        number=int(number) if number is not None else None,
        mistake=str(data["mistake"]) if data.get("mistake") else None,
        failed_since=bool(data.get("failed_since")),
    )


def app(*, record: Record, root: Path, instructors: set[str]):
    """The service's tornado application."""
    from jupyterhub.services.auth import HubAuthenticated
    from jupyterhub.utils import url_path_join
    from tornado import web

    class Base(HubAuthenticated, web.RequestHandler):
        def policy(self) -> HintPolicy:  # read at each request: the file may change
            return hint_policy(root)

    class Hint(Base):
        @web.authenticated
        def post(self):
            try:
                asked = _asked(self.request.body)
            except (ValueError, TypeError) as error:
                raise web.HTTPError(400, str(error)) from None
            status, answer = give(
                record, self.policy(), student=self.current_user["name"], asked=asked
            )
            self.set_status(status)
            self.write(answer)

    class Log(Base):
        @web.authenticated
        def get(self):
            if self.current_user["name"] not in instructors:
                raise web.HTTPError(403, "instructors only")
            policy = self.policy()
            self.write(
                {
                    "policy": {
                        "available": policy.available,
                        "points_per_hint": policy.points_per_hint,
                        "unlock": policy.unlock,
                    },
                    "rows": record.rows(self.get_argument("assignment", None)),
                }
            )

    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", f"/services/{NAME}/")
    return web.Application(
        [
            (url_path_join(prefix, "api/hint"), Hint),
            (url_path_join(prefix, "api/record"), Log),
        ]
    )


def main() -> None:
    """Serve on the URL JupyterHub gives the service."""
    import asyncio
    from urllib.parse import urlparse

    url = urlparse(os.environ["JUPYTERHUB_SERVICE_URL"])
    root = Path(os.environ["COURSE_ROOT"])
    instructors = set(os.environ.get("COURSE_INSTRUCTORS", "").split())
    record = Record(Path(os.environ[RECORD_ENV]))

    async def serve() -> None:
        app(record=record, root=root, instructors=instructors).listen(
            url.port, url.hostname
        )
        await asyncio.Event().wait()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
