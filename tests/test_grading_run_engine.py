"""``course grade`` on dask: a real ``dask scheduler`` and ``dask worker`` started
with their CLIs, the gradebook on a real PostgreSQL server, one worker SIGKILLed
mid-task, and a submission whose worker dies twice; the scores must equal stock
serial ``nbgrader autograde`` into SQLite, cell by cell. The gradebook's URL holds
a password, given in the environment: no process's command line ever shows it.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from harness import fill, reference_answers
from services import dask_cluster, postgres

from course import grading
from course.grading import cells
from course.grading.kernel import contain, procs
from course.grading.nbgrader_app import URL_ENV
from course.grading.run import results

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("grading_engine")]

A = "01_config"
PASSWORD = f"pw-{uuid.uuid4().hex}"  # PostgreSQL's trust login ignores it
TOKEN = f"course-engine-{uuid.uuid4().hex[:8]}"  # this run's processes only
# Starts a process that would outlive its notebook, then stays busy long enough for
# the test to kill the worker that runs it.
SLOW = (
    "import subprocess, sys, time\n"
    f"kid = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)', '{TOKEN}'])\n"
    "time.sleep(15)\n"
)
# Its worker is killed each time it runs it (what the machine's OOM killer does to a
# worker whose notebook took all memory): the sandbox keeps a notebook from killing
# its worker itself (tests/test_sandbox.py), so the test does it.
DOOMED_TOKEN = f"course-doomed-{uuid.uuid4().hex[:8]}"
DOOMED = SLOW.replace(TOKEN, DOOMED_TOKEN).replace("sleep(15)", "sleep(120)")
WRONG = {
    "count_parameters": "def count_parameters(m):\n    return float('nan')\n",
    "query_linear": "def query_linear(model, layer):\n    return [[0.0]]\n",
}


def _submit(root: Path, student: str, nb: dict) -> None:
    path = grading.notebook_path(root, "submitted", A, student=student)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb))


def _class(root: Path) -> None:
    release = json.loads(grading.notebook_path(root, "release", A).read_text())
    ref = reference_answers(root, A)
    _submit(root, "good", fill(release, ref))
    _submit(root, "blank", release)
    _submit(root, "wrong", fill(release, {**ref, **WRONG}))
    slow = {**ref, "describe_config": SLOW + ref["describe_config"]}
    _submit(root, "slow", fill(release, slow))


class CommandLines(threading.Thread):
    """Reads every process's command line, ten times a second, until stopped;
    ``seen`` holds those that showed ``secret``."""

    def __init__(self, secret: str):
        super().__init__(daemon=True)
        self.secret, self.seen, self.done = secret, set(), threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.1):
            for command in _token_commands(self.secret).values():
                self.seen.add(command)


def _token_commands(token: str = TOKEN) -> dict[int, str]:
    """``{pid: command line}`` of the processes whose command line holds ``token``,
    each read once (read again, a process that has just exited shows none)."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            cmd = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
        except OSError:
            continue
        if token.encode() in cmd:
            found[int(entry.name)] = cmd.replace(b"\0", b" ")[:120].decode(
                errors="replace"
            )
    return found


def _token_pids(token: str = TOKEN) -> list[int]:
    return list(_token_commands(token))


def _task_worker(pid: int) -> int | None:
    """The pid of the worker whose task box holds process ``pid``."""
    text = Path(f"/proc/{pid}/cgroup").read_text()
    found = re.search(r"course-task-(\d+)\.", text)
    return int(found.group(1)) if found else None


def _kill_workers(token: str, times: int, deadline: float) -> list[int]:
    """SIGKILL the worker running the submission marked ``token``, ``times`` times
    (a new worker each time)."""
    killed: list[int] = []
    while len(killed) < times and time.monotonic() < deadline:
        for pid in _token_pids(token):
            worker = _task_worker(pid)
            if worker and worker not in killed:
                os.kill(worker, signal.SIGKILL)
                killed.append(worker)
                break
        time.sleep(0.2)
    assert len(killed) == times, f"{token}: killed {killed} of {times} workers"
    return killed


@pytest.fixture(scope="session")
def graded(tmp_path_factory):
    """The class graded twice: serially by nbgrader into SQLite, then by ``course
    grade`` on a CLI-started cluster into PostgreSQL, one worker SIGKILLed while it
    runs the slow submission, and the two that run the doomed one."""
    root = grading.make_course(tmp_path_factory.mktemp("engine"))
    grading.release([A], root)
    _class(root)
    serial = tmp_path_factory.mktemp("serial") / "course"
    shutil.copytree(root, serial)
    grading.nbgrader("autograde", A, "--DrawSeeds.enabled=False", root=serial)
    ref = reference_answers(root, A)
    release = json.loads(grading.notebook_path(root, "release", A).read_text())
    doomed = {**ref, "describe_config": DOOMED + ref["describe_config"]}
    _submit(root, "doomed", fill(release, doomed))
    with (
        postgres() as url,
        dask_cluster(tmp_path_factory.mktemp("dask")) as (file, tls),
    ):
        url = url.replace("postgres@", f"postgres:{PASSWORD}@")
        watch = CommandLines(PASSWORD)
        watch.start()
        control = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1)",
                                    PASSWORD])  # fmt: skip
        cmd = [sys.executable, "-m", "course", "grade", A, f"--root={root}"]
        cmd += [f"--scheduler-file={file}", *tls.flags(), "--fixed-seeds"]
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, URL_ENV: url},
        )
        deadline = time.monotonic() + 300
        killed = _kill_workers(TOKEN, 1, deadline)[0]
        # The doomed submission's workers only once the slow one is graded: a
        # worker killed while a retry waits on it would blame the retry too.
        graded_slow = grading.notebook_path(root, "autograded", A, student="slow")
        while not graded_slow.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        _kill_workers(DOOMED_TOKEN, 2, deadline)
        out, err = proc.communicate(timeout=900)
        control.wait()
        watch.done.set()
        watch.join()
        yield {
            "password_seen_in": watch.seen,
            "root": root,
            "serial": serial,
            "url": url,
            "out": out,
            "err": err,
            "code": proc.returncode,
            "killed": killed,
            "rows": _rows(url),
            "left": _token_pids() + _token_pids(DOOMED_TOKEN),
            "boxes": _boxes_left(root),
            "story": _story(file, tls.security()),
        }


def _boxes_left(root: Path) -> list[str]:
    """Task boxes that still hold a running process of this class: one working in
    ``root``. (Other tests' ``course grade`` runs, on the other xdist worker, open
    and close boxes of their own meanwhile.)"""
    left = []
    for box in Path("/sys/fs/cgroup/pids").glob("course-task-*"):
        box_env = {contain.BOX_ENV: box.name, contain.CGROUP_ENV: str(box)}
        for pid in contain.members(box_env):
            try:
                cwd = os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                continue
            if procs.running(pid) and Path(cwd).is_relative_to(root):
                left.append(_describe(box, pid))
                break
    return left


def _describe(box: Path, pid: int) -> str:
    """A left box, its process and its worker's state: what a failure shows."""
    worker = int(box.name.split("-")[2].split(".")[0])
    return (
        f"{box.name}: pid {pid} ({_cmdline(pid)}, parent {_parent(pid)}), worker "
        f"running: {procs.running(worker)} ({_cmdline(worker)}, "
        f"tgid {_status(worker).get('Tgid')})"
    )


def _cmdline(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return "?"
    return cmd[:120].decode(errors="replace")


def _status(pid: int) -> dict[str, str]:
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    return {k: v.strip() for k, _, v in (ln.partition(":") for ln in lines)}


def _parent(pid: int) -> str:
    return _status(pid).get("PPid", "?")


def _story(file: Path, security) -> str:
    """What the scheduler did with the tasks, and each live worker's pid: shown
    when a box is left, to tell a re-run task from a dead worker's leftover."""
    from distributed import Client

    def transitions(dask_scheduler=None) -> list[str]:
        log = [t for t in dask_scheduler.transition_log if "grade-" in str(t[0])]
        events = [e for _, e in dask_scheduler.get_events("all")]
        return [f"{t[0]} {t[1]}->{t[2]} {t[4]}" for t in log] + list(map(str, events))

    with Client(scheduler_file=str(file), security=security, timeout=30) as client:
        pids = client.run(os.getpid)
        lines = client.run_on_scheduler(transitions)
    return "\n".join([f"workers: {pids}", *lines])


def _rows(url: str) -> dict[str, int]:
    import psycopg

    with psycopg.connect(url.replace("+psycopg", "")) as conn:
        return {
            "submissions": conn.execute(
                "SELECT count(*) FROM submitted_assignment"
            ).fetchone()[0],
            "students": conn.execute(
                "SELECT count(DISTINCT student_id) FROM submitted_assignment"
            ).fetchone()[0],
            "notebooks": conn.execute(
                "SELECT count(*) FROM submitted_notebook"
            ).fetchone()[0],
            "grades": conn.execute("SELECT count(*) FROM grade").fetchone()[0],
        }


def test_same_scores_as_serial_nbgrader(graded):
    postgres_scores = grading.cell_scores(graded["root"], A, graded["url"])
    sqlite_scores = grading.cell_scores(graded["serial"], A)
    assert set(sqlite_scores) == {"good", "blank", "wrong", "slow"}
    for student, scores in sqlite_scores.items():
        assert postgres_scores[student] == scores, student
    good = postgres_scores["good"]
    assert sum(s for s, _ in good.values() if s) > sum(
        s for s, _ in postgres_scores["wrong"].values() if s
    )


def test_no_command_line_shows_the_gradebook_password(graded):
    """Only the control process, started with the password as an argument, shows
    it (so the watch works): nbgrader's processes got the URL in private."""
    seen = graded["password_seen_in"]
    assert len(seen) == 1 and "import time" in next(iter(seen)), seen


def test_killed_worker_regrades_once(graded):
    """The slow submission's worker was SIGKILLed mid-task: it is graded on another
    worker, and the gradebook holds one submission per student, one grade per cell."""
    log = (graded["root"] / "reports" / "grading.csv").read_text()
    assert re.search(r"^slow,01_config,(graded|flagged),", log, re.M), log
    rows = graded["rows"]
    assert rows["submissions"] == rows["students"] == rows["notebooks"] == 5, rows
    cells = len(grading.cell_scores(graded["serial"], A)["good"])
    assert rows["grades"] == rows["submissions"] * cells, rows


def test_submission_whose_worker_dies_twice_fails(graded):
    line = next(ln for ln in graded["out"].splitlines() if " doomed/" in ln)
    assert line.strip().startswith("failed") and results.KILLED_WORKERS in line, line
    assert graded["code"] == 1  # a failed submission: exit status 1


def test_nothing_outlives_its_task(graded):
    assert graded["left"] == [], "processes a killed worker's task started"
    assert graded["boxes"] == [], "\n".join([*graded["boxes"], graded["story"]])


def test_progress_counts_tasks_to_the_total(graded):
    fractions = [
        tuple(map(int, f)) for f in re.findall(r"(\d+)/(\d+) \[", graded["err"])
    ]
    assert fractions and all(done <= total for done, total in fractions), fractions
    assert fractions[-1] == (5, 5), fractions
    counts = re.findall(r"graded=(\d+), flagged=(\d+), failed=(\d+)", graded["err"])
    graded_, flagged, failed = map(int, counts[-1])
    assert (graded_ + flagged, failed) == (4, 1), counts[-1]


def test_ship_files_and_register_from_source(tmp_path):
    """Workers without the course folder get each submission as bytes; an assignment
    never released is registered from source/ first; release/ is not touched."""
    root = grading.make_course(tmp_path / "course")
    source = json.loads(grading.notebook_path(root, "source", A).read_text())
    nb = fill(source, reference_answers(root, A))
    _submit(root, "good", nb)
    cmd = [sys.executable, "-m", "course", "grade", A, f"--root={root}"]
    proc = subprocess.run(
        [*cmd, "--ship-files", "--workers=1"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"registered it from source/{A}" in proc.stdout
    assert not (root / "release").exists()
    assert grading.notebook_path(root, "autograded", A, student="good").exists()
    scores = grading.cell_scores(root, A)["good"]
    assert all(s == m for c, (s, m) in scores.items() if cells.is_test_id(c))


def test_unknown_assignment_is_one_sentence(tmp_path):
    root = grading.make_course(tmp_path / "course")
    (root / "submitted" / "ann" / "99_nope").mkdir(parents=True)
    cmd = [sys.executable, "-m", "course", "grade", "99_nope", f"--root={root}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stdout.strip().count("\n") == 0 and "99_nope" in proc.stdout
    assert A in proc.stdout  # it names the assignments the course has


def test_jsonschema_is_imported_without_the_uri_grammar():
    """The coordinator and each zygote import jsonschema without rfc3987_syntax
    (2.9 s of Lark grammars, for a format nothing here checks); importing that
    package later still works."""
    code = (
        "import sys\n"
        "from course.grading import import_jsonschema_lean\n"
        "import_jsonschema_lean()\n"
        "import nbgrader.api\n"
        "print('rfc3987_syntax' in sys.modules)\n"
        "import rfc3987_syntax\n"
        "print(rfc3987_syntax.is_valid_syntax('iri', 'https://example.org/é'))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert proc.stdout.split() == ["False", "True"], proc.stderr


def test_a_failed_task_says_why_in_one_line():
    """The exception at the end of nbgrader's traceback, not its "see above"."""
    from course.grading.run.engine import _last_error

    log = (
        "[AutogradeApp | INFO] Autograding x\nTraceback (most recent call last):\n"
        '  File "judge.py", line 3, in <module>\n'
        "ImportError: cannot import name 'X' from 'course.data'\n"
        "[AutogradeApp | ERROR] There was an error processing assignment: x\n"
        "[AutogradeApp | ERROR] Please see the the above traceback for details.\n"
    )
    assert _last_error(log) == "ImportError: cannot import name 'X' from 'course.data'"
    assert _last_error("[AutogradeApp | ERROR] No notebooks matched x") == (
        "[AutogradeApp | ERROR] No notebooks matched x"
    )
    assert _last_error("[AutogradeApp | ERROR] Please see the above traceback") == ""
