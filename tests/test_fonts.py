"""Chinese plot labels draw on a machine with any one of the CJK fonts the course
knows (course/fonts.py): Linux's, macOS's or Windows'.

This machine has one CJK font (Debian's fonts-wqy-microhei); a copy of it under
another family's name stands in for each of the others, and in the probe's
matplotlib it is the only CJK font there is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fontTools.ttLib import TTCollection

from course import fonts

WQY = Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc")
FAMILY_IDS = (1, 4, 16)
FILES = {  # how each is named on its system
    "PingFang SC": "PingFang.ttc",
    "Microsoft YaHei": "msyh.ttc",
    "SimHei": "simhei.ttf",
    "Noto Sans CJK SC": "NotoSansCJK-Regular.ttc",
    "Source Han Sans SC": "SourceHanSansSC-Regular.otf",
}  # the name table's family, full name, typographic family

PROBE = """
import sys, warnings
import matplotlib
matplotlib.use("Agg")
from matplotlib import font_manager
import matplotlib.pyplot as plt
manager = font_manager.fontManager
known = set(sys.argv[2:])
manager.ttflist = [f for f in manager.ttflist if f.name not in known]
font_manager.findSystemFonts = lambda *a, **k: [sys.argv[1]] if sys.argv[1] else []
import course  # in the Chinese edition, its import sets the fonts
fig, ax = plt.subplots()
ax.set(title="输入特征（列）", xlabel="位置", ylabel="查询")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    fig.canvas.draw()
used = font_manager.findfont(font_manager.FontProperties(family=["sans-serif"]))
print(font_manager.get_font(used).family_name)
print(sum("missing from font" in str(w.message) for w in caught))
"""


def _renamed(family: str, folder: Path) -> Path:
    """A copy of the machine's CJK font whose family is ``family``."""
    font = TTCollection(str(WQY)).fonts[0]
    for record in font["name"].names:
        if record.nameID in FAMILY_IDS:
            record.string = family
    path = folder / FILES[family]
    font.save(str(path))
    return path


def _probe(font: Path | None, folder: Path) -> list[str]:
    """What the probe draws with where ``font`` is the only CJK font installed
    (``None``: none is), and how many glyphs it lacked."""
    env = {**os.environ, "COURSE_LANG": "zh", "MPLCONFIGDIR": str(folder)}
    hidden = [*fonts.CJK_FONTS, "WenQuanYi Micro Hei Mono"]
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(font or ""), *hidden],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return out.stdout.splitlines()


FAMILIES = ["PingFang SC", "Microsoft YaHei", "SimHei", "Noto Sans CJK SC"]


@pytest.mark.parametrize("family", [*FAMILIES, "Source Han Sans SC"])
def test_labels_have_glyphs_with_only_one_cjk_font(family, tmp_path):
    """Installed after matplotlib's font cache was made, as a student's would be:
    the course finds the file by its name (``fonts.CJK_FILES``)."""
    assert family in fonts.CJK_FONTS
    assert _probe(_renamed(family, tmp_path), tmp_path) == [family, "0"]


def test_control_without_a_cjk_font_labels_are_boxes(tmp_path):
    family, missing = _probe(None, tmp_path)
    assert family not in fonts.CJK_FONTS and int(missing) > 0
