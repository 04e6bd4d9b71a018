"""Pictures of attention: matplotlib helpers and bertviz views that draw offline.

bertviz's views load require.js, d3 5.7.0 and jQuery from a CDN, so offline they
draw nothing. Here each view's HTML gets require.js inlined in a ``<script>`` and
the ``d3``/``jquery`` require paths pointed at ``data:`` URIs — in every output, so
a saved notebook still draws when reopened. The three files come from packages the
course installs (``mpld3`` ships d3 5.7.0; ``nbclassic`` ships require.js and
jQuery); none is part of this repository.
"""

from __future__ import annotations

import base64
import functools
import importlib.util
import re
from pathlib import Path

import torch

CDN_REQUIRE = re.compile(
    r'<script src="https://cdnjs\.cloudflare\.com/ajax/libs/require\.js/[^"]+"></script>'
)
CDN_PATHS = {
    "d3": re.compile(r"'https://cdnjs\.cloudflare\.com/ajax/libs/d3/[^']+'"),
    "jquery": re.compile(r"'https://cdnjs\.cloudflare\.com/ajax/libs/jquery/[^']+'"),
}
ASSETS = {
    "require": ("nbclassic", "static/components/requirejs/require.js"),
    "jquery": ("nbclassic", "static/components/jquery/jquery.min.js"),
    "d3": ("mpld3", "js/d3.v5.min.js"),
}


class OfflineAssetsMissing(RuntimeError):
    """A JavaScript file the offline views need is not installed."""

    def _render_traceback_(self):
        return [f"OfflineAssetsMissing: {self}"]


def asset_path(name: str) -> Path:
    """Where the installed copy of ``require``, ``jquery`` or ``d3`` lies."""
    package, relative = ASSETS[name]
    spec = importlib.util.find_spec(package)
    path = Path(spec.submodule_search_locations[0]) / relative if spec else None
    if path is None or not path.is_file():
        raise OfflineAssetsMissing(
            f"{name}.js for the offline bertviz views should come from the {package!r} "
            f"package ({relative}), but it is not installed here: run `make setup` "
            "(or pip install -e .) to install the course's dependencies."
        )
    return path


@functools.cache
def _asset_text(name: str) -> str:
    return asset_path(name).read_text("utf-8")


def _data_uri(name: str) -> str:
    encoded = base64.b64encode(_asset_text(name).encode("utf-8")).decode("ascii")
    return f"'data:application/javascript;base64,{encoded}'"


def offline_html(html: str) -> str:
    """Rewrite one bertviz view's HTML so that it draws with no network.

    Parameters
    ----------
    html : str
        What a bertviz view returns with ``html_action="return"``.

    Returns
    -------
    str
        The same page with require.js inlined and d3/jQuery as ``data:`` URIs.
    """
    if not CDN_REQUIRE.search(html):
        raise ValueError(
            "This does not look like a bertviz view: no require.js tag found."
        )
    inline = (
        "<script>\n"
        + _asset_text("require").replace("</script", "<\\/script")
        + "\n</script>"
    )
    html = CDN_REQUIRE.sub(lambda _m: inline, html, count=1)
    for name, pattern in CDN_PATHS.items():
        html, count = pattern.subn(lambda _m, n=name: _data_uri(n), html)
        if count == 0:
            raise ValueError(f"No {name} path found in the bertviz view.")
    return html


def _html(text: str):
    from IPython.display import HTML

    return HTML(text)


def attention_inputs(text: str, text_b: str | None = None, model=None, tokenizer=None):
    """Run the course model on one text (or pair) for bertviz.

    Returns
    -------
    attentions : tuple of (1, H, T, T)
    tokens : list of str
    sentence_b_start : int or None
        Index of the first token of ``text_b`` (bertviz's pair argument).
    """
    from . import models

    model = model or models.load_model()
    tokenizer = tokenizer or models.load_tokenizer()
    enc = (
        tokenizer(text, text_b, return_tensors="pt")
        if text_b
        else tokenizer(text, return_tensors="pt")
    )
    with torch.no_grad():
        out = model(**enc)
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    start = None
    if text_b:
        start = int(enc["token_type_ids"][0].tolist().index(1))
    return out.attentions, tokens, start


def head_view(attention, tokens, sentence_b_start=None, **kwargs):
    """bertviz's head view (batch size 1), drawing offline. Returns IPython HTML."""
    from bertviz import head_view as bv_head_view

    page = bv_head_view(
        attention, tokens, sentence_b_start, html_action="return", **kwargs
    )
    return _html(offline_html(page.data))


def model_view(attention, tokens, sentence_b_start=None, **kwargs):
    """bertviz's model view (batch size 1), drawing offline. Returns IPython HTML."""
    from bertviz import model_view as bv_model_view

    page = bv_model_view(
        attention, tokens, sentence_b_start, html_action="return", **kwargs
    )
    return _html(offline_html(page.data))


def neuron_view(text: str, text_b: str | None = None, layer: int = 0, head: int = 0):
    """bertviz's neuron view of the course model (its neuron-view twin), offline."""
    from bertviz.neuron_view import show

    from . import models

    nv_model, nv_tokenizer = models.neuron_view_model()
    page = show(
        nv_model,
        "bert",
        nv_tokenizer,
        text,
        text_b,
        layer=layer,
        head=head,
        html_action="return",
    )
    return _html(offline_html(page.data))


def standalone_page(view_html: str, title: str = "bertviz") -> str:
    """Wrap a view's HTML in a full page (for saving, or for a browser test)."""
    return f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title></head><body>{view_html}</body></html>"
