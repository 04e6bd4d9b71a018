"""Grade a class on Kubernetes: dask-kubernetes' operator runs the workers as pods.

Needs the Dask operator in the cluster, an image with the course installed
(``pip install .`` of this repository), a ReadWriteMany volume holding the course
folder, and a PostgreSQL service for the gradebook. Run it from a pod (JupyterHub's
instructor server, say) that mounts the same volume:

    python docs/recipes/kubernetes.py --image registry.example/course:1 \\
        --volume course-folder --workers 32 --db postgresql+psycopg://grader@db/course

The operator's scheduler speaks plain TCP (dask-kubernetes sets up no TLS), so
``course grade`` is told ``--insecure-scheduler``: before using it where students'
pods run in the same Kubernetes cluster (a JupyterHub on it), keep them from the
grading pods with a NetworkPolicy that admits only the cluster's own pods and the
instructor's (``dask.org/cluster-name: course-grading``); a scheduler reachable by
a student runs the student's code as the grader.
"""

from __future__ import annotations

import argparse
import sys

from dask_kubernetes.operator import KubeCluster, make_cluster_spec

MOUNT = "/srv/course"  # where every pod sees the course folder


def cluster_spec(*, image: str, volume: str, workers: int) -> dict:
    """The DaskCluster resource: workers of one thread that mount the course."""
    spec = make_cluster_spec(
        name="course-grading",
        image=image,
        n_workers=workers,
        resources={
            "requests": {"cpu": "1", "memory": "6G"},
            "limits": {"memory": "6G"},
        },
        worker_command=["dask", "worker", "--nthreads", "1", "--memory-limit", "0"],
        env={"OMP_NUM_THREADS": "1"},
    )
    pod = spec["spec"]["worker"]["spec"]
    pod["volumes"] = [
        {"name": "course", "persistentVolumeClaim": {"claimName": volume}}
    ]
    for container in pod["containers"]:
        container["volumeMounts"] = [{"name": "course", "mountPath": MOUNT}]
        # Kernels' boxes: a pids cgroup and a network namespace need these rights.
        container["securityContext"] = {"capabilities": {"add": ["SYS_ADMIN"]}}
    return spec


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignments", nargs="*")
    parser.add_argument("--image", required=True)
    parser.add_argument("--volume", required=True, help="the RWX claim's name")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--db", required=True, help="PostgreSQL SQLAlchemy URL")
    args = parser.parse_args()
    from course.cli import main as course

    spec = cluster_spec(image=args.image, volume=args.volume, workers=args.workers)
    with KubeCluster(custom_cluster_spec=spec) as cluster:
        return course(
            ["grade", *args.assignments, "--root", MOUNT, "--db", args.db]
            + ["--scheduler", cluster.scheduler_address, "--insecure-scheduler"]
        )


if __name__ == "__main__":
    sys.exit(main())
