"""The HTML views in a real browser: headless Chromium renders a next-token result (accented, CJK
and emoji text) and a generation result; the DOM has the legend and every word, no U+FFFD, and
the screenshot is not blank. Skips, saying why, where no Chromium is installed (`make test` and
.ci/run try to install Debian's `chromium`)."""
from __future__ import annotations

import shutil
import subprocess

import pytest
import torch

import aieg_fast
from builders import byte_level_tokenizer

BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
pytestmark = pytest.mark.skipif(BROWSER is None, reason="no Chromium on PATH (Debian: apt-get install chromium)")
TEXT = "café naïve 今天 😀 ok."


def _page(tmp_path, name, fragment):
    p = tmp_path / f"{name}.html"
    p.write_text(f'<!doctype html><html><head><meta charset="utf-8"></head><body>{fragment}</body></html>', encoding="utf-8")
    return p


def _chromium(*args):
    cmd = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args]
    out = subprocess.run(cmd, capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-2000:]
    return out.stdout.decode("utf-8")


def _check(tmp_path, name, res):
    page = _page(tmp_path, name, res.to_html(toggle=True))
    dom = _chromium("--dump-dom", page.as_uri())
    assert "aieg-legend" in dom and "\ufffd" not in dom and 'type="checkbox"' in dom
    for w in res.words()[0]:
        assert w.replace("&", "&amp;").replace("<", "&lt;") in dom, w
    png = tmp_path / f"{name}.png"
    _chromium(f"--screenshot={png}", "--window-size=900,500", page.as_uri())
    import matplotlib.image as mpimg

    img = mpimg.imread(str(png))[..., :3]
    assert img.shape[0] >= 400 and img.shape[1] >= 800
    coloured = (img.max(-1) - img.min(-1)) > 0.1  # pixels that are not grey: the heatmap's colours
    assert coloured.mean() > 0.001, "the screenshot shows no coloured cell"
    assert img.std() > 0.01


def test_next_token_html_in_a_browser(tmp_path):
    tok = byte_level_tokenizer()
    enc = tok(TEXT, return_offsets_mapping=True)
    ids = enc["input_ids"]
    res = aieg_fast.Attribution(
        tokens=[tok.decode([i]) for i in ids], token_ids=ids, scores=torch.linspace(-1, 2, len(ids)), method="saliency",
        target={"kind": "token", "id": 5, "text": " great"}, model="tiny-gpt2",
        raw_tokens=tok.convert_ids_to_tokens(ids), text=TEXT, offsets=[list(o) for o in enc["offset_mapping"]],
    )
    _check(tmp_path, "next_token", res)


def test_generation_html_in_a_browser(tmp_path, tiny_gpt2):
    res = tiny_gpt2.attribute_generation("The capital is Paris", generated_text=". It is", method="integrated_gradients", n_steps=8)
    _check(tmp_path, "generation", res)
