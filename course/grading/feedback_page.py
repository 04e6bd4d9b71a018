"""nbgrader's feedback page in the course's language.

nbgrader's feedback template writes its labels (Score, Comments, Test cell, ...)
in English. :func:`feedback_template` writes a copy whose labels speak the
language now spoken, and :func:`course.grading.settings.configure` puts it first
among the exporter's template folders for a Chinese class.
"""

import os
from pathlib import Path

from ..i18n import N_, language, say

# nbgrader's feedback page (formgrader/templates/feedback/index.html.j2) writes its
# labels in English. Each is found by a snippet of that template that holds it and
# no template code; test_i18n fails if an nbgrader release moves one.
LINKS = (  # the table of contents: ">label</a>"
    N_("Test cell"),
    N_("Coding free-response"),
    N_("Written response"),
    N_("Task"),
    N_("Comment"),
)
LABELS = [(f">{label}</a>", label) for label in LINKS] + [
    ("Late submission penalty (", N_("Late submission penalty")),
    ("Score: ", N_("Score")),
    ("(Top)</a>", N_("Top")),
    ("Student's answer</span>", N_("Student's answer")),
    ("Student's task</span>", N_("Student's task")),
    ("Grade cell: <code>", N_("Grade cell")),
    ("Task: <code>", N_("Task")),
    ("<b>Comments:</b>", N_("Comments")),
]


def nbgrader_feedback_template() -> Path:
    """nbgrader's own feedback template folder (``index.html.j2``, ``conf.json``)."""
    import nbgrader

    return Path(nbgrader.__file__).parent / "server_extensions/formgrader/templates"


def feedback_template(folder: Path) -> Path:
    """Write nbgrader's feedback template, its labels in the language now spoken
    (``COURSE_LANG``), to ``folder/<lang>/feedback/`` and return that folder.

    It keeps nbgrader's name, ``feedback``, in a folder of templates of its own:
    first among the exporter's template folders, it stands in for nbgrader's
    when feedback is made, and formgrader, which renders submissions with the
    same exporter under another template name (``formgrade``), still finds its
    own.

    Raises
    ------
    ValueError
        If nbgrader's template no longer holds one of :data:`LABELS`' snippets.
    """
    source = nbgrader_feedback_template() / "feedback"
    text = (source / "index.html.j2").read_text()
    for snippet, label in LABELS:
        if snippet not in text:
            raise ValueError(f"nbgrader's feedback template has no {snippet!r}")
        text = text.replace(snippet, snippet.replace(label, say(label)))
    out = Path(folder) / language() / "feedback"
    out.mkdir(parents=True, exist_ok=True)
    for name, content in (
        ("index.html.j2", text),
        ("conf.json", (source / "conf.json").read_text()),
    ):
        path = out / name
        if not path.exists() or path.read_text() != content:
            part = path.with_suffix(f".{os.getpid()}")  # nbgrader runs side by side
            part.write_text(content)
            part.replace(path)
    return out
