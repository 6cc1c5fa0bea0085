"""Fonts for the plots' labels: matplotlib draws every label in one font (DejaVu Sans by default),
which has no Chinese, Japanese or Korean characters. :func:`label_fonts` adds the
installed fonts of :data:`FALLBACK_FONTS` that draw the characters the default font lacks
(matplotlib falls back from one family of ``font.family`` to the next, glyph by glyph) and says
which characters no installed font draws, and :func:`stand_ins` draws a box in their place (as
matplotlib would, but without its warning per character at every save of the figure)."""
from __future__ import annotations

import functools
from typing import Iterable, List, Optional, Tuple

__all__ = ["FALLBACK_FONTS", "MISSING_GLYPH", "label_fonts", "stand_ins"]

#: fonts tried in this order for the characters the default font lacks (those installed are used):
#: CJK, then other scripts and symbols; colour-bitmap emoji fonts are left out (matplotlib cannot
#: draw them)
FALLBACK_FONTS = ("Noto Sans CJK JP", "Noto Sans CJK SC", "Noto Sans CJK TC", "Noto Sans CJK KR", "Source Han Sans",
                  "WenQuanYi Zen Hei", "WenQuanYi Micro Hei", "Droid Sans Fallback", "Microsoft YaHei", "PingFang SC",
                  "Hiragino Sans", "Malgun Gothic", "Yu Gothic", "Noto Sans Arabic", "Noto Sans Hebrew",
                  "Noto Sans Devanagari", "Noto Sans Thai", "Noto Emoji", "Segoe UI Emoji", "Segoe UI Symbol",
                  "Symbola", "Arial Unicode MS", "STIXGeneral")


#: drawn in place of a character no installed font draws (matplotlib draws a box too, and warns of
#: each such character again at every save); ``"?"`` where the default font lacks it as well
MISSING_GLYPH = "\u25a1"


@functools.lru_cache(maxsize=None)
def _charmap(path: str) -> frozenset:
    """The code points the font file at ``path`` draws (empty when it cannot be read)."""
    from matplotlib.ft2font import FT2Font

    try:
        return frozenset(FT2Font(path).get_charmap())
    except (OSError, RuntimeError, ValueError):
        return frozenset()


def label_fonts(texts: Iterable[str]) -> Tuple[Optional[List[str]], str]:
    """(``font.family`` for labels holding ``texts``, the characters no installed font draws).

    The family list is the default font followed by the installed fonts of
    :data:`FALLBACK_FONTS` that draw some character it lacks; None when the default font draws
    every character (nothing to change). matplotlib's "Last Resort" font, which draws a box per
    character, does not count as drawing one.
    """
    from matplotlib import font_manager

    chars = {c for t in texts for c in str(t) if not c.isspace() and c.isprintable()}
    default = font_manager.findfont(font_manager.FontProperties())
    missing = {c for c in chars if ord(c) not in _charmap(default)}
    if not missing:
        return None, ""
    installed = {}
    for f in font_manager.fontManager.ttflist:  # a family's regular face where it has one
        if f.name not in installed or (f.style == "normal" and f.weight in (400, "normal", "regular")):
            installed[f.name] = f.fname
    families = [font_manager.FontProperties(fname=default).get_name()]
    for name in FALLBACK_FONTS:
        drawn = {c for c in missing if name in installed and ord(c) in _charmap(installed[name])}
        if drawn:
            families.append(name)
            missing -= drawn
    return families, "".join(sorted(missing))


def stand_ins(missing: str) -> dict:
    """A :meth:`str.translate` table putting :data:`MISSING_GLYPH` (``"?"`` where the default font
    lacks it too) in place of each character of ``missing`` (the second item of
    :func:`label_fonts`); empty when ``missing`` is empty."""
    if not missing:
        return {}
    from matplotlib import font_manager

    default = font_manager.findfont(font_manager.FontProperties())
    box = MISSING_GLYPH if ord(MISSING_GLYPH) in _charmap(default) else "?"
    return {ord(c): box for c in missing}
