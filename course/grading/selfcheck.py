"""``python -m course check``: full grading of one's own notebook, for self-study.

JupyterLab's Validate button runs only the visible tests. This runs a real
``nbgrader autograde`` (hidden tests included) in a temporary course folder and
prints, per exercise, the points and the verdict of each test cell — never the test
code itself.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ..i18n import available, edition_root, say
from .cells import error_messages, is_test_id, notebook_path
from .gradebook import cell_scores
from .runs import ROOT, has_source, make_course, nbgrader, release


def grade_one(
    notebook: Path, *, assignment: str, course: Path = ROOT, lang: str = "en"
) -> tuple[dict, dict]:
    """Autograde ``notebook`` as ``assignment`` of the course in ``course``, in its
    edition ``lang``: ``(scores, messages)`` per cell."""
    with tempfile.TemporaryDirectory(prefix="course-check-") as tmp:
        root = make_course(Path(tmp), course, lang=lang)
        release([assignment], root)
        dest = notebook_path(root, "submitted", assignment, student="me")
        dest.parent.mkdir(parents=True)
        shutil.copy(notebook, dest)
        # A sandbox where this machine allows one; else the student's own account.
        nbgrader("autograde", assignment, "--GuardedExecute.sandbox=auto", root=root)
        scores = cell_scores(root, assignment).get("me", {})
        messages = error_messages(
            notebook_path(root, "autograded", assignment, student="me")
        )
    return scores, messages


def report(scores: dict, messages: dict) -> str:
    """Points per test cell with its verdict, and the total."""
    lines, total, most = [], 0.0, 0.0
    for cell, (score, max_score) in scores.items():
        if not is_test_id(cell):
            continue
        total, most = total + (score or 0), most + max_score
        mark = "✓" if score == max_score else "✗"
        lines.append(f"{mark} {cell:45s} {score or 0:g}/{max_score:g}")
        if cell in messages:
            lines.append("    " + messages[cell].replace("\n", "\n    "))
    lines.append(
        say(
            "Total (autograded): {total:g}/{most:g}; written answers are "
            "graded by hand.",
            total=total,
            most=most,
        )
    )
    return "\n".join(lines)


def run(
    notebook: Path,
    *,
    assignment: str | None = None,
    course: Path = ROOT,
    lang: str = "en",
) -> int:
    """Grade, print the report; exit status 0 when every autograded point is earned.

    ``course`` is the English course folder; ``lang`` picks its edition (an edition
    the folder lacks falls back to English).
    """
    lang = available(course, lang)
    edition = edition_root(course, lang)
    if not notebook.exists():
        print(say("No notebook at {notebook}.", notebook=notebook))
        return 2
    assignment = assignment or notebook.stem
    if not has_source(edition, assignment):
        print(
            say(
                "No assignment {assignment} in {folder} (see --root).",
                assignment=assignment,
                folder=edition / "source",
            )
        )
        return 2
    scores, messages = grade_one(
        notebook, assignment=assignment, course=course, lang=lang
    )
    print(report(scores, messages))
    lost = any(s != m for c, (s, m) in scores.items() if is_test_id(c))
    return 1 if lost else 0
