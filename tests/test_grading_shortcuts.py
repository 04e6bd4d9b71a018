"""course.grading.shortcuts: what the grader reads in the answers, out of the kernel."""

import json
import re

import nbformat
import pytest
from harness import fill, fixture_module, reference_answers

from course import grading
from course.grading.enames import TAMPERED
from course.grading.shortcuts import SHORTCUT, shortcut_verdicts

A = "05_softmax_and_scaling"
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
    "from_import": "from torch.nn.functional import softmax as sm\nsoftmax = sm",
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
    """Reference answers, correct alternatives: nothing; a wrong-answer fixture:
    at most the test cells it is meant to lose."""
    fixtures = fixture_module(assignment)
    assert shortcut_verdicts(_notebook(assignment, {})) == {}
    assert shortcut_verdicts(_notebook(assignment, fixtures.ALTERNATIVES)) == {}
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
