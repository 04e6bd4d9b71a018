"""Cheating submissions, graded with ``python -m course grade``: each earns 0 where it
cheats.

Two runs of the same kind of class on 05_softmax_and_scaling:

* the course as configured: every cheat earns 0 on the exercises it touches; the
  ones that change the grading tools are also flagged ``tampering`` and zero every
  later test; the honest student keeps full marks and is not flagged;
* the course with the static scan (``FlagTampering``) removed: every cheat, the
  routes the scan does not list included (a builtin taken as a value, a patched
  evidence recorder, forged or missing evidence, private and low-level softmax,
  the course's own oracle, answers precomputed for the seeds in ``source/``),
  earns 0 where it cheats, because the verdict is decided in the grader's
  process from what the student's code returned.
"""

import json
import subprocess
import sys

import pytest
from harness import fill, reference_answers

from course import grading
from course.checks import softmax as softmax_checks

# One class graded once: every test of this module runs on the same xdist worker.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("cheats")]

A = "05_softmax_and_scaling"
SOFTMAX_DIM0 = """
def softmax(scores, dim=-1):
    e = (scores - scores.max()).exp()
    return e / e.sum(0, keepdim=True)
"""


def _wrong_softmax_after(prelude: str) -> dict[str, str]:
    return {"softmax": prelude + "\n" + SOFTMAX_DIM0}


def _hard_coded_scores() -> str:
    Q, K = softmax_checks.sample_qk()
    numbers = softmax_checks.scores_oracle(Q, K).float().tolist()
    return f"import torch\n_S = torch.tensor({numbers})\n\n\ndef attention_scores(Q, K):\n    return _S.clone()\n"


SAMPLE_ONLY = """
import torch
from course import data, models as _m

with torch.no_grad():
    _A = _m.load_model()(**_m.load_tokenizer()(data.SAMPLE_TEXT, return_tensors="pt")).attentions[0]


def attention_weights(Q, K):
    return _A.clone()
"""

# cheat -> (answers, test cells that must earn 0, expect a tampering flag)
SOFTMAX_TESTS = ("test_softmax_rows", "test_softmax_stable", "test_softmax_random")
RUNTIME_CHEATS = {
    "allclose": (
        _wrong_softmax_after("import torch\ntorch.allclose = lambda *a, **k: True"),
        SOFTMAX_TESTS,
    ),
    "equal": (
        _wrong_softmax_after("import torch\ntorch.equal = lambda *a, **k: True"),
        SOFTMAX_TESTS,
    ),
    "assert_close": (
        _wrong_softmax_after(
            "import torch\ntorch.testing.assert_close = lambda *a, **k: None"
        ),
        SOFTMAX_TESTS,
    ),
    "showtraceback": (
        _wrong_softmax_after("get_ipython().showtraceback = lambda *a, **k: None"),
        SOFTMAX_TESTS,
    ),
    "custom_exc": (
        _wrong_softmax_after(
            "get_ipython().set_custom_exc((Exception,), lambda *a, **k: None)"
        ),
        SOFTMAX_TESTS,
    ),
    "excepthook": (
        _wrong_softmax_after("import sys\nsys.excepthook = lambda *a: None"),
        SOFTMAX_TESTS,
    ),
    "shortcut": (
        {"softmax": "import torch\nsoftmax = torch.nn.functional.softmax\n"},
        SOFTMAX_TESTS,
    ),
}
LIAR = """
import torch


class Liar(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        out = super().__torch_function__(func, types, args, kwargs or {})
        return True if func in (torch.allclose, torch.equal) else out


def attention_scores(Q, K):
    return torch.zeros(*Q.shape[:-1], K.shape[-2]).as_subclass(Liar)
"""
SCAN_ONLY_CHEATS = {
    "patch_checks": (
        _wrong_softmax_after(
            "from course.checks import softmax as _c\n"
            "_c.softmax_rows = _c.softmax_stable = _c.softmax_random = print"
        ),
        SOFTMAX_TESTS,
    ),
    "rebind_check": (
        _wrong_softmax_after(
            "class _Yes:\n    def __getattr__(self, name):\n        return print\n\n\n"
            "check = _Yes()"
        ),
        SOFTMAX_TESTS,
    ),
    "builtins": (
        _wrong_softmax_after("import builtins\nbuiltins.round = lambda *a, **k: 0"),
        SOFTMAX_TESTS,
    ),
    "lying_tensor": (
        {"attention_scores": LIAR},
        (
            "test_attention_scores_shape",
            "test_attention_scores_values",
            "test_attention_scores_random",
        ),
    ),
    "alias": (
        _wrong_softmax_after(
            "import torch\nt = torch\nt.allclose = lambda *a, **k: True"
        ),
        SOFTMAX_TESTS,
    ),
    "obfuscated": (
        _wrong_softmax_after(
            "setattr(__import__('tor' + 'ch'), 'all' + 'close', lambda *a, **k: True)"
        ),
        SOFTMAX_TESTS,
    ),
}
# Routes past the static scan's list: with the verdict decided out of the kernel,
# each still earns 0 where it cheats, scan or no scan.
NEW_ROUTES = {
    "builtin_value": (
        _wrong_softmax_after(
            "import course.checks.softmax as _m\nput = setattr\n"
            "put(_m, 'expect_close', lambda *a, **k: None)\n"
            "put(_m, 'expect_shape', lambda x, *a, **k: x)"
        ),
        SOFTMAX_TESTS,
    ),
    "patch_evidence": (
        {
            "softmax": "import torch\nimport course.checks.evidence as e\n"
            "e.invoke = lambda fn, name, args, kwargs, run: "
            "['value', torch.special.softmax(args[0], args[1])]\n" + SOFTMAX_DIM0
        },
        SOFTMAX_TESTS,
    ),
    "forged_evidence": (
        _wrong_softmax_after(
            "from IPython.display import display as _d\n"
            "_d({'application/vnd.course.evidence+json': {'name': 'softmax', "
            "'digest': '0', 'outcome': ['value', 1.0]}}, raw=True)"
        ),
        SOFTMAX_TESTS,
    ),
    "no_evidence": (
        _wrong_softmax_after("import os\nos.environ.pop('COURSE_EVIDENCE', None)"),
        SOFTMAX_TESTS,
    ),
    "private_softmax": (
        {
            "softmax": "import torch\nsoftmax = lambda s, dim=-1: torch._softmax(s, dim, False)"
        },
        SOFTMAX_TESTS,
    ),
    "aten_softmax": (
        {
            "softmax": "import torch\n"
            "softmax = lambda s, dim=-1: torch.ops.aten._softmax(s, dim, False)"
        },
        SOFTMAX_TESTS,
    ),
    "oracle": (
        {
            "attention_scores": "from course.checks import softmax as c\n\n\n"
            "def attention_scores(Q, K):\n    return c.scores_oracle(Q, K).float()\n"
        },
        ("test_attention_scores_values", "test_attention_scores_random"),
    ),
    "reads_hidden_tests": (  # prints every executed cell: feedback must not show it
        {
            "attention_scores": "print('\\n'.join(In))\n\n\n"
            "def attention_scores(Q, K):\n    return Q @ K.mT / Q.shape[-1] ** 0.5\n"
        },
        (),
    ),
    "table_for_source_seeds": (
        lambda: {"softmax": _table_softmax()},  # built when graded
        ("test_softmax_random",),
    ),
}
ANSWER_CHEATS = {
    "sample_only": (
        {"attention_weights": SAMPLE_ONLY},
        (
            "test_attention_weights_rows",
            "test_attention_weights_values",
            "test_attention_weights_random",
        ),
    ),
    "hard_coded": (
        lambda: {"attention_scores": _hard_coded_scores()},  # built when graded
        (
            "test_attention_scores_shape",
            "test_attention_scores_values",
            "test_attention_scores_random",
        ),
    ),
    "std_constants": (
        {
            "dot_product_std": "def dot_product_std(d_k, n_samples, seed):\n    return 8.0, 1.0\n"
        },
        ("test_dot_product_std_values", "test_dot_product_std_random"),
    ),
}


def _table_softmax() -> str:
    """An answer that knows torch.softmax's outputs for every input the visible
    tests and the hidden test with the seed written in source/ use, and nothing
    else: it passes those and fails any other seed."""
    table = {}

    def learn(x, dim=-1):
        out = softmax_checks._softmax(x, dim)
        table[str(x.flatten().tolist()) + str(dim)] = (
            out.flatten().tolist(),
            list(out.shape),
        )
        return out

    softmax_checks.softmax_rows(learn)
    softmax_checks.softmax_stable(learn)
    softmax_checks.softmax_random(learn, seed=501)
    return (
        f"import torch\n_T = {table!r}\n\n\ndef softmax(scores, dim=-1):\n"
        "    key = str(scores.flatten().tolist()) + str(dim)\n"
        "    if key not in _T:\n        return torch.zeros_like(scores)\n"
        "    values, shape = _T[key]\n"
        "    return torch.tensor(values, dtype=scores.dtype).reshape(shape)\n"
    )


def _grade_class(root, cheats: dict, *flags: str) -> subprocess.CompletedProcess:
    grading.release([A], root)
    release = json.loads(grading.notebook_path(root, "release", A).read_text())
    ref = reference_answers(root, A)
    for student, (answers, _) in {"honest": ({}, ()), **cheats}.items():
        answers = answers() if callable(answers) else answers
        path = grading.notebook_path(root, "submitted", A, student=student)
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(fill(release, {**ref, **answers})))
    cmd = [sys.executable, "-m", "course", "grade", A, f"--root={root}", "--workers=2"]
    cmd += ["--cell-timeout=60", *flags]  # a cheat that hangs its kernel costs 60 s
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1500)


@pytest.fixture(scope="session")
def full_class(tmp_path_factory):
    root = grading.make_course(tmp_path_factory.mktemp("cheats"))
    cheats = {**RUNTIME_CHEATS, **SCAN_ONLY_CHEATS, **ANSWER_CHEATS}
    return root, _grade_class(root, cheats)


EVERY_CHEAT = {**RUNTIME_CHEATS, **SCAN_ONLY_CHEATS, **ANSWER_CHEATS, **NEW_ROUTES}


@pytest.fixture(scope="session")
def no_scan_class(tmp_path_factory):
    root = grading.make_course(tmp_path_factory.mktemp("cheats_no_scan"))
    with open(root / "nbgrader_config.py", "a") as f:
        f.write(
            "\nc.Autograde.autograde_preprocessors = [p for p in "
            "c.Autograde.autograde_preprocessors if 'tamper' not in p]\n"
        )
    return root, _grade_class(root, EVERY_CHEAT)


def _line(out: str, student: str) -> str:
    return next((ln for ln in out.splitlines() if f" {student}/" in ln), "")


def test_honest_student_keeps_full_marks_unflagged(full_class):
    root, proc = full_class
    scores = grading.cell_scores(root, A)["honest"]
    assert all(s == m for c, (s, m) in scores.items() if c.startswith("test_")), scores
    assert _line(proc.stdout, "honest") == "", proc.stdout + proc.stderr


@pytest.mark.parametrize(
    "student", sorted({**RUNTIME_CHEATS, **SCAN_ONLY_CHEATS, **ANSWER_CHEATS})
)
def test_cheat_earns_zero_where_it_cheats(full_class, student):
    root, proc = full_class
    cheats = {**RUNTIME_CHEATS, **SCAN_ONLY_CHEATS, **ANSWER_CHEATS}
    scores = grading.cell_scores(root, A)[student]
    assert {c: scores[c][0] for c in cheats[student][1]} == dict.fromkeys(
        cheats[student][1], 0.0
    ), proc.stdout


TAMPER_CHEATS = {
    k: v
    for k, v in {**RUNTIME_CHEATS, **SCAN_ONLY_CHEATS}.items()
    if k != "shortcut"  # a forbidden shortcut is a wrong answer, not tampering
}
TAMPERING = sorted(TAMPER_CHEATS)


@pytest.mark.parametrize("student", TAMPERING)
def test_tampering_is_flagged_and_zeroes_later_tests(full_class, student):
    root, proc = full_class
    line = _line(proc.stdout, student)
    assert line.strip().startswith("flagged") and "tampering" in line, proc.stdout
    scores = grading.cell_scores(root, A)[student]
    later = _tests_from(root, TAMPER_CHEATS[student][1][0])
    assert later and all(scores[c][0] == 0 for c in later), scores


def _tests_from(root, first: str) -> list[str]:
    """The test cells of the release from ``first`` on, in notebook order."""
    nb = json.loads(grading.notebook_path(root, "release", A).read_text())
    ids = [c["metadata"].get("nbgrader", {}).get("grade_id", "") for c in nb["cells"]]
    tests = [i for i in ids if i.startswith("test_")]
    return tests[tests.index(first) :]


def test_answer_cheats_are_wrong_answers_not_tampering(full_class):
    root, proc = full_class
    for student in [*ANSWER_CHEATS, "shortcut"]:
        assert "tampering" not in _line(proc.stdout, student), proc.stdout
    for student in ANSWER_CHEATS:  # the exercises they do not touch keep their points
        scores = grading.cell_scores(root, A)[student]
        assert scores["test_softmax_random"][0] == 2, (student, scores)


@pytest.mark.xdist_group("cheats_no_scan")  # the other class, on the other worker
@pytest.mark.parametrize("student", sorted(EVERY_CHEAT))
def test_every_cheat_earns_zero_with_the_scan_off(no_scan_class, student):
    """Verdicts come from the grader's process: no route into the kernel's checks,
    comparisons, oracles or output helps, and the static scan is not needed."""
    root, proc = no_scan_class
    scores = grading.cell_scores(root, A)[student]
    targets = EVERY_CHEAT[student][1]
    assert {c: scores[c][0] for c in targets} == dict.fromkeys(targets, 0.0), (
        proc.stdout + proc.stderr
    )
    honest = grading.cell_scores(root, A)["honest"]
    assert all(s == m for c, (s, m) in honest.items() if c.startswith("test_"))


@pytest.mark.xdist_group("cheats_no_scan")
def test_feedback_never_shows_hidden_tests_or_tracebacks(no_scan_class):
    root, _ = no_scan_class
    subprocess.run(
        [sys.executable, "-m", "course", "feedback", A, f"--root={root}"],
        check=True,
        timeout=600,
    )
    pages = sorted((root / "feedback").glob(f"*/{A}/*.html"))
    assert len(pages) == 1 + len(EVERY_CHEAT)
    for page in pages:
        html = page.read_text()
        for secret in ("BEGIN HIDDEN", "seed=", "most recent call last", "Traceback ("):
            assert secret not in html, (page, secret)
