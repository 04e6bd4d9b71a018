"""JupyterLab's Check and Hint buttons: the Jupyter server extension behind them.

The buttons are a JupyterLab extension of their own (``course/labextension/``, plain
JavaScript, installed with the package); they ask this server, which answers with
the course's own commands, run as a student runs them, in the notebook's folder:

* ``GET /course/labels``: the buttons' words in the course's language
  (``COURSE_LANG``; the verdict catalog, ``verdicts.po``).
* ``POST /course/check`` ``{"path": ...}``: ``python -m course check NOTEBOOK``,
  its report as text. The notebook is not written to.
* ``POST /course/hint`` ``{"path": ..., "cell": ...}``: ``python -m course hint
  EXERCISE``, for the exercise the cell ``cell`` belongs to.

A ``path`` is a notebook's path as JupyterLab names it, relative to the server's
``root_dir``; one that leaves it (``..``, an absolute path, a link out) is refused.
The installed configuration (``jupyter_server_config.d/attention-by-hand.json``)
enables the extension; this module imports nothing of the grader.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path, PurePosixPath

import tornado.web
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join

from . import hintbook
from .i18n import N_, say

#: The folder of the buttons' JupyterLab extension (one labextensions folder).
LABEXTENSIONS = Path(__file__).resolve().parent / "labextension"
#: Its package name (``package.json``; its folder's name too, as JupyterLab needs).
NAME = json.loads(next(LABEXTENSIONS.glob("*/package.json")).read_text("utf-8"))["name"]
ROUTE = "course"  # under the server's base URL: /course/labels, check, hint
CHECK_SECONDS = 900  # a whole notebook's check, model and hidden tests included
HINT_SECONDS = 60

#: What the buttons and their panel say (``{fields}`` filled in by the page).
LABELS = {
    "check": N_("Check"),
    "check_caption": N_(
        "Save this notebook and grade it against all its tests, hidden ones too"
    ),
    "hint": N_("Hint"),
    "hint_caption": N_("The next hint for the exercise of the selected cell"),
    "panel": N_("Check and hints"),
    "checking": N_(
        "Checking {notebook}: it is saved, then graded against all its tests. "
        "This takes a minute or two."
    ),
    "asking": N_("Asking for the next hint for the selected cell…"),
    "check_failed": N_("The check could not run: {reason}"),
    "hint_failed": N_("No hint could be given: {reason}"),
    "not_saved": N_("The notebook could not be saved: {reason}"),
    "no_notebook": N_("Open a notebook first, then press the button in its toolbar."),
    "validate_notice": N_(
        "Validate runs the visible tests only. Hidden tests run when your notebook "
        "is graded: press Check to run them all now."
    ),
}
NOT_IN_ROOT = N_("{path} is not a notebook in the folder JupyterLab shows.")
NO_FILE = N_("There is no notebook {path}.")
NO_EXERCISE = N_(
    "The selected cell belongs to no exercise: select an exercise's answer cell "
    "or one of its tests, then ask again."
)
TOO_LONG = N_("It took longer than {seconds} seconds and was stopped.")
STOPPED = N_("python -m course {command} stopped with exit status {status}.")
CHECK_TITLE = N_("Check of {notebook}")
HINT_TITLE = N_("Hint for {exercise}")


class Refused(Exception):
    """A request the extension will not serve: an HTTP status and a sentence."""

    def __init__(self, status: int, sentence: str):
        super().__init__(sentence)
        self.status = status


def notebook_in(root: Path, path: object) -> Path:
    """The notebook that ``path`` names inside the folder ``root``.

    Parameters
    ----------
    root : Path
        The server's ``root_dir``.
    path : object
        What the page sent: a relative, ``/``-separated path to an ``.ipynb``.

    Returns
    -------
    Path
        The notebook, resolved (links followed), inside ``root``.

    Raises
    ------
    Refused
        400 for what is no relative path of a notebook, 403 for one that leaves
        ``root`` (``..``, a link out of it), 404 for one that is not there.
    """
    if not isinstance(path, str) or not path.strip() or "\0" in path:
        raise Refused(400, say(NOT_IN_ROOT, path=repr(path)))
    parts = PurePosixPath(path).parts
    if (
        PurePosixPath(path).is_absolute()
        or "\\" in path
        or ".." in parts
        or not path.endswith(".ipynb")
    ):
        raise Refused(403, say(NOT_IN_ROOT, path=path))
    top = Path(root).resolve()
    notebook = top.joinpath(*parts).resolve()
    if not notebook.is_relative_to(top) or notebook == top:
        raise Refused(403, say(NOT_IN_ROOT, path=path))
    if not notebook.is_file():
        raise Refused(404, say(NO_FILE, path=path))
    return notebook


async def course_command(
    *args: str, cwd: Path, seconds: float
) -> tuple[int | None, str, str]:
    """Run ``python -m course ARGS`` in ``cwd`` with the server's environment.

    Returns ``(exit status, stdout, stderr)``; the status is None where it ran
    past ``seconds`` and was stopped (its whole process group: nbgrader, kernels).
    """
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "course",
        *args,
        cwd=cwd,
        env=dict(os.environ),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), seconds)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        return None, "", ""
    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def _failure(command: str, status: int, output: str) -> str:
    """Why a command did not run: its exit status and the end of what it said."""
    return say(STOPPED, command=command, status=status) + "\n" + output[-2000:]


class CourseHandler(APIHandler):
    """What the three routes share: the notebook asked about, errors as JSON."""

    auth_resource = "kernels"  # a check runs the notebook's code, as a kernel does

    def field(self, name: str) -> object:
        """The field ``name`` of the request's JSON object (None if not there)."""
        body = self.get_json_body()
        return body.get(name) if isinstance(body, dict) else None

    def notebook(self) -> Path:
        """The request's notebook (:func:`notebook_in` the server's root)."""
        return notebook_in(Path(self.settings["server_root_dir"]), self.field("path"))

    def refuse(self, status: int, sentence: str) -> None:
        """Answer ``{"message": sentence}`` with ``status``."""
        self.set_status(status)
        self.finish(json.dumps({"message": sentence}))


class LabelsHandler(CourseHandler):
    """``GET /course/labels``: :data:`LABELS` in the course's language."""

    @tornado.web.authenticated
    def get(self) -> None:
        self.finish(json.dumps({key: say(text) for key, text in LABELS.items()}))


class CheckHandler(CourseHandler):
    """``POST /course/check {"path"}``: ``course check`` of that notebook."""

    @tornado.web.authenticated
    @authorized("execute")
    async def post(self) -> None:
        try:
            notebook = self.notebook()
        except Refused as refused:
            return self.refuse(refused.status, str(refused))
        status, out, err = await course_command(
            "check", notebook.name, cwd=notebook.parent, seconds=CHECK_SECONDS
        )
        if status is None:
            return self.refuse(504, say(TOO_LONG, seconds=CHECK_SECONDS))
        if status not in (0, 1):  # 0: every point; 1: some lost; else it did not run
            return self.refuse(500, _failure("check", status, out + err))
        title = say(CHECK_TITLE, notebook=notebook.name)
        self.finish(json.dumps({"title": title, "text": out, "passed": status == 0}))


class HintHandler(CourseHandler):
    """``POST /course/hint {"path", "cell"}``: ``course hint`` of the exercise the
    cell belongs to (its answer cell or one of its tests)."""

    @tornado.web.authenticated
    @authorized("execute")
    async def post(self) -> None:
        try:
            notebook = self.notebook()
        except Refused as refused:
            return self.refuse(refused.status, str(refused))
        cell = self.field("cell")
        found = hintbook.place(cell if isinstance(cell, str) else None)
        if found is None:
            return self.refuse(400, say(NO_EXERCISE))
        exercise = found[1]
        status, out, err = await course_command(
            "hint", exercise, cwd=notebook.parent, seconds=HINT_SECONDS
        )
        if status is None:
            return self.refuse(504, say(TOO_LONG, seconds=HINT_SECONDS))
        if status not in (0, 2):  # 0: a hint; 2: none left (it says so)
            return self.refuse(500, _failure("hint", status, out + err))
        title = say(HINT_TITLE, exercise=exercise)
        self.finish(json.dumps({"title": title, "text": out, "exercise": exercise}))


def _jupyter_server_extension_points() -> list[dict]:
    """What Jupyter server finds in this module: the extension, itself."""
    return [{"module": "course.lab"}]


def serve_labextension(serverapp) -> list:
    """Let each JupyterLab application of ``serverapp`` find the buttons'
    extension in the package (``LabApp.extra_labextensions_path``), where no
    installed copy is found: an editable install (``pip install -e .``) installs
    no data files. Returns the applications told.

    Jupyter server loads its extensions in the order of their names, so this one
    (``course.lab``) comes before ``jupyterlab`` reads its paths.
    """
    told = []
    for apps in serverapp.extension_manager.extension_apps.values():
        for app in apps:
            if not hasattr(app, "extra_labextensions_path"):
                continue
            paths = [*app.extra_labextensions_path, *app.labextensions_path]
            if not any((Path(p) / NAME / "package.json").is_file() for p in paths):
                app.extra_labextensions_path = [
                    *app.extra_labextensions_path,
                    str(LABEXTENSIONS),
                ]
                told.append(app)
    return told


def _load_jupyter_server_extension(serverapp) -> None:
    """Add the routes under the server's base URL; serve the buttons' extension
    (:func:`serve_labextension`)."""
    for app in serve_labextension(serverapp):
        serverapp.log.info(
            "course.lab: %s finds %s in %s", app.name, NAME, LABEXTENSIONS
        )
    base = url_path_join(serverapp.web_app.settings["base_url"], ROUTE)
    handlers = [
        (url_path_join(base, "labels"), LabelsHandler),
        (url_path_join(base, "check"), CheckHandler),
        (url_path_join(base, "hint"), HintHandler),
    ]
    serverapp.web_app.add_handlers(".*$", handlers)
