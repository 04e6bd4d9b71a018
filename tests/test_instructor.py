"""``python -m course grade`` on a class with faulty submissions, then feedback and report.

Each fault must end graded, flagged or failed with a reason; the batch never aborts;
the correct student's score is unaffected by the others.
"""

import json
import os
import socket
import subprocess
import sys

import pytest
from harness import fill, printed, reference_answers

from course import grading
from course.grading import cells

# One class graded once: every test of this module runs on the same xdist worker.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("grade_cli")]

A = "01_config"

LOOP = "while True:\n    pass\n"
DEAF_LOOP = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass\n"
# 1 GiB at a time, up to 100 GiB: the kernel's 4 GiB cap stops it after a few.
# torch.empty touches no page, so the cap, not the machine's speed, decides.
HOG = "import torch\nhog = [torch.empty(2**28) for _ in range(100)]\n"
# Processes a cell leaves behind; each carries TOKEN in its command line.
TOKEN = "course-fault-token"
SLEEPER = f"import subprocess, sys\nCMD = [sys.executable, '-c', 'import time; time.sleep(3600)', '{TOKEN}']\n"
STRAYS = {
    "sleepers": SLEEPER + "kids = [subprocess.Popen(CMD) for _ in range(3)]\n",
    "deaf_child": f"import subprocess, sys\nkid = subprocess.Popen([sys.executable, '-c', 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)', '{TOKEN}'])\n",
    "daemon": SLEEPER
    + "import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        os.execv(CMD[0], CMD)\n    os._exit(0)\nos.wait()\n",
    "printer": "import itertools, threading\n\n\ndef spam():\n    for i in itertools.count():\n        print(i)\n\n\nthreading.Thread(target=spam, daemon=True).start()\n",
    "no_stdout": "import os, sys\nsys.stdout = open(os.devnull, 'w')\nos.close(1)\nos.close(2)\n",
}
# Answers that try the network and a hundred processes, and print how far they got.
NETWORK = "import socket\ntry:\n    socket.create_connection(('127.0.0.1', PORT), timeout=3).close()\n    print('NET:reached')\nexcept OSError:\n    print('NET:blocked')\n"
PROCESSES = (
    SLEEPER
    + "kids = []\ntry:\n    for _ in range(100):\n        kids.append(subprocess.Popen(CMD))\nexcept OSError:\n    pass\nprint(f'PROCS:{len(kids)}')\n"
)


def _submit(root, student, nb=None, text=None):
    path = grading.notebook_path(root, "submitted", A, student=student)
    path.parent.mkdir(parents=True, exist_ok=True)
    if nb is not None:
        path.write_text(json.dumps(nb))
    elif text is not None:
        path.write_text(text)


@pytest.fixture(scope="session")
def graded_class(tmp_path_factory):
    root = grading.make_course(tmp_path_factory.mktemp("class"))
    grading.release([A], root)
    release = json.loads(grading.notebook_path(root, "release", A).read_text())
    ref = reference_answers(root, A)
    _submit(root, "good", fill(release, ref))
    _submit(root, "blank", release)
    _submit(root, "loop", fill(release, {**ref, "count_parameters": LOOP}))
    _submit(root, "deaf", fill(release, {**ref, "count_parameters": DEAF_LOOP}))
    _submit(
        root,
        "exits",
        fill(release, {**ref, "query_linear": "import os\nos._exit(1)\n"}),
    )
    _submit(
        root,
        "sigkill",
        fill(
            release,
            {
                **ref,
                "query_linear": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
            },
        ),
    )
    _submit(root, "hog", fill(release, {**ref, "count_parameters": HOG}))
    _submit(
        root,
        "shapes",
        fill(
            release,
            {
                **ref,
                "count_parameters": "def count_parameters(m):\n    return 'many'\n",
                "query_linear": "def query_linear(model, layer):\n    return [[0.0]]\n",
            },
        ),
    )
    _submit(
        root,
        "sysexit",
        fill(release, {**ref, "query_linear": "import sys\nsys.exit(3)\n"}),
    )
    _submit(
        root,
        "nan",
        fill(
            release,
            {
                **ref,
                "count_parameters": "def count_parameters(m):\n    return float('nan')\n",
            },
        ),
    )
    _submit(
        root,
        "spam",
        fill(
            release,
            {
                **ref,
                "describe_config": ref["describe_config"]
                + "\nprint('x' * 20_000_000)\n",
            },
        ),
    )
    flood = ref["describe_config"] + "\nprint('x' * 100_000_000)\n"  # 100 MB
    _submit(root, "flood", fill(release, {**ref, "describe_config": flood}))
    phrase = ref["describe_config"] + "\nprint('... Output truncated ...')\n"
    _submit(root, "phrase", fill(release, {**ref, "describe_config": phrase}))
    for student, prelude in STRAYS.items():  # the answer itself stays right
        answers = {**ref, "describe_config": prelude + ref["describe_config"]}
        _submit(root, student, fill(release, answers))
    server = socket.create_server(("127.0.0.1", 0))  # a server the kernel may not reach
    port = server.getsockname()[1]
    for student, code in (
        ("network", NETWORK.replace("PORT", str(port))),
        ("procs", PROCESSES),
    ):
        _submit(
            root,
            student,
            fill(release, {**ref, "describe_config": code + ref["describe_config"]}),
        )
    deleted = fill(release, ref)
    deleted["cells"] = [
        c
        for c in deleted["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade_id")
        != "test_query_linear_first"
    ]
    _submit(root, "deleted", deleted)
    edited = fill(release, ref)
    for c in edited["cells"]:
        if (
            c["metadata"].get("nbgrader", {}).get("grade_id")
            == "test_count_parameters_model"
        ):
            c["source"] = "pass\n"
    _submit(root, "edited", edited)
    _submit(root, "badjson", text="{ this is not a notebook")
    (root / "submitted" / "missing" / A).mkdir(parents=True)
    (root / "submitted" / "missing" / A / "notes.txt").write_text("forgot the notebook")
    cmd = [
        sys.executable,
        "-m",
        "course",
        "grade",
        A,
        f"--root={root}",
        "--workers=2",
        "--cell-timeout=10",
        "--timeout=240",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
    server.close()
    return root, proc


def _line(out: str, student: str) -> str:
    return next((ln for ln in out.splitlines() if f" {student}/" in ln), "")


def test_summary_counts_every_submission(graded_class):
    _, proc = graded_class
    assert "24 submissions:" in proc.stdout, proc.stdout + proc.stderr
    assert proc.returncode == 1  # some failed, and it says so


def test_correct_student_unaffected(graded_class):
    root, proc = graded_class
    scores = grading.cell_scores(root, A)["good"]
    assert all(s == m for c, (s, m) in scores.items() if cells.is_test_id(c)), scores
    assert _line(proc.stdout, "good") == ""  # plainly graded


def test_a_flood_of_output_is_cut_and_the_rest_graded(graded_class):
    """100 MB printed by one answer: the output is cut, the instructor told, and
    every test earns its points; printing the limiter's words flags nothing."""
    root, proc = graded_class
    line = _line(proc.stdout, "flood")
    assert line.strip().startswith("flagged"), proc.stdout
    assert line.split(": ", 1)[1] == "output was truncated", line
    scores = grading.cell_scores(root, A)["flood"]
    assert all(s == m for c, (s, m) in scores.items() if cells.is_test_id(c)), scores
    assert _line(proc.stdout, "phrase") == ""  # plainly graded


def test_untouched_release_is_graded_zero(graded_class):
    root, _ = graded_class
    scores = grading.cell_scores(root, A)["blank"]
    assert sum(s for c, (s, m) in scores.items() if cells.is_test_id(c)) == 0


@pytest.mark.parametrize(
    "student,status,reason,cell",
    [
        ("loop", "flagged", "timed out", "count_parameters"),
        ("deaf", "flagged", "did not stop when interrupted", "count_parameters"),
        ("exits", "flagged", "the kernel died", "query_linear"),
        ("sigkill", "flagged", "the kernel died", "query_linear"),
        ("hog", "flagged", "ran out of memory", "count_parameters"),
        ("deleted", "flagged", "test cell test_query_linear_first was deleted", None),
        ("edited", "flagged", "test cell test_count_parameters_model was edited", None),
        ("badjson", "failed", "not valid JSON", None),
        ("missing", "failed", "no notebook", None),
    ],
)
def test_fault_ends_with_a_reason(graded_class, student, status, reason, cell):
    root, proc = graded_class
    line = _line(proc.stdout, student)
    assert line.strip().startswith(status) and reason in line, proc.stdout
    if cell:  # a fault in one cell costs that exercise only; the kernel goes on
        assert f"cell {cell}" in line, line
        scores = grading.cell_scores(root, A)[student]
        lost = {c for c, (s, m) in scores.items() if cells.is_test_id(c) and s < m}
        assert lost and all(c.startswith(f"test_{cell}") for c in lost), lost


def test_wrong_values_are_graded_with_messages(graded_class):
    root, _ = graded_class
    scores = grading.cell_scores(root, A)
    assert scores["nan"]["test_count_parameters_model"][0] == 0
    assert scores["nan"]["test_describe_config_values"][0] == 1
    assert scores["sysexit"]["test_describe_config_values"][0] == 1
    assert scores["spam"]["test_describe_config_values"][0] == 1
    messages = grading.cell_messages(
        grading.notebook_path(root, "autograded", A, student="shapes")
    )
    assert "should return" in messages["test_count_parameters_model"], messages
    assert scores["shapes"]["test_count_parameters_model"][0] == 0
    assert scores["shapes"]["test_query_linear_first"][0] == 0
    assert scores["shapes"]["test_describe_config_values"][0] == 1


def test_resume_skips_graded_submissions(graded_class):
    root, _ = graded_class
    cmd = [sys.executable, "-m", "course", "grade", A, f"--root={root}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    skipped = int(proc.stdout.split("(")[1].split(" skipped")[0])
    assert skipped >= 8, proc.stdout  # all but the failed ones are not graded again


def test_feedback_and_report(graded_class):
    root, _ = graded_class
    for cmd in (["feedback", A], ["report", A]):
        subprocess.run(
            [sys.executable, "-m", "course", *cmd, f"--root={root}"],
            check=True,
            timeout=600,
        )
    html = (root / "feedback" / "nan" / A / f"{A}.html").read_text()
    assert "CheckFailed" in html and "seed=" not in html and "BEGIN HIDDEN" not in html
    report = (root / "reports" / "report.html").read_text()
    assert (
        "scores_01_config.png" in report
        and (root / "reports" / "scores_01_config.png").stat().st_size > 1000
    )
    rows = (root / "reports" / "grades.csv").read_text().splitlines()
    assert len(rows) == 1 + len(grading.cell_scores(root, A))


def _seconds(root) -> dict[str, float]:
    import csv

    with open(root / "reports" / "grading.csv") as f:
        return {row["student"]: float(row["seconds"]) for row in csv.DictReader(f)}


@pytest.mark.parametrize("student", sorted(STRAYS))
def test_strays_die_with_their_notebook(graded_class, student):
    """Forked sleepers, a child deaf to SIGTERM, a setsid double fork, a thread that
    prints forever, a closed stdout: the submission costs at most its cell timeout
    plus 10 s more than an honest one, and nothing it started outlives it."""
    root, _ = graded_class
    seconds = _seconds(root)
    assert seconds[student] <= seconds["good"] + 10 + 10, seconds
    left = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True)
    assert TOKEN not in left.stdout, left.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_kernels_have_no_network(graded_class):
    root, _ = graded_class
    assert "NET:blocked" in printed(root, A, "network")


@pytest.mark.skipif(
    not os.access("/sys/fs/cgroup/pids", os.W_OK), reason="needs a pids cgroup"
)
def test_kernels_start_a_bounded_number_of_processes(graded_class):
    root, _ = graded_class
    started = int(printed(root, A, "procs").split("PROCS:")[1].split()[0])
    assert 0 < started < 64, started
