"""Run nbgrader on a course folder and read what it decided.

The package is in four parts and the modules they share
(``docs/architecture.md``):

* :mod:`~course.grading.kernel`: how one grading kernel is started, sandboxed
  and contained;
* :mod:`~course.grading.steps`: the nbgrader preprocessors, in the order
  ``nbgrader_config.py`` lists them;
* :mod:`~course.grading.run`: a grading run of a class;
* :mod:`~course.grading.hub`: the course hub's side (exchange, hint service).

The package re-exports what ``python -m course`` and the tests use most, all from
the shared modules at its top; each name lives in one module, and no module of
the package imports the package itself:

* :mod:`~course.grading.cells`: cell roles, markers, grade ids, course folders;
* :mod:`~course.grading.environment`: the grading processes' environments;
* :mod:`~course.grading.runs`: nbgrader on a course folder (release, a copy);
* :mod:`~course.grading.settings`: every setting, from ``nbgrader_config.py``;
* :mod:`~course.grading.gradebook`: where the scores are.
"""

from __future__ import annotations

from . import lean  # noqa: F401 - first: jsonschema without its URI grammar
from .cells import error_messages as cell_messages
from .cells import notebook_path
from .environment import TEMPLATES, kernel_env, public_env, tool_env
from .gradebook import cell_scores
from .lean import import_jsonschema_lean
from .runs import (
    ROOT,
    assignments,
    make_course,
    nbgrader,
    release,
    validate,
)

__all__ = [
    "ROOT",
    "TEMPLATES",
    "assignments",
    "cell_messages",
    "cell_scores",
    "import_jsonschema_lean",
    "kernel_env",
    "make_course",
    "nbgrader",
    "notebook_path",
    "public_env",
    "release",
    "tool_env",
    "validate",
]
