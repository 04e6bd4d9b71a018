"""The cluster recipes of ``docs/grading-at-scale.md`` build what they promise,
offline: the SLURM job script dask-jobqueue generates, and the DaskCluster resource
for Kubernetes."""

import importlib.util
import shlex
import subprocess
import sys
from pathlib import Path

RECIPES = Path(__file__).resolve().parent.parent / "docs" / "recipes"


def _recipe(name: str):
    spec = importlib.util.spec_from_file_location(name, RECIPES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_slurm_job_script():
    slurm = _recipe("slurm")
    with slurm.make_cluster(queue="gpu-free", account="course") as cluster:
        script = cluster.job_script()
    assert "#SBATCH -p gpu-free" in script and "#SBATCH -A course" in script
    assert "#SBATCH --mem=" in script and "#SBATCH -t 02:00:00" in script
    worker = next(ln for ln in script.splitlines() if "dask_worker" in ln)
    argv = shlex.split(worker)
    assert argv[0] == sys.executable  # the course's environment runs the worker
    last = {flag: len(argv) - 1 - argv[::-1].index(flag) for flag in argv}
    assert argv[last["--nthreads"] + 1] == "1"  # the last of a repeated flag wins
    assert argv[last["--memory-limit"] + 1] == "0"
    assert "--nanny" in argv  # a worker that dies is started again
    assert f"export PATH={Path(sys.executable).parent}:$PATH" in script
    check = subprocess.run(["bash", "-n"], input=script, text=True)
    assert check.returncode == 0


def test_kubernetes_cluster_spec():
    kubernetes = _recipe("kubernetes")
    spec = kubernetes.cluster_spec(image="course:1", volume="course-rwx", workers=8)
    worker = spec["spec"]["worker"]
    assert worker["replicas"] == 8
    (container,) = worker["spec"]["containers"]
    args = container["args"]
    assert args[:2] == ["dask", "worker"] and container["image"] == "course:1"
    assert args[args.index("--nthreads") + 1] == "1"
    assert args[args.index("--memory-limit") + 1] == "0"
    assert container["volumeMounts"][0]["mountPath"] == kubernetes.MOUNT
    claim = worker["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"]
    assert claim == "course-rwx"
    scheduler = spec["spec"]["scheduler"]["spec"]["containers"][0]
    assert scheduler["image"] == "course:1"  # the scheduler can import the course
