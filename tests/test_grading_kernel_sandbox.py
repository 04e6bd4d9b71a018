"""course.grading.kernel.sandbox: the probe, a sandboxed warm kernel's life (interrupts,
its proxy's death), a machine that cannot sandbox, and secrets kept out of a
kernel's memory. The attacks themselves are tests/test_sandbox.py."""

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from jupyter_client.manager import KernelManager
from services import reachable_by_all

from course.grading import tool_env
from course.grading.kernel import launch, mounts, procs, sandbox, warm
from course.grading.kernel.launch import Launch

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="reads other processes' memory"),
    pytest.mark.xdist_group("sandbox"),
]
SECRET = f"secret-{uuid.uuid4().hex}"
VIEW = """
import json, os, socket
ipc = os.path.dirname(json.load(open("/run/connection.json"))["ip"])
planted = []
for name, plant in (("file", lambda p: open(p, "w").close()),
                    ("socket", lambda p: socket.socket(socket.AF_UNIX).bind(p))):
    try:
        plant(os.path.join(ipc, "planted-" + name))
        planted.append(name)
    except OSError:
        pass
print(json.dumps({"uid": os.getuid(), "pid": os.getpid(), "root": sorted(os.listdir("/")),
                  "env": sorted(os.environ), "cwd": os.getcwd(), "files": os.listdir("."),
                  "ipc": sorted(os.listdir(ipc)), "planted": planted}))
"""


def test_this_machine_can_sandbox_as_root_and_as_a_user():
    assert sandbox.probe() is None
    with reachable_by_all(Path(sys.executable), Path(sys.base_prefix) / "lib"):
        proc = subprocess.run(
            ["runuser", "-u", "nobody", "--", sys.executable, "-m", "course.grading.kernel.sandbox"],
            capture_output=True, text=True, cwd="/tmp", timeout=60,
        )  # fmt: skip
    assert proc.stdout.strip() == "sandboxed", proc.stderr


def test_a_machine_that_cannot_sandbox_is_refused_before_grading(tmp_path):
    """Inside a user namespace that may make no more of them (and maps no uid for a
    slot) no kernel can be sandboxed: course grade says why, in one sentence, and
    grades nothing."""
    from course import grading

    root = grading.make_course(tmp_path / "course")
    grading.release(["01_config"], root)
    release = grading.notebook_path(root, "release", "01_config")
    submitted = grading.notebook_path(root, "submitted", "01_config", student="ana")
    submitted.parent.mkdir(parents=True)
    submitted.write_bytes(release.read_bytes())
    script = (
        "echo 0 > /proc/sys/user/max_user_namespaces && exec "
        f"{sys.executable} -m course grade 01_config --root={root} --workers=1"
    )
    proc = subprocess.run(
        ["unshare", "--user", "--map-root-user", "sh", "-c", script],
        capture_output=True, text=True, timeout=300, env=tool_env(),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    refusal = [ln for ln in proc.stdout.splitlines() if ln.startswith("Not grading")]
    assert len(refusal) == 1 and "--no-sandbox" in refusal[0], proc.stdout
    assert not (root / "autograded").exists()


@pytest.fixture(scope="module")
def zygote(tmp_path_factory):
    """A zygote started with a secret in its environment, as a grader's would be."""
    tmp = tmp_path_factory.mktemp("zygote")
    env = {**tool_env(), "PGPASSWORD": SECRET, "HF_TOKEN": SECRET}
    proc, warm_env = warm.start(tmp, env)
    assert warm.wait_ready(proc, warm_env), (tmp / "zygote.log").read_text()
    yield proc, warm_env
    warm.stop(proc)


def _kernel(
    env: dict, tmp_path: Path, cwd: Path, policy: sandbox.Policy | None = None
) -> KernelManager:
    """A sandboxed kernel started through the course's kernel command, as
    GuardedExecute starts one: warm if ``env`` names a zygote, else cold."""
    km = KernelManager(kernel_name="python3", transport="ipc")
    (tmp_path / "ipc").mkdir()
    km.ip = str(tmp_path / "ipc" / "kernel")
    km.kernel_spec.argv[:3] = [sys.executable, "-m", "course.grading.kernel.warm"]
    given = Launch(policy or sandbox.Policy(), sandboxed=True).to_env()
    km.start_kernel(env={**env, "PGPASSWORD": SECRET, launch.ENV: given}, cwd=str(cwd))
    return km


def _execute(
    km: KernelManager, code: str, timeout: float = 60, dead: bool = False
) -> str:
    """What ``code`` prints; with ``dead``, what it printed before its kernel died."""
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        out = []
        try:
            kc.execute_interactive(
                code,
                timeout=timeout,
                output_hook=lambda m: out.append(m["content"].get("text", "")),
            )
        except TimeoutError:
            if not dead or km.is_alive():
                raise
        return "".join(out)
    finally:
        kc.stop_channels()


def test_a_sandboxed_kernel_sees_only_its_own_world(zygote, tmp_path):
    cwd = tmp_path / "notebook"
    cwd.mkdir()
    (cwd / "helper.py").write_text("X = 1\n")
    (cwd / "answers.ipynb").write_text("{}")
    km = _kernel(zygote[1], tmp_path, cwd)
    try:
        view = json.loads(_execute(km, VIEW))
    finally:
        km.shutdown_kernel(now=True)
    assert view["uid"] >= sandbox.SLOT_UID and view["pid"] == 2
    assert view["cwd"] == str(cwd) and view["files"] == ["helper.py"]
    assert "work" not in view["root"] or Path(sys.prefix).is_relative_to("/work")
    assert "PGPASSWORD" not in view["env"] and launch.ENV not in view["env"]
    _assert_sealed(view, tmp_path)


def _assert_sealed(view: dict, tmp_path: Path) -> None:
    """The kernel sees its own sockets in its IPC folder and can add nothing there."""
    assert len(view["ipc"]) == 5 and view["planted"] == [], view
    assert sorted(os.listdir(tmp_path / "ipc")) in ([], view["ipc"])


def _memory(pid: int) -> bytes:
    """The writable memory of process ``pid`` (read from outside, as root)."""
    chunks = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb") as mem:
        for line in maps:
            fields = line.split()
            if not fields[1].startswith("rw"):
                continue
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            try:
                mem.seek(lo)
                chunks.append(mem.read(hi - lo))
            except OSError:
                continue
    return b"".join(chunks)


def _sandboxed_kernels(zygote_pid: int) -> set[int]:
    """The zygote's descendants that are pid 2 of a PID namespace: its kernels."""
    found = set()
    for pid in procs.descendants(zygote_pid):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        nspid = next(ln for ln in status.splitlines() if ln.startswith("NSpid"))
        if nspid.split()[-1] == "2" and procs.running(pid):
            found.add(pid)
    return found


def test_no_secret_of_the_grader_reaches_a_kernel_s_memory(zygote, tmp_path):
    """The gradebook's password reaches the zygote in a request's line (which only
    the forked nbgrader reads) and the proxy in its environment: the kernel finds it
    nowhere in its memory. The proxy, which had it, shows the scan finds it."""
    argv = ["--version", f"--CourseDirectory.db_url=postgresql://u:{SECRET}@h/db"]
    ran = warm.nbgrader(argv, cwd=str(tmp_path), env=zygote[1], timeout=60)
    assert ran is not None and ran[1] == 0, ran
    km = _kernel(zygote[1], tmp_path, tmp_path)
    try:
        assert _execute(km, "print('up')").strip() == "up"
        kernels = _sandboxed_kernels(zygote[0].pid)
        assert kernels
        for pid in kernels:
            assert SECRET.encode() not in _memory(pid)
        assert SECRET.encode() not in _memory(zygote[0].pid)
        assert SECRET.encode() in _memory(km.provisioner.pid)  # the scan works
    finally:
        km.shutdown_kernel(now=True)


def test_an_interrupt_reaches_a_sandboxed_kernel(zygote, tmp_path):
    km = _kernel(zygote[1], tmp_path, tmp_path)
    try:
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        msg = kc.execute("import time\nwhile True:\n    time.sleep(0.1)")
        time.sleep(1)
        km.interrupt_kernel()
        reply = kc.get_shell_msg(timeout=30)
        while reply["msg_type"] == "kernel_info_reply":  # wait_for_ready asked twice
            reply = kc.get_shell_msg(timeout=30)
        assert reply["parent_header"]["msg_id"] == msg
        assert reply["content"]["ename"] == "KeyboardInterrupt"
        kc.stop_channels()
    finally:
        km.shutdown_kernel(now=True)


def test_a_sandbox_dies_with_its_proxy(zygote, tmp_path):
    km = _kernel(zygote[1], tmp_path, tmp_path)
    assert _execute(km, "print('up')").strip() == "up"
    kernels = _sandboxed_kernels(zygote[0].pid)
    assert kernels
    os.kill(km.provisioner.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(map(procs.running, kernels)):
        time.sleep(0.1)
    assert not any(map(procs.running, kernels))
    km.shutdown_kernel(now=True)


BALLAST = """
import os
held = 0
for folder in ("/tmp", "/dev/shm", os.environ["HOME"], "."):
    with open(os.path.join(folder, "ballast"), "wb") as f:
        for _ in range(11):
            f.write(b"x" * 2**24)
            f.flush()
            held += 2**24
            print(held >> 20, flush=True)
"""


@pytest.mark.parametrize("ram", [512 << 20, 0])
def test_a_sandbox_s_memory_holds_its_tmpfs_too(zygote, tmp_path, ram):
    """Its four writable folders (192 MiB each here) take memory outside any
    process's address space: with a cap of 512 MiB on the whole sandbox the kernel
    holds less than that (a write fails or the kernel is killed); without one (the
    control) it writes all 4 x 176 MiB."""
    policy = sandbox.Policy(memory=0, ram=ram, scratch=192 << 20, file_size=192 << 20)
    km = _kernel(zygote[1], tmp_path, tmp_path, policy)
    try:
        held = [int(n) for n in _execute(km, BALLAST, timeout=20, dead=True).split()]
    finally:
        km.shutdown_kernel(now=True)
    if ram:
        assert held and max(held) < ram >> 20, held
    else:
        assert max(held) == 4 * 176, held


def test_a_cold_kernel_is_sandboxed_too(tmp_path):
    """No zygote (``course grade --cold``, plain nbgrader): the kernel command
    sandboxes the kernel it starts."""
    env = tool_env()
    env.pop(warm.SOCKET_ENV, None)
    km = _kernel(env, tmp_path, tmp_path)
    try:
        view = json.loads(_execute(km, VIEW, timeout=120))
    finally:
        km.shutdown_kernel(now=True)
    assert view["uid"] >= sandbox.SLOT_UID and view["pid"] == 2
    _assert_sealed(view, tmp_path)


def test_a_fifo_in_the_notebook_folder_is_not_waited_for(tmp_path):
    """The working folder's copy skips what is not a regular file, at once."""
    origin, target = tmp_path / "origin", tmp_path / "target"
    origin.mkdir()
    target.mkdir()
    os.mkfifo(origin / "pipe")
    (origin / "helper.py").write_text("X = 1\n")
    start = time.monotonic()
    mounts._copy(str(origin), str(target), os.getuid())
    assert time.monotonic() - start < 5
    assert sorted(p.name for p in target.iterdir()) == ["helper.py"]
