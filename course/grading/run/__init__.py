"""A grading run of a class (``course grade``, ``course check``).

* :mod:`.batch`: the plan of a run and its submissions, graded on the cluster;
* :mod:`.cluster` and :mod:`.engine`: the dask cluster and one submission's task
  (``nbgrader autograde`` in a task box);
* :mod:`.results` and :mod:`.report`: what the tasks decided, the log and the
  class report;
* :mod:`.hintcharge`: the hints a student asked for, charged and counted;
* :mod:`.selfcheck`: a student's own notebook graded by the shipped course.

It may import the shared modules of :mod:`course.grading`,
:mod:`course.grading.kernel` (warm kernels and boxes per worker) and
:mod:`course.grading.steps` (the flags a task reports). It imports nothing of
:mod:`course.grading.hub`, and no other part of :mod:`course.grading` imports it:
only the command line (:mod:`course.cli`, :mod:`course.instructor`) does
(``tests/test_imports.py``).
"""
