"""Pictures (matplotlib) and tables (pandas) of a result; both imported only when used."""
from __future__ import annotations

import math

from ..core.validation import check_bool
from .scale import grid, make_scale, no_signal, row_flags, strip
from .words import describe_target

__all__ = ["plot", "to_dataframe"]


def _title(attr) -> str:
    if attr.scores.dim() == 2:
        what = f"generation of {attr.scores.shape[0]} tokens"
    else:
        what = f"target {describe_target(attr)}"
    return f"{attr.method} · {what} · {attr.model or '?'}"


def _figure(ax, size):
    """(figure, axes): ``ax`` and its figure, else a new figure of ``size`` inches."""
    import matplotlib.pyplot as plt

    if ax is None:
        return plt.subplots(figsize=size, layout="constrained")
    return ax.figure, ax


def _caveat(scale, flags) -> str:
    """The title's second line: the scale's note or caveat, else the flags' caveats ("" when none)."""
    return scale.note or scale.caveat or "; ".join(f["message"] for f in flags if f["kind"] == "caveat")


def _cmap(scale):
    import matplotlib

    cmap = matplotlib.colormaps["RdBu_r" if scale.signed else "Oranges"].with_extremes(bad="#dddddd")  # bad = held fixed
    return cmap, (-scale.vmax if scale.signed else 0.0), (scale.vmax or 1.0)


#: a 1-D strip of more cells than this is wrapped into rows (:func:`plot`'s ``wrap``)
WRAP_AFTER = 40
#: cells per row of a wrapped strip by default
WRAP_ROW = 30
#: a generation matrix of more columns than this labels every n-th column only
MAX_COLUMN_LABELS = 100


def plot(attr, words: bool = True, ax=None, figsize=None, wrap=None):
    """Draw ``attr`` with matplotlib and return the Figure (``fig.savefig("x.png" / ".pdf" /
    ".svg")``).

    A 1-D result is a heatmap strip (one cell per word or token, labels below); a long one
    (more than :data:`WRAP_AFTER` cells) is wrapped into rows of ``wrap`` cells, read like
    text, each cell labelled inside and each row by the index of its first cell. A generation
    result is a matrix (rows = generated tokens, columns = context words or tokens; cells of the
    future left white); with more than :data:`MAX_COLUMN_LABELS` columns every n-th column is
    labelled (the title says which). Diverging ``RdBu_r`` centred at 0 for signed scores, ``Oranges`` for
    non-negative ones; held-fixed cells grey; a colour bar gives the scale. A result flagged in
    ``attr.degenerate`` as carrying no signal is drawn without colour (generation steps so
    flagged are left blank), and the title says why.

    Args:
        attr: an :class:`~aieg_fast.result.Attribution`.
        words: group tokens into words (default), else one cell per token.
        ax: a matplotlib Axes to draw into (default: a new figure).
        figsize: (width, height) in inches for a new figure (default: from the size).
        wrap: cells per row of a 1-D strip (an int ≥ 1); default None: one row up to
            :data:`WRAP_AFTER` cells, rows of :data:`WRAP_ROW` beyond. Not for a generation result.

    Returns:
        matplotlib.figure.Figure.

    Token texts are drawn as typed (``$`` does not start matplotlib's math text).

    Raises:
        ValueError: ``words`` not a bool; ``wrap`` not an int ≥ 1, or given for a generation result.
        ImportError: matplotlib is not installed.
    """
    check_bool("words", words)
    if wrap is not None and (isinstance(wrap, bool) or not isinstance(wrap, int) or wrap < 1):
        raise ValueError(f"wrap must be an int >= 1 (cells per row) or None, got {wrap!r}")
    if wrap is not None and attr.scores.dim() == 2:
        raise ValueError("wrap applies to a 1-D result's strip; a generation result is a matrix (pass wrap=None)")
    import numpy as np

    if attr.scores.dim() == 2:
        labels, row_labels, rows, visible = grid(attr, words)
        silent = [t for t in range(len(rows)) if no_signal(row_flags(attr, t)) is not None]
        data = np.array([[v if ok else math.nan for v, ok in zip(r, vis)] for r, vis in zip(rows, visible)], dtype=float)
        future = np.array([[not ok for ok in vis] for vis in visible])
        flags = [{"kind": "caveat", "message": f"steps {', '.join(str(t + 1) for t in silent)} carry no signal (white)"}] if silent else []
        size = figsize or (min(2 + 0.35 * len(labels), 40), min(1.5 + 0.3 * len(row_labels), 40))
    else:
        labels, vals, _ = strip(attr, words)
        flags = row_flags(attr)
        per = wrap or (len(labels) if len(labels) <= WRAP_AFTER else WRAP_ROW)
        if per < len(labels):
            return _wrapped_strip(attr, labels, vals, flags, per, ax, figsize, words)
        row_labels, data, future = [], np.array([vals], dtype=float), None
        size = figsize or (min(2 + 0.45 * len(labels), 40), 2.2)
    scale = make_scale((data if future is None else data[~future]).ravel().tolist(), flags)  # as the other views: NaN kept
    if future is None and no_signal(flags) is not None:
        data = np.where(np.isfinite(data), 0.0, data)  # no signal: every cell white (0 on either colour map)
    elif future is not None and silent:
        data[silent] = np.where(np.isfinite(data[silent]), 0.0, data[silent])
    cmap, vmin, vmax = _cmap(scale)
    fig, ax = _figure(ax, size)
    im = ax.imshow(np.ma.masked_invalid(data), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    if future is not None:  # the future is blank, not "held fixed"
        ax.imshow(np.ma.masked_where(~future, np.ones_like(data)), cmap="Greys", vmin=0, vmax=10, aspect="auto", interpolation="nearest")
    every = math.ceil(len(labels) / MAX_COLUMN_LABELS)  # 1 unless the columns are too many to label each
    ax.set_xticks(range(0, len(labels), every), labels[::every], rotation=60 if len(labels) > 6 else 0,
                  ha="right" if len(labels) > 6 else "center", parse_math=False)
    ax.set_yticks(range(len(row_labels)), row_labels, parse_math=False) if row_labels else ax.set_yticks([])
    extra = _caveat(scale, flags)
    if every > 1:
        extra = "; ".join(x for x in (extra, f"1 in {every} of the {len(labels)} columns labelled") if x)
    ax.set_title(_title(attr) + (f"\n{extra}" if extra else ""), fontsize=9, parse_math=False)
    fig.colorbar(im, ax=ax, shrink=0.8, label="score")
    return fig


def _wrapped_strip(attr, labels, vals, flags, per: int, ax, figsize, words: bool):
    """:func:`plot` of a 1-D result in rows of ``per`` cells, each labelled inside."""
    import numpy as np

    n_rows = math.ceil(len(labels) / per)
    data = np.full((n_rows, per), np.nan)
    data.flat[: len(vals)] = vals
    scale = make_scale(list(vals), flags)
    if no_signal(flags) is not None:
        data = np.where(np.isfinite(data), 0.0, data)
    cmap, vmin, vmax = _cmap(scale)
    fig, ax = _figure(ax, figsize or (min(1 + 0.6 * per, 40), min(1.2 + 0.42 * n_rows, 60)))
    im = ax.imshow(np.ma.masked_invalid(data), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    past_end = np.arange(n_rows * per).reshape(n_rows, per) >= len(labels)  # after the text: blank, not "held fixed"
    ax.imshow(np.ma.masked_where(~past_end, np.zeros_like(data)), cmap="Greys", vmin=0, vmax=1, aspect="auto",
              interpolation="nearest")
    for k, lab in enumerate(labels):
        v = data.flat[k]
        ink = [c / 255 for c in scale.ink(v)] if math.isfinite(v) else "#555555"
        text = lab if len(lab) <= 9 else lab[:8] + "…"
        ax.text(k % per, k // per, text, ha="center", va="center", fontsize=7, color=ink, parse_math=False, clip_on=True)
    ax.set_xticks([])
    ax.set_yticks(range(n_rows), [str(r * per) for r in range(n_rows)])
    ax.set_ylabel(f"index of the row's first {'word' if words else 'token'}")
    extra = _caveat(scale, flags)
    ax.set_title(_title(attr) + f" · {len(labels)} cells in rows of {per}" + (f"\n{extra}" if extra else ""), fontsize=9,
                 parse_math=False)
    fig.colorbar(im, ax=ax, shrink=0.8, label="score")
    return fig


def to_dataframe(attr, words: bool = False):
    """A pandas DataFrame of ``attr``.

    One row per token (``words=False``) or per word: columns ``position`` (token index or word
    index), ``token`` / ``word`` (display text), ``score`` (NaN where not attributed),
    ``attributable``, and for tokens ``token_id``, ``special``, ``start``, ``end`` (character
    offsets into ``attr.text``, None when unknown). A generation result gives one row per
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
        return pd.DataFrame([dict(base(c, g), score=vals[c]) for c, g in enumerate(groups)])
    _, row_labels, rows, visible = grid(attr, words)
    recs = []
    for t, (rl, r, vis) in enumerate(zip(row_labels, rows, visible)):
        recs.extend(dict({"step": t, "generated": rl}, **base(c, g), score=r[c]) for c, g in enumerate(groups) if vis[c])
    return pd.DataFrame(recs)
