"""``python -m course``: the course's commands for students and instructors.

=========  ==============================================================
lab        copy release/ into mywork/ (never overwriting) and open JupyterLab
release    regenerate release/ from source/ (all or named assignments)
grade      autograde submitted/ in parallel; each submission graded,
           flagged or failed with a reason
feedback   per-student HTML feedback (verdicts, no hidden test code)
report     class report: grades.csv, PNG plots, report.html
check      grade your own notebook against the full tests, hidden ones too
=========  ==============================================================
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from . import grading


def cmd_lab(args) -> int:
    """Copy each released assignment into ``mywork/`` and start JupyterLab there."""
    work = grading.ROOT / "mywork"
    for name in grading.assignments():
        src, dest = grading.ROOT / "release" / name, work / name
        if src.is_dir() and not dest.exists():
            shutil.copytree(src, dest)
    cmd = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={work}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    cmd += args.extra
    print("Opening", work, "in JupyterLab. Stop it with Ctrl-C.")
    os.execv(sys.executable, cmd)
    return 0


def cmd_release(args) -> int:
    """Rebuild source notebooks, then regenerate ``release/`` (generate_assignment)."""
    from . import authoring

    authoring.main([])
    names = args.assignments or grading.assignments()
    grading.release(names)
    for name in names:
        print(f"released {name}")
    return 0


def _import_folder(root: Path, assignment: str, folder: Path) -> int:
    """Copy ``<student>.ipynb`` files or ``<student>.zip`` archives into submitted/."""
    import zipfile

    count = 0
    for item in sorted(folder.iterdir()):
        dest = grading.notebook_path(root, "submitted", assignment, item.stem)
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
    """Autograde every submission in parallel and print what happened to each."""
    from .grading import batch

    root = Path(args.root).resolve()
    names = args.assignments or [
        a for a in grading.assignments(root) if batch.submissions(root, a)
    ]
    if args.from_folder:
        if len(names) != 1:
            print("--from needs exactly one assignment name.")
            return 2
        print(
            f"imported {_import_folder(root, names[0], Path(args.from_folder))} submissions"
        )
    results = []
    with batch.kernels(warm=not args.cold, progress=print) as env:
        for name in names:
            results += batch.grade(
                root,
                name,
                workers=args.workers,
                force=args.force,
                timeout=args.timeout,
                cell_timeout=args.cell_timeout,
                env=env,
            )
    print(batch.summary(results))
    print(f"every submission: {batch.write_log(results, root / 'reports')}")
    return 1 if any(r.status == batch.FAILED for r in results) else 0


def cmd_feedback(args) -> int:
    """Generate feedback HTML with nbgrader (hidden tests and tracebacks removed)."""
    root = Path(args.root).resolve()
    for name in args.assignments or grading.assignments(root):
        if (root / "autograded").is_dir():
            grading.nbgrader("generate_feedback", name, "--force", root=root)
            print(f"feedback for {name} in {root / 'feedback'}")
    return 0


def cmd_report(args) -> int:
    """Write the class report (CSV, PNG plots, HTML)."""
    from .grading import report

    root = Path(args.root).resolve()
    page = report.build(
        root, args.assignments or grading.assignments(root), root / "reports"
    )
    print(f"report: {page}")
    return 0


def cmd_check(args) -> int:
    """Grade one notebook against the full tests and print points and messages."""
    from .grading import selfcheck

    return selfcheck.run(Path(args.notebook), assignment=args.assignment)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m course", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    lab = sub.add_parser("lab", help=cmd_lab.__doc__)
    lab.add_argument("extra", nargs=argparse.REMAINDER, help="passed to jupyter lab")
    lab.set_defaults(func=cmd_lab)
    rel = sub.add_parser("release", help=cmd_release.__doc__)
    rel.add_argument("assignments", nargs="*")
    rel.set_defaults(func=cmd_release)
    for name, func in (
        ("grade", cmd_grade),
        ("feedback", cmd_feedback),
        ("report", cmd_report),
    ):
        p = sub.add_parser(name, help=func.__doc__)
        p.add_argument("assignments", nargs="*")
        p.add_argument("--root", default=".", help="the course folder (default: here)")
        p.set_defaults(func=func)
        if name == "grade":
            p.add_argument(
                "--workers", type=int, default=None, help="default: number of cores"
            )
            p.add_argument(
                "--force", action="store_true", help="regrade graded submissions"
            )
            p.add_argument(
                "--from", dest="from_folder", help="folder of <student>.ipynb or .zip"
            )
            p.add_argument(
                "--timeout", type=float, default=1800, help="seconds per submission"
            )
            p.add_argument(
                "--cell-timeout", type=int, default=120, help="seconds per cell"
            )
            p.add_argument(
                "--cold",
                action="store_true",
                help="start every kernel from scratch (no warm, forked kernels)",
            )
    chk = sub.add_parser("check", help=cmd_check.__doc__)
    chk.add_argument(
        "notebook",
        help="your notebook, e.g. mywork/03_head_slicing/03_head_slicing.ipynb",
    )
    chk.add_argument("--assignment", help="default: the notebook's file name")
    chk.set_defaults(func=cmd_check)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m course`` and the ``course`` script."""
    args = build_parser().parse_args(argv)
    return args.func(args)
