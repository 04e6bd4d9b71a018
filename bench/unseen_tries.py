"""Verdicts on answers the project has never seen: does each one name its mistake?

A try is a file ``<anything>.txt`` in a folder: its first line says what it is,
``# <assignment> <exercise>: <the mistake in a few words, or "correct">``, and the
rest is the answer cell's code. Each try runs, with the reference answers around
it, through its exercise's hidden checks on two seeds (as
``tests/test_checks_seeds.py`` runs the fixtures). The runner prints one JSON line
per try (its label and each test cell's verdict, "" when it passes) and a summary
on stderr: correct tries at full marks, wrong tries that lost a point. Whether a
verdict names the mistake its label says is for a reader to judge.

    .venv/bin/python bench/unseen_tries.py bench/unseen > verdicts.jsonl

``bench/unseen/`` holds the 61 tries a helper wrote on 2026-12-05 without reading
the grader, its fixtures or the solutions (13 correct, 48 wrong). They were
unseen then; the mistakes they showed unnamed have been named since, so they are
a regression set now, and a new measure of unseen answers needs new tries.

``bench/unseen/student-3/`` holds 73 more (19 correct, 54 wrong), written the same
way on 2026-12-05 by a fresh helper and run once before any change: 19/19 correct
at full marks, 51/54 wrong ones lost points (the 3 that did not: two need the
notebook's own variables, which this runner does not make, and 09's
``train_tiny_transformer`` ignoring ``use_positions``), and a reader counted 43 of
the 52 the runner can judge named (83%). Of the 9 unnamed, 8 were named the same
day; 08's ``permutation_check`` permuting the batch dim is not (its IndexError and
the student's line are shown). This set too is a regression set now.

``bench/unseen/realworld-2/`` holds 59 answers adapted from real code in 29 public
repositories, labelled ``correct`` or with the difference and its source. Run on
58 (``a05_6`` builds two 20000 x 20000 matrices: minutes and 3 GB): 19/20 correct
at full marks (the one that lost used the fused attention that notebook 13 now
says is turned off), 38/39 with a difference lost points, 24/39 named by a
reader's count. A label here starts with ``correct`` and names its source after it; any label
``correct (...)`` counts as correct.

``bench/unseen/student-4/`` holds 77 (20 correct in unusual forms, 40 with one
mistake, 9 with two or three, 8 that raise on inputs the spec allows), written on
2026-12-06 by a fresh helper from the release notebooks and the spec alone, and
run once before any change they steered: 20/20 correct at full marks, 57/57 wrong
ones lost points, and a reader counted 35 of the 57 named (61%; a try with several
mistakes counts only when every one is named; 35 of the 48 with one mistake or a
raise, 73%). After that day's fixes: 52 of 57 (91%); the 5 left have two or three
mistakes at once, of which at most one is named. A regression set now (on
2026-12-06's later grader, a06_4 is named too: 53 of 57).

``bench/unseen/student-5/`` holds 80 (20 correct in unusual forms, 40 with one
mistake, 10 with two or three, 10 that raise on allowed inputs), written on
2026-12-06 by a fresh helper from the release notebooks and the spec alone, and
run once before any change they steered: 20/20 correct at full marks, 57/60 wrong
ones lost points (a05_8's tensors for floats and a07_7's raise without a mask
passed; a09_6 needs the notebook's own variables), and a reader counted 30 of the
59 the runner can judge named (51%; 29 of the 49 with one mistake or a raise, 1
of the 10 with several), three of them blamed on the wrong cause. After that
day's fixes: 20/20, 59/60 lost (a09_6), 56 of 59 named; still not: a04_5's two
mistakes behind a reshape error, a08_5's diagonal named only beside "the wrong
way round" where T = 1 makes them one, a08_8's exact comparison behind its
IndexError. A regression set now.

``bench/unseen/student-6/`` holds 80 (20 correct in unusual forms, 40 with one
mistake, 10 with two, 10 that raise on allowed inputs), written on 2026-12-06 by
a fresh helper from the release notebooks and the spec alone, and run once before
any change they could steer: 20/20 correct at full marks; of the 60 wrong, the
runner cannot judge two (a03_7 and a06_8 answer variable cells, whose test cells
read the notebook's own names, so no check ran), and 58/58 lost points; a reader
counted 48 of the 58 named (83%; 45 of the 48 with one mistake or a raise, 3 of
the 10 with two). Unnamed: a09_7 (T * 2 for T ** 2: the numbers shown, the
mistake not named); a11_7 (the running denominator not rescaled); a13_2 (a mask
laid along the queries, blamed on swapped inputs); of the pairs, only one mistake
named in a05_6, a07_7, a09_4, a13_3, none in a06_6 and a08_6, and a10_7's "/ T"
blamed on ">" instead of ">=". On 2026-12-06's later grader (each named since,
the pairs by the shared attention steps wired into 08, 09 and 13): 58 of 58. A
regression set now.

``bench/unseen/student-7/`` holds 80 (20 correct in unusual forms, 40 with one
mistake, 10 with two, 10 that raise on allowed inputs), written on 2026-12-06 by
a fresh helper from the release notebooks and the spec alone (function cells
only, so that the runner can judge each), and run once before any change they
steered (on a grader whose 08, 09 and 13 already named two mistakes at once):
20/20 correct at full marks; 59/60 wrong ones lost points (a06_3, which raises
on attention_mask=None, lost only the visible cells: no hidden one tried the
default); a reader counted 48 of the 60 named (80%; 39 of the 40 with one
mistake, 7 of the 10 that raise, 2 of the 10 with two). Unnamed then: a13_4 (V
from attn.key); a07_4's and a12_9's raises got a mask hint where no mask was
involved; of the pairs, one mistake only in a03_5, a05_7, a07_8, a08_7, a10_5,
a11_2, a13_8, none in a09_4. Named since (60 of 60), so a regression set now.

``bench/unseen/student-8/`` holds 80 (20 correct in unusual forms, 40 with one
mistake, 10 with two, 10 that raise on allowed inputs), written on 2026-12-07 by
a fresh helper from the release notebooks and the spec alone (function cells
only), each label checked against references of its own, and run once before any
change they steered: 20/20 correct at full marks; of the 60 wrong, the runner
cannot judge a09_8 (``train_tiny_transformer`` needs the notebook's own model
and task; its visible "at most 50% without positions" test catches it in the
notebook), and 59/59 lost points; a reader counted 50 of the 59 named (85%; 37
of the 39 with one mistake, 8 of the 10 that raise, 5 of the 10 with two).
Unnamed then: three blamed on a wrong cause besides or instead of the right one
(a05_5's sqrt(Tk) was also called "missing 1/sqrt(d)" on one key; a08_5's
inverted causal mask was also called "the diagonal masked" on one token; a12_6's
raise with a (B, 1, 1, T) mask was blamed on K/V heads not repeated); a13_6's
raise (a cached step fed (B,) ids) got only torch's broadcast hint; of the
pairs, one mistake only in a03_7 (no bias, divided by sqrt(d)), a11_3 (a -1e4
fill, a fixed dim), a13_2 (sqrt(D), the mask inverted), none in a10_6 (the
diagonal, (head, layer) pairs) and a12_7 (no scale, the mask multiplied). Named
since (59 of 59), so a regression set now.

``bench/unseen/student-9/`` holds 80 (20 correct in unusual forms, 40 with one
mistake, 10 with two, 10 that raise on allowed inputs), written on 2026-12-07 by
a fresh helper from the release notebooks and the spec alone (function cells
only), each label checked against references of its own, and run before any
change they steered: 20/20 correct at full marks; of the 60 wrong, the runner
cannot judge a09_7 (``train_tiny_transformer`` seeding only its data), and 59/59
lost points. A reader counted 51 of the 59 named on the grader of 685110c (86%;
36 of the 39 with one mistake, 8 of the 10 that raise, 7 of the 10 with two),
and 52 on the same day's grader before it read them (a07_3's typed-in 12 and 32
named by the typed-size hint, written for student-8's a03_3). Unnamed then:
a03_5 (rows head:head+d in project_head), a07_6 (the feed-forward's residual
from the layer's input), a13_2 (the 1/0 memory_mask added as it is), a06_7's
broadcast error (a (B, 1, T) mask, on a line naming it ``ext``); of the pairs,
one mistake only in a03_6 (columns, and head 0's bias), a11_8 (no scale, and
the context not rescaled), a12_7 (V tiled while K is right, and the bool mask
added). Named since (59 of 59), so a regression set now.

``bench/unseen/student-10/`` holds 60 (15 correct in unusual forms, 30 with one
mistake, 8 with two, 7 that raise on allowed inputs), half of them written as a
student half-remembering a public implementation would (the Annotated
Transformer, nanoGPT, Hugging Face, d2l, fairseq, tensor2tensor), by a fresh
helper from the release notebooks and the spec alone on 2026-12-07, after
student-9's fixes, and run before any change they steered: 15/15 correct at full
marks; 43/45 wrong ones lost points (a05_3's attention_weights raising on 3-D
inputs and a08_4's causal buffer of 64 tokens: no hidden case tried those
shapes). A reader counted 38 of the 45 named (84%; 28 of the 30 with one
mistake, 4 of the 7 that raise, 6 of the 8 with two). Unnamed then: a05_5 (the
weights divided by sqrt(d) after the softmax), a06_3 (V made with the key
Linear, named as "probs applied to K"), a09_5's raise (a (B, T, T) mask indexed
mask[None, None]: the unpack hint), a03_5 (rows from head * H and head 0's
bias: a shape only), a07_4 (residuals after each LayerNorm, and no mask); and
a12_5's verdict repeated "the values are rotated too" for a second layer.
Named since (45 of 45), so a regression set now.

``bench/unseen/student-11/`` holds 80 (20 correct in unusual forms, 40 with one
mistake, 10 with two, 10 that raise on allowed inputs) and
``bench/unseen/student-12/`` 60 (15 correct, 30 with one mistake, 8 with two, 7
that raise; about two thirds written from memory of public code: minGPT,
nanoGPT, the Annotated Transformer, Hugging Face's BERT and Llama, fairseq,
GPT-2, T5, Longformer, d2l, cs231n), both written on 2026-12-07 by fresh helpers
from the release notebooks and the spec alone and run on the grader of 3d01ef0
before any change they steered. Student-11: 20/20 correct at full marks; 58/59
judged wrong ones lost points (a09_7 needs the notebook's model; a07_6's
bert_layer raising on attention_mask=None lost nothing: no hidden case tried
None); a reader counted 49 of the 59 named (83%; 35 of the 39 with one mistake,
8 of the 10 that raise, 6 of the 10 with two). Student-12: 15/15 correct at full
marks; 42/44 judged wrong ones lost points (a09_5 needs the notebook's model;
a08_6's allclose with its default tolerances and a10_1's plt.* drawing on the
current axes lost nothing); a reader counted 36 of the 44 named (82%; 24 of the
29 with one mistake, 6 of the 7 that raise, 6 of the 8 with two). Unnamed then:
04's and 11's (B, H, d, T) layout (a bare shape); 05's k drawn equal to q; 06's
V with the key's bias and a mask laid along the queries; 07's positions from 2;
08's causal_mask as a (1, 1, T, T) float buffer (the dtype only); 09's probs
averaged over the heads (a bare shape, and the inverted mask beside it) and
attention_memory's T not squared beside the bytes ignored; 10's top_attended
returning indices from the column (the type only) and reversing with [::-1]
(torch's error alone); 12's rotary with its angles interleaved, a .view raise
blamed on K/V heads not repeated, and kv_cache_bytes' missing 2 and batch
blamed on the bytes, a coincidence of the draw.
After that day's fixes: 59/59 and 44/44 judged wrong tries lost points, and
every one is named (student-12's a06_5 names its two mistakes with an "Or:"
between two readings of its inverted mask that give the same numbers). So
both are regression sets now; every earlier set keeps its counts on the
notebooks the fixes touched (04 to 12), correct tries all at full marks.

``bench/unseen/student-13/`` holds 60 (15 correct, 30 with one mistake, 8 with
two, 7 that raise), written on 2026-12-07 by a fresh helper from the Chinese
release notebooks and the spec alone, as a Chinese learner who studied from
d2l-zh, Zhihu and CSDN readings of BERT's source, 苏剑林's RoPE derivation
(complex numbers, torch.polar) and ChatGLM/Qwen-style code would write them,
and run on the grader of efa2e84 (after student-11's and student-12's fixes)
before any change they steered: 15/15 correct at full marks, 45/45 wrong ones
lost points, and a reader counted 38 of the 45 named (84%; 28 of the 30 with
one mistake, 7 of the 7 that raise, but 3 of the 8 with two). Unnamed then:
04's (B*H, T, d) layout of d2l's transpose_qkv (a bare shape); 05's q·k as a
mean over d_k (numbers only); and of the pairs, 07's attention_block without
the scale and with the residual after the LayerNorm, 09's attention_memory
returning a float and without the batch (the type only), 11's chunked_attention
ignoring the mask and dividing by d, 12's rotary turning half the features in
adjacent pairs, and 12's causal window of the wrong width (the causal part
only).
After that day's later fixes: 45/45 lost, 45/45 named (11's pair says the
divided-by-d case again beside the mask ignored; since the next set's fixes a
later case names only what is new). A regression set now.

``bench/unseen/student-14/`` holds 60 (15 correct, 25 with one mistake, 12 with
two, 8 that raise), written on 2026-12-07 by a fresh helper from the English
release notebooks and the spec alone, as a student with a maths background who
writes explicit loops over batch, heads and positions, einsum with spelled-out
letters and float64, and whose mistakes are mostly index bookkeeping (a loop one
short, the wrong loop variable, a slice from the wrong offset, a wrapped -1);
each label checked against the helper's own references and oracles (the model's
attentions, torch.nn modules, transformers' rotary and repeat_kv). Run on the
grader of the day's uncommitted tree (student-13's fixes in) before any change
they steered: 15/15 correct at full marks, 45/45 wrong ones lost points, and a
reader counted 29 of the 45 named (64%; 18 of the 25 with one mistake, 6 of the
8 that raise, 5 of the 12 with two). Unnamed then: 04's last head left zero;
05's max taken along the last dim whatever dim, and q*k summed over the samples
(and d_k = 1's NaN std called "unseeded": NaN != NaN); 06's V sliced from h for
h*d; 07's encoder appending each layer's input; 09's count summing the query
index for T and its loop over heads from 1; the raises of 09 (a (T, T) mask
indexed as (B, T, T): the general mask hint) and 10 (a loop over topk's squeezed
0-d index: no hint); and of the pairs, 03's columns and a bias from ``head``,
04's token loop one short and a (d, H) layout, 06's Q/K swapped and a mask along
the queries, 07's mask along the queries and the attention's LayerNorm in the
feed-forward, 09's two residual mistakes, 10's query 0 wrapped to the last key
and (head, layer) pairs, 13's cache mask from the first rows and a cache of the
new keys only.
After that day's fixes (21d7166): 15/15 correct at full marks, 45/45 lost, and
every one named, both mistakes of each pair. A regression set now.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from harness import answer_namespace, hidden_calls, verdict  # noqa: E402

SEEDS = (7, 31_337)


def read_try(path: Path) -> tuple[str, str, str, str]:
    """``(assignment, exercise, label, code)`` of one try file."""
    first, _, code = path.read_text("utf-8").partition("\n")
    head, _, label = first.removeprefix("#").strip().partition(":")
    assignment, exercise = head.split()
    return assignment, exercise, label.strip(), code


def verdicts(assignment: str, exercise: str, code: str) -> dict[str, str]:
    """``{test cell: first failing message, or ""}`` of the exercise's hidden
    checks, over :data:`SEEDS`."""
    ns = answer_namespace(assignment, {exercise: code})
    out: dict[str, str] = {}
    for cell, fn, name, kwargs in hidden_calls(assignment):
        if name != exercise:
            continue
        if name not in ns:
            out[cell] = "the answer did not run (no such name defined)"
            continue
        messages = [verdict(fn, ns[name], kwargs, seed) for seed in SEEDS]
        out[cell] = next((m for m in messages if m), "")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    right = wrong = right_full = wrong_lost = 0
    for path in sorted(args.folder.rglob("*.txt")):
        assignment, exercise, label, code = read_try(path)
        found = verdicts(assignment, exercise, code)
        lost = any(found.values())
        if label.lower().split(" (")[0] == "correct":
            right, right_full = right + 1, right_full + (not lost)
        else:
            wrong, wrong_lost = wrong + 1, wrong_lost + lost
        line = {"try": path.name, "exercise": exercise, "label": label}
        print(json.dumps({**line, "verdicts": found}, ensure_ascii=False), flush=True)
    print(
        f"correct tries at full marks: {right_full}/{right}; "
        f"wrong tries that lost points: {wrong_lost}/{wrong}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
