"""Edges of the result views: texts from a loaded result printed with their controls escaped,
numbers never cut at narrow widths, the sign kept on a 16-colour terminal, infinite scores at
the ends of the plot's colour scale, arguments refused before anything is drawn, integer
offsets in the DataFrame, thinned row labels of a long generation plot."""
from __future__ import annotations

import io
import math
import re

import pytest
import torch
from rich.cells import cell_len
from rich.console import Console

import aieg_fast
from aieg_fast.display.terminal import Heatmap


class Tty(io.StringIO):
    def isatty(self):
        return True


def _attr(tokens, scores, **kw):
    """A hand-built result over ``tokens`` (scores ``[L]``, or ``[T, L]`` for a generation whose
    last T tokens are the generated ones)."""
    kw.setdefault("target", {"kind": "token", "id": 5, "text": " great"})
    return aieg_fast.Attribution(tokens=list(tokens), token_ids=list(range(len(tokens))), scores=torch.as_tensor(scores),
                                 method=kw.pop("method", "saliency"), **kw)


def _gen(scale=1e-5, T=2):
    """A generation over a 3-token prompt: step t sees the prompt and the t tokens generated before it."""
    tokens = ["the", "movie", "is", "good", "and", "fun"][: 3 + T]
    g = torch.Generator().manual_seed(0)
    scores = (torch.rand(T, len(tokens), generator=g) * 4 - 1) * scale
    for t in range(T):
        scores[t, 3 + t:] = math.nan  # the future of step t
    return _attr(tokens, scores)


def _show(res, width, **kw):
    out = io.StringIO()
    res.show(file=out, width=width, **kw)
    return out.getvalue()


# ------------------------------------------------------------------ escapes (F8)
EVIL = "evil\x1b]0;TITLE\x07\x1b[2J\x1b[31mRED\u202e"


def test_show_escapes_model_method_and_flag_messages():
    """The model name, the method name and the flags' messages of a (loaded) result are printed
    with their controls as escapes, as token texts are: a result file could set the window
    title, clear the screen or hide text."""
    flags = [{"kind": "zero_signal", "message": "flat\x1b[8mHIDDEN"}]
    one = _attr(["a", "b"], [1.0, 2.0], model=EVIL, method="saliency\x1b[5m", degenerate=flags)
    caveat = _attr(["a", "b"], [1.0, 2.0], degenerate=[{"kind": "completeness", "message": "off\x1b[2Jby 50%"}])
    gen = _gen()
    gen.model, gen.method = EVIL, "m\u202e"
    gen.degenerate = [{"kind": "zero_signal", "message": "step\x1b[8mHIDDEN", "step": 1}]
    for res in (one, caveat, gen):
        for stream in (io.StringIO(), Tty()):
            res.show(file=stream, width=100)
            out = stream.getvalue()
            assert not any(bad in out for bad in ("\x1b]0;", "\x1b[2J", "\x1b[8m", "\x1b[5m", "\x1b[31m", "\u202e", "\x07"))
            if not isinstance(stream, Tty):
                assert "\x1b" not in out
    plain = _show(one, 100) + _show(gen, 100) + _show(caveat, 100)
    assert "model: evil\\x1b]0;TITLE\\x07\\x1b[2J\\x1b[31mRED\\u202e" in plain and "method: saliency\\x1b[5m" in plain
    assert "flat\\x1b[8mHIDDEN" in plain and "step\\x1b[8mHIDDEN" in plain and "off\\x1b[2Jby 50%" in plain
    assert "method: m\\u202e" in plain


# ------------------------------------------------------------------ narrow widths (F2)
NUMBER = re.compile(r"(?<![\w.(])([+-](?:\d|inf)[^\s|()]*)")


def test_generation_steps_never_cut_a_number():
    """At every width from the least (20) up, a step line shows whole entries only: each number
    printed is one of the scores as formatted, entries left out are counted in ``(+n)``, no line
    is wider than the width, and every step shows at least one entry (at 20 columns none was
    shown, at ~30 ``+3.4e-05`` was printed as ``+3.4…``)."""
    from aieg_fast.display.scale import grid

    res = _gen(1e-5, T=3)
    labels, _, rows, visible = grid(res, words=False)
    cols = [[r[j] for r in rows if not math.isnan(r[j])] for j in range(len(labels))]
    mean = [sum(c) / len(c) if c else math.nan for c in cols]
    allowed = {f"{v:+.3g}" for r in rows + [mean] for v in r if not math.isnan(v)}
    for width in range(20, 61):
        out = _show(res, width, words=False).splitlines()
        assert all(cell_len(l) <= width for l in out), width
        start = next(i for i, l in enumerate(out) if "<-" in l)
        blocks = "\n".join(out[start:]).replace("<-\n", "<- ").splitlines()  # an entry line under its head
        assert len(blocks) == len(rows) + 1, (width, blocks)
        for line, n_visible in zip(blocks, [sum(v) for v in visible] + [sum(1 for c in cols if c)]):
            entries = line.split("<-", 1)[1]
            nums = NUMBER.findall(entries)
            assert nums and set(nums) <= allowed, (width, line)
            more = re.search(r"\(\+(\d+)\)$", line)
            assert len(nums) + (int(more.group(1)) if more else 0) == min(5, n_visible), (width, line)


def test_score_table_keeps_the_number_whole_at_narrow_widths():
    """The 1-D score table shortens the bar and the word, never the number (``+1.5e-05`` was
    printed as ``+1.5e-…`` and ``+6.667`` as ``+6…`` at 20 columns)."""
    scores = [1.5e-05, 0.1, 6.667, -0.889, 1.333, -1.234e-05, 8.889]
    res = _attr(["the", "unflinchingly", "movie", "is", "good", "and", "fun"], scores)
    for width in range(20, 41):
        out = _show(res, width, words=False)
        assert all(cell_len(l) <= width for l in out.splitlines())
        table = out.splitlines()[-len(scores):]
        assert [NUMBER.findall(l)[-1] for l in table] == [f"{v:+.4g}" for v in scores], (width, table)
        assert [l.split()[-1][0] for l in table] == ["+" if v >= 0 else "-" for v in scores]  # the sign column stays


def test_header_and_scale_line_keep_each_label_with_its_value():
    """At any width the header moves a ``label: value`` pair to the next line whole (``F(x): ``
    ended one line and ``25.45`` began the next), and the plain scale line keeps its sentence
    about the bracketed values on one line where the width holds it."""
    res = _attr(["the", "movie", "is", "good"], [0.0, 5.0, 20.3, 9.0], method="integrated_gradients",
                target_prob=0.0031712, info={"F_input": 25.4512}, model="HuggingFaceTB/SmolLM2-135M-Instruct")
    pairs = ["method: integrated_gradients", "target: ' great'", "p(target): 0.00317", "F(x): 25.45"]
    for width in range(40, 101, 5):
        lines = _show(res, width).splitlines()
        assert all(cell_len(l) <= width for l in lines), width
        assert not any(line.endswith(" ") for line in lines[:2]), (width, lines[:2])  # no padding after a line's last pair
        for pair in pairs:
            assert any(pair in line for line in lines), (width, pair, lines[:3])
        if width >= 60:
            assert any(re.search(r"\[±x\] = score / \S+ \(the largest \|score\|\); the table: scores", l) for l in lines), \
                (width, lines[:5])
    assert pairs[-1] in _show(res, 80).splitlines()[1]  # what does not fit the first line starts the next


# ------------------------------------------------------------------ 16 colours (F5)
def _codes(res, system):
    """The SGR codes each token is drawn with on a console of colour ``system``."""
    console = Console(file=io.StringIO(), color_system=system, force_terminal=True, width=300, highlight=False)
    console.print(Heatmap(res, words=False))
    return dict((tok, code) for code, tok in re.findall(r"\x1b\[([0-9;]+)m(w\d+)", console.file.getvalue()))


@pytest.mark.parametrize("system", ["standard", "windows", "256", "truecolor"])
def test_sign_survives_a_16_colour_terminal(system):
    """Small positive and small negative scores got the same background on a 16-colour
    terminal (the RGB colours rounded to the palette): every negative score's colour differs
    from every positive one's, whatever the colour system."""
    vals = [-1, -0.6, -0.4, -0.3, -0.2, -0.1, 0.1, 0.2, 0.3, 0.4, 0.6, 1]
    res = _attr([f"w{i}" for i in range(len(vals))], vals)
    codes = _codes(res, system)
    assert len(codes) == len(vals)
    neg = {codes[f"w{i}"] for i, v in enumerate(vals) if v < 0}
    pos = {codes[f"w{i}"] for i, v in enumerate(vals) if v > 0}
    assert not neg & pos and len(neg | pos) >= 4  # distinct signs, and two strengths each at least


# ------------------------------------------------------------------ infinite scores in the plot (F1)
def test_plot_draws_infinite_scores_at_the_ends_of_the_scale():
    """+inf / -inf are drawn at the top / bottom of the colour scale (they were masked as "held
    fixed" grey, hiding the sign); NaN stays held fixed; in the wrapped strip too; a result
    flagged as carrying no signal draws them white like its other cells."""
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    res = _attr(["a", "b", "c", "d", "e"], [math.inf, -math.inf, 0.5, -0.25, 1.0], attributable=[True, True, True, True, False])
    for kw in ({}, {"wrap": 2}):
        im = res.plot(words=False, **kw).axes[0].images[0]
        arr = im.get_array()
        mask = np.ma.getmaskarray(arr).ravel()
        assert mask[:5].tolist() == [False, False, False, False, True], kw
        assert arr.ravel()[0] == im.norm.vmax and arr.ravel()[1] == im.norm.vmin and im.norm.vmax == 0.5
        assert np.allclose(im.to_rgba(arr)[0, 0], im.cmap(1.0))  # the strongest red, not the grey of held fixed
    flat = _attr(["a", "b", "c"], [math.inf, 0.5, -0.25], degenerate=[{"kind": "non_finite", "message": "inf"}])
    arr = flat.plot(words=False).axes[0].images[0].get_array()
    assert not np.ma.getmaskarray(arr).any() and arr.ravel().tolist() == [0.0, 0.0, 0.0]
    every = _attr(["a", "b"], [-math.inf, -math.inf])  # no finite score: white (the middle of the map), not blue
    im = every.plot(words=False).axes[0].images[0]
    assert im.get_array().ravel().tolist() == [0.0, 0.0] and im.norm(0.0) == 0.5


# ------------------------------------------------------------------ argument checks (F3, F4)
def test_heatmap_checks_its_arguments():
    """``Heatmap`` refused nothing (``top_k=-2`` showed 3 entries, ``words="no"`` the word view)."""
    res = _gen()
    for kw, msg in (({"top_k": 0}, "top_k must be a positive int, got 0"), ({"top_k": -2}, "top_k must be a positive int, got -2"),
                    ({"top_k": 2.5}, "top_k must be a positive int, got 2.5"), ({"words": "no"}, "words must be True or False, got 'no'")):
        with pytest.raises(ValueError, match=re.escape(msg)):
            Heatmap(res, **kw)
    assert "<-" in "".join(seg.text for seg in Console(file=io.StringIO(), width=80).render(Heatmap(res, words=False, top_k=2)))


def test_show_and_plot_refuse_bad_arguments_before_drawing(tmp_path):
    """A path for ``file`` (AttributeError from rich), a width below 20 (drawn at 20 silently), a
    non-Axes ``ax`` and a bad ``figsize`` (errors from matplotlib) are refused naming the
    argument and the value, before anything is written or a figure made."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = _attr(["a", "b"], [1.0, -2.0])
    with pytest.raises(TypeError, match=r"file must be a text stream .* got 'out.txt'"):
        res.show(file="out.txt")
    with pytest.raises(TypeError, match=r"file must be a text stream"):
        res.show(file=tmp_path / "out.txt")
    assert list(tmp_path.iterdir()) == []
    for width in (5, 19):
        out = io.StringIO()
        with pytest.raises(ValueError, match=rf"width must be an int >= 20 or None, got {width}"):
            res.show(file=out, width=width)
        assert out.getvalue() == ""
    assert _show(res, 20)
    before = plt.get_fignums()
    with pytest.raises(TypeError, match=r"ax must be a matplotlib Axes or None, got 'x'"):
        res.plot(ax="x")
    for bad in (-1, (0, 0), (4, -1), (float("nan"), 2), ("a", "b"), (1, 2, 3), "ab", (True, 2)):
        with pytest.raises(ValueError, match=rf"figsize must be \(width, height\) in inches, .* got {re.escape(repr(bad))}"):
            res.plot(figsize=bad)
    assert plt.get_fignums() == before
    fig = res.plot(figsize=(3, 1.5))
    assert list(fig.get_size_inches()) == [3, 1.5]
    plt.close("all")


# ------------------------------------------------------------------ DataFrame offsets (F13)
def test_dataframe_offsets_are_nullable_integers():
    """``start`` / ``end`` are integers with <NA> where unknown (they were floats with NaN, so
    ``text[start:end]`` raised TypeError)."""
    pd = pytest.importorskip("pandas")
    res = _attr(["<s>", "ab", " cd"], [0.0, 1.0, 2.0], text="ab cd", offsets=[None, [0, 2], [2, 5]],
                special=[True, False, False], attributable=[False, True, True])
    for df in (res.to_dataframe(), _attr(["<s>", "ab", " cd", "!"], torch.ones(1, 4), text="ab cd!", offsets=[None, [0, 2], [2, 5], [5, 6]],
                                         special=[True, False, False, False]).to_dataframe()):
        assert str(df["start"].dtype) == "Int64" and str(df["end"].dtype) == "Int64"
        assert pd.isna(df["start"].iloc[0]) and pd.isna(df["end"].iloc[0])
    df = res.to_dataframe()
    assert [res.text[row.start:row.end] for row in df.iloc[1:].itertuples()] == ["ab", " cd"]


# ------------------------------------------------------------------ long generation plot (F10)
def test_long_generation_plot_thins_row_labels():
    """300 steps: every n-th row is labelled (all 300 labels overlapped), and the title says so."""
    import matplotlib

    from aieg_fast.display.plots import MAX_ROW_LABELS

    matplotlib.use("Agg")
    T = 300
    res = _attr(["p0", "p1"] + [f"g{t}" for t in range(T)], torch.randn(T, T + 2))
    ax = res.plot(words=False).axes[0]
    every = -(-T // MAX_ROW_LABELS)
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    assert every > 1 and len(ticks) == -(-T // every) <= MAX_ROW_LABELS and ticks[:2] == ["g0", f"g{every}"]
    assert f"1 in {every} of the {T} rows labelled" in ax.get_title()
    short = _gen(1.0, T=3).plot(words=False).axes[0]
    assert len(short.get_yticklabels()) == 3 and "rows labelled" not in short.get_title()


# ------------------------------------------------------------------ characters no font draws
def test_plot_characters_no_font_draws_warn_once_and_only_from_the_package(tmp_path):
    """The package's warning names the characters no installed font draws; saving the figure (in
    PNG, SVG, PDF, after ``plot`` returned) adds no matplotlib warning per character ("Glyph ...
    missing from font(s) DejaVu Sans", four of them after one warning of ours): those characters
    are drawn as a box in the labels and the title. Words read from byte-level tokens without
    offsets (their characters split over tokens) are checked too: they were not checked at all."""
    import warnings

    import matplotlib
    import matplotlib.pyplot as plt
    from matplotlib.text import Text

    from aieg_fast.display.fonts import label_fonts
    from builders import byte_level_tokenizer

    matplotlib.use("Agg")
    odd = "\u4eca\u5929\U00013000\U00013001"  # two CJK characters, two Egyptian hieroglyphs
    missing = label_fonts([odd])[1]
    if not missing:
        pytest.skip("an installed font draws every character of the test")
    tok = byte_level_tokenizer()
    ids = tok(f"ok {odd} end")["input_ids"]
    byte_words = aieg_fast.Attribution(tokens=[tok.decode([i]) for i in ids], token_ids=ids, scores=torch.linspace(-1, 2, len(ids)),
                                       method="saliency", target={"kind": "token", "id": 5, "text": " great"}, model="m",
                                       raw_tokens=tok.convert_ids_to_tokens(ids))
    tokens = ["ok", odd[:2], odd[2:], "end", odd[1:3]]
    gen = torch.randn(2, 5)
    gen[0, 4] = math.nan  # the future of step 0
    views = [(byte_words, {}), (_attr(tokens, torch.randn(5)), {"words": False, "wrap": 2}),
             (_attr(tokens, gen), {"words": False})]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for res, kw in views:
            fig = res.plot(**kw)
            for ext in ("png", "svg", "pdf"):
                fig.savefig(tmp_path / f"f.{ext}")
            drawn = "".join(t.get_text() for t in fig.findobj(Text))
            assert not set(drawn) & set(missing), kw
            plt.close(fig)
    glyphs = [str(w.message) for w in seen if "missing from font" in str(w.message)]
    assert not glyphs, glyphs
    ours = [str(w.message) for w in seen if "no installed font draws" in str(w.message)]
    assert len(ours) == 1 and repr(missing) in ours[0], ours  # a set of characters no other test uses


# ------------------------------------------------------------------ saving where no file can be written
@pytest.mark.parametrize("folder", ["/proc", "/sys"])
def test_save_where_the_system_refuses_names_the_path_and_reason(folder, tmp_path):
    """A folder that exists but takes no new file (``/proc``: the system's bare '[Errno 2] No such
    file or directory') gets the package's message naming the path, as a missing folder does;
    the error keeps its kind and errno."""
    import os

    if not os.path.isdir(folder):
        pytest.skip(f"no {folder} here")
    res = _attr(["a", "b"], [1.0, 2.0])
    for save in (res.save, lambda p: aieg_fast.save_attributions([res], p)):
        with pytest.raises(OSError, match=rf"^path '{folder}/x\.json': the file cannot be written there \(.+\)$") as err:
            save(f"{folder}/x.json")
        assert isinstance(err.value.errno, int)
