"""Run nbgrader on a course folder and read what it decided.

These are the building blocks of ``python -m course`` and of the tests that grade
fixture submissions; all of them work on any course root (the repository, or a
copy in a temporary folder).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .. import i18n

ROOT = Path(__file__).resolve().parents[2]
# A Jupyter data folder whose nbconvert ``mathjax.html.j2`` shadows nbconvert's:
# feedback and formgrader pages draw math with the MathJax of the Jupyter server
# showing them, never a CDN's. First on JUPYTER_PATH for nbgrader and on the hub.
TEMPLATES = str(Path(__file__).with_name("templates"))


def assignments(root: Path = ROOT) -> list[str]:
    """Assignment names, i.e. the folders of ``source/``, in course order."""
    return sorted(p.name for p in (root / "source").iterdir() if p.is_dir())


def make_course(dest: Path, root: Path = ROOT, lang: str = "en") -> Path:
    """Copy one edition's ``source/`` and the course's ``nbgrader_config.py`` (with
    that edition's settings, :func:`course.i18n.configure`) into a fresh course
    folder."""
    dest.mkdir(parents=True, exist_ok=True)
    config = (root / "nbgrader_config.py").read_text()
    if lang != "en":  # as the edition's own config does
        config += f'\nfrom course.i18n import configure\nconfigure(c, "{lang}")\n'
    (dest / "nbgrader_config.py").write_text(config)
    source = i18n.edition_root(root, lang) / "source"
    shutil.copytree(source, dest / "source", dirs_exist_ok=True)
    return dest


# Set by dask's nanny for its workers (``distributed.nanny.pre-spawn-environ``).
# Setting it fixes glibc's mmap threshold at 128 KiB, so a kernel maps and zeroes
# every tensor above that afresh: 09 graded in twice the time. Kernels and nbgrader
# keep glibc's own tuning.
WORKER_ONLY = ("MALLOC_TRIM_THRESHOLD_",)


def tool_env() -> dict:
    """The environment for nbgrader and the grading tools: this interpreter's
    folder first on PATH (nbgrader runs ``alembic`` and ``jupyter`` from PATH), the
    course's nbconvert templates first on JUPYTER_PATH (feedback/formgrader math
    offline), one thread per kernel (callers run several at once), and none of the
    dask worker's own malloc tuning (:data:`WORKER_ONLY`)."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    data = os.pathsep.join(filter(None, [TEMPLATES, os.environ.get("JUPYTER_PATH")]))
    inherited = {k: v for k, v in os.environ.items() if k not in WORKER_ONLY}
    return {
        **inherited,
        "PATH": path,
        "JUPYTER_PATH": data,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


HOME = "/home/student"  # a sandboxed kernel's home
KEPT = (
    "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "COURSE_LANG",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "MPLBACKEND", "PYTHONHASHSEED",
    "COURSE_EVIDENCE", "COURSE_KERNEL_BOX",
)  # fmt: skip


def kernel_env(env: dict) -> dict:
    """A sandboxed kernel's environment: what :data:`KEPT` names, nothing more (no
    secret of the grader, no ``COURSE_MODEL``: graders use the embedded model)."""
    import course

    python = str(Path(sys.executable).parent)
    return {
        **{k: v for k, v in env.items() if k in KEPT},
        "PATH": f"{python}:/usr/local/bin:/usr/bin:/bin",
        "PYTHONPATH": str(Path(course.__file__).resolve().parent.parent),
        "PYTHONDONTWRITEBYTECODE": "1",
        "HOME": HOME,
        "USER": "student",
        "LOGNAME": "student",
        "TMPDIR": "/tmp",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }


# The variables that the zygote keeps, by name: a prefix would keep HF_TOKEN.
PUBLIC = ("PATH", "HOME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES",
          "TZ", "TMPDIR", "COURSE_LANG", "COURSE_MODEL", "OMP_NUM_THREADS",
          "MKL_NUM_THREADS", "MPLBACKEND", "PYTHONPATH", "PYTHONHASHSEED",
          "JUPYTER_PATH", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
          "HF_HOME", "HF_HUB_OFFLINE", "HF_HUB_CACHE", "TRANSFORMERS_OFFLINE",
          "SCIKIT_LEARN_DATA", "VIRTUAL_ENV")  # fmt: skip


def public_env(env: dict) -> dict:
    """``env`` without what may be a secret: what the zygote starts with, so that
    no kernel forked from it finds a token or password in its own memory."""
    return {k: v for k, v in env.items() if k in PUBLIC}


def import_jsonschema_lean() -> None:
    """Import jsonschema (nbformat's and nbgrader's validator) without the
    ``rfc3987_syntax`` that jupyter-events has installed beside it.

    jsonschema imports that package for its "iri" format checker, and importing it
    builds 38 Lark parsers: 2.9 s in the coordinator and in every worker's zygote,
    for a check that grading never makes (nbformat and nbgrader validate no
    formats). An ``import rfc3987_syntax`` later still works.
    """
    if "jsonschema" in sys.modules or "rfc3987_syntax" in sys.modules:
        return
    sys.modules["rfc3987_syntax"] = None  # so the import fails, and is skipped
    try:
        import jsonschema  # noqa: F401
    finally:
        del sys.modules["rfc3987_syntax"]


def nbgrader(*args: str, root: Path, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``nbgrader ARGS`` with ``root`` as the course folder and cwd."""
    cmd = [sys.executable, "-m", "nbgrader", *args, f"--CourseDirectory.root={root}"]
    env = {**tool_env(), "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def release(names: list[str], root: Path = ROOT) -> None:
    """Generate ``release/<a>`` for each assignment (``nbgrader generate_assignment``)."""
    for name in names:
        nbgrader("generate_assignment", name, "--force", root=root)


def notebook_path(
    root: Path, stage: str, assignment: str, student: str | None = None
) -> Path:
    """``<root>/<stage>[/<student>]/<a>/<a>.ipynb``."""
    parts = (
        [stage] + ([student] if student else []) + [assignment, f"{assignment}.ipynb"]
    )
    return root.joinpath(*parts)


def cell_scores(
    root: Path, assignment: str, db_url: str | None = None
) -> dict[str, dict[str, tuple[float, float]]]:
    """``{student: {grade_id: (score, max_score)}}`` from the course's gradebook
    (``db_url``, default SQLite in ``root``)."""
    from . import gradebook

    return gradebook.cell_scores(gradebook.url(root, db_url), assignment)


def cell_messages(path: Path) -> dict[str, str]:
    """``{grade_id: error text}`` for each cell of an executed notebook that failed."""
    nb = json.loads(path.read_text("utf-8"))
    out = {}
    for cell in nb["cells"]:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if grade_id and errors:
            out[grade_id] = "\n".join(f"{e['ename']}: {e['evalue']}" for e in errors)
    return out


def validate(path: Path) -> list[str]:
    """Run nbgrader's Validator on one notebook; return one line per failing cell.

    ``nbgrader validate`` exits 0 even when tests fail, so callers that need a
    verdict use this instead. An empty list means every cell ran and passed.
    """
    from nbgrader.validator import Validator
    from traitlets.config import Config

    config = Config()
    config.Validator.validate_all = True
    config.Execute.timeout = 300  # generous: CI runs two notebooks at once
    result = Validator(config=config).validate(str(path))
    lines = []
    for key, cells in result.items():
        for cell in cells:
            first = cell.get("source", "").strip().splitlines()[:1]
            lines.append(
                f"{key}: {first[0] if first else ''} -> {cell.get('raw_error', '')}"
            )
    return lines
