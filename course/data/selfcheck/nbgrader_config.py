"""nbgrader configuration of the course "Attention, by hand"."""

c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.course_id = "attention-by-hand"
c.CourseDirectory.root = __file__.rsplit("/", 1)[0] if "/" in __file__ else "."
# The percent files next to each notebook hold the solutions: never release them.
# The hints reach students built into the course package (course/data/hints.json).
c.CourseDirectory.ignore = [
    ".ipynb_checkpoints",
    "*.pyc",
    "__pycache__",
    "feedback",
    "*.py",
    "hints.toml",
]
# The exchange (course/grading/hub/exchange.py): collect takes a submission as data
# (one a student did not send is refused, its time is the exchange's, not the
# student's timestamp.txt, and no link in it is followed); feedback is released
# readable by its student whatever the instructor's umask.
c.ExchangeFactory.collect = "course.grading.hub.exchange.OwnedCollect"
c.ExchangeFactory.release_feedback = "course.grading.hub.exchange.ReadableFeedback"

# A cell may load a model, train a tiny model twice or run several randomized checks,
# on a machine grading two notebooks at once: allow five minutes.
# `course grade` (whose --cell-timeout overrides it), `course check` and formgrader
# alike.
c.Execute.timeout = 300
c.Execute.interrupt_on_timeout = True
# A whole submission: later cells are not run past it (`course grade --timeout`).
c.GuardedExecute.notebook_timeout = 1800.0
c.Execute.kernel_name = "python3"

# Autograde: nbgrader's pipeline with the course's steps (course/grading/):
# DrawSeeds gives the hidden tests seeds drawn for this student and this run;
# GuardedExecute runs each kernel in its own box (no process outlives the notebook,
# no network, capped memory, processes, output and time) and restarts a kernel that
# a cell killed; in the kernel the checks only record what the answers returned;
# JudgeEvidence decides every test cell in this process from that evidence, and
# from the answers' source for shortcuts; FlagTampering flags, for the instructor,
# cells that patch the grading tools.
c.Autograde.autograde_preprocessors = [
    "course.grading.steps.judge.DrawSeeds",
    "course.grading.steps.execute.GuardedExecute",
    "course.grading.steps.judge.JudgeEvidence",
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "course.grading.steps.flags.LimitOutput",
    "course.grading.steps.tamper.FlagTampering",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]
# Late work: a submission after its due date (set in formgrader's Manage
# Assignments, or `nbgrader db assignment add NAME --duedate=...`) scores 0 and says
# so. nbgrader's other built-in choice is "none" (marked late, no penalty); a
# subclass of nbgrader.plugins.LateSubmissionPlugin can take points per hour.
c.LateSubmissionPlugin.penalty_method = "zero"
# Hidden tests get seeds drawn per student and run (`course grade --fixed-seeds`:
# the seeds written in source/, to reproduce a grade).
c.DrawSeeds.enabled = True
c.GuardedExecute.memory_limit = 4.0  # GiB per kernel; peak use is under 1 GiB
# Hints. Alone, a student asks `check.hint("softmax")` or `course hint softmax`
# and the hints are free. On the course hub (`make hub`) a service, course-hints,
# serves every hint of the class and keeps the record of who asked which, out of
# the students' reach; the instructor decides here:
c.HintPolicy.available = True  # False: the hub gives no hints
c.HintPolicy.points_per_hint = 0.0  # points of the exercise per hint (never < 0)
c.HintPolicy.unlock = "on-request"  # or "after-failure": only once a test failed
# Where `course grade` reads the record, charges it (each hint at the price it had
# when given: negative extra credit on the exercise's test cells, shown in
# formgrader; a cell's extra credit of 0 or more is yours and kept) and counts it
# for the class report: the service's socket, e.g. "/run/course-hints/hints.sock"
# (COURSE_HINT_SOCKET of the hub). Run `course grade` in your hub server (its token).
c.HintPolicy.record = ""
# Worked answers (a model answer and its rubric, shown to a student once their own
# attempt exists: `course answer softmax`, check.worked("softmax")): always for a
# student alone; on the course hub only where this says so, else the hub makes
# them the instructor's alone. They never enter release/, feedback or a graded
# kernel.
c.HintPolicy.worked_answers = False
# Every kernel in a sandbox of its own (docs/security.md): an unprivileged user in
# namespaces of its own that sees only what a notebook needs. "on" refuses to grade
# where the machine cannot; "off" only as an explicit choice (course grade
# --no-sandbox says so in the class report).
c.GuardedExecute.sandbox = "on"
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Feedback shows scores and messages, never hidden test source or tracebacks into it,
# nor the written answers' model answers and rubrics: each task cell holds one
# between nbgrader's "=== BEGIN MARK SCHEME ===" / "=== END MARK SCHEME ===" lines,
# which generate_assignment leaves out of release/, formgrader shows the grader (the
# autograded notebook's task cells are the source's) and ClearMarkScheme removes here.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "course.grading.steps.feedback.ScrubHiddenTests",
    "nbgrader.preprocessors.ClearHiddenTests",
    "nbgrader.preprocessors.ClearMarkScheme",
    "course.grading.steps.feedback.RedactTestCells",
    "course.grading.steps.feedback.ExplainHintCharges",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]

# nbgrader 0.9 applies only its own feedback steps; the HTML exporter applies these.
c.HTMLExporter.preprocessors = [
    "course.grading.steps.feedback.ScrubHiddenTests",
    "course.grading.steps.feedback.RedactTestCells",
    "course.grading.steps.feedback.ExplainHintCharges",
    "course.grading.steps.inert.InertOutputs",
]
# A student's notebook is inert in formgrader (opened with the instructor's Jupyter
# session) and in feedback, both made by this exporter (course/grading/steps/inert.py):
# nbconvert cleans text/html and text/markdown outputs and leaves JavaScript and
# widgets out; the course cleans the markdown cells, which nbgrader's templates do
# not, and what nbconvert leaves (outputs of other types, an image's size).
c.HTMLExporter.sanitize_html = True
c.HTMLExporter.filters = {"markdown2html": "course.grading.steps.inert.InertMarkdown"}
