"""The oracle runs every visible test asks for, made once before any test.

A zygote (:mod:`course.grading.kernel.zygote`) calls :func:`warm_up` before it forks: no
kernel or grader it forks runs them again (each was 10-25 ms, twice per test: in
the kernel and in the judge).
"""

from __future__ import annotations

from . import SAMPLE_TEXTS, layer, oracles


def warm_up() -> None:
    """Run the course model once on each input of the visible tests."""
    for text in SAMPLE_TEXTS:
        oracles.course_case(text=text)
        oracles.sample_qk(text=text)
    oracles.course_case(padded=True)
    for texts in layer.UNPADDED:
        layer.course_case(texts=texts)
    layer.course_case(padded=True)
