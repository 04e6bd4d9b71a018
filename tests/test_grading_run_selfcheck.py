"""``course check`` on a student's machine: the course package as a wheel installs
it, and the released notebooks; no ``source/``, no ``tests/``, no ``.git``.

For every assignment a correct and a wrong notebook get the same points and the
same verdicts from ``course check`` there as from the instructor's ``course
grade``, and nothing the student has holds a reference answer.
"""

import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from harness import submissions

from course import grading, i18n
from course.grading import cells
from course.grading.run import selfcheck

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("student_machine")]

NAMES = grading.assignments()
#: Lines of solutions that are idioms, not answers: the checks make their own
#: inputs with a seeded generator too.
IDIOMS = {"gen = torch.Generator().manual_seed(seed)"}
VENV_BIN = Path(sys.executable).parent
REPORTS = grading.ROOT / "reports" / "selfcheck"


def _wheel_into(site: Path, build: Path) -> None:
    """Build the course's wheel (as pip would for a student) and unpack it.

    It is built from a fresh copy of what the package is made of: setuptools
    keeps what an earlier build of the project folder left in its ``build/``."""
    tree = build / "tree"
    for name in ("pyproject.toml", "README.md"):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(grading.ROOT / name, tree / name)
    ignored = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(grading.ROOT / "course", tree / "course", ignore=ignored)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", ".", "--no-deps"]
        + ["--no-build-isolation", "-q", "-w", str(build)],
        cwd=tree,
        check=True,
        capture_output=True,
    )
    (wheel,) = build.glob("attention_by_hand-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    """``(home, env)``: the student's folder, with ``mywork/`` holding the
    released notebooks, and the environment their commands run in (the
    installed package first on the path, their own home)."""
    top = tmp_path_factory.mktemp("student-machine")
    site, home = top / "site", top / "home"
    _wheel_into(site, top / "wheel")
    shutil.copytree(grading.ROOT / "release", home / "mywork")
    env = {
        "PATH": f"{VENV_BIN}{os.pathsep}/usr/bin:/bin",
        "HOME": str(home),
        "PYTHONPATH": str(site),
        "COURSE_LANG": "en",
    }
    return home, env


def _run(env: dict, home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )


def test_the_student_runs_the_installed_course(machine):
    home, env = machine
    proc = _run(env, home, "-c", "import course; print(course.__file__)")
    assert proc.stdout.startswith(env["PYTHONPATH"]), proc.stdout + proc.stderr
    found = {p.name for p in Path(env["PYTHONPATH"]).rglob("*")}
    for absent in ("tests", ".git", "hints.toml"):
        assert absent not in found
    assert not any(Path(env["PYTHONPATH"]).rglob("source/*/*.py"))


def _answers() -> tuple[list[str], set[str]]:
    """Every solution region and mark scheme of both editions, and the lines of
    them that the released notebook does not give (the distinctive lines)."""
    regions, lines = [], set()
    given = "".join(  # what every student gets: the released notebooks
        grading.notebook_path(
            i18n.edition_root(grading.ROOT, lang), "release", a
        ).read_text()
        for lang in i18n.EDITIONS
        for a in NAMES
    )
    for lang in i18n.EDITIONS:
        edition = i18n.edition_root(grading.ROOT, lang)
        for name in NAMES:
            nb = json.loads(grading.notebook_path(edition, "source", name).read_text())
            for cell in nb["cells"]:
                text = "".join(cell["source"])
                found = [m[2].strip() for m in cells.SOLUTION_REGION.finditer(text)]
                found += [m.strip() for m in cells.MARK_SCHEME.findall(text)]
                found = [f for f in found if f]
                regions += found
                lines |= {
                    line.strip()
                    for region in found
                    for line in region.splitlines()
                    if len(line.strip()) >= 24
                    and not line.strip().startswith("#")
                    and line.strip() not in IDIOMS
                    and json.dumps(line.strip())[1:-1] not in given
                }
    return regions, lines


def _sources_hashes() -> set[str]:
    folders = [grading.ROOT / "source", grading.ROOT / "zh" / "source"]
    return {
        hashlib.sha256(p.read_bytes()).hexdigest()
        for folder in folders
        for p in folder.rglob("*")
        if p.is_file()
    }


def test_nothing_the_student_has_holds_a_reference_answer(machine):
    home, env = machine
    regions, lines = _answers()
    assert len(regions) > 40 and len(lines) > 40  # the scan has something to find
    secret = _sources_hashes()
    files = [p for p in [*Path(env["PYTHONPATH"]).rglob("*"), *home.rglob("*")]]
    found = []
    for path in (p for p in files if p.is_file()):
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() in secret:
            found.append(f"{path}: a copy of a source file")
            continue
        text = data.decode("utf-8", "replace")
        # A notebook keeps its lines as JSON strings: read them as the text.
        plain = text.replace("\\n", "\n").replace('\\"', '"')
        found += [f"{path}: a solution region" for r in regions if r in plain]
        found += [f"{path}: {line!r}" for line in lines if line in plain]
    assert not found, "\n".join(found[:20])


def _notebooks(folder: Path, kind: str) -> list[Path]:
    """Each assignment's correct (``kind="right"``) or wrong notebook, written
    into ``folder/<a>/<a>.ipynb``: the reference answers, or the fixture's
    first round of mistakes."""
    paths = []
    for name in NAMES:
        subs = submissions(grading.ROOT, name)
        key = "reference" if kind == "right" else next(k for k in subs if "mutant" in k)
        path = folder / name / f"{name}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(subs[key][0]))
        paths.append(path)
    return paths


def _sections(printed: str) -> dict[str, str]:
    """``course check``'s output of several notebooks: ``{assignment: report}``."""
    found, name = {}, None
    for line in printed.splitlines():
        if line in NAMES:
            name, found[line] = line, ""
        elif name is not None:
            found[name] += line + "\n"
    return found


def _total(report: str) -> str:
    """The ``points/most`` of a report's total line."""
    found = re.search(r"(\d+(\.\d+)?/\d+(\.\d+)?); written", report)
    return found[1] if found else "-"


def _same(text: str) -> str:
    """A report with its numbers as ``#``: the largest error of a float
    computation may differ in its last digits from one process to another."""
    return re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "#", text)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The instructor's ``course grade`` of students ``right`` and ``wrong``:
    ``{kind: {assignment: report}}`` as ``course check`` prints it."""
    root = grading.make_course(tmp_path_factory.mktemp("class") / "course")
    grading.release(["*"], root)
    for kind in ("right", "wrong"):
        _notebooks(root / "submitted" / kind, kind)
    proc = subprocess.run(
        [sys.executable, "-m", "course", "grade", f"--root={root}", "--workers=2"]
        + ["--fixed-seeds"],
        capture_output=True,
        text=True,
        timeout=2400,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    reports = {}
    for kind in ("right", "wrong"):
        reports[kind] = {}
        for name in NAMES:
            scores = grading.cell_scores(root, name)[kind]
            path = grading.notebook_path(root, "autograded", name, student=kind)
            messages = grading.cell_messages(path)
            reports[kind][name] = selfcheck.report(scores, messages)
    return reports


@pytest.mark.parametrize("kind", ["right", "wrong"])
def test_course_check_gives_what_course_grade_gives(machine, graded, kind):
    home, env = machine
    notebooks = _notebooks(home / kind, kind)
    args = ["-m", "course", "check", "--fixed-seeds", *map(str, notebooks)]
    proc = _run(env, home, *args)
    assert proc.returncode == (0 if kind == "right" else 1), proc.stderr[-3000:]
    sections = _sections(proc.stdout)
    REPORTS.mkdir(parents=True, exist_ok=True)  # the comparison, for a reader
    totals = [
        f"{n} {_total(graded[kind][n])} {_total(sections.get(n, ''))}" for n in NAMES
    ]
    (REPORTS / f"{kind}.txt").write_text(
        "assignment, course grade, course check (autograded points)\n"
        + "\n".join(totals)
        + "\n"
    )
    for name in NAMES:
        want = _same(graded[kind][name]).splitlines()
        got = _same(sections.get(name, "")).splitlines()[: len(want)]
        assert got == want, "\n".join(difflib.unified_diff(want, got, lineterm=""))
    # The verdicts are in the student's record, in their work folder.
    assert (home / kind / ".course" / "progress.sqlite").is_file()
