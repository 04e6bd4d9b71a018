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

from . import grading, i18n


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


def cmd_release(args) -> int:
    """Rebuild source notebooks, then regenerate ``release/`` (generate_assignment),
    for each edition (English, and Chinese in zh/)."""
    from . import authoring

    root = Path(args.root).resolve()
    authoring.main(["--root", str(root)])
    names = args.assignments or grading.assignments(root)
    for lang in i18n.EDITIONS:
        edition = i18n.edition_root(root, lang)
        if (edition / "nbgrader_config.py").is_file():  # a course copy may lack zh/
            grading.release(names, edition)
            for name in names:
                print(f"released {name} ({lang})")
    return 0


def _import_folder(root: Path, assignment: str, folder: Path) -> int:
    """Copy ``<student>.ipynb`` files or ``<student>.zip`` archives into submitted/."""
    import zipfile

    count = 0
    for item in sorted(folder.iterdir()):
        dest = grading.notebook_path(root, "submitted", assignment, student=item.stem)
        if item.suffix == ".ipynb":
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(item, dest)
        elif item.suffix == ".zip":
            dest.parent.mkdir(parents=True, exist_ok=True)
            with zipfile.ZipFile(item) as z:
                names = [
                    n
                    for n in z.namelist()
                    if n.endswith(".ipynb") and "checkpoint" not in n
                ]
                if names:
                    dest.write_bytes(z.read(names[0]))
        else:
            continue
        count += 1
    return count


def cmd_grade(args) -> int:
    """Autograde every submission on dask and print what happened to each."""
    from .grading import batch, cluster, gradebook, hintcharge, sandbox, settings
    from .grading.results import FAILED, summary, write_log

    root = Path(args.root).resolve()
    names = args.assignments or [
        a for a in grading.assignments(root) if batch.submissions(root, a)
    ]
    if args.from_folder:
        if len(names) != 1:
            print("--from needs exactly one assignment name.")
            return 2
        count = _import_folder(root, names[0], Path(args.from_folder))
        print(f"imported {count} submissions")
    try:  # the gradebook is set up before any worker starts
        plan = batch.plan(
            root=root,
            assignments=names,
            db_url=gradebook.url(root, args.db),
            force=args.force,
        )
    except gradebook.NotReleased as err:
        print(err)
        return 2
    chosen = settings.resolve(  # nbgrader_config.py, with the flags given
        root,
        cell_timeout=args.cell_timeout,
        notebook_timeout=args.timeout,
        sandbox="off" if args.no_sandbox else None,
        draw_seeds=False if args.fixed_seeds else None,
    )
    for name in plan.registered:
        print(f"{name} was not in the gradebook: registered it from source/{name}")
    where = args.scheduler or args.scheduler_file or "a dask cluster on this machine"
    print(f"grading {len(plan.todo)} submissions of {', '.join(names)} on {where}")
    with cluster.cluster(
        scheduler=args.scheduler,
        scheduler_file=args.scheduler_file,
        workers=args.workers,
        warm=not args.cold,
    ) as client:
        problems = cluster.sandbox_problems(client) if chosen.sandboxed else {}
        if problems:
            worker, reason = next(iter(problems.items()))
            print(f"Not grading: {sandbox.refusal(f'{worker}: {reason}')}")
            return 2
        results = batch.grade(
            plan, client=client, settings=chosen, ship_files=args.ship_files
        )
    print(summary(results))
    log = write_log(results, root / "reports", sandboxed=chosen.sandboxed)
    print(f"every submission: {log}")
    if not chosen.sandboxed:
        print("kernels were not sandboxed (--no-sandbox): the class report says so")
    code, said = hintcharge.settle(root=root, assignments=names, db_url=plan.db_url)
    print(said or "", end="\n" if said else "")
    failed = any(r.status == FAILED for r in results)
    return max(code, int(failed))


def cmd_feedback(args) -> int:
    """Generate feedback HTML with nbgrader (hidden tests and tracebacks removed)."""
    from .grading import gradebook

    root = Path(args.root).resolve()
    db = f"--CourseDirectory.db_url={gradebook.url(root, args.db)}"
    for name in args.assignments or grading.assignments(root):
        if (root / "autograded").is_dir():
            grading.nbgrader("generate_feedback", name, "--force", db, root=root)
            print(f"feedback for {name} in {root / 'feedback'}")
    return 0


def cmd_report(args) -> int:
    """Write the class report (CSV, PNG plots, HTML) in the course's language."""
    from .grading import report, settings

    root = Path(args.root).resolve()
    names = args.assignments or grading.assignments(root)
    with i18n.speaking(settings.course_language(root)):
        page = report.build(
            root=root, assignments=names, out=root / "reports", db_url=args.db
        )
    print(f"report: {page}")
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


def _grade_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=int, help="embedded cluster: worker processes "
                   "(default: one per core)")  # fmt: skip
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="grade on this dask scheduler's workers")  # fmt: skip
    p.add_argument("--scheduler-file", help="... or the scheduler in this file")
    p.add_argument("--ship-files", action="store_true",
                   help="workers have no shared file system: send each submission "
                   "as bytes, receive the graded notebook as bytes")  # fmt: skip
    p.add_argument("--force", action="store_true", help="regrade graded submissions")
    p.add_argument("--from", dest="from_folder",
                   help="first import a folder of <student>.ipynb or .zip")  # fmt: skip
    p.add_argument("--timeout", type=float,
                   help="seconds per submission (default: nbgrader_config.py's "
                   "GuardedExecute.notebook_timeout)")  # fmt: skip
    p.add_argument("--cell-timeout", type=int,
                   help="seconds per cell (default: nbgrader_config.py's "
                   "Execute.timeout)")  # fmt: skip
    p.add_argument("--cold", action="store_true",
                   help="start every kernel from scratch (no warm kernels)")  # fmt: skip
    p.add_argument("--no-sandbox", action="store_true",
                   help="run kernels as the grader, outside the sandbox "
                   "(docs/security.md; the class report says so)")  # fmt: skip
    p.add_argument("--fixed-seeds", action="store_true",
                   help="hidden tests use the seeds in source/ (to reproduce a grade)")  # fmt: skip


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
        "release": cmd_release,
        "grade": cmd_grade,
        "feedback": cmd_feedback,
        "report": cmd_report,
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
    _grade_options(parsers["grade"])
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
