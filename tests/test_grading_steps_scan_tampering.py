"""course.grading.steps.scan.tampering: which constructs of one cell the scan flags, and
which it must not."""

import json
import re

import pytest
from harness import fixture_module, reference_answers

from course import grading
from course.grading.steps.scan import imported_names, scan_source

IMPORTED = {"torch", "F", "check", "course", "plt", "sys", "os", "np"}
PROTECTED = {"torch": "torch", "check": "course.checks.softmax", "plt": "plt"}

FLAGGED = {
    "torch.allclose = lambda *a, **k: True": "changes torch.allclose",
    "torch.testing.assert_close = print": "changes torch.testing.assert_close",
    "import course.checks.softmax as c\nc.softmax_rows = print": "changes c.softmax_rows",
    "check = None": "rebinds check",
    "def check(): pass": "rebinds check",
    "from course.checks import layer as check": "rebinds check",
    "import numpy as torch": "rebinds torch",
    "import builtins\nbuiltins.len = max": "imports builtins",
    "import importlib\nimportlib.reload(check)": "imports importlib",
    "get_ipython().showtraceback = print": "get_ipython",
    "sys.excepthook = print": "changes sys.excepthook",
    "sys.settrace(print)": "sys.settrace",
    "setattr(torch, 'equal', print)": "calls setattr()",
    "exec('x = 1')": "calls exec()",
    "__import__('torch').equal = print": "__import__",
    "torch.__dict__['equal'] = print": "__dict__",
    "(1).__class__.__base__": "__base__",
    "open('/tmp/x', 'w').write('')": "writing",
    "os.environ['COURSE_MODEL'] = '/tmp'": "changes os.environ",
    "%%capture\ntorch.equal = print": "changes torch.equal",
    "%timeit -n1 torch.equal = print": "changes torch.equal",
    "!ls": "get_ipython",
    "%load_ext autoreload": "get_ipython",
    "for torch.x in range(2): pass": "changes torch.x",
    "t = torch\nt.allclose = print": "changes t.allclose",
    "t = torch\nu = t.testing\nu.assert_close = print": "changes u.assert_close",
    "getattr(torch, 'testing').assert_close = print": "changes getattr",
    "type(model).forward = print": "changes type(model).forward",
    "model.__class__.forward = print": "changes model.__class__.forward",
    "class Liar(torch.Tensor):\n    pass": "subclasses torch.Tensor",
    "class A:\n    def __eq__(self, other):\n        return True": "defines __eq__",
    "class A:\n    def __torch_function__(self, *a):\n        return True": "defines",
    # a builtin is not shadowed where Python would not shadow it
    "def f(x=input):\n    return x": "uses `input`",
    "def f():\n    def g(input):\n        pass\n    return input()": "uses `input`",
    "[x for input in [input]]": "uses `input`",
    "class A:\n    input = 1\n    def f(self):\n        return input()": "uses `input`",
    "def f():\n    global input\n    return input()": "uses `input`",
    # only a plain class of `types` may be imported by name
    "from types import FunctionType": "imports types",
    "from types import SimpleNamespace, FunctionType": "imports types",
    "import types\nns = types.SimpleNamespace()": "imports types",
}

ALLOWED = [
    "import torch\nimport torch.nn.functional as F\nfrom course.checks import softmax as check",
    "class A(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.w = torch.zeros(3)",
    "cfg = model.config\ncfg.num_attention_heads = 4",
    "plt.rcParams['figure.figsize'] = (8, 4)",
    "torch.backends.cudnn.deterministic = True",
    "%matplotlib inline\n%timeit -n1 torch.zeros(3)",
    "print(open('/tmp/x').read())",
    "s = 'abc'.replace('a', 'b')",
    "x = {}\nx['a'] = torch.zeros(2)",
    "y = torch.zeros(3)\ny[0] = 1.0\nW = F.softmax\nz = W(y, dim=0)",
    "class Head(torch.nn.Module):\n    def forward(self, x):\n        return x",
    # a parameter or local named like a builtin (torch's own functions use `input`)
    "def gelu(input):\n    return 0.5 * input * (1.0 + torch.tanh(input))",
    "f = lambda input: input * 2",
    "new = model.__class__(model.config)",
    "seen = {id(p) for p in model.parameters()}",
    "def f(t):\n    input = t + 1\n    return input",
    "def f(xs):\n    return [vars for vars in xs]",
    "def f(:",  # a syntax error fails when run, like any other
    "from types import SimpleNamespace\nmodule = SimpleNamespace(training=False)",
]


@pytest.mark.parametrize("source", sorted(FLAGGED))
def test_flags_tampering(source):
    found = scan_source(source, IMPORTED, PROTECTED)
    assert any(FLAGGED[source] in what for _, what in found), found


@pytest.mark.parametrize("source", ALLOWED)
def test_leaves_ordinary_code_alone(source):
    assert scan_source(source, IMPORTED, PROTECTED) == []


@pytest.mark.parametrize("assignment", grading.assignments())
def test_no_answer_of_the_course_is_flagged(assignment):
    """Reference answers, correct alternatives and every wrong-answer fixture."""
    nb = json.loads(
        grading.notebook_path(grading.ROOT, "source", assignment).read_text()
    )
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    given = [
        "".join(c["source"])
        for c in nb["cells"]
        if c["cell_type"] == "code"
        and c["metadata"]["nbgrader"].get("locked")
        and not c["metadata"]["nbgrader"].get("grade")
    ]
    fixtures = fixture_module(assignment)
    answers = [
        *reference_answers(grading.ROOT, assignment).values(),
        *fixtures.ALTERNATIVES.values(),
        *(m.code for m in fixtures.MUTANTS),
        *given,
    ]
    imported, protected = imported_names(code), imported_names(given)
    flagged = {a: scan_source(a, imported, protected) for a in answers}
    assert not {a: f for a, f in flagged.items() if f}


@pytest.mark.parametrize("source", sorted(FLAGGED))
def test_flags_tampering_in_chinese(monkeypatch, source):
    """What the scan says is a catalog sentence: Chinese in the Chinese edition,
    with the name of what was done left as it is."""
    monkeypatch.setenv("COURSE_LANG", "zh")
    found = scan_source(source, IMPORTED, PROTECTED)
    assert found
    for _, what in found:
        assert re.search(r"[\u4e00-\u9fff]", what), what
        assert not re.search(r"\b(uses|calls|changes|imports|defines)\b", what)


# One deny list: what only one of the two former scanners listed is flagged here.
UNION = {
    "import subprocess": "imports subprocess",
    "import resource": "imports resource",
    "import threading": "imports threading",
    "import dill": "imports dill",
    "import cloudpickle": "imports cloudpickle",
    "import IPython.display": "imports IPython.display",
    "def g():\n    yield\n\n\nf = g().gi_frame.f_back": "gi_frame",
    "async def g():\n    pass\n\n\nf = g().cr_frame": "cr_frame",
    "from torch import _C": "imports _C, a private name",
    "print(torch._C)": "torch._C",
    "f = getattr(torch, 'soft' + 'max')": "getattr()",
    "f = open": "uses `open`",
    "print(vars)": "uses `vars`",
}
# One binder: dynamic imports bind names like ``import`` does.
BOUND = {
    "m = __import__('ctypes')": "imports ctypes",
    "import importlib\nm = importlib.import_module('torch')\nm.equal = print": (
        "changes m.equal"
    ),
    "m = __import__('torch')\nm.allclose = print": "changes m.allclose",
}
# One parser: IPython's syntax, the code inside magics included.
IPYTHON = {
    "!pip list": "runs a shell command (!)",
    "files = !ls": "runs a shell command (!)",
    "%%time\n%timeit torch.equal = print": "changes torch.equal",
    "%%capture\nimport ctypes": "imports ctypes",
    "%env COURSE_EVIDENCE=": "get_ipython",
}


@pytest.mark.parametrize("source, said", sorted({**UNION, **BOUND, **IPYTHON}.items()))
def test_one_deny_list_one_binder_one_parser(source, said):
    found = scan_source(source, IMPORTED, PROTECTED)
    assert any(said in what for _, what in found), found


def test_a_code_magic_reports_the_line_of_its_code():
    found = scan_source("%%capture\nx = 1\n\ntorch.equal = print", IMPORTED)
    assert found == [(4, "changes torch.equal")]
    found = scan_source("x = 1\n%time torch.equal = print", IMPORTED)
    assert found == [(2, "changes torch.equal")]


@pytest.mark.parametrize("source", ["%matplotlib inline", "torch.zeros(3)?", "%who"])
def test_magics_that_change_nothing_are_no_finding(source):
    assert scan_source(source, IMPORTED, PROTECTED) == []


def test_every_deny_entry_says_why():
    from course.grading.steps.scan import deny

    for table in (deny.MODULES, deny.CALLS, deny.NAMES, deny.ATTRS):
        assert all(isinstance(why, str) and len(why) > 10 for why in table.values())
