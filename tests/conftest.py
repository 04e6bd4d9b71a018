import os
import sys
from pathlib import Path

import pytest

from course import grading
from course.grading import settings
from course.grading.environment import threads, tool_env
from course.grading.kernel import warm

# Two test workers share two cores: one torch thread each. Two pools of OpenMP
# threads spinning on the same cores made the in-process checks up to 15x slower.
os.environ.update(threads(os.environ))

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def bert_base_sized(tmp_path_factory):
    """A random BERT of bert-base's shape (12 layers, 12 heads, 768 = 12 x 64) saved
    with the course tokenizer: what ``COURSE_MODEL`` may point at, offline."""
    from transformers import BertConfig, BertModel

    from course import models

    path = tmp_path_factory.mktemp("bert-base-sized")
    BertModel(BertConfig()).save_pretrained(path)
    models.load_tokenizer().save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def warm_env(tmp_path_factory):
    """The environment of a zygote that has imported torch and loaded the model, as
    ``course grade``'s workers keep one: nbgrader and its kernels forked from it
    (``harness.autograde(..., warm_env=...)``) skip the interpreter's start."""
    tmp = tmp_path_factory.mktemp("zygote")
    preload = settings.resolve(grading.ROOT).preprocessors  # as `course grade`'s
    zygote, env = warm.start(tmp, tool_env(), preload=preload)
    assert warm.wait_ready(zygote, env), (tmp / "zygote.log").read_text()
    yield env
    warm.stop(zygote)
