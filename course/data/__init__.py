"""Texts the course runs its models on.

All texts ship with the package. :func:`newsgroups_texts` and :func:`long_text`
use the 20 newsgroups corpus when scikit-learn has it cached already; they never
download.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

#: The sentence most notebooks start from: "bank" means two things in it.
SAMPLE_TEXT = "She sat on the river bank and watched the bank manager row past."

#: How long :func:`long_text` is at least, in words (over 512 word pieces).
LONG_WORDS = 600

#: A pair for sentence-pair inputs (token_type_ids, bertviz's sentence_b_start).
SENTENCE_PAIR = ("The cat sat on the mat.", "It was tired, so it slept.")


def sample_texts() -> list[str]:
    """The course's own sample texts, one sentence each.

    Returns
    -------
    list of str
        Includes :data:`SAMPLE_TEXT`, where "bank" means a river bank and a money bank.
    """
    raw = resources.files(__package__).joinpath("sample_texts.txt").read_text("utf-8")
    lines = (line.strip() for line in raw.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def newsgroups_texts(n: int = 20, fallback: bool = True) -> list[str]:
    """Up to ``n`` short texts from 20 newsgroups, if scikit-learn has it cached.

    Parameters
    ----------
    n : int
        How many texts at most.
    fallback : bool
        When the corpus is not cached (or scikit-learn is absent), return
        :func:`sample_texts` instead of raising. No download is ever attempted.

    Returns
    -------
    list of str
    """
    try:
        posts = _newsgroups_posts()
    except (ImportError, OSError):
        if not fallback:
            raise
        return sample_texts()[:n]
    texts = [" ".join(t.split()[:40]) for t in posts if t.strip()]
    return texts[:n]


def long_text(min_words: int = LONG_WORDS) -> str:
    """One newsgroup post too long for BERT's 512 positions.

    The first 20 newsgroups post of at least ``min_words`` words when scikit-learn
    has the corpus cached; otherwise the course's own post in that style
    (``long_post.txt``, a sci.space answer written for the course: the corpus is a
    download, and the course runs offline).

    Returns
    -------
    str
        Paragraphs separated by blank lines.
    """
    try:
        posts = _newsgroups_posts()
    except (ImportError, OSError):
        posts = []
    for post in posts:
        if len(post.split()) >= min_words:
            return post.strip()
    raw = resources.files(__package__).joinpath("long_post.txt").read_text("utf-8")
    lines = [line for line in raw.splitlines() if not line.startswith("#")]
    return "\n".join(lines).strip()


def _newsgroups_posts() -> list[str]:
    """The 20 newsgroups training posts, headers, footers and quotes removed.

    Raises ``OSError`` at once when scikit-learn's cache holds no corpus (without
    importing scikit-learn, which takes a second).
    """
    home = os.environ.get("SCIKIT_LEARN_DATA", "~/scikit_learn_data")
    if not (Path(home).expanduser() / "20news-bydate.pkz").is_file():
        raise FileNotFoundError("20 newsgroups is not in scikit-learn's cache")
    from sklearn.datasets import fetch_20newsgroups

    bunch = fetch_20newsgroups(
        subset="train",
        remove=("headers", "footers", "quotes"),
        download_if_missing=False,
    )
    return list(bunch.data)


#: The echo task's fixed sizes: every run, and every test of it, uses these.
ECHO_LEN, ECHO_VOCAB, ECHO_LAG = 16, 16, 3


def echo_task(batch: int, generator=None):
    """A sequence task that only a model which sees positions can solve.

    Each row is :data:`ECHO_LEN` random tokens out of :data:`ECHO_VOCAB`; the target
    at position t is the token that came :data:`ECHO_LAG` steps earlier (the first
    positions' targets are ``-100``, ignored by ``cross_entropy``). A causal model
    reads the tokens one by one; to answer it must find the token exactly that far
    back, and without positions every earlier token looks alike.

    Returns
    -------
    tokens, targets : LongTensor (batch, ECHO_LEN)
    """
    import torch

    shape = (batch, ECHO_LEN)
    tokens = torch.randint(0, ECHO_VOCAB, shape, generator=generator)
    targets = torch.full_like(tokens, -100)
    targets[:, ECHO_LAG:] = tokens[:, :-ECHO_LAG]
    return tokens, targets
