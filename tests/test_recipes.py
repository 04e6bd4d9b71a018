"""The cluster recipes of ``docs/grading-at-scale.md`` build what they promise,
offline: the SLURM job script dask-jobqueue generates, and the DaskCluster resource
for Kubernetes."""

import importlib.util
import shlex
import subprocess
import sys
from pathlib import Path

import services

RECIPES = Path(__file__).resolve().parent.parent / "docs" / "recipes"


def _recipe(name: str):
    spec = importlib.util.spec_from_file_location(name, RECIPES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_slurm_job_script(tmp_path):
    slurm = _recipe("slurm")
    files = services.tls_files(tmp_path)
    folder = files.ca.parent
    for made, name in ((files.ca, "ca.pem"), (files.cert, "cert.pem"),
                       (files.key, "key.pem")):  # fmt: skip
        assert made == folder / name  # the names the recipe reads
    with slurm.make_cluster(
        queue="gpu-free", account="course", tls_folder=folder
    ) as cluster:
        script = cluster.job_script()
        address = cluster.scheduler_address
    assert "#SBATCH -p gpu-free" in script and "#SBATCH -A course" in script
    assert "#SBATCH --mem=" in script and "#SBATCH -t 02:00:00" in script
    worker = next(ln for ln in script.splitlines() if "dask_worker" in ln)
    argv = shlex.split(worker)
    assert argv[0] == sys.executable  # the course's environment runs the worker
    last = {flag: len(argv) - 1 - argv[::-1].index(flag) for flag in argv}
    assert argv[last["--nthreads"] + 1] == "1"  # the last of a repeated flag wins
    assert argv[last["--memory-limit"] + 1] == "0"
    assert "--nanny" in argv  # a worker that dies is started again
    # Mutual TLS: the scheduler's address, and each worker's key and CA.
    assert address.startswith("tls://"), address
    assert argv[last["--protocol"] + 1] == "tls://"
    assert argv[last["--tls-key"] + 1] == str(folder / "key.pem")
    assert argv[last["--tls-ca-file"] + 1] == str(folder / "ca.pem")
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
