"""``python -m course``: the course's commands for students and instructors.

Every command works on the course folder named by --root (default: the
current folder), so a course installed read-only with pip works from its folder.

students:
  lab        copy release/ into mywork/ (never overwriting), open JupyterLab;
             COURSE_LANG=zh: the Chinese edition (zh/), in mywork-zh/
  check      grade your own notebook against all the tests, hidden ones too
  hint       the next hint for an exercise (as check.hint("...") in a notebook)
  answer     the worked answer of an exercise or a written answer, once you
             have tried it (as check.worked("...") in a notebook)
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

from . import grading, i18n, instructor, work

STUDENT_COMMANDS = ("lab", "check", "hint", "answer", "progress")


def cmd_lab(args) -> int:
    """Copy each released assignment into your work folder (``mywork/``) and start
    JupyterLab there.

    With COURSE_LANG=zh: the Chinese edition, in ``mywork-zh/``, with JupyterLab's
    menus in Chinese (the zh-CN language pack). Where the course folder has no
    ``release/``, the notebooks are released from the course the package ships.
    """
    root = Path(args.root or ".").resolve()
    lang = i18n.language()
    edition = i18n.edition_root(root, i18n.available(root, lang))
    mine = work.home(root=root, lang=lang)
    _copy_release(edition, mine, lang=lang)
    work.remember(mine, lang=lang)
    cmd = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={mine}"]
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
    print("Opening", mine, "in JupyterLab. Stop it with Ctrl-C.")
    os.execve(sys.executable, cmd, env)
    return 0


def _copy_release(edition: Path, mine: Path, *, lang: str) -> None:
    """Copy each assignment of ``edition``'s ``release/`` into ``mine``, never over
    one already there; without a ``release/``, the shipped course's release."""
    import tempfile

    release = edition / "release"
    with tempfile.TemporaryDirectory(prefix="course-lab-") as tmp:
        if not release.is_dir():
            from .grading.shipped import SHIPPED

            course = grading.make_course(Path(tmp), SHIPPED, lang=lang)
            grading.release(["*"], course)
            release = course / "release"
        for src in sorted(p for p in release.iterdir() if p.is_dir()):
            if not (mine / src.name).exists():
                shutil.copytree(src, mine / src.name)


def _student_work(args) -> Path:
    """The work folder of ``hint`` and ``progress``: ``--work``, else
    :func:`course.work.home` from the current folder."""
    if args.work:
        return Path(args.work)
    root = Path(args.root).resolve() if args.root else None
    return work.home(root=root, lang=i18n.language())


def cmd_hint(args) -> int:
    """Print the next hint for one exercise (e.g. softmax) and record it in your
    progress; where your last failed test named a mistake, its hint comes first."""
    from .hints import cli_hint

    return cli_hint(args.exercise, _student_work(args))


def cmd_answer(args) -> int:
    """Print the worked answer of an exercise (its solution and what its tests
    check) or of a written answer (the model answer and its rubric), once you have
    tried: its tests pass, or you have seen every hint; your own written answer is
    in its cell."""
    from .worked import cli_worked

    return cli_worked(args.item, _student_work(args))


def cmd_progress(args) -> int:
    """Show every assignment and exercise: not started, started, failing (with the
    mistake a test named) or passing; hints used; time spent. Kept in your own
    folder (.course/progress.sqlite), never sent anywhere."""
    from rich.console import Console

    from . import progress

    Console().print(progress.table(_student_work(args)))
    return 0


def cmd_check(args) -> int:
    """Grade notebooks against the full tests and print points and messages."""
    from . import progress
    from .grading.run import selfcheck

    notebooks = [Path(n) for n in args.notebooks]
    root = Path(args.root).resolve() if args.root else None

    def record(assignment: str, scores: dict, messages: dict) -> None:
        notebook = next(n for n in notebooks if n.stem == assignment)
        mine = work.home(start=notebook.resolve().parent, root=root, lang=lang)
        for exercise in progress.record_check(mine, assignment, scores, messages):
            print(progress.suggestion(exercise, in_notebook=False))

    lang = i18n.language()
    return selfcheck.run(
        notebooks,
        course=root or Path.cwd(),
        lang=lang,
        fixed_seeds=args.fixed_seeds,
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
        "answer": cmd_answer,
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
        p.add_argument(  # a student's commands find the work without it
            "--root",
            default=None if name in STUDENT_COMMANDS else ".",
            help="the course folder (default: the current one)",
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
        "notebooks",
        nargs="+",
        metavar="notebook",
        help="your notebooks, e.g. mywork/03_head_slicing/03_head_slicing.ipynb "
        "(each graded as the assignment its file is named after)",
    )
    parsers["check"].add_argument(
        "--fixed-seeds",
        action="store_true",
        help="the hidden tests' own seeds (default: drawn for each run, as in a "
        "class), to see a verdict again",
    )
    parsers["hint"].add_argument("exercise", help="e.g. softmax, split_heads")
    parsers["answer"].add_argument(
        "item", help="an exercise or a written answer, e.g. softmax, why_out_in"
    )
    for name in ("hint", "answer", "progress"):
        parsers[name].add_argument(
            "--work",
            help="your work folder (default: the one you are in, else mywork/ of "
            "--root, else the one `course lab` opened; mywork-zh/ in Chinese)",
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m course`` and the ``course`` script."""
    args = build_parser().parse_args(argv)
    return args.func(args)
