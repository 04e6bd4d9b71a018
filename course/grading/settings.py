"""Every setting of a grading run from one source: the course's ``nbgrader_config.py``.

``course grade``, ``course check``, formgrader and ``nbgrader autograde`` read the
same file; a command-line flag overrides one of its settings only when it is given
(its default is ``None``: the file's value). :class:`Settings` holds what a
grading run resolved, and turns it back into nbgrader's traits
(:meth:`Settings.traits`), the only settings that travel to a task.

:func:`configure` is the part of the file that depends on the edition: course id,
language and feedback labels.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path

from traitlets import Bool, Enum, Float, Unicode
from traitlets.config import Config, Configurable

from .. import i18n

#: The config sections a class reads after its own, nearest first (traitlets'
#: ``section_names()`` reversed; test_grading_settings holds them to it). Written
#: out because the classes live in modules that load torch.
BASES = {
    "GuardedExecute": (
        "Execute",
        "NbGraderPreprocessor",
        "ExecutePreprocessor",
        "Preprocessor",
        "NbConvertBase",
        "NotebookClient",
        "LoggingConfigurable",
        "Configurable",
    ),
    "DrawSeeds": (
        "NbGraderPreprocessor",
        "Preprocessor",
        "NbConvertBase",
        "LoggingConfigurable",
        "Configurable",
    ),
}
COURSE_IDS = {"en": "attention-by-hand", "zh": "attention-by-hand-zh"}


def configure(c, lang: str) -> None:
    """nbgrader settings of one edition (in its ``nbgrader_config.py``): its course
    id, its language for nbgrader's own process and every kernel it starts, and
    feedback pages whose labels (Score, Comments, ...) speak it too.

    This is the one place that sets ``COURSE_LANG`` in a process's environment:
    nbgrader's kernels inherit it.
    """
    c.CourseDirectory.course_id = COURSE_IDS[lang]
    os.environ["COURSE_LANG"] = lang
    if lang == "en":
        return
    from .feedback_page import feedback_template, nbgrader_feedback_template

    try:  # no home or no writable cache, or an nbgrader whose template moved a
        # label: nbgrader's English labels, never a failed command
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        folder = feedback_template(cache / "attention-by-hand")
    except (OSError, RuntimeError, ValueError):
        return
    # Its name is nbgrader's, "feedback", found first; formgrader's "formgrade"
    # (the template of its submission view) in nbgrader's own folder.
    c.HTMLExporter.extra_template_basedirs = [
        str(folder.parent),
        str(nbgrader_feedback_template()),
    ]


def load(root: Path) -> Config:
    """The nbgrader configuration of the course folder ``root`` (empty if none),
    read without changing this process's language (:func:`configure` sets it for
    the nbgrader that runs the file)."""
    from traitlets.config.loader import ConfigFileNotFound, PyFileConfigLoader

    before = os.environ.get("COURSE_LANG")
    try:
        return PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    except ConfigFileNotFound:
        return Config()
    finally:
        if before is None:
            os.environ.pop("COURSE_LANG", None)
        else:
            os.environ["COURSE_LANG"] = before


def course_language(root: Path) -> str:
    """The language of the nbgrader course in ``root``, from the course id its
    ``nbgrader_config.py`` sets (:func:`configure`); else the language now spoken."""
    course_id = load(root).CourseDirectory.get("course_id")
    return {v: k for k, v in COURSE_IDS.items()}.get(course_id, i18n.language())


@dataclass(frozen=True, kw_only=True)
class Settings:
    """What one grading run resolved: the file's values, a flag's where given."""

    cell_timeout: float  # Execute.timeout: seconds per cell
    notebook_timeout: float  # GuardedExecute.notebook_timeout: per submission
    sandbox: str  # GuardedExecute.sandbox: "on", "auto" or "off"
    draw_seeds: bool  # DrawSeeds.enabled: fresh hidden-test seeds per student
    preprocessors: tuple[str, ...] = ()  # Autograde.autograde_preprocessors

    @property
    def sandboxed(self) -> bool:
        """Whether kernels run in a sandbox."""
        return self.sandbox != "off"

    def traits(self) -> dict[str, dict[str, object]]:
        """``{class: {trait: value}}``: these settings as nbgrader's traits."""
        return {
            "Execute": {"timeout": self.cell_timeout},
            "GuardedExecute": {
                "notebook_timeout": self.notebook_timeout,
                "sandbox": self.sandbox,
            },
            "DrawSeeds": {"enabled": self.draw_seeds},
        }

    def argv(self) -> list[str]:
        """:meth:`traits` as nbgrader command-line options."""
        return [
            f"--{cls}.{name}={value}"
            for cls, traits in self.traits().items()
            for name, value in traits.items()
        ]


def resolve(
    root: Path,
    *,
    cell_timeout: float | None = None,
    notebook_timeout: float | None = None,
    sandbox: str | None = None,
    draw_seeds: bool | None = None,
) -> Settings:
    """The settings of a grading run of the course in ``root``: each argument
    that is not ``None`` overrides ``root``'s ``nbgrader_config.py``, which
    overrides the traits' own defaults (read only for a setting the file lacks:
    they live in modules that load torch)."""
    config = load(root)

    def pick(value, path: str, trait: str):
        if value is not None:
            return value
        module, _, name = path.rpartition(".")
        for section in (name, *BASES.get(name, ())):
            if trait in config.get(section, {}):
                return config[section][trait]
        cls = getattr(importlib.import_module(module), name)
        return cls.class_traits()[trait].default_value

    guarded = "course.grading.steps.execute.GuardedExecute"
    return Settings(
        cell_timeout=pick(cell_timeout, guarded, "timeout"),
        notebook_timeout=pick(notebook_timeout, guarded, "notebook_timeout"),
        sandbox=pick(sandbox, guarded, "sandbox"),
        draw_seeds=pick(draw_seeds, "course.grading.steps.judge.DrawSeeds", "enabled"),
        preprocessors=tuple(
            config.get("Autograde", {}).get("autograde_preprocessors", ())
        ),
    )


class HintPolicy(Configurable):
    """The instructor's hints policy, ``c.HintPolicy.*`` in ``nbgrader_config.py``.

    Read by the course hub's hint service (:mod:`course.grading.hub.hintservice`),
    which serves every hint of a class and keeps the record that counts, and by
    ``course grade``, which charges what the policy says into the gradebook.
    """

    available = Bool(
        True, help="Whether students on the course hub get hints at all."
    ).tag(config=True)
    points_per_hint = Float(
        0.0,
        min=0.0,
        help="Points taken from an exercise for each hint asked on it (never "
        "below 0 for the exercise); 0: hints are free.",
    ).tag(config=True)
    unlock = Enum(
        ["on-request", "after-failure"],
        "on-request",
        help="When the next step hint unlocks: at every request, or only once a "
        "test of the exercise has failed since the last hint.",
    ).tag(config=True)
    worked_answers = Bool(
        False,
        help="Whether students on the course hub may see worked answers (a model "
        "answer once their own attempt exists, course/worked.py); off: the hub "
        "makes them the instructor's alone.",
    ).tag(config=True)
    record = Unicode(
        "",
        help="The hint service's Unix socket (e.g. /run/course-hints/hints.sock): "
        "where `course grade` reads who asked which hint. Needed where hints cost "
        "points.",
    ).tag(config=True)


def hint_policy(root: Path) -> HintPolicy:
    """The hints policy of the course in ``root`` (the defaults where it says none)."""
    return HintPolicy(config=load(root))
