"""What a cell is, and where a notebook lives: one home for nbgrader's conventions.

* **Roles** are nbgrader's own (:mod:`nbgrader.utils`): a *test* cell is a graded
  code cell that is no solution (nbgrader restores it from the release); an
  *answer* cell is a solution cell; a *locked* cell is one nbgrader overwrites.
  Every function here takes a cell as nbformat gives it or as plain JSON.
* **Markers** are the delimiters of nbgrader's own preprocessors
  (``ClearSolutions``, ``ClearHiddenTests``, ``ClearMarkScheme``), after the
  course's comment mark ``###``.
* **Grade ids**: a test cell of the exercise ``<answer>`` is named
  ``test_<answer>_<what>`` (``source/NN/NN.py``, ``# %% test=...``).
* **Hidden tests** hold ``check.<name>(..., seed=N)`` calls between the hidden
  markers; :data:`SEED` finds their seeds.
* **Folders** follow nbgrader's ``CourseDirectory.directory_structure``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from nbformat import NotebookNode, from_dict
from nbgrader import utils
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors.clearhiddentests import ClearHiddenTests
from nbgrader.preprocessors.clearmarkingscheme import ClearMarkScheme
from nbgrader.preprocessors.clearsolutions import ClearSolutions

from ..i18n import with_keys

COMMENT = "### "  # the course's comment mark before each of nbgrader's markers


def _marker(cls: type, trait: str) -> str:
    return COMMENT + cls.class_traits()[trait].default_value


BEGIN_SOLUTION = _marker(ClearSolutions, "begin_solution_delimeter")
END_SOLUTION = _marker(ClearSolutions, "end_solution_delimeter")
BEGIN_HIDDEN = _marker(ClearHiddenTests, "begin_test_delimeter")
END_HIDDEN = _marker(ClearHiddenTests, "end_test_delimeter")
BEGIN_MARK_SCHEME = _marker(ClearMarkScheme, "begin_mark_scheme_delimeter")
END_MARK_SCHEME = _marker(ClearMarkScheme, "end_mark_scheme_delimeter")
#: A line that is one of nbgrader's solution markers (the line and its newline).
SOLUTION_LINE = re.compile(
    rf"^[ \t]*({re.escape(BEGIN_SOLUTION)}|{re.escape(END_SOLUTION)})[ \t]*\n?", re.M
)
#: A solution region of an answer cell: its begin marker's line (group 1), the
#: solution (group 2) and its end marker (group 3).
SOLUTION_REGION = re.compile(
    rf"^([ \t]*{re.escape(BEGIN_SOLUTION)}[^\n]*\n)(.*?)(^[ \t]*{re.escape(END_SOLUTION)})",
    re.M | re.S,
)
#: A mark scheme of a task cell (markdown: a line holding nbgrader's bare
#: delimiter, e.g. ``=== BEGIN MARK SCHEME ===``); group 1 is the scheme.
MARK_SCHEME = re.compile(
    rf"^[^\n]*{re.escape(BEGIN_MARK_SCHEME.removeprefix(COMMENT))}[^\n]*\n(.*?)"
    rf"^[^\n]*{re.escape(END_MARK_SCHEME.removeprefix(COMMENT))}",
    re.M | re.S,
)
#: A line that is one of nbgrader's markers (never translated, never graded).
MARKER_LINE = re.compile(rf"^\s*{re.escape(COMMENT)}(BEGIN|END) ")
#: A hidden region of a test cell; group 1 is what it hides.
HIDDEN = re.compile(f"{re.escape(BEGIN_HIDDEN)}(.*?){re.escape(END_HIDDEN)}", re.S)
#: A seed of a hidden test's call.
SEED = re.compile(r"\bseed=\d+")
TEST_PREFIX = "test_"


def node(cell: dict) -> NotebookNode:
    """``cell`` as nbformat's node (nbgrader's utilities read attributes)."""
    return cell if isinstance(cell, NotebookNode) else from_dict(cell)


def grade_id(cell: dict, default: str = "") -> str:
    """The cell's nbgrader grade id (``default`` for a cell without one)."""
    return node(cell).get("metadata", {}).get("nbgrader", {}).get("grade_id", default)


def is_test(cell: dict) -> bool:
    """A test cell: graded code that is no solution (restored from the release)."""
    cell = node(cell)
    return (
        cell.get("cell_type") == "code"
        and bool(utils.is_grade(cell))
        and not utils.is_solution(cell)
    )


def is_answer(cell: dict) -> bool:
    """A cell the student writes (nbgrader's solution cell)."""
    return bool(utils.is_solution(node(cell)))


def is_locked(cell: dict) -> bool:
    """A cell nbgrader overwrites with the release's (given code, tests)."""
    return bool(utils.is_locked(node(cell)))


def has_hidden_tests(source: str) -> bool:
    """Whether a test cell's source holds a hidden region."""
    return BEGIN_HIDDEN in source


def is_test_id(name: str) -> bool:
    """Whether a grade id names a test cell (the course's naming rule)."""
    return name.startswith(TEST_PREFIX)


def exercise(test_id: str, answers: list[str]) -> str:
    """The answer that test cell ``test_id`` tests: the longest of ``answers``
    that it is named after (``test_split_heads_shape`` -> ``split_heads``), else
    ``test_id`` itself."""
    named = [a for a in answers if test_id.startswith(f"{TEST_PREFIX}{a}_")]
    return max(named, key=len, default=test_id)


def test_sources(nb: dict) -> dict[str, str]:
    """``{grade id: source}`` of a notebook's test cells."""
    return {
        grade_id(c): "".join(c.get("source", "")) for c in nb["cells"] if is_test(c)
    }


def stage_folder(root: Path, stage: str) -> Path:
    """``root``'s folder of nbgrader step ``stage`` (``submitted``, ...), which holds
    one folder per student for the steps that have them."""
    course = CourseDirectory(root=os.fspath(root))
    return Path(root) / getattr(course, f"{stage}_directory")


def folder(root: Path, stage: str, assignment: str, student: str | None = None) -> Path:
    """``root``'s folder of ``assignment`` at nbgrader step ``stage`` (``source``,
    ``release``, ``submitted``, ``autograded``, ``feedback``), a student's for the
    steps that have one, as ``CourseDirectory.format_path`` builds it."""
    course = CourseDirectory(root=os.fspath(root))
    return Path(course.format_path(stage, student or ".", assignment))


def notebook_path(
    root: Path, stage: str, assignment: str, *, student: str | None = None
) -> Path:
    """``<root>/<stage>[/<student>]/<a>/<a>.ipynb``."""
    return folder(root, stage, assignment, student=student) / f"{assignment}.ipynb"


def error_output(ename: str, evalue: str) -> NotebookNode:
    """An ``error`` output, as a kernel would send it."""
    return NotebookNode(
        output_type="error",
        ename=ename,
        evalue=evalue,
        traceback=[f"{ename}: {evalue}"],
    )


#: A graded test cell's metadata: the keys of the misconceptions its verdict names.
MISTAKES = "course_mistakes"


def error_messages(path: Path) -> dict[str, str]:
    """``{grade_id: error text}`` for each cell of an executed notebook that failed;
    each text names the misconceptions its verdict named
    (:func:`course.i18n.mistakes_of`, from the cell's :data:`MISTAKES`)."""
    nb = json.loads(Path(path).read_text("utf-8"))
    out = {}
    for cell in nb["cells"]:
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if grade_id(cell) and errors:
            text = "\n".join(f"{e['ename']}: {e['evalue']}" for e in errors)
            keys = cell.get("metadata", {}).get(MISTAKES, [])
            out[grade_id(cell)] = with_keys(text, keys)
    return out
