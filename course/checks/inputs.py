"""Inputs the checks draw: the texts of the visible tests, random padded
batches and tiny BERTs of random sizes.
"""

from __future__ import annotations

import torch

from ..data import SAMPLE_TEXT, SENTENCE_PAIR

# Visible tests on "the sample text" also run this second one, so that an answer
# fitted to the sample (its numbers hard-coded) cannot pass them.
SAMPLE_TEXTS = (SAMPLE_TEXT, SENTENCE_PAIR[1])


def random_batch(rng, vocab: int = 100, token_types: bool = False):
    """A random padded batch: ``(input_ids, token_type_ids or None, attention_mask)``.

    B in 2..3, T in 2..9; the first row is full length, the others padded (so a
    forgotten mask always shows, whatever the seed).
    """
    B, T = rng.randint(2, 3), rng.randint(2, 9)
    gen = torch.Generator().manual_seed(rng.randint(0, 999))
    ids = torch.randint(1, vocab, (B, T), generator=gen)
    types = torch.randint(0, 2, (B, T), generator=gen) if token_types else None
    lengths = [T] + [rng.randint(1, T - 1) for _ in range(B - 1)]  # some padding
    mask = torch.tensor([[1] * n + [0] * (T - n) for n in lengths])
    return ids, types, mask


def random_tiny_bert(rng, heads=(1, 2, 3, 4), fewest_layers: int = 1):
    """A tiny BERT of random size drawn from ``rng`` (``fewest_layers`` to 3 layers,
    head size 2-8).

    Its hidden size is at least 4: LayerNorm over 2 numbers keeps only which one is
    larger, and that would hide most mistakes made before it.
    """
    seed, num_layers = rng.randint(0, 999), rng.randint(fewest_layers, 3)
    num_heads = rng.choice(heads)
    from .. import models  # transformers takes seconds to import; 09 never needs it

    return models.tiny_bert(
        seed=seed,
        num_layers=num_layers,
        num_heads=num_heads,
        # never H = d: there sqrt(D) = d, and a scale by the model width's root
        # gives the numbers of a scale by d
        head_size=rng.choice(
            [d for d in ([2, 4, 8] if num_heads > 1 else [4, 8]) if d != num_heads]
        ),
    )
