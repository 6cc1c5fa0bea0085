"""Writes the example pictures of the README into docs/ from the embedded SmolLM2-135M-Instruct:
the HTML of a next-token result and of a generation result as rendered by headless Chromium, and
the matplotlib views.

    python docs/screenshots.py          # needs Debian's chromium on PATH
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import aieg_fast
from aieg_fast.datasets import SENTIMENT_TEMPLATE

DOCS = Path(__file__).resolve().parent


def shoot(html: str, out: Path, size: str) -> None:
    browser = next(b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b))
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "page.html"
        page.write_text(f'<!doctype html><html><head><meta charset="utf-8"></head><body>{html}</body></html>', encoding="utf-8")
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--screenshot={out}", f"--window-size={size}", page.as_uri()], check=True, capture_output=True, timeout=120)
    print("wrote", out)


def main() -> int:
    ex = aieg_fast.load_model()
    res = ex.attribute("it 's a charming and often affecting journey . ", method="aieg", target=" positive",
                       template=SENTIMENT_TEMPLATE, n_steps=50)
    gen = ex.attribute_generation("The capital of France is", max_new_tokens=6, method="grad_ellm")
    shoot(res.to_html(), DOCS / "next_token_html.png", "900,160")
    shoot(gen.to_html(values=True), DOCS / "generation_html.png", "1000,330")
    res.plot().savefig(DOCS / "next_token_plot.png", dpi=110, bbox_inches="tight")
    gen.plot().savefig(DOCS / "generation_plot.png", dpi=110, bbox_inches="tight")
    print("wrote", DOCS / "next_token_plot.png", DOCS / "generation_plot.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
