"""The course hub's hint service: it serves every hint of a class and keeps the
record of who asked which, where no student can edit it.

JupyterHub starts it (``hub/jupyterhub_config.py``, a managed service named
``course-hints``) as the hub's own user. It listens on a Unix socket in a folder
only that user can write (``COURSE_HINT_SOCKET``): no other account can take its
place and be sent a token, as one could on a loopback port. A student's kernel
asks it with the student's server token (:func:`course.hints.hint`); the hub says
who that is. The service applies the instructor's
:class:`~course.grading.settings.HintPolicy` (the course's ``nbgrader_config.py``,
run as the file's owner, never as the hub's user), chooses the hint as a student
alone gets it (:func:`course.hints.choose`), and records it, with what it costs
then, in its own SQLite file (``COURSE_HINT_RECORD``, mode 0600). ``course
grade`` reads the record back as an instructor (``GET api/record``) and charges it.

The student's kernel says which mistake its latest test named and whether a test
failed since the last hint: those choose which hint comes (the ``after-failure``
rule is advice, not a lock), never what one costs. A request body is at most
64 KiB, an idle connection is closed after a minute, and a student who asks more
than :data:`PACE` times a minute is told to wait (429) until the minute is over.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections import deque
from dataclasses import asdict
from pathlib import Path

from ... import hintbook, hints, hubhints
from ...i18n import tell
from ..settings import HintPolicy, hint_policy

NAME = hubhints.SERVICE_NAME
RECORD_ENV = "COURSE_HINT_RECORD"  # the record's SQLite file
SOCKET_ENV = "COURSE_HINT_SOCKET"  # where it listens
MAX_BODY = 64 << 10  # bytes of a request's body
POLICY_SECONDS = 10.0  # the policy is read again after this long
PACE = 30  # requests one student may send in any minute
SCHEMA = """CREATE TABLE IF NOT EXISTS hints (time REAL NOT NULL,
    student TEXT NOT NULL, assignment TEXT NOT NULL, exercise TEXT NOT NULL,
    hint TEXT NOT NULL, cost REAL NOT NULL)"""


class Record:
    """The hints given to a class: one row per hint, in the service's file."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():  # made the hub's user's alone, from the start
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        self.path.chmod(0o600)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=10)
        db.execute(SCHEMA)
        return db

    def add(
        self, *, student: str, assignment: str, exercise: str, key: str, cost: float
    ) -> None:
        """Record one hint given, and the points it cost when it was given."""
        with contextlib.closing(self._connect()) as db, db:
            db.execute(
                "INSERT INTO hints VALUES (?, ?, ?, ?, ?, ?)",
                (time.time(), student, assignment, exercise, key, cost),
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
        exercise, hint, cost."""
        where, args = (
            ("WHERE assignment = ?", (assignment,)) if assignment else ("", ())
        )
        with contextlib.closing(self._connect()) as db:
            db.row_factory = sqlite3.Row
            found = db.execute(f"SELECT * FROM hints {where} ORDER BY time", args)
            return [dict(row) for row in found]


class Pace:
    """At most ``most`` requests from one student in any ``seconds``: a kernel
    asking in a loop is refused, and the class keeps its service."""

    def __init__(self, most: int = PACE, seconds: float = 60.0, clock=time.monotonic):
        self.most, self.seconds, self.clock = most, seconds, clock
        self.asked: dict[str, deque] = {}

    def allow(self, student: str) -> bool:
        """Whether ``student`` may ask now (a request allowed is counted)."""
        now, times = self.clock(), self.asked.setdefault(student, deque())
        while times and times[0] <= now - self.seconds:
            times.popleft()
        if len(times) >= self.most:
            return False
        times.append(now)
        return True


def _refused(status: int, hint: hints.Hint) -> tuple[int, dict]:
    """A request answered with ``hint`` and no hint unlocked."""
    return status, {"hint": asdict(hint), "key": None}


def give(
    record: Record,
    policy: HintPolicy,
    *,
    student: str,
    asked: hints.Asked,
    pace: Pace | None = None,
) -> tuple[int, dict]:
    """The answer to one request: an HTTP status and ``{"hint", "key"}``."""

    exercise = asked.exercise
    if pace is not None and not pace.allow(student):
        too_many = tell("Too many requests for hints.")
        return _refused(
            429, hints.Hint(exercise, too_many, tell("Wait a minute, then ask again."))
        )
    if not policy.available:
        off = tell("Your instructor has turned hints off for graded work.")
        return _refused(403, hints.Hint(exercise, tell("No hints in this class."), off))
    found = hintbook.find(exercise)
    if found is None:
        return _refused(404, hints.unknown(exercise))
    assignment, entry = found
    if asked.mistake not in entry["mistakes"]:  # a key the kernel made up: none
        asked = hints.Asked(**{**asdict(asked), "mistake": None})
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
            student=student,
            assignment=assignment,
            exercise=asked.exercise,
            key=key,
            cost=policy.points_per_hint,
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


def policy_as_owner(root: Path) -> HintPolicy:
    """The policy in ``root``'s ``nbgrader_config.py``, read by a process of the
    file's owner: the hub's user never runs a file another account can write."""
    config = Path(root) / "nbgrader_config.py"
    owner = config.stat().st_uid if config.exists() else os.getuid()
    if owner == os.getuid():
        return hint_policy(root)
    import pwd

    account = pwd.getpwuid(owner)
    code = (
        "import json, sys; from course.grading.settings import hint_policy; "
        "p = hint_policy(sys.argv[1]); "
        "print(json.dumps({k: getattr(p, k) for k in p.trait_names(config=True)}))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(root)],
        user=owner,
        group=account.pw_gid,
        extra_groups=[],
        env={"PATH": os.environ.get("PATH", ""), "HOME": account.pw_dir},
        cwd="/",
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return HintPolicy(**json.loads(proc.stdout))


class Policies:
    """The course's policy, read again once :data:`POLICY_SECONDS` have passed."""

    def __init__(self, root: Path):
        self.root, self.read_at, self.policy = Path(root), float("-inf"), None

    def __call__(self) -> HintPolicy:
        if time.monotonic() - self.read_at > POLICY_SECONDS:
            self.policy, self.read_at = policy_as_owner(self.root), time.monotonic()
        return self.policy


def app(*, record: Record, policies, instructors: set[str], pace: Pace | None = None):
    """The service's tornado application (``policies()``: the policy now)."""
    from jupyterhub.services.auth import HubAuthenticated
    from tornado import web

    class Base(HubAuthenticated, web.RequestHandler):
        async def prepare(self):
            # Who asks, awaited: while the hub checks a token (a made-up one
            # too), the service answers everyone else.
            await self.hub_auth.get_user(self, sync=False)

    class Hint(Base):
        @web.authenticated
        def post(self):
            try:
                asked = _asked(self.request.body)
            except (ValueError, TypeError) as error:
                raise web.HTTPError(400, str(error)) from None
            status, answer = give(
                record,
                policies(),
                student=self.current_user["name"],
                asked=asked,
                pace=pace,
            )
            self.set_status(status)
            self.write(answer)

    class Log(Base):
        @web.authenticated
        def get(self):
            if self.current_user["name"] not in instructors:
                raise web.HTTPError(403, "instructors only")
            rows = record.rows(self.get_argument("assignment", None))
            self.write({"rows": rows})

    prefix = hubhints.SERVICE_PREFIX
    return web.Application([(f"{prefix}api/hint", Hint), (f"{prefix}api/record", Log)])


def _more_files() -> None:
    """As many open files as the system allows this process: each connection is
    one, and a class opens many."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def main() -> None:
    """Serve on the Unix socket ``COURSE_HINT_SOCKET``."""
    import asyncio

    from tornado.httpserver import HTTPServer
    from tornado.netutil import bind_unix_socket

    os.umask(0o077)
    _more_files()
    root = Path(os.environ["COURSE_ROOT"])
    instructors = set(os.environ.get("COURSE_INSTRUCTORS", "").split())
    record = Record(Path(os.environ[RECORD_ENV]))
    service = app(
        record=record, policies=Policies(root), instructors=instructors, pace=Pace()
    )

    async def serve() -> None:
        server = HTTPServer(
            service, max_body_size=MAX_BODY, idle_connection_timeout=60, body_timeout=10
        )
        server.add_socket(bind_unix_socket(os.environ[SOCKET_ENV], mode=0o666))
        await asyncio.Event().wait()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
