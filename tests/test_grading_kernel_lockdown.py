"""A kernel's limits (``course/grading/kernel/lockdown.py``): the process cap of an
unprivileged grader's sandbox counts the sandbox's processes alone."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from services import reachable_by_all

from course.grading.kernel import lockdown

# Forks until refused (children sleep, then are killed); prints how many it made.
FORKS = textwrap.dedent(
    """
    import os, resource, signal, sys, time
    cap = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_NPROC, (cap, cap))
    pids = []
    for _ in range(3 * cap):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    print(len(pids))
    """
)
OUTSIDE = 30  # the user's own processes, outside any sandbox


def _forks(script, *, namespace: bool, cap: int = 10) -> int:
    """How many processes ``nobody`` forks under a cap of ``cap``, while it has
    :data:`OUTSIDE` processes of its own running; inside a user namespace of its
    own (as an unprivileged grader's sandbox) or not."""
    runuser = shutil.which("runuser") or "/usr/sbin/runuser"
    inner = [sys.executable, str(script), str(cap)]
    if namespace:
        inner = ["unshare", "--user", "--map-user=1000", *inner]
    shell = (
        f"for i in $(seq {OUTSIDE}); do sleep 60 >/dev/null 2>&1 & done; "
        f"{' '.join(inner)}; kill $(jobs -p)"
    )
    proc = subprocess.run(
        [runuser, "-u", "nobody", "--", "bash", "-c", shell],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode in (0, 143), proc.stderr
    return int(proc.stdout.split()[0])


@pytest.mark.slow  # processes of another account, the runtime opened to it
@pytest.mark.skipif(os.geteuid() != 0, reason="runs as nobody (root)")
@pytest.mark.xdist_group("sandbox")  # it opens the Python runtime to every account
def test_a_cap_inside_a_user_namespace_counts_only_its_processes(tmp_path):
    assert lockdown.processes_counted_per_namespace()  # this machine's Linux
    script = tmp_path / "forks.py"
    script.write_text(FORKS)
    tmp_path.chmod(0o755)
    script.chmod(0o644)
    with reachable_by_all(Path(sys.executable), Path(sys.base_prefix) / "lib", script):
        inside = _forks(script, namespace=True)
        outside = _forks(script, namespace=False)
    assert 0 < inside < 10  # the cap holds, the user's other processes aside
    assert outside == 0  # the control: outside, the user's own processes count too


@pytest.mark.parametrize(
    ("release", "counted"),
    [
        ("6.18.44-fc-v1252", True),
        ("5.14.0-362.el9.x86_64", True),
        ("5.10.0-28-amd64", False),
        ("4.19.0", False),
        ("weird", False),
    ],
)
def test_the_kernel_release_is_read(monkeypatch, release, counted):
    monkeypatch.setattr(os, "uname", lambda: type("U", (), {"release": release})())
    assert lockdown.processes_counted_per_namespace() is counted
