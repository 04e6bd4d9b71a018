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
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Feedback shows scores and messages, never hidden test source or tracebacks into it.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbgrader.preprocessors.ClearHiddenTests",
    "course.grading.feedback.RedactTestCells",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]
