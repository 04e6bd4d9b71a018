"""``python -m course check``: full grading of one's own notebook, for self-study.

JupyterLab's Validate button runs only the visible tests. This runs a real
``nbgrader autograde`` (hidden tests included) in a temporary course folder and
prints, per exercise, the points and the verdict of each test cell — never the test
code itself.

The tests come from the course folder's ``source/`` where it has one (an
instructor's), else from the course the package ships (:mod:`.shipped`): a
student needs nothing but the package and their notebook.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ...i18n import available, edition_root, say
from ..cells import error_messages, is_test_id, notebook_path
from ..gradebook import cell_scores
from ..runs import ROOT, has_source, make_course, nbgrader, release
from ..shipped import SHIPPED


def grade(
    notebooks: dict[str, Path],
    *,
    course: Path = ROOT,
    lang: str = "en",
    fixed_seeds: bool = False,
) -> dict[str, tuple[dict, dict]]:
    """Autograde each of ``notebooks`` (``{assignment: notebook}``) in the course
    in ``course``, edition ``lang``, in one course folder made for the run:
    ``{assignment: (scores, messages)}``, per test cell. ``fixed_seeds``: the
    hidden tests' own seeds, not seeds drawn for the run."""
    names = sorted(notebooks)
    with tempfile.TemporaryDirectory(prefix="course-check-") as tmp:
        root = make_course(Path(tmp), course, lang=lang, only=names)
        release(["*"], root)  # nbgrader's own glob: every assignment, one process
        for name, notebook in notebooks.items():
            dest = notebook_path(root, "submitted", name, student="me")
            dest.parent.mkdir(parents=True)
            shutil.copy(notebook, dest)
        # A sandbox where this machine allows one; else the student's own account.
        seeds = ["--DrawSeeds.enabled=False"] if fixed_seeds else []
        nbgrader("autograde", "*", "--GuardedExecute.sandbox=auto", *seeds, root=root)
        return {
            name: (
                cell_scores(root, name).get("me", {}),
                error_messages(notebook_path(root, "autograded", name, student="me")),
            )
            for name in names
        }


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


def tests_of(assignment: str, *, course: Path, lang: str) -> Path | None:
    """The course folder whose tests grade ``assignment``: ``course`` where its
    edition ``lang`` has the assignment's ``source/``, else the shipped course;
    ``None`` where neither has it."""
    for root in (course, SHIPPED):
        if has_source(edition_root(root, available(root, lang)), assignment):
            return root
    return None


def run(
    notebooks: list[Path],
    *,
    course: Path = ROOT,
    lang: str = "en",
    fixed_seeds: bool = False,
    then=None,
) -> int:
    """Grade each notebook (its assignment is its file name), print its report;
    exit status 0 when every autograded point is earned.

    ``course`` is the English course folder; ``lang`` picks its edition (an edition
    the folder lacks falls back to English); ``fixed_seeds`` as :func:`grade`.
    ``then(assignment, scores, messages)`` runs after each report (the CLI records
    progress and suggests hints).
    """
    missing = [n for n in notebooks if not n.exists()]
    if missing:
        print(say("No notebook at {notebook}.", notebook=missing[0]))
        return 2
    chosen = {n.stem: tests_of(n.stem, course=course, lang=lang) for n in notebooks}
    unknown = [name for name, tests in chosen.items() if tests is None]
    if unknown:
        print(say("The course has no assignment {assignment}.", assignment=unknown[0]))
        return 2
    lost = False
    for tests in dict.fromkeys(chosen.values()):  # each course folder, once
        mine = {n.stem: n for n in notebooks if chosen[n.stem] == tests}
        graded = grade(
            mine, course=tests, lang=available(tests, lang), fixed_seeds=fixed_seeds
        )
        for name, (scores, messages) in graded.items():
            if len(graded) > 1 or len(chosen) > 1:
                print(f"\n{name}")
            print(report(scores, messages))
            if then is not None:
                then(name, scores, messages)
            lost |= any(s != m for c, (s, m) in scores.items() if is_test_id(c))
    return 1 if lost else 0
