"""HTML (legend, scale, fixed tokens, generation grid, notebook display), the terminal view
(visible-width wrapping, near-zero rows, hidden whitespace), plots, DataFrames and saving
several results in one file."""
from __future__ import annotations

import html
import io
import json
import math
import re

import pytest
import torch
from rich.cells import cell_len
from rich.console import Console

import aieg_fast
from aieg_fast.display.scale import grid, make_scale, strip
from aieg_fast.display.terminal import Heatmap
from builders import byte_level_tokenizer

ANSI = re.compile(r"\x1b\[[0-9;]*m")
TEXT = "café naïve 今天 😀 ok."


class Tty(io.StringIO):
    def isatty(self):
        return True


def _result(text=TEXT, scores=None, method="saliency"):
    tok = byte_level_tokenizer()
    enc = tok(text, return_offsets_mapping=True)
    ids = enc["input_ids"]
    L = len(ids)
    return aieg_fast.Attribution(
        tokens=[tok.decode([i]) for i in ids], token_ids=ids,
        scores=torch.linspace(-1, 2, L) if scores is None else scores, method=method,
        target={"kind": "token", "id": 5, "text": " great"}, model="tiny-gpt2",
        raw_tokens=tok.convert_ids_to_tokens(ids), text=text, offsets=[list(o) for o in enc["offset_mapping"]],
    )


@pytest.fixture(scope="module")
def gen(tiny_gpt2):
    return tiny_gpt2.attribute_generation("The capital is Paris", generated_text=".\nIs it", method="saliency", template="Q: {text}")


def test_html_next_token():
    res = _result()
    h = res.to_html()
    words = res.words()[0]
    assert h.count("<span") == len(words) and all(w.replace("&", "&amp;") in h for w in words)
    assert "\ufffd" not in h and "Ã" not in h
    assert "aieg-legend" in h and "saliency" in h and "tiny-gpt2" in h and "great" in h
    assert "diverging" in h and "−" in h and "+" in h  # signed scores: diverging scale centred at 0
    assert "color: #111" in h and "background: #fff" in h  # explicit colours for dark themes
    assert "http" not in h and "<script" not in h and "<link" not in h  # self-contained
    assert res._repr_html_().count("<span") == len(words)
    pos = _result(scores=torch.linspace(0, 1, len(res.tokens)))
    assert "sequential" in pos.to_html()
    assert "<sub" in res.to_html(values=True)


def test_html_fixed_tokens_distinct_from_zero(tiny_gpt2):
    res = tiny_gpt2.attribute("a charming journey", method="saliency", template="Review: {text} Sentiment:")
    h = res.to_html()
    n_fixed = sum(1 for g in res.word_groups() if not any(res.attributable[i] for i in g))
    assert n_fixed >= 2 and h.count('<span class="aieg-w aieg-fixed"') == n_fixed
    zero = _result(scores=torch.zeros(len(_result().tokens)))
    assert '<span class="aieg-w aieg-fixed"' not in zero.to_html()  # zeros are not drawn as fixed


def test_html_generation_grid(gen):
    h = gen.to_html()
    T = gen.scores.shape[0]
    labels = gen.word_labels()
    assert h.count("<tr>") == T and h.count('<tr class="aieg-head">') == 1
    future = sum(1 for t in range(T) for g in gen.word_groups() if g[0] >= gen.prompt_length + t)
    assert h.count('class="aieg-future"') == future
    assert "held fixed" in h and "Q:" in labels  # template word shown as held fixed
    assert "⏎" in h and "title=" in h and "Paris." not in h
    assert gen._repr_html_().count("<tr>") == T
    # a wide grid scrolls inside its own box, the row labels (generated tokens) sticky on the left
    assert re.search(r'<div class="aieg-scroll"><table>.*</table></div>', h, re.S)
    assert re.search(r"\.aieg-scroll \{ overflow-x: auto;", h) and "th:first-child { position: sticky; left: 0;" in h
    # the legend shows the answer's newline as it is (HTML had collapsed it into a space)
    assert '<bdi class="aieg-text">.\nIs it</bdi>' in h and re.search(r"\.aieg-text \{ white-space: pre-wrap; \}", h)


def _console(width, color=True):
    """A console of ``width`` columns, truecolor (or no colour), writing nowhere."""
    return Console(file=io.StringIO(), width=width, color_system="truecolor" if color else None)


def _lines(res, width, color=True, **kw):
    """The lines of the terminal heatmap as rich segments (text, style)."""
    return _console(width, color).render_lines(Heatmap(res, **kw), pad=False, new_lines=False)


def _text(line):
    return "".join(seg.text for seg in line)


def _cells(line):
    """The segments drawn on a background colour that hold text (not the legend's colour bar)."""
    return [seg for seg in line if seg.style and seg.style.bgcolor and seg.text.strip()]


def test_show_wraps_on_visible_width():
    res = _result(text="the movie is great and the actors are charming and the story is good " * 2)
    labels, vals, _ = strip(res, words=True)
    scale = make_scale(vals)
    for width in (40, 80):
        lines = _lines(res, width)
        assert all(cell_len(_text(l)) <= width for l in lines)
        body = [l for l in lines if _cells(l) and not _text(l).startswith("  ")]  # not the score table
        assert len(body) > 1 and max(cell_len(_text(l).rstrip()) for l in body) > width - 15  # filled, not cut early
        cells = [seg for l in body for seg in _cells(l)]
        assert [seg.text for seg in cells] == labels
        for seg, v in zip(cells, vals):  # each word on its score's colour, with readable ink
            assert seg.style.bgcolor.triplet == scale.rgb(v) and seg.style.color.triplet == scale.ink(v)
        assert len({seg.style.bgcolor.triplet for seg in cells}) > 5


def test_show_colour_only_on_a_colour_terminal(monkeypatch):
    res = _result(text="the movie is great and the actors are charming " * 2)
    for var in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("COLORTERM", "truecolor")
    monkeypatch.setenv("TERM", "xterm-256color")
    buf = Tty()
    res.show(file=buf, width=40)
    out = buf.getvalue()
    assert ";48;2;" in out and "[+1.00]" not in out  # a TTY: colours instead of values
    assert all(cell_len(l) <= 40 for l in ANSI.sub("", out).splitlines())
    for stream, no_color in ((io.StringIO(), None), (Tty(), "1")):  # not a terminal; NO_COLOR
        if no_color:
            monkeypatch.setenv("NO_COLOR", no_color)
        res.show(file=stream, width=40)
        out = stream.getvalue()
        assert "\x1b[" not in out and "[+1.00]" in out and "scale: diverging" in out


def test_show_header_and_legend():
    res = _result()
    text = [_text(l) for l in _lines(res, 200, color=False)]
    assert text[0].rstrip() == "method: saliency   target: ' great'" and text[1].rstrip() == "model: tiny-gpt2"
    assert text[2].startswith("scale: diverging, ±")
    res.target_prob = 0.25
    res.info["F_input"] = 1.5
    head = _text(_lines(res, 200, color=False)[0])
    assert "   p(target): 0.25" in head and "   F(x): 1.5" in head
    bar = [seg.style.bgcolor.triplet for seg in _lines(res, 200)[2] if seg.style and seg.style.bgcolor]
    scale = make_scale(strip(res)[1])
    assert bar[0] == scale.rgb(-scale.vmax) and bar[-1] == scale.rgb(scale.vmax)  # colour bar, blue to red


def test_a_target_that_decodes_to_a_replacement_character_shows_its_id():
    """A lone byte of a UTF-8 character decodes to U+FFFD: two such targets read alike, so the
    views add the id (the terminal header, the HTML legend and the plot title share it)."""
    res = _result()
    res.target = {"kind": "token", "id": 110, "text": "\ufffd", "contrast_id": 111, "contrast_text": "\ufffd"}
    head = _text(_lines(res, 200, color=False)[0])
    assert "target: '\ufffd' (id 110) vs '\ufffd' (id 111)" in head
    assert "(id 110) vs" in res.to_html()
    res.target = {"kind": "token", "id": 5, "text": " great"}
    assert "(id" not in _text(_lines(res, 200, color=False)[0])


def test_show_width_from_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "30")
    buf = io.StringIO()
    _result().show(file=buf)
    lines = buf.getvalue().splitlines()
    assert len(lines) > 4 and all(cell_len(l) <= 30 for l in lines)
    buf = io.StringIO()
    _result().show(file=buf, width=70)  # the argument wins
    assert max(cell_len(l) for l in buf.getvalue().splitlines()) > 30


def test_near_zero_row_is_said_not_coloured():
    res = _result(scores=torch.full((len(_result().tokens),), 1e-12))
    lines = _lines(res, 80)
    out = "\n".join(_text(l) for l in lines)
    assert "≈ 0" in out and "+1.00" not in out
    assert not any(seg.style and seg.style.bgcolor for l in lines for seg in l)
    assert "≈ 0" in res.to_html() and "rgb(255,0,0)" not in res.to_html()
    const = _result(scores=torch.full((len(_result().tokens),), 0.5))
    assert "near-constant" in const.to_html(words=False)
    lines = _lines(const, 80, words=False)
    assert "near-constant" in _text(lines[2])
    assert not any(seg.style and seg.style.bgcolor for l in lines for seg in l)


def test_hidden_whitespace_is_shown():
    base = _result(text="it is good ")
    scores = torch.ones(len(base.tokens))
    scores[-1] = 11.5  # the largest score on the trailing space token
    res = _result(text="it is good ", scores=scores)
    assert res.words()[0][-1] == "␣"
    buf = io.StringIO()
    res.show(file=buf)
    out = buf.getvalue()
    assert "␣[+1.00]" in out and "␣ +11.5" in out
    assert "␣</span>" in res.to_html()


def test_show_fixed_words_in_brackets(tiny_gpt2):
    res = tiny_gpt2.attribute("a charming journey", method="saliency", template="Review: {text} Sentiment:")
    labels, _, fixed = strip(res)
    held = [lab for lab, fx in zip(labels, fixed) if fx]
    assert "Review:" in held
    lines = _lines(res, 80)
    out = " ".join(_text(l) for l in lines)
    assert all(f"[{lab}]" in out for lab in held)
    assert not any(seg.text == f"[{lab}]" and seg.style and seg.style.bgcolor for l in lines for seg in l for lab in held)


def test_generation_show(gen):
    buf = io.StringIO()
    gen.show(file=buf, width=80)
    steps = [l for l in buf.getvalue().splitlines() if "<-" in l and "mean" not in l]
    assert len(steps) == gen.scores.shape[0] and "⏎" in steps[1]
    assert all(cell_len(l) <= 80 for l in steps)
    labels, _, rows, visible = grid(gen, words=True)
    lines = [l for l in _lines(gen, 80) if "<-" in _text(l) and "mean" not in _text(l)]
    assert len(lines) == len(rows)
    for line, row, vis in zip(lines, rows, visible):  # each step on its own scale, largest |score| first
        finite = sorted(((labels[i], v) for i, v in enumerate(row) if vis[i] and not math.isnan(v)), key=lambda p: -abs(p[1]))
        scale = make_scale([v for _, v in finite])
        cells = _cells(line)
        assert 1 <= len(cells) <= 5
        for seg, (lab, v) in zip(cells, finite):
            assert lab.startswith(seg.text.rstrip("…")) and seg.style.bgcolor.triplet == scale.rgb(v)
    narrow = [_text(l) for l in _lines(gen, 44) if "<-" in _text(l)]  # entries that do not fit are left out, not cut,
    assert all(cell_len(l) <= 44 and re.search(r" [+-][0-9.e+-]+( \(\+\d\))?$", l) for l in narrow)  # and counted
    for l, row, vis in zip(narrow, rows, visible):
        n_top = min(5, sum(1 for i, v in enumerate(row) if vis[i] and not math.isnan(v)))
        more = re.search(r" \(\+(\d)\)$", l)
        assert l.count(" | ") + 1 + (int(more.group(1)) if more else 0) == n_top
    assert any(re.search(r" \(\+\d\)$", l) for l in narrow)
    assert any(l.count(" | ") < 4 for l in narrow)


def test_plot_strip_and_matrix(tmp_path, gen):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    for res in (_result(), gen):
        fig = res.plot()
        assert isinstance(fig, Figure)
        for ext in ("png", "svg"):
            fig.savefig(tmp_path / f"x.{ext}")
            assert (tmp_path / f"x.{ext}").stat().st_size > 1000
    img = gen.plot(words=False).axes[0].images[0].get_array()
    assert img.shape == (gen.scores.shape[0], len(gen.tokens))
    # the title names the target as the other views do: with its contrast and F
    res = _result()
    res.target = dict(res.target, contrast_id=7, contrast_text=" bad")
    res.options = {"target_fn": "label_logprob"}
    assert "target ' great' vs ' bad' [label_logprob]" in res.plot().axes[0].get_title()
    # with its label set, the header names it (it named only the target word, not what F sums over)
    res.options = {"target_fn": "label_logprob", "label_set": [" great", " bad"]}
    assert "[label_logprob of ' great', ' bad']" in res.plot().axes[0].get_title()
    assert "[label_logprob of ' great', ' bad']" in html.unescape(res.to_html())
    res.options = {"target_fn": "label_logprob", "label_set": [f" w{i}" for i in range(150)]}  # a line, not 150 labels
    assert "[label_logprob of ' w0', ' w1', ' w2', ' w3', ' w4', ' w5' and 144 more]" in res.plot().axes[0].get_title()


def test_to_dataframe(gen):
    pd = pytest.importorskip("pandas")
    res = _result()
    df = res.to_dataframe()
    assert isinstance(df, pd.DataFrame) and len(df) == len(res.tokens)
    assert {"position", "token", "token_id", "score", "attributable", "start", "end"} <= set(df.columns)
    assert df["score"].sum() == pytest.approx(float(res.scores.sum()), rel=1e-5)
    dw = res.to_dataframe(words=True)
    assert list(dw["word"]) == res.words()[0]
    dg = gen.to_dataframe()
    T, Lp = gen.scores.shape[0], gen.prompt_length
    assert len(dg) == sum(Lp + t for t in range(T)) and {"step", "generated"} <= set(dg.columns)


def test_save_and_load_several(tmp_path, gen):
    a, b = _result(), _result(text="日本語のテキスト 🎉")
    p = tmp_path / "all.json"
    aieg_fast.save_attributions([a, gen, b], p)
    d = json.loads(p.read_text(encoding="utf-8"))
    assert d["format"] == "aieg_fast.attributions" and len(d["results"]) == 3
    back = aieg_fast.load_attributions(p)
    assert [r.words()[0] for r in back] == [r.words()[0] for r in (a, gen, b)]
    torch.testing.assert_close(back[1].scores, gen.scores, equal_nan=True)
    assert back[1].is_generation and back[2].text == "日本語のテキスト 🎉"
    with pytest.raises(ValueError, match="load_attributions"):
        aieg_fast.load_attribution(p)
    a.save(tmp_path / "one.json")
    assert len(aieg_fast.load_attributions(tmp_path / "one.json")) == 1
    with pytest.raises(TypeError, match="not an Attribution"):
        aieg_fast.save_attributions([a, "x"], p)
    for body in (b"tokens,scores\n1,2\n", b"\xff\xfe{}"):  # a CSV, not UTF-8
        (tmp_path / "bad.json").write_bytes(body)
        for load in (aieg_fast.load_attribution, aieg_fast.load_attributions):
            with pytest.raises(ValueError, match=r"bad.json is not a JSON file of attributions \((JSONDecodeError|UnicodeDecodeError)"):
                load(tmp_path / "bad.json")
    lines = tmp_path / "attributions.jsonl"  # attribute-dataset's records, one per line: the error says how to read them
    lines.write_text("".join(json.dumps(dict(r.to_dict(), index=i)) + "\n" for i, r in enumerate((a, b))), encoding="utf-8")
    for load in (aieg_fast.load_attribution, aieg_fast.load_attributions):
        with pytest.raises(ValueError, match=r"one JSON record per line .*Attribution\.from_dict\(json\.loads\(line\)\)"):
            load(lines)
    read = [aieg_fast.Attribution.from_dict(json.loads(ln)) for ln in lines.read_text(encoding="utf-8").splitlines()]
    assert [r.words()[0] for r in read] == [r.words()[0] for r in (a, b)]
    # results compare by identity: == and `in` work (a dataclass __eq__ on the scores tensor raised)
    back = aieg_fast.load_attribution(tmp_path / "one.json")
    assert a == a and a != back and back in [b, back] and [b, back].index(back) == 1 and len({a, back}) == 2


def test_save_that_fails_leaves_the_old_file(tmp_path, gen):
    """A result that cannot be serialised (a value JSON does not know in ``info``) raises before
    anything is written: the file saved before at that path is intact, and no temporary is left."""
    a = _result()
    p = tmp_path / "one.json"
    a.save(p)
    before = p.read_bytes()
    a.info["user_value"] = object()
    with pytest.raises(TypeError):
        a.save(p)
    with pytest.raises(TypeError):
        aieg_fast.save_attributions([gen, a], p)
    assert p.read_bytes() == before and sorted(x.name for x in tmp_path.iterdir()) == ["one.json"]


def test_save_numpy_and_tensor_values_in_info(tmp_path):
    """Values a user puts into ``info`` from numpy or torch are written as numbers and lists
    (a numpy scalar raised TypeError); a non-finite one is written as null and reads back as None."""
    import numpy as np

    a = _result()
    a.info.update(mean=np.float32(0.25), count=np.int64(3), grid=np.arange(3), t=torch.tensor([1.5, float("nan")]),
                  bad=float("inf"))
    a.save(tmp_path / "one.json")
    back = aieg_fast.load_attribution(tmp_path / "one.json")
    assert back.info["mean"] == 0.25 and back.info["count"] == 3 and back.info["grid"] == [0, 1, 2]
    assert back.info["t"] == [1.5, None] and back.info["bad"] is None


def test_save_writes_through_links_and_pipes(tmp_path, gen):
    """A link to a file: the file is written and the link stays a link. A named pipe (as
    /dev/stdout can be): written through to its reader. Before, both were replaced by a new
    regular file (as root, a device node too)."""
    import os
    import threading

    a = _result()
    target, link = tmp_path / "target.json", tmp_path / "link.json"
    target.write_text("{}")
    link.symlink_to(target)
    a.save(link)
    assert link.is_symlink() and aieg_fast.load_attribution(target).tokens == a.tokens
    aieg_fast.save_attributions([gen, a], link)
    assert link.is_symlink() and len(aieg_fast.load_attributions(target)) == 2
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, encoding="utf-8").read()), daemon=True)
    reader.start()
    a.save(fifo)
    reader.join(timeout=30)
    assert not fifo.is_file() and json.loads(got[0])["tokens"] == a.tokens


def test_html_writes_bidi_overrides_visibly(gen):
    """A right-to-left override in a token reversed the rest of the HTML line in a browser (the
    words after it drawn mirrored, beside the wrong colours and values): it is written as the
    escape the terminal view shows, as are other control characters."""
    res = _result(text="good \u202eevil movie \x1b[31m is bad")
    for h in (res.to_html(), res.to_html(values=True, toggle=True), res._repr_html_()):
        assert "\u202e" not in h and "\x1b" not in h and "\\u202e" in h and "\\x1b" in h
    g = gen.to_html()
    assert "\u202e" not in g


def test_html_words_tokens_toggle(gen):
    res = _result()
    h = res.to_html(toggle=True)
    n_words, n_tokens = len(res.words()[0]), len(res.tokens)
    assert h.count("<span") == n_words + n_tokens  # both views are in the page
    assert h.count('type="checkbox"') == 1 and "<script" not in h
    assert h.index('class="aieg-view-words"') < h.index('class="aieg-view-tokens"')
    assert "input:checked ~ .aieg-view-tokens { display: block; }" in h
    g = gen.to_html(toggle=True)
    assert g.count("<table") == 2 and g.count('type="checkbox"') == 1


def test_target_probability_recorded_and_in_the_legend(tiny_gpt2, tmp_path):
    """When the call computed the model's full output (a predicted target), the result records
    p(target) — equal to the model's softmax — and the HTML legend shows it; with a given target
    and a method whose path scores only the target (IG), too."""
    ex = tiny_gpt2
    text = "the movie is good"
    res = ex.attribute(text, method="saliency")
    with torch.no_grad():
        p = torch.softmax(ex.model(torch.tensor([res.token_ids])).logits[0, -1], -1)
    assert abs(res.target_prob - float(p[res.target["id"]])) < 1e-5
    assert f"p(target) = {res.target_prob:.3g}" in res.to_html()
    res.save(tmp_path / "r.json")
    assert aieg_fast.load_attribution(tmp_path / "r.json").target_prob == pytest.approx(res.target_prob)
    ig = ex.attribute(text, method="integrated_gradients", target=res.target["id"], n_steps=4)
    assert ig.target_prob == pytest.approx(res.target_prob, rel=1e-5) and f"p(target) = {ig.target_prob:.3g}" in ig.to_html()


def test_view_arguments_are_checked():
    res = _result()
    for bad in (0, -5, 19, 2.5, "80"):
        with pytest.raises(ValueError, match=rf"width must be an int >= 20 or None, got {bad!r}"):
            res.show(file=io.StringIO(), width=bad)
    with pytest.raises(ValueError, match=r"top_k must be a positive int, got 0"):
        res.show(file=io.StringIO(), top_k=0)
    with pytest.raises(ValueError, match=r"k must be a positive int, got -1"):
        res.top_tokens(-1)
    assert len(res.top_tokens(2)) == 2
    with pytest.raises(ValueError, match=r"row applies to a generation result .* got row=0"):
        res.top_tokens(2, row=0)


def test_custom_target_fn_header_names_the_function_not_a_token(tiny_gpt2):
    def margin(logits):
        return logits[:, 5] - logits[:, 7]

    res = tiny_gpt2.attribute("the movie is good", method="saliency", target_fn=margin)
    buf = io.StringIO()
    res.show(file=buf, width=120)
    head = buf.getvalue().splitlines()[0]
    assert "target: F = custom:margin" in head and "p(target)" not in head
    h = res.to_html()
    assert "F = custom:margin" in h and "p(target)" not in h
    plain = tiny_gpt2.attribute("the movie is good", method="saliency", target_fn="logprob")
    assert "p(target)" in plain.to_html()  # a token target keeps its probability


def test_view_flags_must_be_bools():
    """words / values / toggle given as strings (``"no"`` is truthy) are refused, naming the flag."""
    res = _result()
    for call, name in ((lambda: res.to_html(values="no"), "values"), (lambda: res.to_html(words="no"), "words"),
                       (lambda: res.to_html(toggle=1), "toggle"), (lambda: res.show(file=io.StringIO(), words="no"), "words"),
                       (lambda: res.plot(words="no"), "words"), (lambda: res.to_dataframe(words=0), "words")):
        with pytest.raises(ValueError, match=rf"{name} must be True or False"):
            call()


def test_html_lays_out_right_to_left_text_from_the_right(gen):
    """The text of a 1-D result takes its direction from its first strong character (dir="auto"),
    and the target, prompt and generated text of the legends are isolated (<bdi>), so a Hebrew or
    Arabic text reads from the right and does not reorder the legend around it."""
    res = _result()
    res.target = {"kind": "token", "id": 5, "text": " \u05d8\u05d5\u05d1"}
    html = res.to_html()
    assert '<div class="aieg-text" dir="auto">' in html and "<bdi>&#x27; \u05d8\u05d5\u05d1&#x27;</bdi>" in html
    assert "prompt: <b><bdi class=\"aieg-text\">" in gen.to_html() and "generated: <b><bdi class=\"aieg-text\">" in gen.to_html()


def test_plot_title_of_a_short_text_fits_its_figure():
    """Two tokens gave a figure narrower than its title: the saved plot cut the method name off."""
    import matplotlib

    matplotlib.use("Agg")
    res = _result("the movie", method="integrated_gradients")
    res.model = "/tmp/some/long/path/to/a/tiny_llama_model"
    fig = res.plot()
    fig.canvas.draw()
    box = fig.axes[0].title.get_window_extent()
    assert box.x0 >= 0 and box.x1 <= fig.bbox.x1, (box, fig.bbox)


def test_plot_labels_fall_back_to_a_font_that_draws_them(tmp_path, monkeypatch):
    """A character the default font lacks is drawn with an installed fallback font (here
    STIXGeneral, shipped with matplotlib, for a Fraktur letter); one that no installed font draws
    is named once. Before, every label used the default font alone (boxes for CJK)."""
    import warnings

    import matplotlib

    from aieg_fast.display.fonts import label_fonts

    matplotlib.use("Agg")

    def result(first):
        return aieg_fast.Attribution(tokens=[first, " is", " good"], token_ids=[1, 2, 3], scores=torch.tensor([0.1, -0.2, 0.3]),
                                     method="saliency", target={"kind": "token", "id": 5, "text": " fine"}, model="m")

    assert label_fonts(["plain text"]) == (None, "")
    plain = result("a").plot()
    assert "STIXGeneral" not in plain.axes[0].get_xticklabels()[0].get_fontfamily()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no warning of ours: a font draws it
        fig = result("\U0001d504").plot()
    assert fig.axes[0].get_xticklabels()[0].get_fontfamily()[-1] == "STIXGeneral"
    fig.savefig(tmp_path / "f.png")
    if label_fonts(["\u732b"])[1] != "\u732b":
        pytest.skip("a CJK font is installed here")
    from aieg_fast.display import plots

    monkeypatch.setattr(plots, "_WARNED_MISSING", set())  # whatever plots ran before in this process
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(3):  # named once, at this line (it came at every plot, from result.py)
            result("\u732b").plot().savefig(tmp_path / "c.png")
    ours = [w for w in seen if "no installed font draws" in str(w.message)]
    assert len(ours) == 1 and ours[0].filename == __file__, [(str(w.message), w.filename) for w in ours]
    assert "1 character(s) of the labels ('\u732b')" in str(ours[0].message)


def test_plot_draws_dollar_signs_as_typed(tmp_path):
    """Tokens with ``$...$`` (LaTeX in the prompt) are drawn as typed, not parsed as math text
    (which raised for ``$$E=mc^2$$``)."""
    import matplotlib

    matplotlib.use("Agg")
    tok = byte_level_tokenizer()
    text = "a $$E=mc^2$$ b $x^2$"
    ids = tok(text)["input_ids"]
    res = aieg_fast.Attribution(tokens=[tok.decode([i]) for i in ids], token_ids=ids, scores=torch.linspace(-1, 1, len(ids)),
                                method="saliency", target={"kind": "token", "id": 5, "text": " $y$"}, model="m", text=text)
    res.plot(words=False).savefig(tmp_path / "t.png")
    fig = res.plot()  # one word "$$E=mc^2$$": math text would raise
    fig.savefig(tmp_path / "x.png")
    labels = [t for t in fig.axes[0].get_xticklabels()]
    assert all(not t.get_parse_math() for t in labels) and "$" in "".join(t.get_text() for t in labels)
    assert not fig.axes[0].title.get_parse_math()


def test_html_ids_differ_between_processes():
    """Each process's snippets carry a random part in their ids, so two runs' snippets on one page
    (or a notebook rerun after a restart) do not share the ids the CSS and the switch use."""
    import subprocess
    import sys

    code = ("import torch, aieg_fast, re; r = aieg_fast.Attribution(tokens=['a'], token_ids=[1], scores=torch.ones(1), "
            "method='m', target={'kind': 'token', 'id': 1}); print(re.search(r'id=\"([^\"]+)\"', r.to_html(toggle=True)).group(1))")
    ids = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() for _ in range(2)}
    assert len(ids) == 2 and all(i.startswith("aieg-fast-") for i in ids)


def test_save_and_load_errors_name_the_path(tmp_path):
    res = _result()
    with pytest.raises(ValueError, match="path must name a file to write"):
        res.save(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"the folder '.*nodir' does not exist"):
        res.save(tmp_path / "nodir" / "x.json")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "other.json").write_text('{"a": 1}')
    for load in (aieg_fast.load_attribution, aieg_fast.Attribution.load):
        with pytest.raises(ValueError, match=r"is not a saved attribution .* got dict with keys \['a'\]"):
            load(tmp_path / "other.json")
    # JSON close to a result but not one: ValueError naming the file (were KeyError, RuntimeError)
    for i, bad in enumerate(('{"tokens": ["a", "b"], "scores": [1, 2]}', '{"tokens": ["a"], "token_ids": [1], "scores": [[1, 2], [3]]}',
                             '{"format": "aieg_fast.attributions", "results": [{"tokens": ["a"], "scores": [1]}]}')):
        (tmp_path / f"bad{i}.json").write_text(bad)
        with pytest.raises(ValueError, match=rf"bad{i}.json( result 0)? is not a saved attribution \("):
            (aieg_fast.load_attributions if i == 2 else aieg_fast.load_attribution)(tmp_path / f"bad{i}.json")
    with pytest.raises(TypeError, match=r"got one Attribution; save it with its .save\(path\), or pass \[result\]"):
        aieg_fast.save_attributions(res, tmp_path / "all.json")


@pytest.mark.parametrize("field, value, match", [
    ("target", "x", r"target must be a dict, got 'x'"),
    ("info", [1], r"info must be a dict, got \[1\]"),
    ("degenerate", [{"kind": "zero_signal"}], r"degenerate\[0\] must be a dict with a 'kind' and a 'message'"),
    ("offsets", "pairs", r"offsets\[0\] must be None or a \[start, end\) pair of ints within text \(19 characters\), got \[0\]"),
    ("offsets", "reversed", r"offsets\[0\] must be None or a \[start, end\) pair .* got \[5, 2\]"),
    ("offsets", "outside", r"offsets\[0\] must be None or a \[start, end\) pair .* got \[0, 99\]"),
    ("attributable", "no", r"attributable must hold True / False per token, got 'no'"),
])
def test_a_hand_edited_file_is_refused_at_load_not_in_the_views(tmp_path, field, value, match):
    """A saved result edited by hand loaded and then failed in to_html() / show() with an
    AttributeError or KeyError, or at load with a bare IndexError; it is refused at load, naming
    the file and the field."""
    d = _result().to_dict()
    spoiled = {"pairs": [0], "reversed": [5, 2], "outside": [0, 99], "no": "no"}
    d[field] = [spoiled[value]] + d[field][1:] if isinstance(value, str) and value in spoiled else value
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ValueError, match=r"edited.json is not a saved attribution \(ValueError: " + match):
        aieg_fast.load_attribution(path)


def test_show_infinite_score():
    """An infinite score (e.g. edited by hand, no degenerate flag) is printed with a full bar
    (the bar length raised OverflowError)."""
    res = _result(scores=None)
    res.scores[1] = float("inf")
    out = io.StringIO()
    res.show(file=out, words=False, width=70)
    assert "+inf" in out.getvalue()


@pytest.mark.parametrize("fill", [float("inf"), float("nan")])
def test_no_finite_score_is_said_by_every_view(fill):
    """Scores none of which is finite: every view says so (all +inf was called "all scores ≈ 0",
    and the plot said nothing for all NaN)."""
    res = _result(scores=None)
    res.scores[:] = fill
    want = "no finite score (all NaN)" if fill != fill else "no finite score (all ±inf or NaN)"
    out = io.StringIO()
    res.show(file=out, words=False, width=70)
    assert want in out.getvalue() and want in res.to_html()
    pytest.importorskip("matplotlib")
    assert want in res.plot(words=False).axes[0].get_title()


def test_show_escapes_terminal_controls():
    """A token holding an escape sequence, a NUL or a right-to-left override is printed as escapes
    (a terminal would otherwise act on them), in the text, the table and the header."""
    tokens = ["ok", "\x1b[2J", "a\u202eb", "\x00"]
    res = aieg_fast.Attribution(tokens=tokens, token_ids=[1, 2, 3, 4], scores=torch.tensor([1.0, 2.0, -1.0, 0.5]),
                                method="saliency", target={"kind": "token", "id": 5, "text": "\x1b[31m"})
    out = io.StringIO()
    res.show(file=out, words=False, width=80)
    text = out.getvalue()
    assert "\x1b" not in text and "\u202e" not in text and "\x00" not in text
    assert "\\x1b[2J" in text and "a\\u202eb" in text and "\\x00" in text and "\\x1b[31m" in text


def test_long_strip_wraps_into_labelled_rows_and_wide_matrix_thins_labels(tiny_gpt2):
    """A long prompt's strip is wrapped into rows (each cell labelled inside, the same values in
    text order); a short one stays one row; a generation matrix of many columns labels 1 in n."""
    import matplotlib
    import numpy as np
    from transformers import GPT2Config, GPT2LMHeadModel

    from aieg_fast.display.plots import MAX_COLUMN_LABELS, WRAP_AFTER, WRAP_ROW

    matplotlib.use("Agg")
    long = _result(" ".join(["the movie is good and the actors are great"] * 8))
    n = len(long.tokens)
    assert n > WRAP_AFTER
    ax = long.plot(words=False).axes[0]
    img = ax.images[0].get_array()
    assert img.shape == (-(-n // WRAP_ROW), WRAP_ROW)
    assert np.allclose(np.ma.filled(img, np.nan).ravel()[:n], long.scores.numpy(), equal_nan=True)
    assert img.mask.ravel()[n:].all()  # past the end: empty, not a score
    assert len(ax.texts) == n and [t.get_position() for t in ax.texts[:2]] == [(0, 0), (1, 0)]
    assert ax.texts[WRAP_ROW].get_position() == (0, 1)  # the next row starts where the first ends
    assert long.plot(words=False, wrap=7).axes[0].images[0].get_array().shape == (-(-n // 7), 7)
    assert _result().plot(words=False).axes[0].images[0].get_array().shape == (1, len(_result().tokens))
    for bad in (0, 2.5, True, "30"):
        with pytest.raises(ValueError, match="wrap must be a positive int"):
            long.plot(wrap=bad)
    tok = tiny_gpt2.tokenizer
    wide = aieg_fast.load_model(GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=len(tok), n_positions=300)).eval(), tok)
    gen = wide.attribute_generation(" ".join(["the movie is good"] * 14), generated_text=" ok", method="saliency")
    with pytest.raises(ValueError, match="wrap applies to a 1-D result"):
        gen.plot(wrap=10)
    ax = gen.plot(words=False).axes[0]
    cols = ax.images[0].get_array().shape[1]
    every = -(-cols // MAX_COLUMN_LABELS)
    assert cols > MAX_COLUMN_LABELS and len(ax.get_xticks()) == -(-cols // every) <= MAX_COLUMN_LABELS
    assert f"1 in {every} of the {cols} columns labelled" in ax.get_title()


@pytest.mark.parametrize("field, value", [("attributable", [True]), ("special", [False]), ("raw_tokens", ["a"]),
                                          ("attributable", [True, True, False])])
def test_per_token_lists_of_another_length_are_refused(field, value):
    """attributable, special and raw_tokens of the wrong length were accepted: show(), to_html()
    and words() then failed with IndexError (or read the wrong tokens)."""
    kw = dict(tokens=["a", "b"], token_ids=[1, 2], scores=torch.tensor([0.1, 0.2]), method="saliency",
              target={"kind": "token", "id": 0, "text": "x"})
    with pytest.raises(ValueError, match=rf"^{field} has {len(value)} entries but there are 2 tokens$"):
        aieg_fast.Attribution(**kw, **{field: value})
    assert aieg_fast.Attribution(**kw, **{field: []}).attributable == [True, True]  # empty: the default


@pytest.mark.parametrize("d, kind", [(5, "int"), ("tokens scores", "str"), ([["a"]], "list"), (None, "NoneType")])
def test_from_dict_of_something_else_than_a_dict_names_its_type(d, kind):
    """from_dict(5) raised "argument of type 'int' is not iterable"; a str was read as a dict
    without keys."""
    with pytest.raises(TypeError, match=rf"^d must be a dict or other mapping \(Attribution.to_dict\(\)\), got {kind}$"):
        aieg_fast.Attribution.from_dict(d)


def test_from_dict_of_a_mapping_that_is_no_dict():
    """A read-only view of a record (types.MappingProxyType) loaded before the type check and was
    then refused as "not a dict"."""
    import types

    a = aieg_fast.Attribution(tokens=["a", "b"], token_ids=[1, 2], scores=torch.tensor([0.5, -1.0]), method="saliency",
                              target={"kind": "token", "id": 0, "text": "x"})
    b = aieg_fast.Attribution.from_dict(types.MappingProxyType(a.to_dict()))
    assert b.tokens == a.tokens and torch.equal(b.scores, a.scores)


def test_plot_writes_control_characters_as_escapes(tmp_path):
    """Control characters in tokens, the target or the model name are drawn as the escapes the
    terminal and HTML views write (``bell\\x07``): matplotlib wrote them raw into an SVG, which
    is then no valid XML, and warned of a missing glyph at every save."""
    import warnings
    import xml.dom.minidom

    import matplotlib

    matplotlib.use("Agg")
    res = aieg_fast.Attribution(tokens=["bell\x07", " esc\x1b[31m", " nul\x00", " non\uffff"], token_ids=[1, 2, 3, 4],
                                scores=torch.tensor([0.1, -0.2, 0.3, 0.1]), method="saliency",
                                target={"kind": "token", "id": 5, "text": " \x1b"}, model="m\x07")
    for words in (True, False):
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)  # no "Glyph 27 missing" at the save either
            fig = res.plot(words=words)
            fig.savefig(tmp_path / "ctl.svg")
        xml.dom.minidom.parse(str(tmp_path / "ctl.svg"))  # raised ExpatError (not well-formed)
        matplotlib.pyplot.close(fig)
        labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
        assert any("bell\\x07" in lab for lab in labels) and "\\x07" in fig.axes[0].get_title(), labels


@pytest.mark.parametrize("n_tokens", [3, 45])  # one strip; rows of cells labelled inside (_wrapped_strip)
def test_plot_writes_control_characters_of_a_finding_as_escapes(tmp_path, n_tokens):
    """The title's second line (the findings' messages, e.g. of a saved result) is drawn as the
    labels are: a control character in it was written raw into the SVG (no valid XML) and
    warned of a missing glyph at every save."""
    import warnings
    import xml.dom.minidom

    import matplotlib

    matplotlib.use("Agg")
    res = aieg_fast.Attribution(tokens=[f" t{i}" for i in range(n_tokens)], token_ids=list(range(n_tokens)),
                                scores=torch.linspace(-1, 1, n_tokens), method="saliency",
                                target={"kind": "token", "id": 5, "text": " x"}, model="m",
                                degenerate=[{"kind": "caveat", "message": "token 'z\x07' odd"}])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no "Glyph 7 missing" at the save
        fig = res.plot(words=False)
        fig.savefig(tmp_path / "f.svg")
    matplotlib.pyplot.close(fig)
    xml.dom.minidom.parse(str(tmp_path / "f.svg"))  # raised ExpatError (not well-formed)
    assert "token 'z\\x07' odd" in fig.axes[0].get_title()


def test_none_for_an_empty_dict_field_is_taken():
    """options=None (or info / backend / timing) built in memory reads as no options, as the views
    read it before the fields were checked."""
    res = aieg_fast.Attribution(tokens=["a", " b"], token_ids=[1, 2], scores=torch.tensor([0.1, 0.2]), method="m",
                                target={"kind": "token", "id": 3}, options=None, info=None, backend=None, timing=None)
    assert res.options == {} and res.info == {} and "m" in res.to_html()


def test_none_for_a_per_token_list_is_its_default(tmp_path):
    """attributable=None or special=None (in memory, or null in a saved file) read as their
    defaults, as before the fields were checked (a bare "'NoneType' object is not iterable"
    TypeError since); offsets / degenerate / raw_tokens None as empty too."""
    kw = dict(tokens=["a", " b"], token_ids=[1, 2], scores=torch.tensor([0.1, 0.2]), method="m", target={"kind": "token", "id": 3})
    res = aieg_fast.Attribution(**kw, attributable=None, special=None, offsets=None, degenerate=None, raw_tokens=None)
    assert res.attributable == [True, True] and res.special == [False, False] and res.offsets == [] and res.degenerate == []
    d = aieg_fast.Attribution(**kw).to_dict()
    d.update(attributable=None, special=None)
    (tmp_path / "r.json").write_text(json.dumps(d))
    assert aieg_fast.load_attribution(tmp_path / "r.json").attributable == [True, True]
