"""Source notebooks: in sync with their percent files, clean, valid, and released.

* every ``source/<a>/<a>.ipynb`` equals the build of ``<a>.py`` (no hand edits);
* no outputs are stored in source/;
* the answer and test cell ids keep the COURSE_SPEC contract;
* every source notebook runs top to bottom with every test passing (Validator);
* ``release/`` (and the Chinese edition's ``zh/release/``) equals a fresh
  ``nbgrader generate_assignment`` and holds no solution.
"""

import json

import nbformat
import pytest

from course import authoring, grading, i18n, models

ASSIGNMENTS = grading.assignments()

SPEC_IDS = {
    "01_config": [
        "describe_config",
        "count_parameters",
        "query_linear",
        "with_max_positions",
        "why_out_in",
    ],
    "02_outputs": ["encode", "output_shapes", "pooler", "neuron_view_keys"],
    "03_head_slicing": ["head_params", "project_head", "first_head_qkv"],
    "04_split_heads": ["split_heads", "merge_heads"],
    "05_softmax_and_scaling": [
        "softmax",
        "attention_scores",
        "attention_weights",
        "dot_product_std",
        "why_last_dim",
        "why_sqrt_dk",
    ],
    "06_manual_attention": [
        "head_attention",
        "extended_mask",
        "multi_head_attention",
        "first_head_attention",
    ],
    "07_full_layer": [
        "embeddings_forward",
        "attention_block",
        "feed_forward",
        "bert_layer",
        "bert_encoder",
    ],
    "08_positions_and_masks": [
        "sinusoidal_encoding",
        "causal_mask",
        "causal_attention",
        "permutation_check",
        "why_positions",
    ],
    "09_build_a_transformer": [
        "MultiHeadSelfAttention",
        "EncoderBlock",
        "train_tiny_transformer",
        "attention_memory",
    ],
    "10_visualize": [
        "attention_heatmap",
        "top_attended",
        "previous_token_heads",
        "describe_a_head",
    ],
    "11_debugging": [
        "masked_softmax",
        "chunked_attention",
        "key_mask",
        "fixed_split_heads",
        "position_table",
        "diagnose_nan",
        "diagnose_mask",
        "diagnose_view",
        "diagnose_plateau",
        "diagnose_memory",
    ],
    "12_modern_encoder": [
        "rotary",
        "sliding_window_mask",
        "grouped_query_attention",
        "modernbert_attention",
        "kv_cache_bytes",
        "why_offset",
        "why_share_kv",
    ],
    "13_decoding": [
        "cross_attention",
        "cached_attention",
        "greedy_generate",
        "sample_next",
        "why_cache",
    ],
}


def _cells(path):
    return json.loads(path.read_text())["cells"]


def test_every_notebook_is_built_from_its_percent_file():
    assert authoring.main(["--check"]) == 0


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_source_has_no_outputs_and_keeps_the_spec_ids(assignment):
    cells = _cells(grading.notebook_path(grading.ROOT, "source", assignment))
    assert all(
        not c.get("outputs") and c.get("execution_count") is None
        for c in cells
        if c["cell_type"] == "code"
    )
    roles = [c["metadata"].get("nbgrader", {}) for c in cells]
    ids = [r["grade_id"] for r in roles if r]
    graded = {r["grade_id"] for r in roles if r and (r["solution"] or r["task"])}
    written = {r["grade_id"] for r in roles if r and r["task"]}
    for exercise in SPEC_IDS[assignment]:
        assert exercise in graded, f"{exercise} has no answer cell"
        if exercise not in written and exercise != "describe_a_head":
            tests = [i for i in ids if i.startswith(f"test_{exercise}")]
            assert len(tests) >= 2, (
                f"{exercise} needs several test cells for partial credit"
            )
    for cell in cells:
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("grade"):
            assert "".join(cell["source"]).startswith('"""'), (
                f"{meta['grade_id']}: docstring first"
            )


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_source_runs_and_passes_every_test(assignment):
    failures = grading.validate(
        grading.notebook_path(grading.ROOT, "source", assignment)
    )
    assert failures == []


# Appended as a test cell: the kernel did load the model COURSE_MODEL names.
_BERT_BASE_SHAPE = """from course import models
config = models.load_model().config
assert (config.hidden_size, config.num_attention_heads) == (768, 12), config
"""


@pytest.mark.slow
@pytest.mark.xdist_group("bert_base")  # one worker saves the 440 MB model
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_source_runs_on_a_bert_base_sized_model(
    assignment, bert_base_sized, monkeypatch, tmp_path
):
    """COURSE_MODEL may be bert-base: every notebook, reference answers and every
    visible and hidden test, runs and passes on its shapes (768 = 12 x 64)."""
    source = grading.notebook_path(grading.ROOT, "source", assignment)
    nb = nbformat.read(source, as_version=4)
    cell = nbformat.v4.new_code_cell(_BERT_BASE_SHAPE)
    cell.metadata["nbgrader"] = {
        "grade": True,
        "grade_id": "bert_base_shape",
        "points": 1,
        "locked": True,
        "solution": False,
        "schema_version": 3,
    }
    nb.cells.append(cell)
    path = tmp_path / source.name
    nbformat.write(nb, path)
    monkeypatch.setenv(models.ENV_VAR, str(bert_base_sized))
    assert grading.validate(path) == []


@pytest.mark.slow
@pytest.mark.parametrize("lang", list(i18n.EDITIONS))
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_is_generated_and_holds_no_solution(assignment, lang, tmp_path):
    root = grading.make_course(tmp_path, lang=lang)
    grading.release([assignment], root)
    fresh = grading.notebook_path(root, "release", assignment)
    edition = i18n.edition_root(grading.ROOT, lang)
    committed = grading.notebook_path(edition, "release", assignment)
    assert committed.exists(), "run `make release`"
    assert committed.read_text() == fresh.read_text(), (
        "release/ drifted: run `make release`"
    )
    files = sorted(p.name for p in committed.parent.iterdir())
    assert files == [f"{assignment}.ipynb"], f"release/{assignment} holds {files}"
    text = committed.read_text()
    for secret in ("BEGIN SOLUTION", "HIDDEN TESTS", "seed="):
        assert secret not in text
