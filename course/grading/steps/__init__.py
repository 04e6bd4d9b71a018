"""The nbgrader preprocessors of the course, in the order ``nbgrader_config.py``
lists them, and what they need.

* :mod:`.judge`: ``DrawSeeds`` (the hidden tests' seeds) and ``JudgeEvidence``
  (every test cell decided in this process from the kernel's evidence);
* :mod:`.execute`: ``GuardedExecute``, each kernel in its sandbox and box, its
  time and output limits, and a new kernel after a cell that killed its own;
* :mod:`.flags`: ``LimitOutput`` and the flags a run reports;
* :mod:`.tamper`: ``FlagTampering``;
* :mod:`.feedback` and :mod:`.inert`: what a student's feedback and the
  instructor's pages may show;
* :mod:`.scan`: the answers' source read for shortcuts and tampering.

It may import the shared modules of :mod:`course.grading`,
:mod:`course.grading.kernel` (``GuardedExecute`` starts kernels),
:mod:`course.checks` (the evidence the kernel records) and :mod:`course.i18n`. It
imports nothing of :mod:`course.grading.run` or :mod:`course.grading.hub`
(``tests/test_imports.py``).
"""
