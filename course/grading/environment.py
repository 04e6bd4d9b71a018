"""The environments of the grading processes, built here and nowhere else.

* :func:`tool_env`: nbgrader and the grading tools (``course grade``'s workers,
  ``course check``, ``course feedback``);
* :func:`kernel_env`: a sandboxed kernel, from what :data:`KEPT` names;
* :func:`public_env`: the zygote's, without what may be a secret;
* :func:`threads`: one torch thread per kernel, for these and for the hub's
  servers (several kernels share the cores).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# A Jupyter data folder whose nbconvert ``mathjax.html.j2`` shadows nbconvert's:
# feedback and formgrader pages draw math with the MathJax of the Jupyter server
# showing them, never a CDN's. First on JUPYTER_PATH for nbgrader and on the hub.
TEMPLATES = str(Path(__file__).with_name("templates"))

# Set by dask's nanny for its workers (``distributed.nanny.pre-spawn-environ``).
# Setting it fixes glibc's mmap threshold at 128 KiB, so a kernel maps and zeroes
# every tensor above that afresh: 09 graded in twice the time. Kernels and nbgrader
# keep glibc's own tuning.
WORKER_ONLY = ("MALLOC_TRIM_THRESHOLD_",)
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def threads(env: dict | None = None) -> dict[str, str]:
    """Threads per kernel: what ``env`` sets for ``OMP_NUM_THREADS`` (an
    administrator's choice), else 1; the same for MKL. Torch's thread pools in
    several busy kernels spin against each other (two kernels on two cores ran the
    checks up to 14x slower)."""
    count = (env or {}).get("OMP_NUM_THREADS") or "1"
    return dict.fromkeys(THREAD_VARIABLES, count)


def tool_env() -> dict:
    """The environment for nbgrader and the grading tools: this interpreter's
    folder first on PATH (nbgrader runs ``alembic`` and ``jupyter`` from PATH), the
    course's nbconvert templates first on JUPYTER_PATH (feedback/formgrader math
    offline), one thread per kernel (callers run several at once), and none of the
    dask worker's own malloc tuning (:data:`WORKER_ONLY`)."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    data = os.pathsep.join(filter(None, [TEMPLATES, os.environ.get("JUPYTER_PATH")]))
    inherited = {k: v for k, v in os.environ.items() if k not in WORKER_ONLY}
    return {**inherited, "PATH": path, "JUPYTER_PATH": data, **threads()}


HOME = "/home/student"  # a sandboxed kernel's home
KEPT = (
    "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "COURSE_LANG",
    *THREAD_VARIABLES, "MPLBACKEND", "PYTHONHASHSEED",
    "COURSE_EVIDENCE", "COURSE_KERNEL_BOX", "NBGRADER_EXECUTION",
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
          "TZ", "TMPDIR", "COURSE_LANG", "COURSE_MODEL", *THREAD_VARIABLES,
          "MPLBACKEND", "PYTHONPATH", "PYTHONHASHSEED",
          "JUPYTER_PATH", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
          "HF_HOME", "HF_HUB_OFFLINE", "HF_HUB_CACHE", "TRANSFORMERS_OFFLINE",
          "SCIKIT_LEARN_DATA", "VIRTUAL_ENV")  # fmt: skip


def public_env(env: dict) -> dict:
    """``env`` without what may be a secret: what the zygote starts with, so that
    no kernel forked from it finds a token or password in its own memory."""
    return {k: v for k, v in env.items() if k in PUBLIC}
