"""Grade a class on a SLURM cluster: dask-jobqueue submits the workers as jobs.

Run it on a login node, from the course folder on the shared file system (NFS),
with the course's environment active there and on the compute nodes:

    python docs/recipes/slurm.py --jobs 32 --tls-folder ~/.course-tls \\
        --db postgresql+psycopg://grader@db/course

Each job is one dask worker: one process, one thread, so one notebook at a time;
its memory covers a kernel (capped at 4 GiB), the worker's zygote and nbgrader.
The scheduler, its workers and ``course grade`` speak mutual TLS with the
instructor's files (``ca.pem``, ``cert.pem``, ``key.pem`` in ``--tls-folder``, a
folder of the instructor's alone on the shared file system; how to make them:
docs/grading-at-scale.md, "Who may use the cluster"): on a cluster other accounts
share, a plain ``tcp://`` scheduler runs anyone's code as the instructor, and
``course grade`` refuses one.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from dask_jobqueue import SLURMCluster
from distributed import Security

VENV = Path(sys.executable).parent  # the same environment on every node


def tls_flags(folder: Path) -> list[str]:
    """``course grade``'s options that name the TLS files in ``folder``."""
    return [f"--tls-ca-file={folder / 'ca.pem'}", f"--tls-cert={folder / 'cert.pem'}",
            f"--tls-key={folder / 'key.pem'}"]  # fmt: skip


def security(folder: Path) -> Security:
    """Mutual TLS for every role of the cluster, with the files in ``folder``."""
    ca, cert, key = (str(folder / name) for name in ("ca.pem", "cert.pem", "key.pem"))
    roles = ("client", "scheduler", "worker")
    return Security(
        tls_ca_file=ca,
        require_encryption=True,
        **{f"tls_{role}_cert": cert for role in roles},
        **{f"tls_{role}_key": key for role in roles},
    )


def make_cluster(
    *, queue: str, tls_folder: Path, account: str | None = None
) -> SLURMCluster:
    """A SLURMCluster whose jobs are grading workers (no job is submitted yet),
    over mutual TLS with the files in ``tls_folder``."""
    return SLURMCluster(
        queue=queue,
        account=account,
        cores=1,
        processes=1,
        memory="6GB",
        walltime="02:00:00",
        # One thread, no dask memory limit: the kernels have their own cap.
        worker_extra_args=["--nthreads", "1", "--memory-limit", "0"],
        job_script_prologue=[
            f"export PATH={VENV}:$PATH",
            "export OMP_NUM_THREADS=1",
        ],
        # cgroups (the kernels' boxes) and network namespaces need root; without
        # it the boxes fall back to markers (README, "Kernels contained").
        scheduler_options={"dashboard": False},
        protocol="tls://",
        security=security(tls_folder),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignments", nargs="*")
    parser.add_argument("--jobs", type=int, default=16)
    parser.add_argument("--queue", default=os.environ.get("SLURM_QUEUE", "normal"))
    parser.add_argument("--account")
    parser.add_argument("--tls-folder", type=Path, required=True,
                        help="ca.pem, cert.pem and key.pem, the instructor's")  # fmt: skip
    parser.add_argument("--db", help="the gradebook (a password: COURSE_GRADEBOOK_URL)")
    args = parser.parse_args()
    from course.cli import main as course

    tls = args.tls_folder.expanduser()
    with make_cluster(
        queue=args.queue, tls_folder=tls, account=args.account
    ) as cluster:
        cluster.scale(jobs=args.jobs)
        db = ["--db", args.db] if args.db else []
        return course(
            ["grade", *args.assignments, "--root", os.getcwd(), *db, *tls_flags(tls)]
            + ["--scheduler", cluster.scheduler_address]
        )


if __name__ == "__main__":
    sys.exit(main())
