"""Hidden tests under seeds nobody chose: verdicts do not depend on the seed.

The grader draws a fresh seed for every hidden test (``course.grading.steps.judge.
DrawSeeds``). Here every hidden check of every assignment runs on other seeds than
the ones written in ``source/``: the reference answers and the correct
alternatives pass each, and each wrong-answer fixture still fails its own
exercise's hidden tests with its named message.
"""

import pytest
from harness import (
    answer_namespace,
    correct_forms,
    fixture_module,
    has_piece,
    hidden_calls,
    other_forms,
    verdict,
)

from course import grading

pytestmark = pytest.mark.slow  # every hidden check on 67 to 207 seeds

# 8: 06's first random batch has B == T, where a (B, T) mask added to (B, H, T, T)
# scores broadcasts without an error; the other seeds' first batches raise.
SEEDS = (7, 8, 11, 4242, 31_337, 123_456, 987_654)
# Misconceptions, on 200 seeds in a row as well: a draw that hides a mistake (one
# head, keys in one block, no padding, D = 2) turned up about once in 100-1000
# seeds before each check made sure its first case shows the mistake.
SWEEP = SEEDS + tuple(range(200))
# Checks that build or run a model, a figure or 20000 samples per case (about 0.03
# to 1 s a seed and form): correct forms get SEEDS here, and up to 1000 seeds in
# bench/seed_fairness.py; the other checks' SWEEP adds about 2 min on 2 cores.
COSTLY = {
    "count_parameters_random",
    "query_linear_random",
    "with_max_positions_random",
    "output_shapes_random",
    "pooler_random",
    "neuron_view_keys_random",
    "dot_product_std_random",
    "head_attention_random",
    "multi_head_attention_random",
    "embeddings_forward_random",
    "attention_block_random",
    "feed_forward_random",
    "bert_layer_random",
    "bert_encoder_random",
    "permutation_check_random",
    "mhsa_random",
    "block_random",
    "heatmap_random",
    "key_mask_random",
    "fixed_split_heads_random",
    "cross_attention_random",
    "greedy_generate_random",
    "sample_next_random",
}
# A wrong answer costs these checks more again: its diagnosis runs the answer's
# steps with one, two or three mistakes (``checks.mistaken``). Misconceptions get
# SEEDS and 60 more here (every check's first case is built to show its mistakes);
# ``bench/seed_fairness.py --mutants`` sweeps them on 1000 drawn seeds.
COSTLY_WRONG = COSTLY | {"modernbert_attention_random", "attention_weights_random"}
WRONG_SWEEP = SEEDS + tuple(range(60))


@pytest.mark.parametrize("assignment", grading.assignments())
def test_correct_answers_pass_hidden_tests_on_any_seed(assignment):
    """Every correct form of the fixtures (``harness.correct_forms``) passes each
    hidden check on SWEEP, or on SEEDS where a check costs too much for 207 seeds
    (``bench/seed_fairness.py`` sweeps 1000 seeds of every check)."""
    calls = hidden_calls(assignment)
    for label, answers, only in correct_forms(assignment):
        ns = answer_namespace(assignment, answers)
        for cell, fn, name, kwargs in calls:
            if only not in (None, name):
                continue  # a form of another answer: the reference ran this check
            for seed in SEEDS if fn.__name__ in COSTLY else SWEEP:
                message = verdict(fn, ns[name], kwargs, seed)
                assert message == "", (label, cell, seed, message)


@pytest.mark.parametrize("assignment", grading.assignments())
def test_misconceptions_keep_their_message_on_any_seed(assignment):
    _assert_named(assignment, fixture_module(assignment).MUTANTS, None)


@pytest.mark.parametrize("assignment", grading.assignments())
def test_misconceptions_keep_their_message_in_other_code_forms(assignment):
    """Each mistake moved into a helper and into a class is still named."""
    mutants = [f for m in fixture_module(assignment).MUTANTS for f in other_forms(m)]
    _assert_named(assignment, mutants, SEEDS[:2])


def _assert_named(assignment: str, mutants, seeds: tuple[int, ...] | None) -> None:
    """Each mutant fails its own exercise's hidden tests with its message piece,
    on ``seeds`` (None: SWEEP, or WRONG_SWEEP for the checks in COSTLY_WRONG)."""
    calls = hidden_calls(assignment)
    for mutant in mutants:
        ns = answer_namespace(assignment, {mutant.cell: mutant.code})
        for cell, fn, name, kwargs in calls:
            if name != mutant.cell or cell not in mutant.fails:
                continue  # only the mutant's own exercise; later cells call its names
            costly = fn.__name__ in COSTLY_WRONG
            for seed in seeds or (WRONG_SWEEP if costly else SWEEP):
                message = verdict(fn, ns[name], kwargs, seed)
                assert message and has_piece(message, mutant.fails[cell]), (
                    mutant.name,
                    cell,
                    seed,
                    message,
                )
