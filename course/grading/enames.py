"""Names of the error outputs the grader writes into a graded notebook.

They are how the grading steps (:mod:`course.grading.steps.execute`,
:mod:`course.grading.steps.judge`, :mod:`course.grading.steps.scan`,
:mod:`course.grading.steps.tamper`) tell the coordinator (:mod:`course.grading.run.batch`)
what happened to a cell. This module imports nothing, so the coordinator reads
graded notebooks without loading torch or nbclient.
"""

KERNEL_DIED = "KernelDied"  # the kernel died (or broke) while running the cell
DEAF = "CellTimeoutError"  # the cell ran past its time and ignored the interrupt
NOT_RUN = "NotRun"  # not run: the notebook's time, output or restarts ran out
TAMPERED = "TamperingDetected"  # a flag: the cell patches the grading tools
SHORTCUT = "ShortcutUsed"  # the answer calls what the exercise turns off
UNREPLAYABLE = "GradingError"  # the judge could not replay the cell's checks
