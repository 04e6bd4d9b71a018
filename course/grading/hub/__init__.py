"""The course hub's side of grading.

* :mod:`.exchange`: nbgrader's collect and release-feedback, as the hub's
  exchange runs them (``c.ExchangeFactory`` in ``nbgrader_config.py``);
* :mod:`.hintservice`: the hint service that serves every hint of the class and
  keeps the record of who asked which;
* :mod:`.private`: the instructor's files made private as the hub starts.

It may import the shared modules of :mod:`course.grading` (``settings``) and the
course's hint and worked-answer modules (:mod:`course.hintbook`,
:mod:`course.hints`, :mod:`course.hubhints`, :mod:`course.worked`,
:mod:`course.i18n`). It imports nothing of :mod:`course.grading.kernel`,
:mod:`course.grading.steps` or :mod:`course.grading.run`
(``tests/test_imports.py``).
"""
