"""Cheating submissions, graded with ``python -m course grade``: each earns 0 where it
cheats.

Two runs of the same kind of class on 05_softmax_and_scaling:

* the course as configured: every cheat earns 0 on the exercises it touches; the
  ones that change the grading tools are also flagged ``tampering`` and zero every
  later test; the honest student keeps full marks and is not flagged;
* the course with the static scan (``FlagTampering``) removed, graded with ordinary
  (``--cold``) kernels: the defences inside the kernel alone still give 0 to
  redefined ``torch.allclose``/``equal``/``assert_close``, swallowed tracebacks and
  the forbidden shortcut.
"""

import json
import subprocess
import sys

import pytest
from harness import fill, reference_answers

from course import grading
from course.checks import softmax as softmax_checks

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


def _grade_class(root, cheats: dict, *flags: str) -> subprocess.CompletedProcess:
    grading.release([A], root)
    release = json.loads(grading.notebook_path(root, "release", A).read_text())
    ref = reference_answers(root, A)
    for student, (answers, _) in {"honest": ({}, ()), **cheats}.items():
        answers = answers() if callable(answers) else answers
        path = grading.notebook_path(root, "submitted", A, student)
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(fill(release, {**ref, **answers})))
    cmd = [sys.executable, "-m", "course", "grade", A, f"--root={root}", "--workers=2"]
    cmd += ["--cell-timeout=60", *flags]  # a cheat that hangs its kernel costs 60 s
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1500)


@pytest.fixture(scope="module")
def full_class(tmp_path_factory):
    root = grading.make_course(tmp_path_factory.mktemp("cheats"))
    cheats = {**RUNTIME_CHEATS, **SCAN_ONLY_CHEATS, **ANSWER_CHEATS}
    return root, _grade_class(root, cheats)


@pytest.fixture(scope="module")
def runtime_only_class(tmp_path_factory):
    root = grading.make_course(tmp_path_factory.mktemp("cheats_runtime"))
    with open(root / "nbgrader_config.py", "a") as f:
        f.write(
            "\nc.Autograde.autograde_preprocessors = [p for p in "
            "c.Autograde.autograde_preprocessors if 'tamper' not in p]\n"
        )
    return root, _grade_class(root, RUNTIME_CHEATS, "--cold")  # ordinary kernels


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


@pytest.mark.parametrize("student", sorted(RUNTIME_CHEATS))
def test_kernel_side_defences_alone_give_zero(runtime_only_class, student):
    root, proc = runtime_only_class
    scores = grading.cell_scores(root, A)[student]
    assert [scores[c][0] for c in RUNTIME_CHEATS[student][1]] == [0, 0, 0], (
        proc.stdout + proc.stderr
    )
    honest = grading.cell_scores(root, A)["honest"]
    assert all(s == m for c, (s, m) in honest.items() if c.startswith("test_"))
