"""``python -m course``: the course's commands for students and instructors.

Every command works on the course folder named by --root (default: the
current folder), so a course installed read-only with pip works from its folder.

students:
  lab        copy release/ into mywork/ (never overwriting), open JupyterLab;
             COURSE_LANG=zh: the Chinese edition (zh/), in mywork-zh/
  check      grade your own notebook against all the tests, hidden ones too
  hint       the next hint for an exercise (as check.hint("...") in a notebook)
  progress   every assignment and exercise: state, hints used, time spent

instructors:
  release    rebuild source/ notebooks, regenerate release/ (and zh/release/)
  grade      autograde submitted/ on dask (this machine, or --scheduler);
             each submission ends graded, flagged or failed with a reason
  feedback   per-student HTML feedback (verdicts, no hidden test code)
  report     class report: grades.csv, PNG plots, report.html

`python -m course COMMAND --help` tells more of each.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from . import grading, i18n, instructor


def cmd_lab(args) -> int:
    """Copy each released assignment into ``mywork/`` and start JupyterLab there.

    With COURSE_LANG=zh: the Chinese edition, in ``mywork-zh/``, with JupyterLab's
    menus in Chinese (the zh-CN language pack).
    """
    root = Path(args.root).resolve()
    lang = i18n.language()
    edition = i18n.edition_root(root, i18n.available(root, lang))
    work = _work(root, lang)
    for name in grading.assignments(edition):
        src, dest = grading.cells.folder(edition, "release", name), work / name
        if src.is_dir() and not dest.exists():
            shutil.copytree(src, dest)
    cmd = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={work}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    if lang != "en":  # the language pack's locale, as a settings default
        cmd.append(f"--LabApp.app_settings_dir={i18n.lab_settings(lang)}")
    cmd += args.extra[1:] if args.extra[:1] == ["--"] else args.extra
    env = dict(os.environ)
    student = root / "hub" / "student"  # the hub's student view: no instructor tools
    if student.is_dir():
        env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(
            filter(None, [str(student), env.get("JUPYTER_CONFIG_PATH")])
        )
    print("Opening", work, "in JupyterLab. Stop it with Ctrl-C.")
    os.execve(sys.executable, cmd, env)
    return 0


def _work(root: Path, lang: str) -> Path:
    """The student's own folder: ``mywork/`` (``mywork-zh/`` for the Chinese edition)."""
    return root / ("mywork" if lang == "en" else f"mywork-{lang}")


def _student_work(args) -> Path:
    return (
        Path(args.work)
        if args.work
        else _work(Path(args.root).resolve(), i18n.language())
    )


def cmd_hint(args) -> int:
    """Print the next hint for one exercise (e.g. softmax) and record it in your
    progress; where your last failed test named a mistake, its hint comes first."""
    from .hints import cli_hint

    return cli_hint(args.exercise, _student_work(args))


def cmd_progress(args) -> int:
    """Show every assignment and exercise: not started, started, failing (with the
    mistake a test named) or passing; hints used; time spent. Kept in your own
    folder (.course/progress.sqlite), never sent anywhere."""
    from rich.console import Console

    from . import progress

    Console().print(progress.table(_student_work(args)))
    return 0


def cmd_check(args) -> int:
    """Grade one notebook against the full tests and print points and messages."""
    from . import progress
    from .grading import selfcheck

    notebook = Path(args.notebook)
    work = progress.work_folder(notebook.resolve().parent)

    def record(assignment: str, scores: dict, messages: dict) -> None:
        for exercise in progress.record_check(work, assignment, scores, messages):
            print(progress.suggestion(exercise, in_notebook=False))

    return selfcheck.run(
        notebook,
        assignment=args.assignment,
        course=Path(args.root).resolve(),
        lang=i18n.language(),
        then=record,
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``course`` command line: one sub-command per task, each with --root."""
    parser = argparse.ArgumentParser(
        prog="course",
        description=__doc__.split("\n", 1)[1].replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands = {
        "lab": cmd_lab,
        "check": cmd_check,
        "hint": cmd_hint,
        "progress": cmd_progress,
        "release": instructor.cmd_release,
        "grade": instructor.cmd_grade,
        "feedback": instructor.cmd_feedback,
        "report": instructor.cmd_report,
    }
    parsers = {}
    for name, func in commands.items():  # listed, with their roles, in __doc__
        p = sub.add_parser(name, description=func.__doc__.replace("``", ""))
        p.set_defaults(func=func)
        parsers[name] = p
        p.add_argument(
            "--root", default=".", help="the course folder (default: the current one)"
        )
        if name in ("grade", "feedback", "report"):
            p.add_argument(
                "--db",
                metavar="URL",
                help="the gradebook's SQLAlchemy URL, e.g. postgresql+psycopg://"
                "USER@HOST/DB (default: sqlite, gradebook.db in the course folder)",
            )
        if name in ("release", "grade", "feedback", "report"):
            p.add_argument("assignments", nargs="*", help="default: all")
    instructor.grade_options(parsers["grade"])
    parsers["lab"].add_argument(
        "extra",
        nargs=argparse.REMAINDER,
        help="after --: passed to jupyter lab (e.g. -- --port=9999)",
    )
    parsers["check"].add_argument(
        "notebook",
        help="your notebook, e.g. mywork/03_head_slicing/03_head_slicing.ipynb",
    )
    parsers["check"].add_argument(
        "--assignment", help="default: the notebook's file name"
    )
    parsers["hint"].add_argument("exercise", help="e.g. softmax, split_heads")
    for name in ("hint", "progress"):
        parsers[name].add_argument(
            "--work", help="your folder (default: mywork/, mywork-zh/ in Chinese)"
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m course`` and the ``course`` script."""
    args = build_parser().parse_args(argv)
    return args.func(args)
