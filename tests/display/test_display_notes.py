"""What the views say beside the colours: the caution of a large IG completeness error (1-D and
per generation step, in the terminal, HTML and the plot); how the terminal's generation lines are
scaled and averaged."""
from __future__ import annotations

import io
import math
import re

import matplotlib
import pytest
import torch

import aieg_fast

matplotlib.use("Agg")

ANSI = re.compile(r"\x1b\[[0-9;]*m")
CAUTION = "IG completeness error -0.113 is 49% of F(x) − F(x′) = +0.229; raise n_steps"


def _attr(tokens, scores, **kw):
    """A hand-built result over ``tokens`` (scores ``[L]``, or ``[T, L]`` for a generation whose
    last T tokens are the generated ones)."""
    kw.setdefault("target", {"kind": "token", "id": 5, "text": " great"})
    return aieg_fast.Attribution(tokens=list(tokens), token_ids=list(range(len(tokens))), scores=torch.as_tensor(scores),
                                 method=kw.pop("method", "integrated_gradients"), **kw)


def _gen(flagged=(0, 2), T=3):
    """A generation over a 3-token prompt whose steps ``flagged`` (0-based) carry a completeness flag."""
    tokens = ["the", "movie", "is", "good", "and", "fun"][: 3 + T]
    scores = torch.linspace(-1, 2, T * len(tokens)).reshape(T, len(tokens))
    for t in range(T):
        scores[t, 3 + t:] = math.nan  # the future of step t
    flags = [{"kind": "completeness", "message": f"step {t}: {CAUTION}", "step": t} for t in flagged]
    return _attr(tokens, scores, degenerate=flags)


class Tty(io.StringIO):
    def isatty(self):
        return True


def _show(res, stream=None, **kw):
    out = stream or io.StringIO()
    res.show(file=out, width=100, **kw)
    return out.getvalue()


def test_completeness_caution_in_html_of_a_next_token_result():
    """The README: "a completeness error keeps the colours and adds a caution"; the terminal
    said it, the HTML legend (notebook, ``--html``) did not."""
    res = _attr(["the", " movie", " is"], [0.3, -0.2, 0.5], degenerate=[{"kind": "completeness", "message": CAUTION}])
    h = res.to_html()
    assert "caution" in h and "49% of F(x)" in h
    assert "background: rgb(255,255,255)" not in h  # the colours are kept
    assert "caution" in _show(res)


def test_completeness_caution_per_generation_step():
    """A generation's completeness flags (one per step) were ignored by all three views: each
    view now marks the flagged steps, keeps their colours and says why."""
    res = _gen(flagged=(0, 2))
    out = _show(res)
    steps = [ln for ln in out.splitlines() if " <- " in ln and "mean over steps" not in ln]
    assert [ln.startswith("⚠") for ln in steps] == [True, False, True]
    assert "\ncaution: ⚠ steps 1, 3:" in out and "49% of" in out
    h = res.to_html()
    assert h.count("(caution)</span>") == 2 and "caution:</b>" in h and "steps 1, 3" in h and "(no signal)" not in h
    ax = res.plot().axes[0]
    assert "caution: ⚠ steps 1, 3" in ax.get_title()
    assert [t.get_text().startswith("⚠ ") for t in ax.get_yticklabels()] == [True, False, True]
    silent = _attr(res.tokens, res.scores, degenerate=[{"kind": "zero_signal", "message": "raw signal is 0", "step": 1}])
    h = silent.to_html()
    assert "caution" not in _show(silent) and "caution:" not in h and "(caution)" not in h  # no signal is no caution


def test_generation_lines_say_their_scale_and_what_the_mean_is_over(monkeypatch):
    """The terminal colours each step line on its own scale (HTML and plot: one scale for all
    steps), and its ``mean over steps`` line averages each entry over the steps that see it
    only (a token generated last counts once): the header said neither."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    res = _gen(flagged=())
    colour = ANSI.sub("", _show(res, Tty()))
    assert "colours: each line on its own scale" in colour
    assert "mean over steps: each entry's mean over the steps that see it" in colour.replace("\n", " ")
    plain = _show(res)
    assert "colours:" not in plain and "mean over steps: each entry's mean" in plain.replace("\n", " ")


def test_html_values_keep_their_sign_before_the_number_after_right_to_left_words():
    """``values=True`` after a Hebrew or Arabic word, in the text laid out ``dir="auto"``: the
    bidirectional algorithm drew ``-0.36`` as ``0.36-``; the number is isolated, left to right."""
    toks = ["good", " שלום", " עולם", " مرحبا", " end"]
    res = _attr(toks, [0.5, -0.36, 0.2, -0.9, 0.1], method="saliency")
    h = res.to_html(values=True)
    assert h.count('<bdi dir="ltr">') == 5 and '<sub class="aieg-v"><bdi dir="ltr">-0.36</bdi></sub>' in h


def test_plain_text_says_the_bracketed_values_are_relative(monkeypatch):
    """Without colour the text prints score / largest |score| (``good[+1.00]``) while the scale
    line gives the scores' range and the table the scores: the scale line says which is which."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    res = _attr(["the", " movie", " is"], [0.036, 0.144, -0.072], method="saliency")
    lines = _show(res).splitlines()
    assert lines[2].startswith("scale: diverging, ±0.144") and "[±x] = score / 0.144 (the largest |score|)" in lines[2]
    assert "movie[+1.00]" in lines[3] and "+0.144" in lines[5]
    assert "[±x]" not in ANSI.sub("", _show(res, Tty()))  # coloured: no bracketed values


def test_a_nan_score_is_told_apart_from_held_fixed_and_zero():
    """An attributed token whose score is NaN: the terminal printed the bare word (no value, not
    in the table), the plot drew it in the held-fixed grey, HTML as a white (zero) cell."""
    res = _attr(["Review:", " the", " movie", " is"], [0.0, 0.4, math.nan, -0.2], method="saliency",
                attributable=[False, True, True, True])
    out = _show(res, words=False)
    assert "[Review:]" in out and "the[+1.00]" in out and "movie[nan]" in out and "is[-0.50]" in out
    h = res.to_html(words=False)
    assert h.count('<span class="aieg-w aieg-fixed"') == 1 and '<sub class="aieg-v">nan</sub>' in h
    for wrap in (None, 2):
        fig = res.plot(words=False, wrap=wrap)
        hatched = [p for p in fig.axes[0].patches if p.get_hatch()]
        assert len(hatched) == 1 and hatched[0].get_x() == (2 if wrap is None else 0) - 0.5
        key = [t.get_text() for lg in fig.legends + [fig.axes[0].get_legend()] if lg for t in lg.get_texts()]
        assert key == ["held fixed (not attributed)", "NaN score (attributed)"]


def test_plots_name_their_axes_and_greys():
    """The generation matrix had no axis labels and two greys (held fixed, the future) that
    nothing told apart; a figure of its own is pyplot's (plt.show() shows it)."""
    import matplotlib.pyplot as plt

    res = _gen(flagged=())
    res.attributable[0] = False
    res.scores[:, 0] = math.nan  # "the": held fixed
    fig = res.plot()
    assert fig.number in plt.get_fignums()
    ax = fig.axes[0]
    assert ax.get_ylabel() == "generated token" and ax.get_xlabel().startswith("context words")
    key = [t.get_text() for t in fig.legends[0].get_texts()]
    assert key == ["held fixed (not attributed)", "not yet generated at that step"]
    one = _attr(["Review:", " the", " movie"], [0.0, 0.4, 0.1], attributable=[False, True, True]).plot(words=False)
    assert one.axes[0].get_xlabel() == "tokens"
    _, own = plt.subplots()
    res.plot(ax=own)  # into axes of one's own: the legend in the axes
    assert [t.get_text() for t in own.get_legend().get_texts()] == key
    plt.close("all")


def test_a_nan_score_in_a_generation_grid_is_not_held_fixed():
    """An attributed cell whose score is NaN in a generation was drawn and titled "held fixed" in
    the HTML grid and the plot; it is marked nan (HTML) and cross-hatched with its legend entry."""
    import matplotlib.pyplot as plt

    res = _gen(flagged=())
    res.attributable[0] = False
    res.scores[:, 0] = math.nan  # "the": held fixed
    res.scores[2, 1] = math.nan  # "movie" at step 3: attributed, NaN score
    html = res.to_html(words=False)
    assert html.count('title="the: held fixed"') == 3 and "movie" in html and "NaN score" in html
    assert "'movie': NaN score" in html.replace("&#x27;", "'")
    fig = res.plot(words=False)
    hatched = [p for p in fig.axes[0].patches if p.get_hatch()]
    assert len(hatched) == 1 and (hatched[0].get_x(), hatched[0].get_y()) == (0.5, 1.5)
    key = [t.get_text() for t in fig.legends[0].get_texts()]
    assert key == ["held fixed (not attributed)", "not yet generated at that step", "NaN score (attributed)"]
    plt.close("all")


@pytest.mark.parametrize("scores, note", [([0.3, 0.3, 0.3], "near-constant"), ([1e-12, -1e-12, 0.0], "all scores ≈ 0")])
@pytest.mark.parametrize("wrap", [None, 2])
def test_a_flat_result_is_drawn_white_in_the_plot_as_in_html(scores, note, wrap):
    """A near-constant or near-zero row: HTML and the terminal draw it without colour and the
    plot's title said "no colour", but the plot coloured every cell in full."""
    import matplotlib.pyplot as plt

    res = _attr(["the", " movie", " is"], scores, method="saliency")
    assert "background: rgb(255,255,255)" in res.to_html(words=False)
    fig = res.plot(words=False, wrap=wrap)
    ax = fig.axes[0]
    assert note in ax.get_title() and "no colour" in ax.get_title()
    im = ax.images[0]
    cells = im.to_rgba(im.get_array())[0][: 3 if wrap is None else 2, :3]
    cmap_zero = im.to_rgba(0.0)[:3]
    assert all(tuple(c) == tuple(cmap_zero) for c in cells), cells  # the colour map's white at 0
    assert min(cmap_zero) > 0.9  # white (RdBu_r's middle), near white (Oranges' bottom)
    plt.close(fig)


@pytest.mark.parametrize("options, said", [({"target_fn": "logit-contrast", "contrast_target": " bad"}, "each token vs ' bad'"),
                                           ({"target_fn": "logprob", "contrast_target": None}, "each token [logprob]"),
                                           ({"target_fn": "logit", "contrast_target": None}, None)])
def test_generation_views_say_what_each_step_explains(options, said):
    """A generation explained against a contrast token or with another F: the terminal header,
    the HTML legend and the plot title said only "generation of T tokens"."""
    import matplotlib.pyplot as plt

    res = _gen(flagged=())
    res = aieg_fast.Attribution(tokens=res.tokens, token_ids=res.token_ids, scores=res.scores, method="saliency",
                                target={"kind": "generation", "id": None, "ids": [3, 4, 5], "text": " good and fun"},
                                options=options)
    head = _show(res).splitlines()[0]
    fig = res.plot()
    title = fig.axes[0].get_title().splitlines()[0]
    plt.close(fig)
    html = res.to_html()
    if said is None:
        assert head.endswith("(greedy)") and "each token" not in title and "each token" not in html
    else:
        assert head.endswith(f"generation: 3 tokens (greedy), {said}"), head
        assert f"generation of 3 tokens, {said} ·" in title, title
        assert "generation of 3 tokens, <b><bdi>" + said.replace("'", "&#x27;") + "</bdi></b>" in html


def test_mean_over_steps_without_signal_names_the_steps_flags():
    """When no step carries a signal, the ``mean over steps`` line gives the kind the steps are
    flagged with (it said ``no signal (zero_signal)`` for an all-NaN generation whose every step
    was flagged ``non_finite``), and counts the steps of another kind."""
    def _wide(res):
        out = io.StringIO()
        res.show(file=out, width=200)
        return out.getvalue()

    tokens = ["the", "movie", "is", "good", "and", "fun"]
    res = _attr(tokens, torch.full((3, 6), math.nan),
                degenerate=[{"kind": "non_finite", "message": "NaN scores", "step": t} for t in range(3)])
    mean = [ln for ln in _wide(res).splitlines() if "mean over steps" in ln and "<-" in ln]
    assert len(mean) == 1 and "no signal (non_finite): no step carries a signal: no colour" in mean[0], mean
    res.degenerate = res.degenerate[1:] + [{"kind": "zero_signal", "message": "zero", "step": 0}]
    mean = [ln for ln in _wide(res).splitlines() if "mean over steps" in ln and "<-" in ln]
    assert "no signal (non_finite): no step carries a signal, 1 step zero_signal" in mean[0], mean
