"""Pictures (matplotlib) and tables (pandas) of a result; both imported only when used."""
from __future__ import annotations

import math
import numbers

from ..core.diagnostics import warn
from ..core.validation import as_int, check_bool
from .fonts import label_fonts, stand_ins
from .scale import caution_flag_of_steps, caution_steps, fixed_columns, grid, make_scale, no_signal, row_flags, strip
from .words import describe_step_target, describe_target, printable

__all__ = ["plot", "to_dataframe"]


#: the sets of characters :func:`plot` has warned of (Python's "default" warning filter shows a
#: warning again once any ``warnings.catch_warnings`` block has run, as the package's own do)
_WARNED_MISSING: set = set()


def _title(attr, box=None) -> str:
    """The plot's title: method, target (or the generation's length), model; with the characters of
    ``box`` (a :func:`~.fonts.stand_ins` table) replaced."""
    if attr.scores.dim() == 2:
        step = describe_step_target(attr)
        what = f"generation of {attr.scores.shape[0]} tokens" + (f", {step}" if step else "")
    else:
        what = f"target {describe_target(attr)}"
    return _shown(f"{attr.method} · {what} · {attr.model or '?'}", box)


def _shown(text: str, box=None) -> str:
    """A label as drawn: control and direction characters written as escapes
    (:func:`~.words.printable`, as the terminal and HTML views write them: an SVG holding them raw
    is no valid XML, and no font draws them), then the characters of ``box`` replaced."""
    return printable(text).translate(box or {})


def _figure(ax, size):
    """(figure, axes): ``ax`` and its figure, else a new pyplot figure of ``size`` inches (so
    ``plt.show()`` shows it; pyplot keeps it open until ``plt.close(fig)``)."""
    import matplotlib.pyplot as plt

    if ax is None:
        return plt.subplots(figsize=size, layout="constrained")
    return ax.figure, ax


def _caveat(scale, flags) -> str:
    """The title's second line: the scale's note, its caveat (a caution) and the flags' caveats ("" when none)."""
    caveats = [f["message"] for f in flags if f["kind"] == "caveat"]
    return "; ".join(x for x in [scale.note, f"caution: {scale.caveat}" if scale.caveat else ""] + caveats if x)


#: the grey of a cell with no score (held fixed: template, special); the colour maps' "bad" colour
NO_SCORE = "#dddddd"
#: the hatch over an attributed cell whose score is NaN, told apart from a held-fixed one
NAN_HATCH = "xxx"
#: the lighter grey of a generation matrix's cells of the future (the step's token and those after it)
FUTURE = "#f3f3f3"


def _mark_nan(ax, cells) -> None:
    """Cross-hatch ``cells``, (row, column) of the attributed entries whose score is NaN (grey as
    held fixed cells are, beneath)."""
    from matplotlib.patches import Rectangle

    for r, c in cells:
        ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, hatch=NAN_HATCH, edgecolor="#444444", linewidth=0))


def _key(fig, ax, own: bool, fixed: bool, nan: bool, future: bool = False) -> None:
    """A legend of the cells without a colour the picture has: held fixed, a NaN score, the
    future of a step; below the figure (``own``: a figure :func:`plot` made), else in ``ax``."""
    from matplotlib.patches import Patch

    handles = [Patch(facecolor=NO_SCORE, edgecolor="#999999", label="held fixed (not attributed)")] if fixed else []
    if future:
        handles.append(Patch(facecolor=FUTURE, edgecolor="#999999", label="not yet generated at that step"))
    if nan:
        handles.append(Patch(facecolor=NO_SCORE, edgecolor="#444444", hatch=NAN_HATCH, label="NaN score (attributed)"))
    if handles and own:
        fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=7, frameon=False)
    elif handles:
        ax.legend(handles=handles, loc="upper right", fontsize=7, framealpha=0.9)


def _cmap(scale):
    import matplotlib

    cmap = matplotlib.colormaps["RdBu_r" if scale.signed else "Oranges"].with_extremes(bad=NO_SCORE)  # bad = held fixed
    top = scale.vmax or 1.0  # no finite score: 0 is still the white middle (signed) or bottom
    return cmap, (-top if scale.signed else 0.0), top


def _drawn(data, scale, vmin: float, vmax: float):
    """The cells as drawn: NaN masked (held fixed: grey, or blank where another layer covers it);
    ±inf at the ends of the colour scale, as the terminal and HTML views draw them; every cell
    white (0 on either colour map) where the scale has a note (no signal, all ≈ 0, near-constant,
    no finite score: drawn without colour, as the other views)."""
    import numpy as np

    if scale.note:
        data = np.where(np.isnan(data), data, 0.0)
    return np.ma.masked_invalid(np.clip(data, vmin, vmax))


def _check_plot_args(attr, ax, figsize, wrap) -> None:
    """Refuse :func:`plot`'s bad arguments before anything is drawn, naming the argument."""
    from matplotlib.axes import Axes

    if wrap is not None and (isinstance(wrap, bool) or not isinstance(wrap, int) or wrap < 1):
        raise ValueError(f"wrap must be a positive int (cells per row) or None, got {wrap!r}")
    if wrap is not None and attr.scores.dim() == 2:
        raise ValueError("wrap applies to a 1-D result's strip; a generation result is a matrix (pass wrap=None)")
    if ax is not None and not isinstance(ax, Axes):
        raise TypeError(f"ax must be a matplotlib Axes or None, got {ax!r}")
    try:
        ok = figsize is None or (len(figsize) == 2 and all(
            isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x) and x > 0 for x in figsize))
    except TypeError:  # no len()
        ok = False
    if not ok:
        raise ValueError(f"figsize must be (width, height) in inches, two finite numbers > 0, or None, got {figsize!r}")


#: a 1-D strip of more cells than this is wrapped into rows (:func:`plot`'s ``wrap``)
WRAP_AFTER = 40
#: cells per row of a wrapped strip by default
WRAP_ROW = 30
#: a generation matrix of more columns than this labels every n-th column only
MAX_COLUMN_LABELS = 100
#: a generation matrix of more rows (steps) than this labels every n-th row only
MAX_ROW_LABELS = 100


def plot(attr, words: bool = True, ax=None, figsize=None, wrap=None):
    """Draw ``attr`` with matplotlib and return the Figure (``fig.savefig("x.png" / ".pdf" /
    ".svg")``).

    A 1-D result is a heatmap strip (one cell per word or token, labels below); a long one
    (more than :data:`WRAP_AFTER` cells) is wrapped into rows of ``wrap`` cells, read like
    text, each cell labelled inside and each row by the index of its first cell. A generation
    result is a matrix (rows = generated tokens, columns = context words or tokens; cells of the
    future in a lighter grey than held-fixed ones, both in the legend); with more than
    :data:`MAX_COLUMN_LABELS` columns every n-th column is labelled, with more than
    :data:`MAX_ROW_LABELS` rows every n-th row (the title says which). Diverging ``RdBu_r``
    centred at 0 for signed scores, ``Oranges`` for non-negative ones; held-fixed cells grey,
    an attributed cell whose score is NaN grey and cross-hatched, with a legend of
    the two below the figure (in ``ax`` when given); a score of ±inf at the end of the scale of
    its sign (as in the other views); a colour bar gives the scale. A result flagged in
    ``attr.degenerate`` as carrying no signal is drawn without colour (generation steps so
    flagged are left blank), and the title says why; a large IG completeness error keeps the
    colours and the title adds a caution (generation steps so flagged marked ``⚠``).

    Args:
        attr: an :class:`~aieg_fast.result.Attribution`.
        words: group tokens into words (default), else one cell per token.
        ax: a matplotlib Axes to draw into (default: a new figure).
        figsize: (width, height) in inches for a new figure, two finite numbers > 0 (default:
            from the size).
        wrap: cells per row of a 1-D strip (an int ≥ 1); default None: one row up to
            :data:`WRAP_AFTER` cells, rows of :data:`WRAP_ROW` beyond. Not for a generation result.

    Returns:
        matplotlib.figure.Figure: a new one (when ``ax`` is None) is pyplot's, as
        ``plt.subplots`` makes it: ``plt.show()`` shows it, and it stays open until
        ``plt.close(fig)`` (in a loop of many plots, close each once saved: matplotlib warns
        past 20 open figures).

    Token texts are drawn as typed (``$`` does not start matplotlib's math text). Characters the
    default font lacks (Chinese, Japanese, Korean, emoji, ...) are drawn with an installed font
    of :data:`~aieg_fast.display.fonts.FALLBACK_FONTS` that has them; right-to-left scripts
    are drawn unshaped, in reading order left to right (matplotlib has no bidirectional layout).

    Warns:
        UserWarning: once, naming the characters no installed font draws; they are drawn as a box
            (:data:`~aieg_fast.display.fonts.MISSING_GLYPH`), so that matplotlib does not warn of
            each again whenever the figure is saved.

    Raises:
        ValueError: ``words`` not a bool; ``wrap`` not an int ≥ 1, or given for a generation result;
            ``figsize`` not None nor two finite numbers > 0.
        TypeError: ``ax`` not None nor a matplotlib Axes.
        ImportError: matplotlib is not installed.
    """
    check_bool("words", words)
    wrap = as_int(wrap)  # a NumPy or one-element tensor integer as an int
    _check_plot_args(attr, ax, figsize, wrap)
    import matplotlib

    drawn = attr.word_labels() if words else attr.token_labels()  # the columns, then a generation's rows
    if attr.scores.dim() == 2:
        drawn = drawn + attr.token_labels()[attr.prompt_length:]
    families, missing = label_fonts([_shown(x) for x in drawn] + [_title(attr)])
    if missing and missing not in _WARNED_MISSING:  # once per set of characters in a process, at the user's line
        _WARNED_MISSING.add(missing)
        warn(f"plot: no installed font draws {len(missing)} character(s) of the labels ({missing[:20]!r}); they show "
             "as boxes. Install a font that has them (e.g. Noto Sans CJK for Chinese, Japanese and Korean)", UserWarning)
    with matplotlib.rc_context({"font.family": families} if families else {}):
        return _plot(attr, words, ax, figsize, wrap, stand_ins(missing))


def _plot(attr, words: bool, ax, figsize, wrap, box):
    """:func:`plot` once its arguments are checked and the label fonts chosen; ``box`` (a
    :func:`~.fonts.stand_ins` table) replaces the characters no installed font draws in the
    labels and the title: matplotlib would draw a box for each too, and warn of each at every
    save of the figure, which may happen after :func:`plot` returns."""
    import numpy as np

    if attr.scores.dim() == 2:
        labels, row_labels, rows, visible = grid(attr, words)
        labels, row_labels = [_shown(x, box) for x in labels], [_shown(x, box) for x in row_labels]
        silent = [t for t in range(len(rows)) if no_signal(row_flags(attr, t)) is not None]
        data = np.array([[v if ok else math.nan for v, ok in zip(r, vis)] for r, vis in zip(rows, visible)], dtype=float)
        future = np.array([[not ok for ok in vis] for vis in visible])
        flags = [{"kind": "caveat", "message": f"steps {', '.join(str(t + 1) for t in silent)} carry no signal (white)"}] if silent else []
        flags += caution_flag_of_steps(attr)  # a large IG completeness error: coloured, the row marked ⚠
        warned = caution_steps(attr)
        row_labels = [f"⚠ {lab}" if t in warned else lab for t, lab in enumerate(row_labels)]
        fixed = [fx and any(vis[c] for vis in visible) for c, fx in enumerate(fixed_columns(attr, words))]  # drawn held fixed
        nan = [(t, c) for t, (r, vis) in enumerate(zip(rows, visible)) for c, (v, ok) in enumerate(zip(r, vis))
               if ok and math.isnan(v) and not fixed[c]]  # attributed, NaN score
        size = figsize or (min(2 + 0.35 * len(labels), 40), min(1.5 + 0.3 * len(row_labels), 40))
    else:
        labels, vals, fixed = strip(attr, words)
        labels = [_shown(x, box) for x in labels]
        flags = row_flags(attr)
        per = wrap or (len(labels) if len(labels) <= WRAP_AFTER else WRAP_ROW)
        nan = [k for k, (v, fx) in enumerate(zip(vals, fixed)) if math.isnan(v) and not fx]  # attributed, NaN score
        if per < len(labels):
            return _wrapped_strip(attr, (labels, vals, fixed, nan), flags, per, ax, figsize, words, box)
        row_labels, data, future = [], np.array([vals], dtype=float), None
        size = figsize or (min(2 + 0.45 * len(labels), 40), 2.2)
    scale = make_scale((data if future is None else data[~future]).ravel().tolist(), flags)  # as the other views: NaN kept
    if future is not None and silent:
        data[silent] = np.where(np.isnan(data[silent]), data[silent], 0.0)
    cmap, vmin, vmax = _cmap(scale)
    own = ax is None
    fig, ax = _figure(ax, size)
    im = ax.imshow(_drawn(data, scale, vmin, vmax), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    if future is None:
        _mark_nan(ax, [(0, k) for k in nan])  # the strip's row 0
        _key(fig, ax, own, any(fixed), bool(nan))
        ax.set_xlabel("words" if words else "tokens")
    else:  # the future in a lighter grey than "held fixed"
        from matplotlib.colors import ListedColormap

        ax.imshow(np.ma.masked_where(~future, np.zeros_like(data)), cmap=ListedColormap([FUTURE]), aspect="auto",
                  interpolation="nearest")
        _mark_nan(ax, nan)
        _key(fig, ax, own, any(fixed), bool(nan), bool(future.any()))
        ax.set_xlabel(f"context {'words' if words else 'tokens'} (prompt, then the generated tokens)")
        ax.set_ylabel("generated token")
    every = math.ceil(len(labels) / MAX_COLUMN_LABELS)  # 1 unless the columns are too many to label each
    ax.set_xticks(range(0, len(labels), every), labels[::every], rotation=60 if len(labels) > 6 else 0,
                  ha="right" if len(labels) > 6 else "center", parse_math=False)
    every_row = max(1, math.ceil(len(row_labels) / MAX_ROW_LABELS))  # likewise for the rows (steps)
    ax.set_yticks(range(0, len(row_labels), every_row), row_labels[::every_row], parse_math=False)
    thinned = [f"1 in {n} of the {len(labs)} {what} labelled" for n, labs, what in
               ((every, labels, "columns"), (every_row, row_labels, "rows")) if n > 1]
    extra = _shown("; ".join(x for x in [_caveat(scale, flags)] + thinned if x), box)  # a finding's message, as the labels
    title = _title(attr, box) + (f"\n{extra}" if extra else "")
    ax.set_title(title, fontsize=9, parse_math=False)
    if own and figsize is None:  # a few tokens' figure: as wide as its title (9 pt: about 0.075 in a character)
        fig.set_figwidth(min(max(fig.get_figwidth(), 1.5 + 0.075 * max(map(len, title.split("\n")))), 40))
    fig.colorbar(im, ax=ax, shrink=0.8, label="score")
    return fig


def _wrapped_strip(attr, strip_, flags, per: int, ax, figsize, words: bool, box):
    """:func:`plot` of a 1-D result in rows of ``per`` cells, each labelled inside; ``strip_`` =
    (labels, values, fixed, the indices of the attributed entries whose score is NaN); ``box``
    as :func:`_plot`'s."""
    import numpy as np

    labels, vals, fixed, nan = strip_
    n_rows = math.ceil(len(labels) / per)
    data = np.full((n_rows, per), np.nan)
    data.flat[: len(vals)] = vals
    scale = make_scale(list(vals), flags)
    cmap, vmin, vmax = _cmap(scale)
    own = ax is None
    fig, ax = _figure(ax, figsize or (min(1 + 0.6 * per, 40), min(1.2 + 0.42 * n_rows, 60)))
    drawn = _drawn(data, scale, vmin, vmax)
    im = ax.imshow(drawn, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    past_end = np.arange(n_rows * per).reshape(n_rows, per) >= len(labels)  # after the text: blank, not "held fixed"
    ax.imshow(np.ma.masked_where(~past_end, np.zeros_like(data)), cmap="Greys", vmin=0, vmax=1, aspect="auto",
              interpolation="nearest")
    _mark_nan(ax, [divmod(k, per) for k in nan])
    _key(fig, ax, own, any(fixed), bool(nan))
    filled = drawn.filled(math.nan)
    for k, lab in enumerate(labels):
        v = filled.flat[k]
        ink = [c / 255 for c in scale.ink(v)] if not math.isnan(v) else "#555555"
        text = lab if len(lab) <= 9 else lab[:8] + "…"
        ax.text(k % per, k // per, text, ha="center", va="center", fontsize=7, color=ink, parse_math=False, clip_on=True)
    ax.set_xticks([])
    ax.set_yticks(range(n_rows), [str(r * per) for r in range(n_rows)])
    ax.set_ylabel(f"index of the row's first {'word' if words else 'token'}")
    extra = _shown(_caveat(scale, flags), box)  # a finding's message, as the labels
    ax.set_title(_title(attr, box) + f" · {len(labels)} cells in rows of {per}" + (f"\n{extra}" if extra else ""), fontsize=9,
                 parse_math=False)
    fig.colorbar(im, ax=ax, shrink=0.8, label="score")
    return fig


def to_dataframe(attr, words: bool = False):
    """A pandas DataFrame of ``attr``.

    One row per token (``words=False``) or per word: columns ``position`` (token index or word
    index), ``token`` / ``word`` (display text), ``score`` (NaN where not attributed),
    ``attributable``, and for tokens ``token_id``, ``special``, ``start``, ``end`` (character
    offsets into ``attr.text``: integers of pandas' nullable ``Int64`` dtype, ``pd.NA`` when
    unknown, e.g. for a special token). A generation result gives one row per
    (step, token) with ``step`` and ``generated`` (the explained token) first, for the tokens
    visible at that step.

    Raises:
        ValueError: ``words`` not a bool.
        ImportError: pandas is not installed (``pip install pandas``).
    """
    check_bool("words", words)
    import pandas as pd

    L = len(attr.tokens)
    groups = attr.word_groups() if words else [[i] for i in range(L)]
    labels = attr.word_labels() if words else attr.token_labels()
    name = "word" if words else "token"

    def base(c, g):
        rec = {"position": c, name: labels[c], "attributable": any(attr.attributable[i] for i in g)}
        if not words:
            off = attr.offsets[c] if attr.offsets else None
            rec.update(token_id=attr.token_ids[c], special=attr.special[c], start=off[0] if off else None, end=off[1] if off else None)
        return rec

    if attr.scores.dim() == 1:
        vals = attr.words()[1] if words else [float(s) if a else math.nan for s, a in zip(attr.scores.tolist(), attr.attributable)]
        recs = [dict(base(c, g), score=vals[c]) for c, g in enumerate(groups)]
    else:
        _, row_labels, rows, visible = grid(attr, words)
        recs = []
        for t, (rl, r, vis) in enumerate(zip(row_labels, rows, visible)):
            recs.extend(dict({"step": t, "generated": rl}, **base(c, g), score=r[c]) for c, g in enumerate(groups) if vis[c])
    df = pd.DataFrame(recs)
    for col in ("start", "end"):  # integers with gaps: pandas would make them floats with NaN
        if col in df:
            df[col] = df[col].astype("Int64")
    return df
