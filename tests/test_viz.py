"""bertviz's three views, made offline by course.viz, draw in a real browser.

Each view is saved as a standalone page and opened in headless Chromium with every
non-local request blocked. The SVG must hold as many attention lines as bertviz
draws for the data (head view: H x T^2 for one layer; model view: L x H x T^2;
neuron view: T^2 for one head), a label per token, no page error, no blocked request.
"""

import pytest
from browser import browser

from course import data, viz

TEXT_A, TEXT_B = data.SENTENCE_PAIR

COUNT = """() => ({
  lines: document.querySelectorAll('svg line').length,
  neuronLines: document.querySelectorAll('svg .attn-line-group line').length,
  text: Array.from(document.querySelectorAll('svg text')).map(t => t.textContent),
})"""


@pytest.fixture(scope="module")
def inputs():
    return viz.attention_inputs(TEXT_A, TEXT_B)


def _draw(html, tmp_path, name):
    page_file = tmp_path / f"{name}.html"
    page_file.write_text(viz.standalone_page(html))
    with browser() as (ctx, blocked):
        page = ctx.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_file.as_uri())
        page.wait_for_function(
            "document.querySelectorAll('svg line').length > 0", timeout=20000
        )
        page.wait_for_timeout(500)
        counts = page.evaluate(COUNT)
    return counts, errors, blocked


def test_views_have_no_cdn_left(inputs):
    attentions, tokens, start = inputs
    for html in (
        viz.head_view(attentions, tokens, start).data,
        viz.model_view(attentions, tokens, start).data,
    ):
        assert "cdnjs" not in html and "data:application/javascript;base64," in html


def test_head_view_draws_offline(inputs, tmp_path):
    attentions, tokens, start = inputs
    counts, errors, blocked = _draw(
        viz.head_view(attentions, tokens, start).data, tmp_path, "head"
    )
    H, T = attentions[0].shape[1], len(tokens)
    assert (errors, blocked) == ([], [])
    assert counts["lines"] == H * T * T
    assert len(counts["text"]) == 2 * T  # one label per token, left and right


def test_model_view_draws_offline(inputs, tmp_path):
    attentions, tokens, start = inputs
    counts, errors, blocked = _draw(
        viz.model_view(attentions, tokens, start).data, tmp_path, "model"
    )
    L, H, T = len(attentions), attentions[0].shape[1], len(tokens)
    assert (errors, blocked) == ([], [])
    assert counts["lines"] == L * H * T * T


def test_neuron_view_draws_offline(inputs, tmp_path):
    _, tokens, _ = inputs
    counts, errors, blocked = _draw(
        viz.neuron_view(TEXT_A, TEXT_B, layer=2, head=3).data, tmp_path, "neuron"
    )
    T = len(tokens)
    assert (errors, blocked) == ([], [])
    assert counts["neuronLines"] == T * T
    for token in tokens:
        assert token in counts["text"]


def test_missing_asset_is_one_clear_sentence(monkeypatch):
    monkeypatch.setitem(viz.ASSETS, "d3", ("mpld3", "js/no-such-file.js"))
    with pytest.raises(viz.OfflineAssetsMissing, match="make setup"):
        viz.asset_path("d3")
