"""jsonschema without its URI grammar, before anything of the grader imports it.

The package imports this module first (``course/grading/__init__.py``): nbformat,
which :mod:`course.grading.cells` imports, imports jsonschema at once.
"""

from __future__ import annotations

import sys


def import_jsonschema_lean() -> None:
    """Import jsonschema (nbformat's and nbgrader's validator) without the
    ``rfc3987_syntax`` that jupyter-events has installed beside it.

    jsonschema imports that package for its "iri" format checker, and importing it
    builds 38 Lark parsers: 2.9 s in the coordinator and in every worker's zygote,
    for a check that grading never makes (nbformat and nbgrader validate no
    formats). An ``import rfc3987_syntax`` later still works.
    """
    if "jsonschema" in sys.modules or "rfc3987_syntax" in sys.modules:
        return
    sys.modules["rfc3987_syntax"] = None  # so the import fails, and is skipped
    try:
        import jsonschema  # noqa: F401
    finally:
        del sys.modules["rfc3987_syntax"]


import_jsonschema_lean()
