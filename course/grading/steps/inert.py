"""A student's notebook, inert wherever nbgrader shows it: formgrader, feedback.

formgrader (in the instructor's Jupyter server) and ``nbgrader generate_feedback``
render a student's notebook with nbconvert's HTML exporter, and a browser opens the
page with its reader's Jupyter session: a script in it could act as the instructor.
nbconvert's ``sanitize_html`` (on in ``nbgrader_config.py``) cleans ``text/html``
and ``text/markdown`` outputs and leaves JavaScript and widget outputs out, but not
all of it: nbgrader's ``formgrade`` and ``feedback`` templates render markdown cells
without any cleaning, and no template quotes an image output's width or height,
which the student's code writes (``width=1 onerror=...``). Two steps do the rest:

* :class:`InertMarkdown`, the exporter's ``markdown2html`` filter
  (``c.HTMLExporter.filters``): every markdown cell, ``text/markdown`` output and
  grader's comment, rendered as before, then cleaned by :func:`clean`;
* :class:`InertOutputs`, a preprocessor (``c.HTMLExporter.preprocessors``): only
  the outputs a page shows without running anything (:data:`SHOWN`), their HTML
  cleaned, an image's size a number.

What stays: text, headings, lists, tables, code, formulas (MathJax typesets the TeX
text), links to web pages and the images a notebook holds (attachments, data URLs).
What goes: scripts, event handlers, styles, frames, ``base``, ``meta``, objects and
whatever else runs code or loads a URL. A student's ids gain a prefix and only the
classes of highlighted code and heading anchors stay, so that nothing a student
writes can stand for formgrader's score and comment boxes (its script finds them
by id, their buttons by class).
"""

from __future__ import annotations

import re

import nh3
from jinja2 import pass_context
from nbconvert.preprocessors import Preprocessor
from pygments.token import STANDARD_TYPES
from traitlets.config import LoggingConfigurable

#: What every id in a student's HTML starts with (and every link to one).
ID_PREFIX = "student-"
#: The output types that a page shows without running anything; the others
#: (JavaScript, widgets, Vega, Plotly, ...) are left out.
SHOWN = frozenset(
    {"text/plain", "text/html", "text/markdown", "text/latex"}
    | {"image/png", "image/jpeg", "image/svg+xml"}
)
#: Rendered markdown: nh3's tags (text, headings, lists, tables, code, images).
MARKDOWN_TAGS = frozenset(nh3.ALLOWED_TAGS)
#: A ``text/html`` output: the tags that nbconvert's ``clean_html`` (sanitize_html)
#: keeps after us, so that none of ours is shown escaped as text; but no table,
#: to which it adds a ``tbody`` that it then shows escaped.
OUTPUT_TAGS = frozenset(
    {"a", "abbr", "acronym", "b", "blockquote", "code", "em", "i", "li", "ol"}
    | {"strong", "ul", "div", "pre", "span"}
)
ATTRIBUTES = {
    **{tag: set(names) for tag, names in nh3.ALLOWED_ATTRIBUTES.items()},
    "*": {"id", "title"},
    "th": nh3.ALLOWED_ATTRIBUTES["th"] | {"style"},  # a markdown table's alignment
    "td": nh3.ALLOWED_ATTRIBUTES["td"] | {"style"},
}
CLASSES = {
    "div": {"highlight"},  # pygments' code block
    "span": set(STANDARD_TYPES.values()) - {""},  # pygments' tokens
    "a": {"anchor-link"},  # nbconvert's heading anchors
}
#: Images come from the notebook itself: a data URL of an image type.
IMAGE_DATA = re.compile(r"data:image/(png|jpeg|gif|webp|svg\+xml)[;,]", re.I)
BROWSER_DROPS = re.compile(r"[\t\n\r]")  # what a browser removes from any URL
#: What nbconvert's ``strip_files_prefix`` takes off a link, after us, in
#: nbgrader's templates: a URL is judged as it will be once that is gone.
FILES_PREFIX = re.compile(r"^(/?files/)+", re.I)
SCHEME = re.compile(r"[a-z][a-z0-9+.\-]*:", re.I)
WEB = re.compile(r"(https?|mailto):", re.I)
EDGES = "".join(map(chr, range(0x21)))  # and strips from its ends


def _url(tag: str, name: str, value: str) -> str | None:
    """nh3's attribute filter: an image only from a data URL, a link anywhere but
    to a data URL or to another host written as a path (``//host``, ``/\\host``);
    a link to an id gets the id's prefix. nh3 already left out other schemes than
    ``http``, ``https``, ``mailto`` and ``data``."""
    if name not in ("href", "src"):
        return value
    url = BROWSER_DROPS.sub("", value).strip(EDGES)
    if tag == "img":
        return value if IMAGE_DATA.match(url) else None
    if url.startswith("#"):
        return "#" + ID_PREFIX + url[1:]
    url = FILES_PREFIX.sub("", url)
    if url[:2].replace("\\", "/") == "//":
        return None
    if SCHEME.match(url) and not WEB.match(url):  # files/javascript:..., data:
        return None
    return value


def clean(html: str, *, tags: frozenset[str] = MARKDOWN_TAGS) -> str:
    """``html`` with only ``tags``, their harmless attributes and URLs, no script
    or style content, ids prefixed with :data:`ID_PREFIX`.

    Parameters
    ----------
    html : str
        HTML that a student's notebook made.
    tags : frozenset of str
        The elements kept (the others go, their text stays).

    Returns
    -------
    str
        The cleaned HTML.
    """
    return nh3.clean(
        html,
        tags=set(tags),
        attributes=ATTRIBUTES,
        attribute_filter=_url,
        allowed_classes=CLASSES,
        filter_style_properties={"text-align"},
        url_schemes={"http", "https", "mailto", "data"},
        id_prefix=ID_PREFIX,
    )


class InertMarkdown(LoggingConfigurable):
    """The ``markdown2html`` filter of the HTML exporter that it is given to (its
    parent, by ``c.HTMLExporter.filters``), its HTML cleaned by :func:`clean`."""

    @pass_context
    def __call__(self, context, source: str) -> str:
        return clean(self.parent.markdown2html(context, source))

    # Jinja reads pass_context's mark from the filter itself, not from __call__.
    jinja_pass_arg = __call__.jinja_pass_arg


def _number(value) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int | float) or bool(
        isinstance(value, str) and re.fullmatch(r"\d+(\.\d+)?", value)
    )


def _plain_sizes(metadata: dict) -> None:
    """Remove each image width or height that is not a number (templates write
    them unquoted) and the file names (written as URLs) of ``metadata``."""
    metadata.pop("filenames", None)
    levels = [metadata, *(v for v in metadata.values() if isinstance(v, dict))]
    for level in levels:
        for key in ("width", "height"):
            if key in level and not _number(level[key]):
                del level[key]


class InertOutputs(Preprocessor):
    """Keep only the outputs of :data:`SHOWN` types, clean their ``text/html``
    (:data:`OUTPUT_TAGS`), and keep an image's size only where it is a number."""

    def preprocess_cell(self, cell, resources, index):
        if "outputs" not in cell:
            return cell, resources
        for output in cell.outputs:
            data = output.get("data", {})
            for mime in [m for m in data if m not in SHOWN]:
                del data[mime]
            if "text/html" in data:
                html = data["text/html"]
                html = "".join(html) if isinstance(html, list) else html
                data["text/html"] = clean(html, tags=OUTPUT_TAGS)
            _plain_sizes(output.get("metadata", {}))
        # An output that had nothing else to show is left out.
        cell.outputs = [o for o in cell.outputs if o.get("data", True)]
        return cell, resources
