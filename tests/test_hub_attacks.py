"""The classroom's attack suite: on the course hub, a student against the
instructor and against a classmate, with real accounts, a real hub and Chromium.

The hub (``hub/jupyterhub_config.py``, PAM logins) runs on loopback with three
Unix accounts made for the test: the instructor, Ana (honest) and Mal (the
attacker). Ana submits 01 with right answers, on time. Mal, after the due date:

* submits a notebook whose markdown and outputs carry script payloads, each of
  which would set a marker and call the test's own listener;
* writes her inbound entry by hand, its name and ``timestamp.txt`` backdated an
  hour before the due date and her files touched to match, with links to the
  instructor's solutions and gradebook in it;
* drops an entry in Ana's name, timed after Ana's;
* while the instructor runs ``course grade``, connects to every loopback port the
  instructor's account listens on, as a dask client (plain and TLS), and asks the
  scheduler to run ``os.getuid``;
* reads Ana's home and lists the exchange's feedback folder.

Then the instructor opens Mal's submission in formgrader, in Chromium. Every
attack must fail and Ana's grade stay whole. Each defence's control (the attack
succeeding with the defence off) is in the test of that defence, where it is
cheap to turn off: ``test_grading_hub_exchange`` (collect), ``test_grading_run_cluster``
(the scheduler), ``test_grading_steps_inert`` (the student's HTML),
``test_grading_hub_private`` (homes and the class's work); here the hub's own
controls are what Mal could do before the hub started.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import services
from browser import browser, hub_login
from harness import fill, reference_answers

from course import grading

A01 = "01_config"
TEACHER, ANA, MAL = "atk-teacher", "atk-ana", "atk-mal"
PASSWORD = "attention-by-hand"
COURSE_ID = "attention-by-hand"
HERE = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SHOTS = HERE / "reports" / "hub-attacks"
SHOWN = "MAL-NOTES-STAY-READABLE"  # the student's own text, which must still show
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="makes Unix accounts (root)"),
    pytest.mark.xdist_group("classroom"),
]


def _payloads(listener: str) -> tuple[str, str]:
    """A markdown cell and a code cell whose every payload, if it ran in the
    viewer's page, would set ``window.__pwned`` and call ``listener``/pwned-NAME."""

    def hit(name: str) -> str:
        return f"window.__pwned='{name}';fetch('{listener}/pwned-{name}')"

    markdown = f"""{SHOWN}: $\\sqrt{{d_k}}$ and my notes.

<script>{hit("md-script")}</script>
<img src="x" onerror="{hit("img-onerror")}">
<svg onload="{hit("svg-onload")}"><circle r="4"/></svg>
<a id="jslink" href="javascript:{hit("js-link")}">click-me</a>
<iframe srcdoc="<script>parent.{hit("iframe-srcdoc")}</script>"></iframe>
<details open ontoggle="{hit("details-ontoggle")}">more</details>
<meta http-equiv="refresh" content="1;url={listener}/pwned-meta-refresh">
<base href="{listener}/pwned-base/">
<style>@import url('{listener}/pwned-css-import');</style>
<object data="{listener}/pwned-object"></object>
"""
    outputs = {
        "HTML": f'<img src=x onerror="{hit("html-output")}">',
        "Javascript": hit("js-output"),
    }
    raw = {"text/html": f"<script>{hit('script-output')}</script>", "text/plain": "o"}
    code = (
        "from IPython.display import HTML, Javascript, display\n"
        + "".join(f"display({kind}({text!r}))\n" for kind, text in outputs.items())
        + f"display({raw!r}, raw=True)\n"
    )
    return markdown, code


class Listener(ThreadingHTTPServer):
    """A loopback HTTP server that records every path asked of it."""

    def __init__(self):
        self.paths: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                owner.paths.append(self.path)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", services.free_port()), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


# Mal's dask client: every loopback port the instructor's account listens on,
# tried as a scheduler (plain TCP, and TLS with no key), until told to stop.
SCANNER = r"""
import json, os, sys, time
from distributed import Client
uid, stop, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
tried, ran = set(), []
def listening():
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        f = line.split()
        if f[3] == "0A" and int(f[7]) == uid:
            yield int(f[1].split(":")[1], 16)
def record():
    with open(out + ".part", "w") as f:
        json.dump({"tried": sorted(tried), "ran": ran}, f)
    os.replace(out + ".part", out)
record()
while not os.path.exists(stop):
    for port in sorted(set(listening()) - tried):
        if os.path.exists(stop):
            break
        tried.add(port)
        for scheme in ("tcp", "tls"):
            try:
                with Client(f"{scheme}://127.0.0.1:{port}", timeout=3) as c:
                    ran.append([port, scheme, c.run_on_scheduler(os.getuid)])
            except Exception:
                pass
        record()
    time.sleep(0.3)
"""


class Hub:
    """The accounts, the course folder, the exchange and the hub of the suite."""

    def __init__(self, folder: Path, homes: dict[str, Path], url: str):
        self.folder, self.homes, self.url = folder, homes, url
        self.course = homes[TEACHER] / "course"
        self.exchange = folder / "exchange"

    def run(self, user: str, *cmd: str, check: bool = True, cwd: Path | None = None):
        role = "instructor" if user == TEACHER else "student"
        env = {
            "PATH": f"{BIN}:/usr/bin:/bin",
            "HOME": str(self.homes[user]),
            "USER": user,
            "COURSE_EXCHANGE": str(self.exchange),
            "JUPYTER_CONFIG_PATH": str(HERE / "hub" / role),
            "COURSE_ROOT": str(self.course),
        }
        where = cwd or (self.course if user == TEACHER else self.homes[user])
        proc = services.run_as(user, *cmd, env=env, cwd=where, check=check)
        return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def attacked():
    """The whole story, once; yields what each test reads of it."""
    folder = Path(tempfile.mkdtemp(prefix="course-attacks-"))
    folder.chmod(0o755)
    (folder / "exchange").mkdir(mode=0o777)
    (folder / "exchange").chmod(0o777)
    hints = folder / "hint-service" / "hints.sock"
    python = Path(sys.executable).resolve()
    seen: dict = {}
    listener = Listener()
    with (
        services.reachable_by_all(python, Path(sys.base_prefix) / "lib"),
        services.unix_accounts([TEACHER, ANA, MAL], folder / "home", PASSWORD) as homes,
    ):
        course = grading.make_course(homes[TEACHER] / "course")
        subprocess.run(["chown", "-R", TEACHER, course], check=True)
        env = {
            "COURSE_INSTRUCTORS": TEACHER,
            "COURSE_STUDENTS": f"{ANA} {MAL}",
            "COURSE_EXCHANGE": str(folder / "exchange"),
            "COURSE_HINT_SOCKET": str(hints),
            "COURSE_ROOT": str(course),
        }
        diary = homes[ANA] / "diary.txt"
        diary.write_text("Ana's own notes")
        shutil.chown(diary, ANA)
        seen["home_open_before"] = services.can_read(MAL, diary)  # the control
        try:
            with services.course_hub(folder, env) as url:
                hub = Hub(folder, homes, url)
                _story(hub, listener, seen)
                yield hub, listener, seen
        finally:
            SHOTS.mkdir(parents=True, exist_ok=True)
            shutil.copy(folder / "hub.log", SHOTS / "hub.log")
    listener.shutdown()
    shutil.rmtree(folder, ignore_errors=True)


def _story(hub: Hub, listener: Listener, seen: dict) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    hub.run(TEACHER, f"{BIN}/course", "release", A01)
    hub.run(TEACHER, f"{BIN}/nbgrader", "release_assignment", A01)
    right = reference_answers(HERE, A01)
    hub.run(ANA, f"{BIN}/nbgrader", "fetch_assignment", A01)
    ana_nb = hub.homes[ANA] / A01 / f"{A01}.ipynb"
    ana_nb.write_text(json.dumps(fill(json.loads(ana_nb.read_text()), right)))
    shutil.chown(ana_nb, ANA)
    hub.run(ANA, f"{BIN}/nbgrader", "submit", A01)
    due = datetime.now(UTC)
    due_text = due.strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    hub.run(TEACHER, f"{BIN}/nbgrader", "db", "assignment", "add", A01,
            f"--duedate={due_text}")  # fmt: skip
    seen["due"] = due
    _mal_submits(hub, listener, right, due)
    seen["collect"] = hub.run(TEACHER, f"{BIN}/nbgrader", "collect", A01)
    seen["scan"], seen["grade"] = _grade_while_mal_scans(hub)
    seen["scores"] = grading.cell_scores(hub.course, A01)
    seen["late"] = services.late_penalties(
        f"sqlite:///{hub.course / 'gradebook.db'}", A01
    )
    seen["mal_reads_ana"] = services.can_read(MAL, hub.homes[ANA] / "diary.txt")
    hub.run(TEACHER, f"{BIN}/course", "feedback", A01)
    hub.run(TEACHER, f"{BIN}/course", "report")
    hub.run(TEACHER, f"{BIN}/nbgrader", "release_feedback", A01)
    seen["mal_lists_feedback"] = hub.run(
        MAL, "ls", str(hub.exchange / COURSE_ID / "feedback"), check=False
    )
    with browser() as (ctx, blocked):
        page = ctx.new_page()
        hub_login(page, hub.url, TEACHER, PASSWORD)
        seen["teacher_umask"] = _server_umask(TEACHER)
        seen["formgrader"] = _formgrader_view(hub, page, MAL)
        feedback = hub.course / "feedback" / MAL / A01 / f"{A01}.html"
        report = hub.course / "reports" / "report.html"
        seen["pages"] = {
            "feedback": _opened(page, feedback),
            "report": _opened(page, report),
        }
        seen["blocked"] = blocked
    summary = {"scan": seen["scan"], "listener": listener.paths,
               "marker": seen["formgrader"]["marker"], "late": seen["late"],
               "teacher_umask": seen["teacher_umask"]}  # fmt: skip
    (SHOTS / "summary.json").write_text(json.dumps(summary, indent=1, default=str))


def _release(hub: Hub) -> dict:
    """The student version of 01, as released."""
    return json.loads(grading.notebook_path(hub.course, "release", A01).read_text())


def _mal_submits(hub: Hub, listener: Listener, right: dict, due: datetime) -> None:
    """Mal's notebook of payloads, backdated and linked, and a forgery for Ana."""
    release = _release(hub)
    markdown, code = _payloads(listener.url)
    nb = fill(release, right)
    nb["cells"] += [
        {"cell_type": "markdown", "id": "mal-md", "metadata": {}, "source": markdown},
        {"cell_type": "code", "id": "mal-code", "metadata": {}, "source": code,
         "outputs": [], "execution_count": None},
    ]  # fmt: skip
    path = hub.homes[MAL] / "payload.ipynb"
    path.write_text(json.dumps(nb))
    shutil.chown(path, MAL)
    inbound = hub.exchange / COURSE_ID / "inbound"
    secret = hub.course / "source" / A01 / f"{A01}.py"
    links = (
        f"ln -s '{secret}' answers.txt; ln -s '{hub.course}/gradebook.db' gb.db; "
        "touch -h -d '-1 hour' * ."
    )
    services.inbound_entry(MAL, inbound, named=MAL, assignment=A01,
                           when=due - timedelta(hours=1), notebook=path,
                           extra=links)  # fmt: skip
    services.inbound_entry(MAL, inbound, named=ANA, assignment=A01,
                           when=due + timedelta(hours=1), notebook=path)  # fmt: skip


def _grade_while_mal_scans(hub: Hub) -> tuple[dict, str]:
    """``course grade`` as the instructor while Mal's scanner tries every port
    the instructor's account listens on; what the scanner found, the grade log."""
    scan = hub.folder / "scan"
    scan.mkdir(mode=0o777)
    scan.chmod(0o777)
    stop, out = scan / "stop", scan / "found.json"
    uid = str(pwd.getpwnam(TEACHER).pw_uid)
    script = hub.homes[MAL] / "scan.py"
    script.write_text(SCANNER)
    shutil.chown(script, MAL)
    scanner = subprocess.Popen(
        [services.RUNUSER, "-u", MAL, "--", str(BIN / "python"), str(script), uid,
         str(stop), str(out)],
        cwd=hub.homes[MAL], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        graded = hub.run(TEACHER, f"{BIN}/course", "grade", A01, "--cell-timeout", "60")
    finally:
        stop.touch()
        try:  # one port's tries at most (two clients, 3 s each), and a margin
            scanner.wait(timeout=60)
        except subprocess.TimeoutExpired:  # what it has tried is on record
            os.killpg(scanner.pid, signal.SIGKILL)
            scanner.wait()
    found = json.loads(out.read_text()) if out.exists() else {"tried": [], "ran": []}
    return found, graded


def _server_umask(user: str) -> str:
    """The umask of ``user``'s running single-user server, from /proc."""
    proc = services.single_user_server(user)
    try:
        status = (proc / "status").read_text().splitlines() if proc else []
    except OSError:  # it ended meanwhile
        status = []
    return next((ln.split()[1] for ln in status if ln.startswith("Umask")), "no server")


def _opened(page, path: Path) -> dict:
    """A page the instructor opens from the course folder: its text and the
    marker a payload would set."""
    page.goto(path.as_uri())
    page.wait_for_timeout(3000)
    page.screenshot(path=SHOTS / f"{path.stem}.png", full_page=True)
    return {
        "text": page.inner_text("body"),
        "marker": page.evaluate("window.__pwned || null"),
    }


def _formgrader_view(hub: Hub, page, student: str) -> dict:
    """Formgrader's page of ``student``'s submission as the instructor sees it:
    its text, the marker a payload would set, and the link clicked."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{hub.course / 'gradebook.db'}") as gb:
        sub = gb.find_submission_notebook(A01, A01, student).id
    url = f"{hub.url}/user/{TEACHER}/formgrader/submissions/{sub}/?index=0"
    page.goto(url)
    try:
        page.wait_for_selector(f"text={SHOWN}", timeout=60000)
        page.wait_for_timeout(3000)  # an onerror, a refresh: they fire by then
        link = page.locator("#jslink")
        if link.count():
            link.first.click(timeout=5000)
            page.wait_for_timeout(1000)
    finally:
        page.screenshot(path=SHOTS / "formgrader-mal.png", full_page=True)
    return {
        "text": page.inner_text("body"),
        "marker": page.evaluate("window.__pwned || null"),
        "url": page.url,
        "score_boxes": page.locator("input.score").count(),
        "scores_filled": page.eval_on_selector_all(  # the autograder's, by its JS
            "input.score", "boxes => boxes.filter(b => b.placeholder !== '').length"
        ),
    }


def test_formgrader_runs_no_script_a_student_wrote(attacked):
    hub, listener, seen = attacked
    view = seen["formgrader"]
    assert view["marker"] is None, view
    assert [p for p in listener.paths if "pwned" in p] == [], listener.paths
    assert SHOWN in view["text"]  # the student's own words still shown
    assert view["url"].startswith(hub.url), view["url"]  # no refresh took it away
    # formgrader's own scripts still run: its score boxes, filled from its API.
    assert view["score_boxes"] > 0 and view["scores_filled"] > 0, view
    assert seen["blocked"] == []


def test_feedback_and_the_report_run_no_script_a_student_wrote(attacked):
    """Mal's feedback page (which the instructor may open too) and the class
    report: the payloads shown as nothing or as text, never run."""
    _, listener, seen = attacked
    pages = seen["pages"]
    assert {name: p["marker"] for name, p in pages.items()} == {
        "feedback": None, "report": None,
    }  # fmt: skip
    assert [p for p in listener.paths if "pwned" in p] == [], listener.paths
    assert SHOWN in pages["feedback"]["text"]
    assert "Class report" in pages["report"]["text"]


def test_no_one_submits_in_a_classmate_s_name(attacked):
    hub, _, seen = attacked
    assert f"names {ANA} but {MAL} sent it" in seen["collect"], seen["collect"]
    collected = grading.notebook_path(hub.course, "submitted", A01, student=ANA)
    assert SHOWN not in collected.read_text()  # Ana's own notebook was collected
    ana = {k: v for k, v in seen["scores"][ANA].items() if k.startswith("test_")}
    assert ana and all(s == m for s, m in ana.values()), ana  # her grade whole


def test_a_backdated_submission_is_late(attacked):
    _, _, seen = attacked
    assert seen["late"][MAL] > 0, seen["late"]  # "zero": the penalty is her score
    assert seen["late"][ANA] == 0, seen["late"]


def test_no_link_brings_the_instructor_s_files_in(attacked):
    hub, _, seen = attacked
    source = (hub.course / "source" / A01 / f"{A01}.py").read_text()
    release = "\n".join("".join(c["source"]) for c in _release(hub)["cells"])
    answers = [ln.strip() for ln in source.splitlines() if ln.strip() not in release]
    distinctive = max(answers, key=len)  # a line of an answer: never released
    mal = grading.notebook_path(hub.course, "submitted", A01, student=MAL).parent
    names = sorted(p.name for p in mal.iterdir())
    assert "answers.txt" not in names and "gb.db" not in names, names
    for graded in mal.parents[2].glob(f"*/{MAL}/{A01}/**/*"):
        if graded.is_file():
            assert distinctive not in graded.read_text(errors="replace"), graded


def test_the_grader_s_scheduler_takes_no_student(attacked):
    _, _, seen = attacked
    scan = seen["scan"]
    assert scan["tried"], "the scanner found no port of the instructor's"
    assert scan["ran"] == [], scan


def test_a_student_reads_no_classmate_s_home_or_feedback(attacked):
    _, _, seen = attacked
    assert seen["home_open_before"]  # the control: useradd's 0755 home
    assert not seen["mal_reads_ana"]
    assert "Permission denied" in seen["mal_lists_feedback"], seen["mal_lists_feedback"]
    assert seen["teacher_umask"] == "0077", seen["teacher_umask"]
