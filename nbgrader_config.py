"""nbgrader configuration of the course "Attention, by hand"."""

c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.course_id = "attention-by-hand"
c.CourseDirectory.root = __file__.rsplit("/", 1)[0] if "/" in __file__ else "."
# The percent files next to each notebook hold the solutions: never release them.
c.CourseDirectory.ignore = [
    ".ipynb_checkpoints",
    "*.pyc",
    "__pycache__",
    "feedback",
    "*.py",
]

# A cell may load a model, train a tiny model twice or run several randomized checks,
# on a machine grading two notebooks at once: allow five minutes.
c.Execute.timeout = 300
c.Execute.interrupt_on_timeout = True
c.Execute.kernel_name = "python3"

# Autograde: nbgrader's pipeline with two course steps (course/grading/):
# GuardedExecute restarts a kernel that a cell killed or that ignored the interrupt
# (that cell gets 0, the rest is graded), caps each kernel at 4 GiB of address space
# and kills kernels at once when done; FlagTampering sets to 0 every test after a
# cell that patches the grading tools (torch.allclose, course.checks, builtins, ...).
c.Autograde.autograde_preprocessors = [
    "course.grading.execute.GuardedExecute",
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "course.grading.tamper.FlagTampering",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]
c.GuardedExecute.memory_limit = 4.0  # GiB per kernel; peak use is under 1 GiB
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Feedback shows scores and messages, never hidden test source or tracebacks into it.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbgrader.preprocessors.ClearHiddenTests",
    "course.grading.feedback.RedactTestCells",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]
