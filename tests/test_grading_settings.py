"""Every setting of a grading run from nbgrader_config.py; a flag overrides it."""

import pytest

from course import grading
from course.grading import settings

CONFIG = """c = get_config()
c.Execute.timeout = 300
c.GuardedExecute.notebook_timeout = 1800.0
c.GuardedExecute.sandbox = "on"
c.DrawSeeds.enabled = True
"""


@pytest.mark.parametrize(
    "flags,expected",
    [
        ({}, (300, 1800.0, "on", True)),
        ({"cell_timeout": 10}, (10, 1800.0, "on", True)),
        ({"notebook_timeout": 240}, (300, 240, "on", True)),
        ({"sandbox": "off", "draw_seeds": False}, (300, 1800.0, "off", False)),
    ],
)
def test_flags_override_the_config_only_when_given(tmp_path, flags, expected):
    (tmp_path / "nbgrader_config.py").write_text(CONFIG)
    got = settings.resolve(tmp_path, **flags)
    assert (
        got.cell_timeout,
        got.notebook_timeout,
        got.sandbox,
        got.draw_seeds,
    ) == expected
    assert got.sandboxed == (expected[2] != "off")
    assert f"--Execute.timeout={expected[0]}" in got.argv()


def test_the_course_gives_a_cell_the_same_time_everywhere():
    """`course grade`, `course check` and formgrader read one number."""
    chosen = settings.resolve(grading.ROOT)
    assert chosen.cell_timeout == settings.load(grading.ROOT).Execute.timeout
    assert chosen.draw_seeds and chosen.sandbox == "on"
    for edition in ("en", "zh"):
        root = grading.ROOT / ("zh" if edition == "zh" else ".")
        assert settings.resolve(root) == chosen, edition


def test_a_config_without_a_setting_falls_back_to_the_trait(tmp_path):
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\n")
    got = settings.resolve(tmp_path, draw_seeds=True)
    assert got.notebook_timeout == 0 and got.sandbox == "on"


def test_a_chinese_class_keeps_its_course_id(monkeypatch, tmp_path):
    """The hub's instructor config loads the edition's config and keeps its id."""
    from traitlets.config.loader import PyFileConfigLoader

    monkeypatch.setenv("COURSE_ROOT", str(grading.ROOT / "zh"))
    monkeypatch.setenv("COURSE_LANG", "en")
    hub = grading.ROOT / "hub" / "instructor"
    config = PyFileConfigLoader("nbgrader_config.py", path=str(hub)).load_config()
    assert config.CourseDirectory.course_id == settings.COURSE_IDS["zh"]
    student = grading.ROOT / "hub" / "student"
    monkeypatch.setenv("COURSE_LANG", "zh")
    config = PyFileConfigLoader("nbgrader_config.py", path=str(student)).load_config()
    assert config.CourseDirectory.course_id == settings.COURSE_IDS["zh"]


@pytest.mark.parametrize(
    "path",
    [
        "course.grading.steps.execute.GuardedExecute",
        "course.grading.steps.judge.DrawSeeds",
    ],
)
def test_a_class_reads_the_sections_traitlets_reads(path):
    """A setting written for a base class (``c.ExecutePreprocessor.timeout``) is
    the one nbgrader uses: resolve() looks where traitlets looks, in its order."""
    import importlib

    module, _, name = path.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    assert (name, *settings.BASES[name]) == tuple(reversed(cls.section_names()))


def test_a_setting_of_a_base_class_is_read(tmp_path):
    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()\nc.ExecutePreprocessor.timeout = 42\n"
    )
    assert settings.resolve(tmp_path).cell_timeout == 42


def test_the_run_knows_the_course_s_preprocessors():
    """What the zygotes preload: the autograde steps nbgrader_config.py names."""
    import importlib

    chosen = settings.resolve(grading.ROOT)
    assert "course.grading.steps.judge.JudgeEvidence" in chosen.preprocessors
    for path in chosen.preprocessors:
        module, _, name = path.rpartition(".")
        assert hasattr(importlib.import_module(module), name), path
