"""Texts the course runs its models on.

All texts ship with the package. :func:`newsgroups_texts` adds the 20 newsgroups
corpus when scikit-learn has it cached already; it never downloads.
"""

from __future__ import annotations

from importlib import resources

#: The sentence most notebooks start from: "bank" means two things in it.
SAMPLE_TEXT = "She sat on the river bank and watched the bank manager row past."

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
        from sklearn.datasets import fetch_20newsgroups

        bunch = fetch_20newsgroups(
            subset="train",
            remove=("headers", "footers", "quotes"),
            download_if_missing=False,
        )
    except (ImportError, OSError):
        if not fallback:
            raise
        return sample_texts()[:n]
    texts = [" ".join(t.split()[:40]) for t in bunch.data if t.strip()]
    return texts[:n]


def next_token_task(batch: int, seq_len: int, vocab: int, generator=None):
    """A next-token task whose answer depends on order.

    Each row is ``seq_len`` random tokens; the target at position t is the token at
    position t + 1 (the last position's target is ``-100``, ignored by
    ``cross_entropy``). A model must know which token comes next, so a model that
    cannot see order cannot solve it.

    Returns
    -------
    tokens, targets : LongTensor (batch, seq_len)
    """
    import torch

    tokens = torch.randint(0, vocab, (batch, seq_len), generator=generator)
    targets = torch.full_like(tokens, -100)
    targets[:, :-1] = tokens[:, 1:]
    return tokens, targets
