"""nbgrader configuration of the Chinese edition (中文版) of "Attention, by hand".

The English course's configuration, with this folder as the course root and a
course id of its own: its own gradebook, exchange inbox and release. Grade ids,
tests and points are the English edition's (the notebooks are built from the same
percent files; course/catalog.py).
"""

import os

from course.grading.settings import configure

c = get_config()  # noqa: F821 - provided by nbgrader
here = os.path.dirname(os.path.abspath(__file__))
load_subconfig(os.path.join(here, os.pardir, "nbgrader_config.py"))  # noqa: F821
c.CourseDirectory.root = here
# Its own course id; verdicts, feedback and `course check` in Chinese (nbgrader and
# every kernel it starts speak COURSE_LANG).
configure(c, "zh")
