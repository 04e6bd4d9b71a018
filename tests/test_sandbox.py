"""The attack suite: submissions that go after the grader, graded by a real
``course grade``, once as root and once as an unprivileged grader.

Every attack is a correct submission with more code in the answer cell of
``describe_config``: it tries one route, prints ``LEAK-...`` if a read got through
and ``RAN-<name>`` when it is done (so an attack that broke early fails the test
instead of passing it); what the writes did is read on the machine afterwards (a
write can succeed inside the sandbox, on its private copy of a folder). Afterwards: no ``LEAK``, every ``RAN``, the honest students of the
same run keep full marks, and the course folder, the course package, the venv's
``.pth`` files, the gradebook's stored test cells and every other student's files
are what they were before the run. A control run with ``--no-sandbox`` shows the
read attacks succeed there, so these tests can fail.
"""

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import services
from harness import fill, printed, reference_answers

import course
from course import grading

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="grades as root and as a user"),
    pytest.mark.xdist_group("sandbox"),
]
A = "01_config"
GRADER = "abh-grader"
RUNUSER = shutil.which("runuser") or "/usr/sbin/runuser"
TOKEN = f"course-sandbox-{uuid.uuid4().hex[:8]}"  # stray processes and files
SECRET = f"secret-{uuid.uuid4().hex}"  # in the grader's environment only
SITE = next(p for p in sys.path if p.endswith("site-packages"))
HONEST = ("honest1", "honest2")

# {root}, {token}, {secret}, {site}, {course}: filled in per run.
ATTACKS = {
    "read_source": "print('LEAK-source', len(open('{root}/source/01_config/01_config.ipynb').read()))",
    "read_other": "print('LEAK-other', len(open('{root}/submitted/honest1/01_config/01_config.ipynb').read()))",
    "list_course": "import os\nseen = set(os.listdir('{root}')) & {{'source', 'submitted', 'gradebook.db', 'nbgrader_config.py'}}\nif seen:\n    print('LEAK-listing', seen)",
    "overwrite_other": "for stage in ('submitted', 'autograded'):\n    p = f'{root}/{{stage}}/honest2/01_config/01_config.ipynb'\n    try:\n        open(p, 'w').write('{{}}')\n        pass\n    except OSError:\n        pass",
    "gradebook": "import sqlite3\ndb = sqlite3.connect('file:{root}/gradebook.db?mode=rw', uri=True)\ndb.execute(\"update grade_cells set max_score = 0\")\ndb.execute(\"update source_cell set source = 'pass'\")\ndb.commit()",
    "plant_course": "open('{course}/__init__.py', 'a').write('\\n# planted\\n')",
    "plant_config": "open('{root}/nbgrader_config.py', 'a').write('\\n# planted\\n')",
    "plant_pth": "open('{site}/{token}.pth', 'w').write('import os\\n')",
    "write_etc": "open('/etc/{token}', 'w').write('x')",
    "write_root": "open('/root/{token}', 'w').write('x')",
    "see_processes": "import os\nfor pid in [p for p in os.listdir('/proc') if p.isdigit()]:\n    try:\n        cmd = open(f'/proc/{{pid}}/cmdline', 'rb').read()\n    except OSError:\n        continue\n    if any(name in cmd for name in (b'nbgrader', b'distributed', b'pytest', b'grade')):\n        print('LEAK-process', pid, cmd)",
    "environment": "import os\nif '{secret}' in str(dict(os.environ)) or '{secret}' in open('/proc/self/environ').read():\n    print('LEAK-environment')",
    "cgroup": "open('/sys/fs/cgroup/pids/cgroup.procs', 'w').write('1')\nprint('LEAK-cgroup')",
    "namespaces": "import ctypes, glob, os\nlibc = ctypes.CDLL(None, use_errno=True)\nfor path in glob.glob('/proc/*/ns/net'):\n    try:\n        fd = os.open(path, os.O_RDONLY)\n    except OSError:\n        continue\n    if libc.setns(fd, 0) == 0:\n        print('LEAK-setns', path)\nif libc.unshare(0x10000000) == 0:\n    print('LEAK-unshare')",
    "ptrace": "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nif libc.ptrace(16, 1, 0, 0) == 0:\n    print('LEAK-ptrace')",
    "outlive": "import os, sys\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(3600)', '{token}'])\n    os._exit(0)\nos.wait()",
    "kill_all": "import os, signal\nfor pid in [int(p) for p in os.listdir('/proc') if p.isdigit()]:\n    if pid != os.getpid():\n        try:\n            os.kill(pid, signal.SIGKILL)\n        except OSError:\n            pass\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n    pass",
    "kill_worker": "import os, signal\npid = os.getppid()\nwhile pid > 1:\n    if b'spawn_main' in open(f'/proc/{{pid}}/cmdline', 'rb').read():\n        os.kill(pid, signal.SIGKILL)\n        print('LEAK-killed-worker')\n        break\n    pid = int(open(f'/proc/{{pid}}/stat').read().rsplit(')', 1)[1].split()[1])",
    "families": "import os, socket\ntry:\n    socket.socket(40, socket.SOCK_STREAM).close()\n    print('LEAK-vsock')\nexcept OSError:\n    pass\ntry:\n    os.memfd_create('x')\n    print('LEAK-memfd')\nexcept OSError:\n    pass",
    "flood_log": "import os\nfor _ in range(1024):\n    os.write(1, b'x' * (1 << 20))\n    os.write(2, b'x' * (1 << 20))",
    "plant_ipc": "import json, os, socket\nipc = os.path.dirname(json.load(open('/run/connection.json'))['ip'])\nfor n in range(3):\n    try:\n        socket.socket(socket.AF_UNIX).bind(os.path.join(ipc, f'{token}-{{n}}'))\n        print('LEAK-ipc-socket')\n    except OSError:\n        pass\ntry:\n    open(os.path.join(ipc, '{token}'), 'w').close()\n    print('LEAK-ipc-file')\nexcept OSError:\n    pass",
    "processes": "import os, signal, time\npids = []\nfor _ in range(200):\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n    if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n    pids.append(pid)\nfor pid in pids:\n    os.kill(pid, signal.SIGKILL)\n    os.waitpid(pid, 0)\nif len(pids) > 64:\n    print('LEAK-processes', len(pids))",
    "files": "import os\nmade = 0\nfor n in range(40000):\n    try:\n        open(f'/tmp/{token}-{{n}}', 'w').close()\n    except OSError:\n        break\n    made += 1\nfor n in range(made):\n    os.unlink(f'/tmp/{token}-{{n}}')\nif made > 16384:\n    print('LEAK-files', made)",
    "network": "import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=3).close()\n    print('LEAK-network')\nexcept OSError:\n    pass",
}
# ipykernel forwards what a kernel writes to its raw streams into the notebook: the
# grader keeps the first 10 MiB of the flood, drops the rest, and grades the
# submission all the same, flagged for the instructor.
CUT = ("flood_log",)
READS = ("read_source", "read_other", "list_course")  # the control run's attacks


def _attack(name: str, fields: dict) -> str:
    code = ATTACKS[name].format(**fields)
    body = "\n".join("    " + line for line in code.splitlines())
    return f"try:\n{body}\nexcept Exception:\n    pass\nprint('RAN-{name}')\n"


def _make_class(folder: Path, attacks, port: int) -> Path:
    root = grading.make_course(folder / "course")
    grading.release([A], root)
    release = json.loads(grading.notebook_path(root, "release", A).read_text())
    ref = reference_answers(root, A)
    fields = {"root": root, "token": TOKEN, "secret": SECRET, "site": SITE,
              "course": Path(course.__file__).parent, "port": port}  # fmt: skip
    students = {s: ref for s in HONEST}
    for name in attacks:
        code = _attack(name, fields) + ref["describe_config"]
        students[f"attack_{name}"] = {**ref, "describe_config": code}
    for student, answers in students.items():
        path = grading.notebook_path(root, "submitted", A, student=student)
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(fill(release, answers)))
    return root


def _fingerprint(root: Path) -> dict:
    """What no submission may change: hashes of files, and the gradebook's cells."""
    files = [p for p in (root / "source").rglob("*") if p.is_file()]
    files += [p for p in (root / "release").rglob("*") if p.is_file()]
    files += [p for p in (root / "submitted").rglob("*") if p.is_file()]
    files += [root / "nbgrader_config.py"]
    files += [p for p in Path(course.__file__).parent.rglob("*.py")]
    files += [p for p in Path(SITE).glob("*.pth")]
    out = {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
    db = root / "gradebook.db"
    if db.exists():
        with sqlite3.connect(db) as conn:
            for table in ("grade_cells", "source_cell", "solution_cells", "base_cell"):
                out[table] = sorted(map(str, conn.execute(f"select * from {table}")))
    return out


def _grade(root: Path, *, user: str | None, extra=()) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "course", "grade", A, f"--root={root}",
           "--workers=2", "--cell-timeout=60", "--timeout=240", *extra]  # fmt: skip
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
           "PGPASSWORD": SECRET, "LANG": "C.UTF-8"}  # fmt: skip
    if user:
        env["HOME"] = str(root.parent)
        cmd = (
            [RUNUSER, "-u", user, "--", "env", "-i"]
            + [f"{k}={v}" for k, v in env.items()]
            + cmd
        )
    else:
        env["HOME"] = os.environ.get("HOME", "/root")
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)


@pytest.fixture(scope="module", params=["root", "user"])
def attacked(request, tmp_path_factory):
    """One class per grader, with every attack; graded once; what changed."""
    folder = tmp_path_factory.mktemp(f"attacked-{request.param}")
    folder.chmod(0o755)
    listener = __import__("socket").create_server(("127.0.0.1", 0))
    root = _make_class(folder, ATTACKS, listener.getsockname()[1])
    with (
        services.reachable_by_all(
            Path(sys.executable), Path(sys.base_prefix) / "lib", root
        ),
        services.unix_accounts([GRADER], folder / "home", "x"),
    ):
        user = None
        if request.param == "user":
            user = GRADER
            subprocess.run(["chown", "-R", GRADER, folder / "course"], check=True)
            subprocess.run(["chown", GRADER, folder], check=True)
        before = _fingerprint(root)
        proc = _grade(root, user=user)
        after = _fingerprint(root)
    listener.close()
    yield root, proc, before, after
    for leftover in (
        Path("/etc", TOKEN),
        Path("/root", TOKEN),
        Path(SITE, TOKEN + ".pth"),
    ):
        leftover.unlink(missing_ok=True)


def test_the_run_grades_everyone(attacked):
    root, proc, _, _ = attacked
    assert proc.returncode == 0, proc.stdout + proc.stderr
    graded = {p.name for p in (root / "autograded").iterdir()}
    assert graded == {p.name for p in (root / "submitted").iterdir()}, proc.stdout


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_every_attack_fails(attacked, name):
    root, proc, _, _ = attacked
    out = printed(root, A, f"attack_{name}")
    if name in CUT:  # its output was cut: graded all the same, and flagged
        graded = grading.notebook_path(root, "autograded", A, student=f"attack_{name}")
        line = next(ln for ln in proc.stdout.splitlines() if f"attack_{name}/" in ln)
        assert graded.exists() and "output was truncated" in line, proc.stdout
        assert graded.stat().st_size < 64 << 20
        return
    assert f"RAN-{name}" in out, out[-2000:] + proc.stdout
    assert "LEAK" not in out, out[-2000:]


def test_honest_students_keep_full_marks(attacked):
    root, proc, _, _ = attacked
    scores = grading.cell_scores(root, A)
    for student in HONEST:
        tests = {c: s for c, s in scores[student].items() if c.startswith("test_")}
        lost = {c: s for c, s in tests.items() if s[0] != s[1]}
        assert tests and not lost, (student, lost, proc.stdout)


def test_nothing_outside_the_submission_changed(attacked):
    _, _, before, after = attacked
    changed = sorted(k for k in before if before[k] != after.get(k))
    assert not changed
    assert not Path("/etc", TOKEN).exists() and not Path("/root", TOKEN).exists()
    assert not Path(SITE, TOKEN + ".pth").exists()
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True)
    assert TOKEN not in ps.stdout


def test_without_the_sandbox_the_reads_succeed(tmp_path):
    """The control: the same read attacks, graded with --no-sandbox, get through
    (so the attacks are real and the tests above can fail)."""
    root = _make_class(tmp_path, READS, 9)
    proc = _grade(root, user=None, extra=["--no-sandbox"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in READS:
        assert "LEAK" in printed(root, A, f"attack_{name}"), name
    report = subprocess.run(
        [sys.executable, "-m", "course", "report", A, f"--root={root}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    page = (root / "reports" / "report.html").read_text()
    assert "without the sandbox" in page, report.stdout


def test_the_docs_count_the_attacks():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert f"grades {len(ATTACKS)} attacks" in readme
