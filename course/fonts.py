"""Chinese text in matplotlib: one rule for the notebooks' plots and the class report.

matplotlib's default fonts have no CJK glyphs, so Chinese titles and labels draw as
boxes. :func:`use_cjk_fonts` puts the CJK fonts of Linux, macOS and Windows first
(:data:`CJK_FONTS`; matplotlib draws with the first one installed); each also draws
Latin letters and digits. :func:`follow_language` does so in the Chinese
edition (``COURSE_LANG=zh``, which the Chinese course's nbgrader config and
``make lab LANG=zh`` set for every kernel) once pyplot is loaded: the notebooks
import pyplot before the ``course`` package, whose import calls it.
"""

from __future__ import annotations

import sys
from pathlib import Path

#: Simplified-Chinese fonts, the first installed one is used: Linux's (Debian's
#: fonts-wqy-microhei, which ``make test`` and ``make lab LANG=zh`` install; Noto and
#: Source Han, Google's and Adobe's), macOS's, then Windows'.
CJK_FONTS = [
    "WenQuanYi Micro Hei",
    "Noto Sans CJK SC",
    "Noto Sans SC",
    "Source Han Sans SC",
    "PingFang SC",
    "Hiragino Sans GB",
    "Heiti SC",
    "Microsoft YaHei",
    "SimHei",
]
#: Pieces of those fonts' file names, lower case: an installed font that
#: matplotlib's font cache (made before it was installed) does not know yet.
CJK_FILES = (
    "wqy-microhei",
    "notosanscjk",
    "notosanssc",
    "sourcehansans",
    "pingfang",
    "hiragino sans gb",
    "stheiti",
    "msyh",
    "simhei",
)


def use_cjk_fonts(plt=None) -> None:
    """Put a CJK font first in ``font.sans-serif``.

    Installed CJK fonts that matplotlib's font cache (made before they were
    installed) does not know are added to it first.

    Parameters
    ----------
    plt : module, optional
        ``matplotlib.pyplot`` (imported here if not given).
    """
    if plt is None:
        import matplotlib.pyplot as plt
    from matplotlib import font_manager

    if not {f.name for f in font_manager.fontManager.ttflist} & set(CJK_FONTS):
        for path in font_manager.findSystemFonts():
            if any(k in Path(path).name.lower() for k in CJK_FILES):
                font_manager.fontManager.addfont(path)
    rest = [f for f in plt.rcParams["font.sans-serif"] if f not in CJK_FONTS]
    plt.rcParams["font.sans-serif"] = [*CJK_FONTS, *rest]


def follow_language() -> bool:
    """In the Chinese edition, with pyplot loaded, use CJK fonts; say whether.

    Returns
    -------
    bool
        True if the fonts were set (Chinese, and ``matplotlib.pyplot`` imported).
    """
    from .i18n import language

    try:
        chinese = language() == "zh"
    except ValueError:  # a language the course does not speak: English
        return False
    plt = sys.modules.get("matplotlib.pyplot")
    if not chinese or plt is None:
        return False
    use_cjk_fonts(plt)
    return True
