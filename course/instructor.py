"""``python -m course``'s commands for instructors: release, grade, feedback and
report (:mod:`course.cli` parses the command line).

Each works on the course folder named by ``--root``; ``grade``, ``feedback`` and
``report`` take ``--db`` for a gradebook that is not ``gradebook.db`` there.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from . import grading, i18n
from .grading.cells import stage_folder


def cmd_release(args) -> int:
    """Rebuild source notebooks, then regenerate ``release/`` (generate_assignment),
    for each edition (English, and Chinese in zh/), and the tests the package
    ships for ``course check`` (course/data/selfcheck/)."""
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
    if root == grading.ROOT:  # a copy of the course (an instructor's) ships nothing
        from .grading import shipped

        for path in shipped.write(root):
            print(f"shipped {path} (course check's tests)")
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
    from .grading import gradebook, settings
    from .grading.kernel import sandbox
    from .grading.run import batch, cluster, hintcharge
    from .grading.run.results import FAILED, summary, write_log

    root = Path(args.root).resolve()
    remote = {  # the scheduler named, if any, and how it is reached
        "scheduler": args.scheduler,
        "scheduler_file": args.scheduler_file,
        "tls_ca_file": args.tls_ca_file,
        "tls_cert": args.tls_cert,
        "tls_key": args.tls_key,
        "insecure_scheduler": args.insecure_scheduler,
    }
    refused = cluster.refusal(**remote)
    if refused:
        print(refused)
        return 2
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
        **remote,
        workers=args.workers,
        warm=not args.cold,
        preload=chosen.preprocessors,
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
    if said:
        print(said)
    failed = any(r.status == FAILED for r in results)
    return max(code, int(failed))


def cmd_feedback(args) -> int:
    """Generate feedback HTML with nbgrader (hidden tests and tracebacks removed).

    Where hints cost points, their charge is settled first: a submission first
    autograded outside ``course grade`` (formgrader's button) is charged, as its
    submission time says, before its student reads feedback.
    """
    from .grading import gradebook, settings
    from .grading.run import hintcharge

    root = Path(args.root).resolve()
    autograded = stage_folder(root, "autograded")
    if not autograded.is_dir():
        print(f"no feedback: nothing autograded in {autograded}")
        return 0
    url = gradebook.url(root, args.db)
    names = args.assignments or grading.assignments(root)
    code = 0
    if settings.hint_policy(root).points_per_hint:
        code, said = hintcharge.settle(root=root, assignments=names, db_url=url)
        print(said)
        if code:
            print("the feedback shows the hint charges the gradebook already held")
    for name in names:
        grading.nbgrader("generate_feedback", name, "--force", root=root, db_url=url)
        print(f"feedback for {name} in {stage_folder(root, 'feedback')}")
    return code


def cmd_report(args) -> int:
    """Write the class report (CSV, PNG plots, HTML) in the course's language."""
    from .grading import settings
    from .grading.run import report

    root = Path(args.root).resolve()
    names = args.assignments or grading.assignments(root)
    with i18n.speaking(settings.course_language(root)):
        page = report.build(
            root=root, assignments=names, out=root / "reports", db_url=args.db
        )
    print(f"report: {page}")
    return 0


def grade_options(p: argparse.ArgumentParser) -> None:
    """Add ``course grade``'s own options to its parser.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The ``grade`` sub-command's parser.
    """
    p.add_argument("--workers", type=int, help="embedded cluster: worker processes "
                   "(default: one per core)")  # fmt: skip
    p.add_argument("--scheduler", metavar="tls://HOST:PORT",
                   help="grade on this dask scheduler's workers")  # fmt: skip
    p.add_argument("--scheduler-file", help="... or the scheduler in this file")
    p.add_argument("--tls-ca-file", help="the scheduler's CA certificate (default: "
                   "dask's distributed.comm.tls.ca-file)")  # fmt: skip
    p.add_argument("--tls-cert", help="this grader's certificate (default: dask's "
                   "distributed.comm.tls.client.cert)")  # fmt: skip
    p.add_argument("--tls-key", help="its private key (default: dask's "
                   "distributed.comm.tls.client.key)")  # fmt: skip
    p.add_argument("--insecure-scheduler", action="store_true",
                   help="grade on a plain tcp:// scheduler all the same (anyone "
                   "who reaches it can run code on it and on its workers)")  # fmt: skip
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
