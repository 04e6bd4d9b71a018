"""One grading kernel: how it is started, sandboxed and contained.

* :mod:`.launch`: what a kernel is started with (one frozen ``Launch``) and how
  a process becomes it (``become_kernel``, ``run_kernel``), warm or cold;
* :mod:`.warm` and :mod:`.zygote`: a kernel forked warm from a zygote that paid
  the imports once (the kernelspec ``python -m course.grading.kernel.warm``);
* :mod:`.sandbox`, :mod:`.mounts`, :mod:`.inside`, :mod:`.lockdown`,
  :mod:`.kernelapp`: the kernel's own namespaces, file system, uid, limits and
  seccomp filter, and the ipykernel that seals its folder once bound;
* :mod:`.contain` and :mod:`.procs`: the box (cgroup) of a kernel or a task, and
  what was left running in it;
* :mod:`.kernels`: the grader's kernel manager and client.

It may import the shared modules of :mod:`course.grading` (``environment``,
``lean``, ``nbgrader_app``), :mod:`course.i18n`, and what a kernel loads
(:mod:`course.checks`, :mod:`course.models`, :mod:`course.viz`, preloaded by the
zygote). It imports nothing of :mod:`course.grading.steps`,
:mod:`course.grading.run` or :mod:`course.grading.hub`: the steps the zygote
preloads for the nbgrader processes it forks are named by the run that starts it
(``tests/test_imports.py``, ``docs/architecture.md``).
"""
