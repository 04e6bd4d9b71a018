"""JupyterLab's Check and Hint buttons (``course/labextension/``, ``course/lab.py``).

In Chromium, in each edition: ``course lab`` on a copy of the course whose work
folder holds a notebook with a wrong softmax; the toolbar's Check button (found by
its label, in that language) reports the failed test and its mistake in a panel,
without writing into the notebook; with the answer cell selected, Hint gives the
hint for that mistake. Screenshots go to ``reports/lab-buttons/``.

Without a browser: the server extension refuses a notebook outside the folder it
serves (and a request without the server's token), and the package installs every
file of the JupyterLab extension, whose file name follows its content.
"""

import hashlib
import json
import os
import re
import sys
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from browser import browser, cell
from nbformat import from_dict
from nbgrader.utils import compute_checksum
from services import course_lab, free_port, serving

from course import grading, i18n
from course import lab as server_extension

ASSIGNMENT = "05_softmax_and_scaling"
REPORTS = grading.ROOT / "reports" / "lab-buttons"
WRONG = """def softmax(scores, dim=-1):
    e = (scores - scores.amax()).exp()
    return e / e.sum(0, keepdim=True)"""
TESTS = ["test_softmax_rows", "test_softmax_stable", "test_softmax_random"]
SAID = {  # each edition's words: the buttons, the check's sentences, the hints
    "en": {
        "check": "Check",
        "hint": "Hint",
        "checking": "Checking",
        "report": "Check of",
        "mistake": "rows do not sum",  # the failed test's message
        "hint_title": "Hint for softmax",
        "hint_text": "wrong axis",  # the hint for that mistake
        "no_exercise": "belongs to no exercise",
        "validate": "Hidden tests run when your notebook is graded",
    },
    "zh": {
        "check": "检查",
        "hint": "提示",
        "checking": "正在检查",
        "report": "的检查结果",
        "mistake": "每行之和不为 1",
        "hint_title": "softmax 的提示",
        "hint_text": "沿错了维度",
        "no_exercise": "不属于任何练习",
        "validate": "评分时还会运行隐藏测试",
    },
}
ENTRY = ".course-lab-entry[data-kind='{kind}']"
FINISHED = ENTRY + ":is([data-state='done'], [data-state='failed'])"


def _notebook(lang: str) -> dict:
    """The released notebook cut to its first exercise: the title, the setup
    (without the model), the answer with a mistake, its tests (the last failure
    names the mistake whose hint comes first)."""
    edition = i18n.edition_root(grading.ROOT, lang)
    nb = json.loads(grading.notebook_path(edition, "release", ASSIGNMENT).read_text())
    cells = {c["id"]: c for c in nb["cells"]}
    cells["softmax"]["source"] = WRONG
    lines = cells["code-01"]["source"]
    lines = lines if isinstance(lines, str) else "".join(lines)
    cells["code-01"]["source"] = [x for x in lines.splitlines() if "checks" in x][0]
    # A locked cell cut by the test, not the student: Validate would say it changed.
    meta = cells["code-01"]["metadata"]["nbgrader"]
    meta["checksum"] = compute_checksum(from_dict(cells["code-01"]))
    keep = ["markdown-00", "code-01", "softmax", *TESTS]
    nb["cells"] = [cells[k] for k in keep]
    return nb


def _cells(path: Path) -> list:
    """What a student wrote and ran: each cell's id, source and outputs."""
    nb = json.loads(path.read_text())
    return [(c["id"], "".join(c["source"]), c.get("outputs")) for c in nb["cells"]]


@pytest.fixture(params=["en", "zh"])
def lab(request, tmp_path):
    """``course lab`` in one edition, its work folder holding the notebook above."""
    lang = request.param
    with course_lab(
        tmp_path, lang=lang, assignment=ASSIGNMENT, notebook=_notebook(lang)
    ) as (url, notebook):
        yield url, lang, notebook


def _button(page, label: str):
    """The notebook toolbar's button whose label is ``label``, exactly."""
    toolbar = page.locator(".jp-NotebookPanel-toolbar")
    exact = re.compile(rf"^\s*{re.escape(label)}\s*$")
    return toolbar.locator(".jp-ToolbarButtonComponent", has_text=exact)


def _press(page, label: str, kind: str, shots: Path, lang: str) -> str:
    """Press a button and return the text of the panel entry it made, finished."""
    before = page.locator(ENTRY.format(kind=kind)).count()
    _button(page, label).click()
    finished = page.locator(FINISHED.format(kind=kind))
    try:
        page.wait_for_function(
            "([sel, n]) => document.querySelectorAll(sel).length > n",
            arg=[FINISHED.format(kind=kind), before],
            timeout=300000,
        )
    except Exception:
        page.screenshot(path=str(shots / f"{kind}-not-finished-{lang}.png"))
        raise
    return finished.first.inner_text()


@pytest.mark.slow
def test_check_and_hint_buttons_in_the_notebook_toolbar(lab):
    url, lang, notebook = lab
    said = SAID[lang]
    REPORTS.mkdir(parents=True, exist_ok=True)
    written = _cells(notebook)
    with browser() as (ctx, blocked):
        page = ctx.new_page()
        page.set_viewport_size({"width": 1400, "height": 1000})
        page.goto(f"{url}/lab/tree/{ASSIGNMENT}/{ASSIGNMENT}.ipynb")
        toolbar = page.locator(".jp-NotebookPanel-toolbar")
        toolbar.locator("[data-command='course:check']").wait_for(timeout=60000)
        labels = {
            command: toolbar.locator(f"[data-command='course:{command}']").inner_text()
            for command in ("check", "hint")
        }
        commands = [
            _button(page, said[k]).get_attribute("data-command")
            for k in ("check", "hint")
        ]
        # Check: a sentence while it runs, then the report of the failed test.
        _button(page, said["check"]).click()
        running = page.locator(ENTRY.format(kind="check") + "[data-state='running']")
        running.wait_for(timeout=30000)
        while_running = running.inner_text()
        page.screenshot(path=str(REPORTS / f"checking-{lang}.png"))
        page.wait_for_selector(FINISHED.format(kind="check"), timeout=300000)
        entry = page.locator(ENTRY.format(kind="check"))
        report, state = entry.inner_text(), entry.get_attribute("data-state")
        page.screenshot(path=str(REPORTS / f"check-{lang}.png"))
        # Hint with the answer cell selected: the hint for the mistake it named.
        cell(page, 2).locator(".jp-InputPrompt").click()
        hint = _press(page, said["hint"], "hint", REPORTS, lang)
        page.screenshot(path=str(REPORTS / f"hint-{lang}.png"))
        # Hint with the title selected: no exercise, a sentence that says so.
        cell(page, 0).locator(".jp-InputPrompt").click()
        refused = _press(page, said["hint"], "hint", REPORTS, lang)
        refused_state = page.locator(ENTRY.format(kind="hint")).first
        refused_state = refused_state.get_attribute("data-state")
        # nbgrader's Validate (visible tests only) says that hidden tests remain.
        validate = page.get_by_text("Validate", exact=True)
        if not validate.is_visible():  # the panel narrowed the toolbar
            toolbar.locator(".jp-Toolbar-responsive-opener").click()
        validate.click()
        notice = page.locator(".validation-failed .course-hidden-tests")
        notice.wait_for(timeout=300000)
        validated = notice.inner_text()
        page.screenshot(path=str(REPORTS / f"validate-{lang}.png"))
    assert said["validate"] in validated, validated
    assert labels == {"check": said["check"], "hint": said["hint"]}, labels
    assert commands == ["course:check", "course:hint"]
    assert said["checking"] in while_running and f"{ASSIGNMENT}.ipynb" in while_running
    assert state == "done", report
    assert said["report"] in report and f"{ASSIGNMENT}.ipynb" in report, report
    assert re.search(r"✗ test_softmax_rows\s+0/1", report), report
    assert said["mistake"] in report, report
    assert said["hint_title"] in hint and said["hint_text"] in hint, hint
    assert refused_state == "failed" and said["no_exercise"] in refused, refused
    assert _cells(notebook) == written  # the check wrote nothing into it
    assert blocked == [], blocked


# --- the server extension, without a browser ---------------------------------

TOKEN = "course-lab-test-token"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``jupyter server`` with the student's configuration (which enables
    course.lab), serving a folder with a notebook; beside the folder, outside
    it, another notebook, and inside it a link to that one."""
    tmp = tmp_path_factory.mktemp("lab-server")
    root = tmp / "root"
    (root / ASSIGNMENT).mkdir(parents=True)
    notebook = root / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    notebook.write_text(json.dumps(_notebook("en")))
    (tmp / "outside.ipynb").write_text(json.dumps(_notebook("en")))
    (root / "link.ipynb").symlink_to(tmp / "outside.ipynb")
    port = free_port()
    cmd = [sys.executable, "-m", "jupyter", "server", "--no-browser"]
    cmd += ["--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}"]
    cmd += ["--ServerApp.port_retries=0", f"--IdentityProvider.token={TOKEN}"]
    cmd += [f"--ServerApp.root_dir={root}"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    env = {**os.environ, "COURSE_LANG": "en"}
    env["JUPYTER_CONFIG_PATH"] = str(grading.ROOT / "hub" / "student")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    url = f"http://127.0.0.1:{port}"
    probe = f"{url}/api/status?token={TOKEN}"
    with serving(cmd, probe=probe, log=tmp / "server.log", env=env, cwd=tmp):
        yield url


def _post(url: str, route: str, body: dict, token: str | None = TOKEN):
    """POST ``body`` to ``/course/<route>``: ``(status, answer)``."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"token {token}"
    request = urllib.request.Request(
        f"{url}/course/{route}", json.dumps(body).encode(), headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        text = error.read()
        try:
            return error.code, json.loads(text)
        except ValueError:
            return error.code, {"message": text.decode(errors="replace")}


OUTSIDE = "is not a notebook in the folder JupyterLab shows"  # lab.NOT_IN_ROOT


@pytest.mark.parametrize("route", ["check", "hint"])
@pytest.mark.parametrize(
    "path, status, words",
    [
        ("../outside.ipynb", 403, OUTSIDE),
        (f"{ASSIGNMENT}/../../outside.ipynb", 403, OUTSIDE),
        ("/etc/passwd", 403, OUTSIDE),
        ("link.ipynb", 403, OUTSIDE),  # a link out of the folder
        (f"{ASSIGNMENT}\\..\\..\\outside.ipynb", 403, OUTSIDE),
        ("missing.ipynb", 404, "There is no notebook missing.ipynb"),
        (42, 400, OUTSIDE),
        ("", 400, OUTSIDE),
    ],
)
def test_a_notebook_outside_the_served_folder_is_refused(
    server, route, path, status, words
):
    code, answer = _post(server, route, {"path": path, "cell": "softmax"})
    assert (code, words in answer.get("message", "")) == (status, True), answer


def test_the_server_answers_inside_its_folder_and_only_with_its_token(server):
    """The controls: a notebook inside is served (a hint, a cell of no exercise
    refused for what it is); without the token nothing is."""
    path = f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
    code, answer = _post(server, "hint", {"path": path, "cell": "softmax"})
    assert code == 200, answer
    assert answer["exercise"] == "softmax" and "softmax" in answer["text"], answer
    code, answer = _post(server, "hint", {"path": path, "cell": "markdown-00"})
    assert code == 400 and "belongs to no exercise" in answer["message"], answer
    code, _ = _post(server, "hint", {"path": path, "cell": "softmax"}, token=None)
    assert code == 403
    request = urllib.request.Request(f"{server}/course/labels")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 403
    request.add_header("Authorization", f"token {TOKEN}")
    with urllib.request.urlopen(request, timeout=30) as response:
        labels = json.loads(response.read())
    assert labels["check"] == "Check" and labels["hint"] == "Hint"


# --- the JupyterLab extension's files ---------------------------------------


def test_the_extension_is_loaded_from_a_file_named_by_its_content():
    """JupyterLab loads ``_build.load``; its name carries the hash of what it
    holds (as webpack names it), so a changed file is a new name to a browser."""
    folder = server_extension.LABEXTENSIONS / server_extension.NAME
    package = json.loads((folder / "package.json").read_text())
    scripts = sorted(p.name for p in (folder / "static").glob("*.js"))
    loaded = folder / package["jupyterlab"]["_build"]["load"]
    digest = hashlib.sha256(loaded.read_bytes()).hexdigest()[:20]
    assert package["name"] == server_extension.NAME == folder.name
    assert scripts == [loaded.name] == [f"remoteEntry.{digest}.js"], (
        f"rename it remoteEntry.{digest}.js, in package.json too"
    )
    schema = folder / "schemas" / server_extension.NAME / "plugin.json"
    toolbar = json.loads(schema.read_text())["jupyter.lab.toolbars"]["Notebook"]
    assert [item["command"] for item in toolbar] == ["course:check", "course:hint"]
    assert (
        f"'{server_extension.NAME}'" in loaded.read_text()
        and "':plugin'" in loaded.read_text()
    )


def test_pip_installs_every_file_of_the_extension_where_jupyter_finds_it():
    """``[tool.setuptools.data-files]`` names each file of ``course/labextension``
    (the JupyterLab extension, the server's configuration), under the folders
    JupyterLab and Jupyter server read; the package data holds them too."""
    pyproject = tomllib.loads((grading.ROOT / "pyproject.toml").read_text())
    setuptools = pyproject["tool"]["setuptools"]
    installed = {}
    for target, patterns in setuptools["data-files"].items():
        for pattern in patterns:
            for path in grading.ROOT.glob(pattern):
                installed[path.relative_to(server_extension.LABEXTENSIONS)] = (
                    Path(target) / path.name
                )
    files = {
        p.relative_to(server_extension.LABEXTENSIONS)
        for p in server_extension.LABEXTENSIONS.rglob("*")
    }
    files = {p for p in files if (server_extension.LABEXTENSIONS / p).is_file()}
    assert set(installed) == files
    labextensions = Path("share/jupyter/labextensions")
    for source, target in installed.items():
        if source.parts[0] == server_extension.NAME:
            assert target == labextensions / source
        else:
            assert target == Path("etc/jupyter/jupyter_server_config.d") / source.name
            config = json.loads((server_extension.LABEXTENSIONS / source).read_text())
            assert config["ServerApp"]["jpserver_extensions"] == {"course.lab": True}
    data = setuptools["package-data"]["course"]
    packaged = {p for pattern in data for p in (grading.ROOT / "course").glob(pattern)}
    assert {server_extension.LABEXTENSIONS / p for p in files} <= packaged
    student = grading.ROOT / "hub" / "student" / "jupyter_server_config.json"
    enabled = json.loads(student.read_text())["ServerApp"]["jpserver_extensions"]
    assert enabled["course.lab"] is True  # `course lab` and the hub's students
