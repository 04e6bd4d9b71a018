"""course.grading.steps.scan.reading: the verdicts the grader reads in a notebook's answers,
out of the kernel."""

import json
import re

import nbformat
import pytest
from harness import correct_forms, fill, fixture_module, reference_answers

from course import grading
from course.grading.enames import SHORTCUT, TAMPERED
from course.grading.steps.scan import read

A = "05_softmax_and_scaling"


def shortcut_verdicts(nb):
    return read(nb).verdicts(nb)


SOFTMAX_TESTS = {"test_softmax_rows", "test_softmax_stable", "test_softmax_random"}


def _notebook(assignment: str, answers: dict, extra: str | None = None):
    release = json.loads(
        grading.notebook_path(grading.ROOT, "source", assignment).read_text()
    )
    nb = fill(release, {**reference_answers(grading.ROOT, assignment), **answers})
    if extra is not None:  # a cell the student added, before the first test
        first_test = next(
            i
            for i, c in enumerate(nb["cells"])
            if c["metadata"].get("nbgrader", {}).get("grade_id", "").startswith("test_")
        )
        cell = {"cell_type": "code", "metadata": {}, "source": extra, "outputs": []}
        cell["execution_count"] = None
        nb["cells"].insert(first_test, cell)
    return nbformat.reads(json.dumps(nb), as_version=4)


# Routes to torch's softmax (or around the grader) that an answer cell may take.
SOFTMAX_ROUTES = {
    "private": "import torch\nsoftmax = lambda s, dim=-1: torch._softmax(s, dim, False)",
    "aten": "import torch\nsoftmax = lambda s, dim=-1: torch.ops.aten._softmax(s, dim, False)",
    "C": "import torch\nsoftmax = lambda s, dim=-1: torch._C._nn.softmax(s, dim)",
    "special": "import torch\nsoftmax = torch.special.softmax",
    "method": "def softmax(s, dim=-1):\n    return s.softmax(dim)",
    "own_method_named_softmax": "class A:\n    def softmax(self, s, dim=-1):\n        return s.softmax(dim)\n\n\nsoftmax = A().softmax",
    "from_import": "from torch.nn.functional import softmax as sm\nsoftmax = sm",
    "own_instance_tuple": "from torch import special\n\n\nclass Mine:\n    pass\n\n\ns = Mine()\ns, _ = special, 0\n\n\ndef softmax(x, dim=-1):\n    return s.log_softmax(x, dim).exp()",
    "own_instance_parameter": "from torch import special\n\n\nclass Mine:\n    pass\n\n\ns = Mine()\n\n\ndef softmax(x, dim=-1, s=special):\n    return s.log_softmax(x, dim).exp()",
    "self_outside_a_class": "import torch\n\n\ndef h(self, x, dim):\n    return self.log_softmax(x, dim).exp()\n\n\ndef softmax(s, dim=-1):\n    return h(torch.special, s, dim)",
    "own_instance_rebound": "class A:\n    pass\n\n\ndef softmax(s, dim=-1):\n    a = A()\n    a = s\n    return a.softmax(dim)",
    "getattr_literal": "import torch\nsoftmax = getattr(torch, 'softmax')",
    "module": "import torch\nsoftmax = lambda s, dim=-1: torch.nn.Softmax(dim)(s)",
    "oracle": "from course.checks import softmax as c\nsoftmax = c._softmax",
    "distributions": "import torch\n\n\ndef softmax(s, dim=-1):\n    return torch.distributions.Categorical(logits=s.movedim(dim, -1)).probs.movedim(-1, dim)",
    "sdpa": "import torch\nimport torch.nn.functional as F\n\n\ndef softmax(s, dim=-1):\n    n = s.shape[-1]\n    return F.scaled_dot_product_attention(s * n**0.5, torch.eye(n), torch.eye(n))",
    "normalize": "import torch.nn.functional as F\n\n\ndef softmax(s, dim=-1):\n    return F.normalize(s.exp(), p=1, dim=dim)",
}
PAST_THE_ANSWER = {"private", "aten", "C", "oracle"}  # private names: later tests too
# Routes that reach past the answer's own code: every later test earns 0.
STATE_ROUTES = {
    "getattr_dynamic": "import torch\nf = getattr(torch, 'soft' + 'max')",
    "vars": "import torch\nf = vars(torch)['softmax']",
    "builtin_value": "import torch\nput = setattr\nput(torch, 'allclose', print)",
    "dict": "import torch\nf = torch.__dict__['softmax']",
    "module_alias": "import course.checks as c\ne = c.evidence\ne.invoke = print",
    "patch_check": "check.softmax_rows = print",
    "private_run": "import course.checks as c\nprint(c._run)",
    "exec": "exec('x = 1')",
    "importlib": "import importlib\nm = importlib.import_module('torch')",
    "ipython": "get_ipython().showtraceback = print",
    "builtins": "import builtins\nbuiltins.round = print",
    "sys_modules": "import sys\nsys.modules['torch'].allclose = print",
    "frame": "import sys\nf = sys._getframe()",
    "getattr_value": "import functools, torch\nf = functools.reduce(getattr, ['soft' + 'max'], torch)",
    "shell": "!pip list",
}


@pytest.mark.parametrize("route", sorted(SOFTMAX_ROUTES))
def test_softmax_shortcut_routes_lose_the_softmax_tests(route):
    verdicts = shortcut_verdicts(_notebook(A, {"softmax": SOFTMAX_ROUTES[route]}))
    assert SOFTMAX_TESTS <= set(verdicts), verdicts
    assert {verdicts[t][0] for t in SOFTMAX_TESTS} <= {SHORTCUT, TAMPERED}
    if route not in PAST_THE_ANSWER:  # the lesson's names cost that exercise only
        assert "test_attention_scores_shape" not in verdicts, verdicts


@pytest.mark.parametrize("route", sorted(STATE_ROUTES))
def test_cells_reaching_past_their_code_lose_every_later_test(route):
    verdicts = shortcut_verdicts(_notebook(A, {}, extra=STATE_ROUTES[route]))
    assert SOFTMAX_TESTS | {"test_dot_product_std_random"} <= set(verdicts), route
    assert verdicts["test_softmax_rows"][0] == TAMPERED


def test_helper_in_another_cell_counts_for_the_exercise_that_calls_it():
    helper = "import torch\n\n\ndef my_norm(s, dim):\n    return torch.softmax(s, dim)"
    nb = _notebook(
        A, {"softmax": "def softmax(s, dim=-1):\n    return my_norm(s, dim)"}
    )
    nb.cells.insert(3, nbformat.v4.new_code_cell(helper))
    assert SOFTMAX_TESTS <= set(shortcut_verdicts(nb))


def test_attention_weights_may_use_torch_softmax():
    weights = "import torch\n\n\ndef attention_weights(Q, K):\n    return torch.softmax(attention_scores(Q, K), -1)"
    assert shortcut_verdicts(_notebook(A, {"attention_weights": weights})) == {}


@pytest.mark.parametrize("assignment", grading.assignments())
def test_no_false_verdicts_on_the_course_answers(assignment):
    """Every correct form (reference, alternatives, each in a helper and a class,
    ``FORMS``): nothing; a wrong-answer fixture: at most the test cells it is meant
    to lose."""
    fixtures = fixture_module(assignment)
    for label, answers, _ in correct_forms(assignment):
        verdicts = shortcut_verdicts(_notebook(assignment, answers))
        assert verdicts == {}, (label, verdicts)
    for mutant in fixtures.MUTANTS:
        nb = _notebook(assignment, {mutant.cell: mutant.code})
        extra = set(shortcut_verdicts(nb)) - set(mutant.fails)
        assert not extra, (mutant.name, extra)


ENGLISH_VERBS = re.compile(r"\b(uses|calls|changes|runs|imports|looks|passes)\b")


@pytest.mark.parametrize(
    "answers, extra",
    [
        ({"softmax": SOFTMAX_ROUTES["special"]}, None),
        ({"softmax": SOFTMAX_ROUTES["private"]}, None),
        ({}, STATE_ROUTES["shell"]),
        ({}, STATE_ROUTES["importlib"]),
        ({}, STATE_ROUTES["frame"]),
        ({}, "from torch import _C"),
        ({}, STATE_ROUTES["module_alias"]),
    ],
)
def test_verdicts_speak_the_course_language(monkeypatch, answers, extra):
    """The same shortcut in English and in Chinese: whole sentences of the
    catalog, never an English verb inside a Chinese sentence."""
    said = {}
    for lang in ("en", "zh"):
        monkeypatch.setenv("COURSE_LANG", lang)
        verdicts = shortcut_verdicts(_notebook(A, answers, extra))
        said[lang] = [m for _, m in verdicts.values()]
    assert said["en"] and all(ENGLISH_VERBS.search(m) for m in said["en"])
    for message in said["zh"]:
        assert re.search(r"[\u4e00-\u9fff]", message), message
        assert not ENGLISH_VERBS.search(message), message


def test_a_lesson_verdict_keeps_its_english_wording():
    message = shortcut_verdicts(_notebook(A, {"softmax": SOFTMAX_ROUTES["special"]}))
    assert message["test_softmax_rows"][1].startswith(
        "`softmax` uses `torch.special.softmax`. Write softmax by hand"
    )


def test_the_reading_is_ordered_and_names_the_first_cell():
    extra = "import torch\nx = 1\nsys = __import__('sys')\ntorch.equal = print"
    nb = _notebook(A, {"softmax": SOFTMAX_ROUTES["special"]}, extra=extra)
    reading = read(nb)
    assert [f.cell for f in reading.findings] == sorted(
        f.cell for f in reading.findings
    )
    first = reading.tampering
    assert first.line == 3 and first.name.startswith("#"), first
    assert first.message.startswith(f"cell {first.name}, line 3, ")
    assert {f.ename for f in reading.findings} == {TAMPERED, SHORTCUT}


def test_harmless_stores_and_reads_cost_nothing_in_a_notebook():
    """Plot style, cuDNN flags and reading a file are no tampering (the former
    shortcut scanner zeroed the tests after them)."""
    extra = (
        "import matplotlib.pyplot as plt\nimport torch\n"
        "plt.rcParams['figure.figsize'] = (8, 4)\n"
        "torch.backends.cudnn.deterministic = True\nprint(open('/etc/hostname').read())"
    )
    assert shortcut_verdicts(_notebook(A, {}, extra=extra)) == {}


def _graded(nb):
    """What autograde does after the kernel: the judge, then FlagTampering."""
    from course.grading.steps.judge import JudgeEvidence
    from course.grading.steps.tamper import FlagTampering

    resources = {}
    nb, resources = JudgeEvidence().preprocess(nb, resources)
    return FlagTampering().preprocess(nb, resources)


def test_tampering_is_decided_once(monkeypatch):
    """The judge and FlagTampering read one reading: the notebook is scanned once,
    and each later test carries one TamperingDetected verdict."""
    from course.grading.steps import scan

    reads, real = [], scan.reading._read
    monkeypatch.setattr(scan.reading, "_read", lambda nb: reads.append(nb) or real(nb))
    nb, _ = _graded(_notebook(A, {}, extra=STATE_ROUTES["exec"]))
    assert len(reads) == 1
    test = next(
        c
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("grade_id") == "test_softmax_rows"
    )
    assert [o.ename for o in test.outputs] == [TAMPERED]


def test_flag_tampering_alone_zeroes_the_later_tests():
    """With the judge switched off, FlagTampering still gives every later test the
    verdict (from the same reading)."""
    from course.grading.steps.tamper import FlagTampering

    nb = _notebook(A, {}, extra=STATE_ROUTES["builtins"])
    nb, _ = FlagTampering().preprocess(nb, {})
    verdicts = read(nb).verdicts(nb)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if grade_id in verdicts:
            assert [o.ename for o in cell.outputs if "ename" in o] == [TAMPERED]
