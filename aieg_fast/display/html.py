"""One self-contained HTML renderer (no script, no network) for next-token and generation
results: a legend with the colour scale, then the text as coloured words (1-D) or an aligned
grid of generated tokens × context (2-D)."""
from __future__ import annotations

import html as _html
import itertools
import math
import secrets

from ..core.validation import check_bools
from .scale import caution, caution_flag_of_steps, fixed_columns, grid, make_scale, no_signal, row_flags, strip
from .words import describe_step_target, describe_target, printable, target_probability

__all__ = ["to_html"]


def _esc(s: str) -> str:
    """``s`` for HTML: escaped, and the characters a browser would act on (bidirectional
    overrides that reverse the rest of a line, controls) written visibly (:func:`printable`)."""
    return _html.escape(printable(s))


#: element ids ``aieg-fast-<run>-<n>``: the random run part keeps snippets of two processes (a notebook
#: rerun after a restart, pages joining several runs' snippets) from sharing ids, which scope the CSS and
#: the words / tokens switch
_RUN = secrets.token_hex(4)
_ids = itertools.count()

# scoped by the container's id; explicit colours so light and dark page themes both read
_CSS = """
#{id} {{ color: #111; background: #fff; font-family: system-ui, -apple-system, 'Segoe UI', sans-serif;
  font-size: 14px; line-height: 1.9; padding: 8px 10px; border: 1px solid #ddd; border-radius: 6px; }}
#{id} .aieg-legend {{ font-size: 12px; color: #333; margin-bottom: 6px; line-height: 1.5; }}
#{id} .aieg-text {{ white-space: pre-wrap; }}
#{id} .aieg-bar {{ display: inline-block; width: 140px; height: 10px; vertical-align: middle;
  border: 1px solid #999; margin: 0 4px; background: linear-gradient(to right, {grad}); }}
#{id} .aieg-w {{ padding: 1px 3px; margin: 1px; border-radius: 3px; border: 1px solid #e0e0e0;
  white-space: pre; }}
#{id} .aieg-fixed {{ color: #777 !important; background: repeating-linear-gradient(135deg, #fff 0 3px, #eee 3px 6px) !important;
  border: 1px dashed #aaa; font-style: italic; }}
#{id} .aieg-caution {{ color: #a34700; }}
#{id} .aieg-v {{ font-size: 10px; color: #444; margin-left: 2px; }}
#{id} table {{ border-collapse: collapse; font-size: 12px; line-height: 1.3; }}
#{id} th {{ font-weight: 600; color: #111; padding: 2px 4px; white-space: pre; }}
#{id} tr.aieg-head th {{ writing-mode: vertical-rl; transform: rotate(180deg); text-align: left;
  vertical-align: bottom; max-height: 12em; }}
#{id} td {{ min-width: 1.6em; height: 1.6em; padding: 1px 3px; text-align: center; border: 1px solid #eee; }}
#{id} .aieg-scroll {{ overflow-x: auto; max-width: 100%; }}
#{id} tr > th:first-child {{ position: sticky; left: 0; background: #fff; z-index: 1; }}
#{id} td.aieg-future {{ background: transparent; border-color: transparent; }}
"""


def _style(scale, v: float) -> str:
    (r, g, b), (ir, ig, ib) = scale.rgb(v), scale.ink(v)
    return f"background: rgb({r},{g},{b}); color: rgb({ir},{ig},{ib})"


def _legend(attr, scale, words: bool) -> str:
    parts = [f"<b>{_esc(str(attr.method))}</b>"]
    if attr.scores.dim() == 2:
        step = describe_step_target(attr)
        parts.append(f"generation of {attr.scores.shape[0]} tokens" + (f", <b><bdi>{_esc(step)}</bdi></b>" if step else ""))
    else:
        parts.append(f"target <b><bdi>{_esc(describe_target(attr))}</bdi></b>")  # bdi: a right-to-left target stays in place
    prob = target_probability(attr)
    if prob is not None:
        parts.append(f"p(target) = {prob:.3g}")
    if isinstance(attr.info.get("F_input"), (int, float)):
        parts.append(f"F(x) = {attr.info['F_input']:.4g}")
    parts.append(f"model {_esc(str(attr.model or '?'))}")
    lo = f"−{scale.vmax:.3g}" if scale.signed else "0"
    bar = f'{lo}<b class="aieg-bar"></b>+{scale.vmax:.3g}'
    note = f' — <i>{_esc(scale.note)}</i>' if scale.note else ""
    if scale.caveat:  # a large IG completeness error: the colours are kept, with this caution
        note += f' — <b class="aieg-caution">caution:</b> <i>{_esc(scale.caveat)}</i>'
    unit = "words" if words else "tokens"
    kind = "diverging (blue − / red +)" if scale.signed else "sequential (0 → orange)"
    fixed = '<em class="aieg-w aieg-fixed">held fixed</em>'
    return (f'<div class="aieg-legend">{" · ".join(parts)}<br>scale: {kind} {bar}{note} · {unit} · '
            f'{fixed} = template / special (not attributed) · hover for values</div>')


def _wrap(attr, scale, body: str, words: bool) -> str:
    uid = f"aieg-fast-{_RUN}-{next(_ids)}"
    if scale.signed:
        grad = "rgb(0,0,255), rgb(255,255,255), rgb(255,0,0)"
    else:
        grad = "rgb(255,255,255), rgb(255,120,0)"
    css = _CSS.format(id=uid, grad=grad)
    return (f'<div class="aieg-fast" id="{uid}" lang="und"><style>{css}</style>'
            f"{_legend(attr, scale, words)}{body}</div>")


def _strip_html(attr, words: bool, values: bool) -> str:
    labels, vals, fixed = strip(attr, words)
    scale = make_scale(vals, row_flags(attr))
    spans = []
    for lab, v, fx in zip(labels, vals, fixed):
        text = _esc(lab)
        if fx:
            spans.append(f'<span class="aieg-w aieg-fixed" title="held fixed (template / special)">{text}</span>')
            continue
        if math.isnan(v):  # attributed, but its score is NaN: said in the text, not drawn as a zero
            spans.append(f'<span class="aieg-w" title="NaN score">{text}<sub class="aieg-v">nan</sub></span>')
            continue
        title = f"{v:+.4g}"
        # bdi dir="ltr": the number's sign stays before it after a right-to-left word ("0.36-" else)
        val = f'<sub class="aieg-v"><bdi dir="ltr">{v:+.2g}</bdi></sub>' if values else ""
        spans.append(f'<span class="aieg-w" title="{title}" style="{_style(scale, v)}">{text}{val}</span>')
    # dir="auto": a right-to-left text (Arabic, Hebrew) is laid out from the right, as it is read
    return _wrap(attr, scale, f'<div class="aieg-text" dir="auto">{" ".join(spans)}</div>', words)


def _grid_html(attr, words: bool, values: bool) -> str:
    labels, row_labels, rows, visible = grid(attr, words)
    fixed_cols = fixed_columns(attr, words)
    scale = make_scale([v for r, vis in zip(rows, visible) for v, ok in zip(r, vis) if ok], caution_flag_of_steps(attr))
    head = "".join(f"<th{' class=aieg-fixed' if fx else ''}>{_esc(lab)}</th>" for lab, fx in zip(labels, fixed_cols))
    trs = [f'<tr class="aieg-head"><th></th>{head}</tr>']
    for t, (rl, r, vis) in enumerate(zip(row_labels, rows, visible)):
        cells = []
        bad, warn = no_signal(row_flags(attr, t)), caution(row_flags(attr, t))
        for c, (v, ok) in enumerate(zip(r, vis)):
            if bad is not None and ok and not math.isnan(v):  # no signal: no colour, the reason on hover
                tip = _esc(f"step {t + 1}: no signal ({bad['kind']}): {bad['message']}; value {v:+.4g}")
                cells.append(f'<td title="{tip}">{f"{v:+.2g}" if values else ""}</td>')
            elif not ok:
                cells.append('<td class="aieg-future"></td>')
            elif math.isnan(v) and fixed_cols[c]:
                cells.append(f'<td class="aieg-fixed" title="{_esc(labels[c])}: held fixed"></td>')
            elif math.isnan(v):  # attributed, but its score is NaN
                cells.append(f'<td title="{_esc(f"step {t + 1} {rl!r} ← {labels[c]!r}: NaN score")}"><sub class="aieg-v">nan</sub></td>')
            else:
                tip = _esc(f"step {t + 1} {rl!r} ← {labels[c]!r}: {v:+.4g}" + (" (caution: IG completeness error)" if warn else ""))
                cells.append(f'<td title="{tip}" style="{_style(scale, v)}">{f"{v:+.2g}" if values else ""}</td>')
        head_cell = _esc(rl)
        if bad is not None:
            head_cell = f'<span title="{_esc(bad["message"])}">⚠ {head_cell} (no signal)</span>'
        elif warn is not None:  # coloured, with a caution
            head_cell = f'<span title="{_esc(warn["message"])}">⚠ {head_cell} (caution)</span>'
        trs.append(f"<tr><th>{head_cell}</th>{''.join(cells)}</tr>")
    gen = _esc(str(attr.info.get("generated_text", "")))
    prompt = _esc(str(attr.info.get("prompt", "")))
    # pre-wrap: the prompt's and the answer's newlines and runs of spaces as they are (HTML collapses them)
    intro = (f'<div class="aieg-legend">prompt: <b><bdi class="aieg-text">{prompt}</bdi></b> · generated: '
             f'<b><bdi class="aieg-text">{gen}</bdi></b></div>')
    return _wrap(attr, scale, f'{intro}<div class="aieg-scroll"><table>{"".join(trs)}</table></div>', words)


_TOGGLE_CSS = """
#{id} .aieg-view-tokens {{ display: none; }}
#{id} > input:checked ~ .aieg-view-words {{ display: none; }}
#{id} > input:checked ~ .aieg-view-tokens {{ display: block; }}
#{id} > label {{ font: 12px system-ui, sans-serif; color: #111; background: #fff; cursor: pointer; }}
"""


def _toggle_html(attr, values: bool) -> str:
    """Both views, words and tokens, with a checkbox that switches between them in CSS alone."""
    uid = f"aieg-fast-{_RUN}-{next(_ids)}"
    render = _grid_html if attr.scores.dim() == 2 else _strip_html
    return (f'<div class="aieg-fast-toggle" id="{uid}"><style>{_TOGGLE_CSS.format(id=uid)}</style>'
            f'<input type="checkbox" id="{uid}-tokens"><label for="{uid}-tokens"> show tokens instead of words</label>'
            f'<div class="aieg-view-words">{render(attr, True, values)}</div>'
            f'<div class="aieg-view-tokens">{render(attr, False, values)}</div></div>')


def to_html(attr, words: bool = True, values: bool = False, toggle: bool = False) -> str:
    """A self-contained HTML snippet of ``attr`` (inline CSS, no script, no network).

    A legend names the method, target (or generation), model and ``F(x)`` when recorded, and
    draws the colour scale with its maximum: diverging blue-white-red centred at 0 when any
    score is negative, white to orange for non-negative scores; a near-zero or near-constant
    result is drawn without colour and the legend says so, as is a result (or a grid row, marked
    ⚠ ... (no signal)) flagged in ``attr.degenerate`` as carrying no signal; a large IG
    completeness error keeps the colours and the legend adds a caution (a grid row so flagged
    is marked ⚠ ... (caution), its message on hover). Held-fixed (template, special)
    entries are hatched grey, distinct from a zero score; an attributed entry whose score is NaN
    is marked ``nan``. Text colour is set explicitly, so the
    snippet reads on light and dark pages. A 1-D result shows the text, one ``<span>`` per word
    (or token); a generation result shows a grid: one row per generated token, one column per
    context word (or token), cells of the future blank, values on hover; a grid wider than the
    page scrolls sideways, the generated tokens' column staying in view.

    Args:
        attr: an :class:`~aieg_fast.result.Attribution`.
        words: group tokens into words (default), else one entry per token.
        values: also print each value (in the word's span, or in each grid cell).
        toggle: render both views, with a checkbox that switches between words and tokens
            (CSS only, no script); ``words`` is then ignored.

    Returns:
        str: the HTML (a ``<div>``; wrap it in a page with ``<meta charset='utf-8'>``).

    Raises:
        ValueError: ``words``, ``values`` or ``toggle`` not a bool.
    """
    check_bools(dict(words=words, values=values, toggle=toggle))
    if toggle:
        return _toggle_html(attr, values)
    if attr.scores.dim() == 2:
        return _grid_html(attr, words, values)
    return _strip_html(attr, words, values)
