"""The classroom end to end, on the course's JupyterHub with real processes.

The hub (``hub/jupyterhub_config.py``, its npm proxy, PAM logins) runs on loopback
with four Unix accounts made for the test: one instructor and three students.

1. The instructor releases 01 and 05 to nbgrader's exchange.
2. Ana, in Chromium through the hub's login and JupyterLab's Assignment List,
   fetches 01, asks the hub's hint service for two hints on count_parameters
   (the class's policy: 0.5 points a hint), answers it, opens it (not marked
   modified), validates and submits; then she deletes her own progress file.
   Ben (partly wrong) and Cy (a loop that never ends) use the nbgrader CLI on 05;
   Ben submits again after the due date.
3. The instructor collects and runs ``course grade`` in their hub server (which
   charges Ana's hints from the service's record), reads the class report, and
   looks at Cy's flagged submission in formgrader, in Chromium.
4. The instructor releases feedback; each student fetches it and sees scores and
   verdicts, and no hidden test source; Ben opens his in Chromium, its formulas
   typeset by his server's MathJax (offline).

Screenshots go to ``reports/classroom/`` for a person to look at.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest
import services
from browser import browser, hub_login, run_cell
from harness import fill, reference_answers

from course import grading, hintbook

A01, A05 = "01_config", "05_softmax_and_scaling"
COST = 0.5  # the class's policy: points of the exercise per hint
ASKED = "count_parameters"  # Ana asks two hints on it
SCRATCH = {  # Ana's own notebook in her home: the check module, two hint requests
    "cells": [
        {"cell_type": "code", "id": f"c{i}", "metadata": {}, "outputs": [],
         "execution_count": None, "source": source}
        for i, source in enumerate(
            ["from course.checks import config as check",
             f'check.hint("{ASKED}")', f'check.hint("{ASKED}")']
        )
    ],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                "language": "python"}},
    "nbformat": 4, "nbformat_minor": 5,
}  # fmt: skip
TEACHER, ANA, BEN, CY = "abh-teacher", "abh-ana", "abh-ben", "abh-cy"
PASSWORD = "attention-by-hand"
HERE = Path(__file__).resolve().parents[1]
SHOTS = HERE / "reports" / "classroom"
BIN = Path(sys.executable).parent
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="makes Unix accounts (root)"),
    pytest.mark.xdist_group("classroom"),
]
# Ben's first 05 misses the max-subtraction, his resubmission the 1/sqrt(d_k).
UNSTABLE = """
def softmax(scores, dim=-1):
    e = scores.exp()
    return e / e.sum(dim=dim, keepdim=True)
"""
UNSCALED = """
def attention_scores(Q, K):
    return Q @ K.transpose(-2, -1)
"""
FOREVER = """
import torch
def softmax(scores, dim=-1):
    return torch.softmax(scores, dim=dim)
converged = False
while not converged:  # waits for a flag that nothing sets
    pass
"""


class Classroom:
    """The accounts, the course folder, the exchange and the hub of one class."""

    def __init__(self, folder: Path, homes: dict[str, Path], url: str):
        self.folder, self.homes, self.url = folder, homes, url
        self.course = homes[TEACHER] / "course"
        self.env = {
            "PATH": f"{BIN}:/usr/bin:/bin",
            "COURSE_EXCHANGE": str(folder / "exchange"),
        }
        self.db = f"sqlite:///{self.course / 'gradebook.db'}"

    def run(
        self, user: str, *cmd: str, cwd: Path | None = None, env: dict | None = None
    ) -> str:
        """Run ``cmd`` as ``user`` in their home (or ``cwd``), as their server would
        (with ``env`` added: e.g. the server's hub token)."""
        role = "instructor" if user == TEACHER else "student"
        env = {
            **(env or {}),
            **self.env,
            "HOME": str(self.homes[user]),
            "USER": user,
            "JUPYTER_CONFIG_PATH": str(HERE / "hub" / role),
            "COURSE_ROOT": str(self.course),
        }
        proc = services.run_as(user, *cmd, env=env, cwd=cwd or self.homes[user])
        return proc.stdout + proc.stderr

    def teacher(self, *cmd: str, env: dict | None = None) -> str:
        return self.run(TEACHER, *cmd, cwd=self.course, env=env)

    def answer(self, student: str, assignment: str, answers: dict[str, str]) -> None:
        """Write the student's answers into the notebook they fetched."""
        path = self.homes[student] / assignment / f"{assignment}.ipynb"
        nb = fill(json.loads(path.read_text()), answers)
        path.write_text(json.dumps(nb))
        shutil.chown(path, student)


@pytest.fixture(scope="module")
def classroom():
    folder = Path(tempfile.mkdtemp(prefix="course-class-"))
    folder.chmod(0o755)
    exchange = folder / "exchange"
    exchange.mkdir()
    exchange.chmod(0o777)
    python = Path(sys.executable).resolve()
    names = [TEACHER, ANA, BEN, CY]
    hints = folder / "hint-service" / "hints.sock"  # a folder of root's, 0755
    env = {
        "COURSE_INSTRUCTORS": TEACHER,
        "COURSE_STUDENTS": f"{ANA} {BEN} {CY}",
        "COURSE_EXCHANGE": str(exchange),
        "COURSE_HINT_SOCKET": str(hints),
    }
    with (
        services.reachable_by_all(python, Path(sys.base_prefix) / "lib"),
        services.unix_accounts(names, folder / "home", PASSWORD) as homes,
    ):
        course = grading.make_course(homes[TEACHER] / "course")
        with open(course / "nbgrader_config.py", "a") as config:  # the hint policy
            config.write(f"c.HintPolicy.points_per_hint = {COST}\n")
            config.write(f"c.HintPolicy.record = '{hints}'\n")
        subprocess.run(["chown", "-R", TEACHER, course], check=True)
        env["COURSE_ROOT"] = str(course)
        try:
            with services.course_hub(folder, env) as url:
                yield Classroom(folder, homes, url)
        finally:  # the hub's log, for a failure to be read
            SHOTS.mkdir(parents=True, exist_ok=True)
            shutil.copy(folder / "hub.log", SHOTS / "hub.log")
    shutil.rmtree(folder, ignore_errors=True)


def _login(page, url: str, user: str) -> None:
    hub_login(page, url, user, PASSWORD)


def _assignment_list(page):
    page.click("#jp-menu-panel .lm-MenuBar-itemLabel:text('Nbgrader')")
    page.click("li[data-command='nbgrader:open-assignment-list']")
    page.wait_for_selector("#released_assignments_list", timeout=60000)


def _row(page, listing: str, assignment: str):
    """The row of ``assignment`` in the released, fetched or submitted list."""
    row = page.locator(f"#{listing}_assignments_list > .list_item").filter(
        has_text=assignment
    )
    row.first.wait_for(timeout=120000)
    return row.first


def _ana_fetches_answers_validates_submits(room: Classroom, page) -> dict:
    _login(page, room.url, ANA)
    menus = page.locator(".lm-MenuBar-itemLabel").all_inner_texts()
    _assignment_list(page)
    _row(page, "released", A01).locator(".item_status button").click()
    _row(page, "fetched", A01)
    hints = _ana_asks_two_hints(room, page)
    room.answer(ANA, A01, reference_answers(HERE, A01))
    page.goto(f"{room.url}/user/{ANA}/lab/tree/{A01}/{A01}.ipynb")
    page.wait_for_selector(".jp-Notebook", timeout=60000)
    page.wait_for_timeout(3000)  # what marks a notebook modified does so on opening
    tabs = page.locator(".lm-TabBar-tab.jp-mod-dirty")
    dirty = tabs.filter(has_text=f"{A01}.ipynb").count()  # her scratch may be unsaved
    page.click("[title='Validate Assignment']:visible", timeout=30000)
    dialog = page.wait_for_selector(".jp-Dialog-content", timeout=180000)
    page.wait_for_function(
        "!document.querySelector('.jp-Dialog-content').innerText"
        ".includes('Validating')",
        timeout=180000,
    )
    verdict = dialog.inner_text()
    page.click(".jp-Dialog button.jp-mod-accept")
    _assignment_list(page)
    _row(page, "fetched", A01).locator(".item_status button:text('Submit')").click()
    _row(page, "submitted", A01)
    page.screenshot(path=SHOTS / "student-assignment-list.png")
    tools = page.locator(
        "li[data-command='nbgrader:open-formgrader'], "
        "li[data-command='nbgrader:open-course-list']"
    ).count()
    return {"menus": menus, "dirty": dirty, "verdict": verdict, "hints": hints,
            "instructor_tools": [tools] if tools else []}  # fmt: skip


def _ana_asks_two_hints(room: Classroom, page) -> list[str]:
    """In a notebook of her own, Ana asks for the next hint on count_parameters,
    twice; the hub's service gives them. Returns the two hints' text."""
    path = room.homes[ANA] / "scratch.ipynb"
    path.write_text(json.dumps(SCRATCH))
    shutil.chown(path, ANA)
    page.goto(f"{room.url}/user/{ANA}/lab/tree/scratch.ipynb")
    page.wait_for_selector(
        ".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120000
    )
    run_cell(page, 0, timeout=300000, shots=SHOTS)  # a loaded machine: slow imports
    said = [run_cell(page, i, "Hint", shots=SHOTS) for i in (1, 2)]
    page.screenshot(path=SHOTS / "student-hints-on-the-hub.png")
    return said


def _server_environment(user: str) -> dict[str, str]:
    """The environment of the user's running single-user server, from /proc."""
    proc = services.single_user_server(user)
    try:
        pairs = (proc / "environ").read_bytes().decode().split("\0") if proc else []
    except OSError:  # it ended meanwhile
        pairs = []
    return dict(pair.split("=", 1) for pair in pairs if "=" in pair)


def _clear_hint_charges(room: Classroom, student: str, assignment: str) -> int:
    """Take the hints' charge off a student's cells, as a submission first
    autograded outside ``course grade`` (formgrader's button) has none; return how
    many cells had it."""
    from nbgrader.api import Gradebook

    with Gradebook(room.db) as gb:
        cleared = 0
        for notebook in gb.find_submission(assignment, student).notebooks:
            for grade in notebook.grades:
                if grade.extra_credit is not None and grade.extra_credit < 0:
                    grade.extra_credit, cleared = None, cleared + 1
        gb.db.commit()
    return cleared


def _teacher_opens_flagged(room: Classroom, page) -> str:
    """Formgrader's page of Cy's flagged submission, as the instructor sees it."""
    from nbgrader.api import Gradebook

    with Gradebook(room.db) as gb:
        sub = gb.find_submission_notebook(A05, A05, CY).id
    _login(page, room.url, TEACHER)
    url = f"{room.url}/user/{TEACHER}/formgrader/submissions/{sub}/?index=0"
    return _typeset_page(page, url, "KeyboardInterrupt", "instructor-formgrader.png")


def _typeset_page(page, url: str, text: str, shot: str) -> str:
    """The text of the page at ``url`` once it shows ``text`` and its formulas,
    typeset offline by the server's own MathJax; a screenshot ``shot`` either way."""
    page.goto(url)
    try:
        page.wait_for_selector(f"text={text}", timeout=60000)
        page.wait_for_selector(".MathJax_Display", timeout=60000)
    finally:
        page.screenshot(path=SHOTS / shot, full_page=True)
    return page.inner_text("body")


def _files_url(room: Classroom, student: str, path: Path) -> str:
    """The URL of a file below the student's home, served by their own server."""
    return f"{room.url}/user/{student}/files/{path.relative_to(room.homes[student])}"


def _feedback_file(room: Classroom, student: str, assignment: str) -> Path:
    """The feedback page the student fetched last, below their home."""
    found = sorted(room.homes[student].glob(f"{assignment}/feedback/*/*.html"))
    assert found, f"no feedback fetched for {student}"
    return found[-1]


def _reads_typeset_feedback(room: Classroom, page, student: str, name: str) -> str:
    """A student opens fetched feedback with formulas in the browser: their own
    server's MathJax typesets them, offline."""
    _login(page, room.url, student)
    url = _files_url(room, student, _feedback_file(room, student, name))
    return _typeset_page(page, url, "Score", "student-feedback-math.png")


def _ana_reads_feedback(room: Classroom, page) -> str:
    """Ana fetches her feedback from the Assignment List and opens it."""
    _login(page, room.url, ANA)
    _assignment_list(page)
    row = _row(page, "submitted", A01)
    row.locator("button:text('Fetch Feedback')").click()
    row.locator("text=view feedback").wait_for(timeout=60000)
    feedback = _feedback_file(room, ANA, A01)
    page.goto(_files_url(room, ANA, feedback))
    page.wait_for_selector("text=Score", timeout=60000)
    page.screenshot(path=SHOTS / "student-feedback.png", full_page=True)
    return feedback.read_text()


def _ben_and_cy_submit(room: Classroom) -> None:
    right = reference_answers(HERE, A05)
    for student in (BEN, CY):
        room.run(student, f"{BIN}/nbgrader", "fetch_assignment", A05)
    room.answer(CY, A05, {**right, "softmax": FOREVER})
    room.run(CY, f"{BIN}/nbgrader", "submit", A05)
    room.answer(BEN, A05, {**right, "softmax": UNSTABLE})
    room.run(BEN, f"{BIN}/nbgrader", "submit", A05)
    due = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    room.teacher(f"{BIN}/nbgrader", "db", "assignment", "add", A05, f"--duedate={due}")
    time.sleep(1.5)
    room.answer(BEN, A05, {**right, "attention_scores": UNSCALED})
    room.run(BEN, f"{BIN}/nbgrader", "submit", A05)


def _together(*calls) -> None:
    """Run the calls at once, as several people would; raise the first failure."""
    with ThreadPoolExecutor(len(calls)) as pool:
        for future in [pool.submit(call) for call in calls]:
            future.result()


def test_release_submit_grade_feedback(classroom):
    room, started = classroom, time.monotonic()
    SHOTS.mkdir(parents=True, exist_ok=True)
    room.teacher(f"{BIN}/course", "release", A01, A05)
    # One at a time: two first releases at once race to make the exchange's folder.
    for name in (A01, A05):
        room.teacher(f"{BIN}/nbgrader", "release_assignment", name)

    steps = {"released": time.monotonic() - started}
    others = threading.Thread(target=_ben_and_cy_submit, args=(room,))
    others.start()
    with browser() as (ctx, blocked):
        seen = _ana_fetches_answers_validates_submits(room, ctx.new_page())
    ana_env = _server_environment(ANA)
    others.join()
    steps["submitted"] = time.monotonic() - started

    # What Ana can edit changes no grade: her own record of the hints she asked.
    shutil.rmtree(room.homes[ANA] / ".course")
    # The instructor collects and grades, in their hub server (its hub token).
    _together(
        *[lambda n=n: room.teacher(f"{BIN}/nbgrader", "collect", n) for n in (A01, A05)]
    )
    with browser() as (ctx, _):
        _login(ctx.new_page(), room.url, TEACHER)
    token = {
        "JUPYTERHUB_API_TOKEN": _server_environment(TEACHER)["JUPYTERHUB_API_TOKEN"]
    }
    graded = room.teacher(
        f"{BIN}/course", "grade", A01, A05, "--cell-timeout", "15", env=token
    )
    room.teacher(f"{BIN}/course", "report", env=token)
    class_report = (room.course / "reports" / "report.html").read_text()
    steps["graded"] = time.monotonic() - started
    # The instructor's account is no root: its kernels were sandboxed all the same.
    run = json.loads((room.course / "reports" / "grading-run.json").read_text())
    assert run == {"sandboxed": True}, graded
    scores = {name: grading.cell_scores(room.course, name) for name in (A01, A05)}
    with browser() as (ctx, blocked_too):
        page = ctx.new_page()
        page.goto((room.course / "reports" / "report.html").as_uri())
        page.screenshot(path=SHOTS / "instructor-class-report.png", full_page=True)
        flagged = _teacher_opens_flagged(room, page)

    steps["formgrader"] = time.monotonic() - started
    # Feedback: released by the instructor, fetched by each student.
    # Ana's charge gone (as if formgrader had graded her 01): the feedback sets it.
    uncharged = _clear_hint_charges(room, ANA, A01)
    fed = room.teacher(f"{BIN}/course", "feedback", A01, A05, env=token)
    for name in (A01, A05):  # one at a time, as above (the exchange's feedback/)
        room.teacher(f"{BIN}/nbgrader", "release_feedback", name)
    fetching = threading.Thread(
        target=_together,
        args=[lambda s=s: room.run(s, f"{BIN}/nbgrader", "fetch_feedback", A05)
              for s in (BEN, CY)],
    )  # fmt: skip
    fetching.start()
    with browser() as (ctx, blocked_three):
        ana_feedback = _ana_reads_feedback(room, ctx.new_page())
    fetching.join()
    with browser() as (ctx, blocked_four):
        typeset = _reads_typeset_feedback(room, ctx.new_page(), BEN, A05)
    pages = {s: _feedback_file(room, s, A05).read_text() for s in (BEN, CY)}
    pages[ANA] = ana_feedback
    steps["feedback read"] = time.monotonic() - started
    print("classroom flow, seconds from the start:", steps, graded, sep="\n")

    # What the hub made private as it started: a student reads no solution, no
    # hidden test, no hint text (they come from the service), no one's grades.
    secrets = [
        HERE / "source" / A01 / f"{A01}.py",
        HERE / "tests" / "fixtures" / "a05.py",
        hintbook.TEXTS,
        room.course / "source" / A05 / f"{A05}.py",
        room.course / "gradebook.db",
    ]
    assert [p for p in secrets if services.can_read(ANA, p)] == []
    assert services.can_read(ANA, HERE / "course" / "checks" / "__init__.py")
    # Ana's JupyterLab: the student's tools only, no pop-up, nothing modified.
    assert "Nbgrader" in seen["menus"] and seen["dirty"] == 0, seen
    assert seen["instructor_tools"] == [], seen
    assert "Success" in seen["verdict"] or "passes" in seen["verdict"], seen
    assert blocked == blocked_too == blocked_three == blocked_four == []
    # Her server (and so her kernels) uses one torch thread: the class shares cores.
    assert ana_env.get("OMP_NUM_THREADS") == "1", sorted(ana_env)
    # Hints: given by the hub's service, each saying what it costs; charged into
    # the gradebook from the service's record (Ana deleted her own); in the report.
    assert all(f"costs {COST} points" in h for h in seen["hints"]), seen["hints"]
    assert f"hints: 2 asked, {2 * COST:g} points charged" in graded, graded
    assert "Hints asked, by exercise" in class_report
    assert f"<td>{ASKED}</td><td>2</td><td>1</td><td>{2 * COST:g}</td>" in class_report
    # Scores: Ana's right answers less her hints, Ben's latest (late) one, Cy's
    # loop interrupted.
    tests = {k: v for k, v in scores[A01][ANA].items() if k.startswith("test_")}
    charged = {k for k in tests if ASKED in k}
    assert tests and all(s == m for k, (s, m) in tests.items() if k not in charged)
    lost = sum(m - s for k, (s, m) in tests.items() if k in charged)
    assert lost == 2 * COST, scores[A01][ANA]
    ben = scores[A05][BEN]
    assert ben["test_softmax_stable"] == (1, 1)  # his first submission lost this
    assert ben["test_attention_scores_values"][0] == 0  # ... and his second this
    late = services.late_penalties(room.db, A05)
    assert late[BEN] == sum(s for s, _ in ben.values()) > 0  # penalty "zero"
    assert late[CY] == 0
    assert f"flagged {CY}/{A05}" in graded, graded
    assert "KeyboardInterrupt" in flagged
    assert "\\operatorname{softmax}" not in flagged  # typeset, not raw TeX
    assert "\\operatorname{softmax}" in pages[BEN]  # the feedback has the formula
    assert "\\operatorname{softmax}" not in typeset  # ... and Ben sees it typeset
    # Ana's feedback says what her hints took, under the cells they took it from.
    assert "Hints you asked on this exercise took" in pages[ANA], pages[ANA][-3000:]
    assert uncharged > 0 and f"hints: 2 asked, {2 * COST:g} points charged" in fed
    # Feedback: scores and verdicts, no hidden test source.
    assert "1/sqrt" in pages[BEN] or "sqrt(d" in pages[BEN], pages[BEN][-2000:]
    for student, page in pages.items():
        assert "Score" in page, student
        for secret in ("HIDDEN TESTS", "seed=", "_random("):
            assert secret not in page, (student, secret)


HUB_ROLES = """
import json, sys
from types import SimpleNamespace
from traitlets.config.loader import PyFileConfigLoader

c = PyFileConfigLoader("jupyterhub_config.py", path=sys.argv[1]).load_config()
spawner = SimpleNamespace(user=SimpleNamespace(name="ana"), environment={})
c.Spawner.pre_spawn_hook(spawner)
print(json.dumps([spawner.environment["COURSE_LANG"], list(c.Spawner.get("args", []))]))
"""


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_class_gets_its_language(tmp_path, lang):
    """``COURSE_LANG=zh make hub``: every server's verdicts in Chinese, and
    JupyterLab's menus from the zh-CN language pack; English by default."""
    env = {**os.environ, "COURSE_HUB_STATE": str(tmp_path), "COURSE_LANG": lang}
    proc = subprocess.run(
        [sys.executable, "-c", HUB_ROLES, str(HERE / "hub")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    said, args = json.loads(proc.stdout)
    assert said == lang
    settings = [a for a in args if a.startswith("--LabApp.app_settings_dir=")]
    assert (settings != []) == (lang == "zh"), args
