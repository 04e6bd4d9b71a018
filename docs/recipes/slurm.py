"""Grade a class on a SLURM cluster: dask-jobqueue submits the workers as jobs.

Run it on a login node, from the course folder on the shared file system (NFS),
with the course's environment active there and on the compute nodes:

    python docs/recipes/slurm.py --jobs 32 --db postgresql+psycopg://grader@db/course

Each job is one dask worker: one process, one thread, so one notebook at a time;
its memory covers a kernel (capped at 4 GiB), the worker's zygote and nbgrader.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from dask_jobqueue import SLURMCluster

VENV = Path(sys.executable).parent  # the same environment on every node


def make_cluster(*, queue: str, account: str | None = None) -> SLURMCluster:
    """A SLURMCluster whose jobs are grading workers (no job is submitted yet)."""
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
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignments", nargs="*")
    parser.add_argument("--jobs", type=int, default=16)
    parser.add_argument("--queue", default=os.environ.get("SLURM_QUEUE", "normal"))
    parser.add_argument("--account")
    parser.add_argument("--db", required=True, help="PostgreSQL SQLAlchemy URL")
    args = parser.parse_args()
    from course.cli import main as course

    with make_cluster(queue=args.queue, account=args.account) as cluster:
        cluster.scale(jobs=args.jobs)
        return course(
            ["grade", *args.assignments, "--root", os.getcwd(), "--db", args.db]
            + ["--scheduler", cluster.scheduler_address]
        )


if __name__ == "__main__":
    sys.exit(main())
