"""Imports flow one way: no import cycle in ``course/``, and what a student's
kernel loads (``course.checks``) never imports the grader (``course.grading``).

Read from the source (every ``import``, at module level or inside a function),
so a cycle hidden in a function body counts too.
"""

import ast
import re
from pathlib import Path

import pytest

import course

ROOT = Path(course.__file__).parent
SOURCE = ROOT.parent / "source"


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    path = ROOT.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _imports(path: Path, source: str | None = None) -> set[str]:
    """The ``course`` modules ``path`` imports (or ``source``, read as if it were
    ``path``'s)."""
    name = _module(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    source = path.read_text("utf-8") if source is None else source
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            for alias in node.names:
                child = f"{base}.{alias.name}"
                found.add(child if _is_module(child) else base)
    return {m for m in found if m.split(".")[0] == "course" and _is_module(m)}


GRAPH = {_module(p): _imports(p) - {_module(p)} for p in sorted(ROOT.rglob("*.py"))}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_graph_is_read():
    assert "course.checks.oracles" in GRAPH["course.checks.layer"]
    assert "course.checks" in GRAPH["course.checks.softmax"]


def test_no_import_cycle_in_course():
    assert _cycles(GRAPH) == []


def test_cycles_are_found():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        ["a", "b", "c"]
    ]


def _the_grader(imported: set[str]) -> set[str]:
    return {m for m in imported if m.startswith("course.grading")}


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if ".checks" in m))
def test_checks_never_import_the_grader(module):
    assert not _the_grader(GRAPH[module])


def _notebook_modules() -> set[str]:
    """The ``course.checks`` modules the notebooks' test cells import."""
    names = set()
    for path in SOURCE.glob("*/*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "course.checks":
                names |= {f"course.checks.{a.name}" for a in node.names}
    return names & set(GRAPH)


def test_a_notebook_s_checks_import_no_other_notebook_s():
    """Sentences and helpers two notebooks share live in a shared module."""
    notebooks = _notebook_modules()
    assert len(notebooks) > 8
    crossing = {m: GRAPH[m] & notebooks for m in notebooks if GRAPH[m] & notebooks}
    assert crossing == {}


# The parts of the grader (docs/architecture.md): each part's modules, by the first
# name under course.grading; a top-level module is "shared".
PARTS = ("kernel", "steps", "run", "hub")
GRADING = ROOT / "grading"


def _part(module: str) -> str | None:
    """``kernel``, ``steps``, ``run``, ``hub`` or ``shared`` for a module of
    ``course.grading``; ``None`` outside it."""
    names = module.split(".")
    if names[:2] != ["course", "grading"]:
        return None
    return names[2] if len(names) > 2 and names[2] in PARTS else "shared"


#: What each part of the grader never imports.
NEVER = {
    "kernel": {"steps", "run", "hub"},
    "steps": {"run", "hub"},
    "run": {"hub"},
    "hub": {"kernel", "steps", "run"},
    "shared": {"kernel", "steps", "run", "hub"},
}


def _forbidden(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """The edges of ``graph`` from one part of the grader to a part it never
    imports."""
    return {
        (a, b)
        for a, imported in graph.items()
        for b in imported
        if _part(a) and _part(b) in NEVER[_part(a)]
    }


def test_the_grader_s_parts_are_read():
    assert {_part(m) for m in GRAPH} >= {*PARTS, "shared", None}
    assert _part("course.grading.steps.scan.reading") == "steps"
    assert _part("course.grading.cells") == _part("course.grading") == "shared"
    assert "course.grading.kernel.contain" in GRAPH["course.grading.steps.execute"]


def test_the_grader_s_parts_import_one_way():
    assert _forbidden(GRAPH) == set()


def test_no_part_of_the_grader_imports_run():
    """A run is the command line's: no other part of the grader starts one."""
    assert not {
        (a, b)
        for a, imported in GRAPH.items()
        for b in imported
        if _part(b) == "run" and _part(a) not in (None, "run")
    }


@pytest.mark.parametrize(
    ("edge", "part"),
    [
        (("course.grading.kernel.warm", "course.grading.steps.flags"), "kernel"),
        (("course.grading.kernel.sandbox", "course.grading.run.batch"), "kernel"),
        (("course.grading.steps.judge", "course.grading.run.report"), "steps"),
        (("course.grading.steps.scan.deny", "course.grading.hub.private"), "steps"),
        (("course.grading.run.engine", "course.grading.hub.exchange"), "run"),
        (("course.grading.hub.exchange", "course.grading.kernel.warm"), "hub"),
        (("course.grading.hub.private", "course.grading.steps.inert"), "hub"),
        (("course.grading.cells", "course.grading.kernel.procs"), "shared"),
        # the two arrows the grader had until stop 44
        (("course.grading.kernel.zygote", "course.grading.steps.judge"), "kernel"),
        (("course.grading.settings", "course.grading.steps.feedback"), "shared"),
    ],
)
def test_a_forbidden_arrow_is_found(edge, part):
    """The control: each rule, fed one fake edge against it, flags it."""
    a, b = edge
    graph = {**GRAPH, a: GRAPH.get(a, set()) | {b}}
    assert _part(a) == part
    assert _forbidden(graph) == {edge}


@pytest.mark.parametrize(
    "source",
    [
        "from ..grading.steps import judge\n",
        "def f():\n    from course.grading.steps.judge import JudgeEvidence\n",
        "import course.grading.steps.judge\n",
    ],
)
def test_a_checks_module_importing_the_grader_is_found(source):
    """The control of test_checks_never_import_the_grader: an import of the grader,
    read as if a checks module had it, is flagged."""
    imported = _imports(ROOT / "checks" / "softmax.py", source)
    assert _the_grader(imported) == {"course.grading.steps.judge"}


def test_the_architecture_names_every_part_of_the_grader():
    """docs/architecture.md draws course/grading: every sub-package (``kernel/``,
    ``scan/``) and every module of the grader (``cells``) is named there."""
    doc = (ROOT.parent / "docs" / "architecture.md").read_text("utf-8")
    packages = {p.parent.name for p in GRADING.rglob("*/__init__.py")}
    assert packages >= {*PARTS, "scan"}
    assert {p for p in packages if f"`{p}/`" not in doc} == set()
    modules = {p.stem for p in GRADING.rglob("*.py")} - {"__init__"}
    modules -= {p.stem for p in (GRADING / "steps" / "scan").glob("*.py")}
    assert len(modules) > 30
    assert {m for m in modules if f"`{m}`" not in doc} == set()


def _homes(doc: str) -> list[str]:
    """The paths (``grading/cells.py``, ``checks/oracles.py``) in the second column
    of docs/architecture.md's table "One home per rule"."""
    table = doc.split("## One home per rule", 1)[1].split("\n\n")[2]
    rows = [line.split("|")[2] for line in table.splitlines()[2:]]
    return [p for row in rows for p in re.findall(r"`([\w/<>]+\.(?:py|toml))`", row)]


def _missing(doc: str) -> list[str]:
    """The homes of ``doc``'s table that are no file of the course or repository."""
    where = (ROOT, ROOT.parent)  # course/..., or the repository's own files
    return [
        h
        for h in _homes(doc)
        if "<" not in h and not any((base / h).is_file() for base in where)
    ]


def test_every_rule_s_home_in_the_architecture_exists():
    doc = (ROOT.parent / "docs" / "architecture.md").read_text("utf-8")
    assert len(_homes(doc)) >= 10
    assert _missing(doc) == []


def test_a_home_that_moved_is_found():
    """The control: a row naming a module that does not exist is reported."""
    doc = "## One home per rule\n\nx\n\n| a | b |\n|---|---|\n| r | `gone/away.py` |\n"
    assert _missing(doc) == ["gone/away.py"]


def _tested_module(test_name: str) -> Path | None:
    """The module of ``course/`` that ``test_<folders>_<name>`` tests
    (``test_grading_kernel_sandbox``: ``grading/kernel/sandbox.py``), where its
    name mirrors one; ``None`` if none does."""
    words = test_name.removeprefix("test_").split("_")
    for cut in range(len(words), 0, -1):  # the longest folder path that exists
        folder = ROOT.joinpath(*words[: cut - 1])
        name = "_".join(words[cut - 1 :])
        for candidate in (folder / f"{name}.py", folder / name / "__init__.py"):
            if folder.is_dir() and candidate.exists():
                return candidate
    return None


#: Test files that test the course as a whole, not one module, and what they try.
WHOLE_COURSE = {
    "test_autograde": "every notebook autograded: right, wrong and partial answers",
    "test_cheats": "answers that cheat, graded as a class",
    "test_checks_seeds": "every notebook's checks on its fixtures, over many seeds",
    "test_checks_sample_only": "every visible check against answers fitted to it",
    "test_claims": "what the notebooks' sentences say, run",
    "test_classroom": "the course hub in a browser: release, submit, grade, report",
    "test_env": "a fresh machine's set-up",
    "test_hints_browser": "hints in JupyterLab",
    "test_hub_attacks": "a student attacking the course hub",
    "test_imports": "which module imports which",
    "test_jupyterlab": "the course opened in JupyterLab",
    "test_notebooks": "source/, release/ and zh/ in step",
    "test_recipes": "docs/recipes run",
    "test_rubrics": "the written answers' rubrics",
    "test_sandbox": "code in a grading kernel attacking its sandbox",
}
#: Modules with logic tested under another file's name, and why there.
TESTED_BY = {
    "authoring": ("test_notebooks", "what it builds: release/ and zh/"),
    "catalog": ("test_i18n", "the catalogs, both languages"),
    "hintauthoring": ("test_hints", "the hints' package data it writes"),
    "hintbook": ("test_hints", "every hint read back, both languages"),
    "hubhints": ("test_grading_hub_hintservice", "its one server"),
    "grading.environment": ("test_grading_kernel_warm", "the kernels' env"),
    "grading.gradebook": ("test_grading_run_batch", "a run's gradebook"),
    "grading.lean": ("test_grading_run_engine", "a task's nbgrader imports"),
    "grading.nbgrader_app": ("test_grading_run_engine", "the URL kept off argv"),
    "grading.runs": ("test_notebooks", "release and validate"),
    "grading.kernel.inside": ("test_grading_kernel_sandbox", "the kernel's side"),
    "grading.kernel.kernelapp": ("test_grading_kernel_sandbox", "its sealed IPC"),
    "grading.kernel.kernels": ("test_grading_kernel_sandbox", "every kernel run"),
    "grading.kernel.launch": ("test_grading_kernel_sandbox", "cold and warm"),
    "grading.kernel.procs": ("test_grading_kernel_contain", "what a box holds"),
    "grading.kernel.zygote": ("test_grading_kernel_warm", "a warm kernel's fork"),
    "grading.run.results": ("test_grading_run_batch", "a run's results"),
    "grading.steps.execute": ("test_grading_kernel_sandbox", "GuardedExecute"),
    "grading.steps.tamper": ("test_grading_steps_scan_tampering", "what it flags"),
    "grading.steps.scan": ("test_grading_steps_scan_reading", "its entry point"),
    "grading.steps.scan.binder": ("test_grading_steps_scan_tampering", "names"),
    "grading.steps.scan.lessons": ("test_checks_lessons", "the LESSONS it reads"),
    "grading.steps.scan.source": ("test_grading_steps_scan_reading", "the cells"),
}


def _modules_with_logic() -> list[str]:
    """``grading.kernel.sandbox``, ...: every module of ``course/`` (its package
    data and the JupyterLab extension aside) that defines a function or class."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if {"data", "labextension", "templates"} & set(path.relative_to(ROOT).parts):
            continue
        tree = ast.parse(path.read_text("utf-8"))
        kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        if any(isinstance(node, kinds) for node in tree.body):
            found.append(_module(path).removeprefix("course").lstrip("."))
    return found


def test_every_test_file_is_named_for_a_module_or_the_whole_course():
    """``tests/test_grading_kernel_sandbox.py`` tests ``grading/kernel/sandbox.py``;
    a file of :data:`WHOLE_COURSE` tests the course as a whole."""
    names = [p.stem for p in (ROOT.parent / "tests").glob("test_*.py")]
    assert len(names) > 60
    unnamed = [n for n in names if _tested_module(n) is None]
    assert sorted(set(unnamed) - set(WHOLE_COURSE)) == []
    assert sorted(set(WHOLE_COURSE) - set(names)) == []
    assert [n for n in WHOLE_COURSE if _tested_module(n) is not None] == []


def test_the_mirror_is_read():
    """The control: a name with its part left out mirrors nothing."""
    assert _tested_module("test_grading_sandbox") is None
    assert _tested_module("test_grading_steps_scan_reading") == (
        GRADING / "steps" / "scan" / "reading.py"
    )
    assert _tested_module("test_checks_lessons") == ROOT / "checks" / "lessons.py"
    assert "grading.kernel.sandbox" in _modules_with_logic()


def test_every_module_with_logic_has_a_test_file():
    """Its own (``test_<folders>_<name>.py``; a notebook's checks too, beside
    test_checks_seeds, which runs them on the fixtures); else the one
    :data:`TESTED_BY` names, and says why there."""
    tests = {p.stem for p in (ROOT.parent / "tests").glob("test_*.py")}
    untested = [
        m
        for m in _modules_with_logic()
        if "test_" + m.replace(".", "_") not in tests and m not in TESTED_BY
    ]
    assert untested == []
    assert [m for m, (test, _) in TESTED_BY.items() if test not in tests] == []
    own = [m for m in TESTED_BY if "test_" + m.replace(".", "_") in tests]
    assert own == []  # a module that has its own test file leaves the list
