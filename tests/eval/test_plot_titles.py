"""The reports' plots name the run they show (model, dataset, a dtype other than float32), as
summary.md's title does: a PNG shared alone must say what it is."""
import json

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.figure  # noqa: E402

import aieg_fast.eval as E  # noqa: E402
from aieg_fast.eval.report import pi_soft_figure, run_title  # noqa: E402


def _suptitle(fig) -> str:
    """The figure's title: its figure-level texts (Figure.get_suptitle needs matplotlib 3.8; the package takes 3.7)."""
    return "".join(t.get_text() for t in fig.texts)


def _saved_titles(monkeypatch):
    """Spy on Figure.savefig: the titles (figure title, then each axes' title) of every figure saved."""
    saved = []
    real = matplotlib.figure.Figure.savefig

    def spy(fig, *args, **kwargs):
        saved.append([_suptitle(fig)] + [ax.get_title() for ax in fig.axes])
        return real(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", spy)
    return saved


def test_run_title():
    assert run_title({"model": "m", "dataset": "d"}) == "m on d"
    assert run_title({"model": "m", "dataset": "d", "dtype": "bfloat16"}) == "m on d (bfloat16)"
    assert run_title({"model": "m", "dataset": "d", "dtype": "float32"}) == "m on d"


def test_pi_soft_figure_title_is_literal_text():
    recs = [{"methods": {"ig": {"pi_soft_nc_curve": [0.4, 0.2], "pi_soft_ns_curve": [0.5, 0.7]}},
             "controls": {"uniform": {"pi_soft_nc_curve": [0.5, 0.3], "pi_soft_ns_curve": [0.5, 0.7]}}}]
    title = "runs/$my_model$ on a_b.csv"  # a path with '$' is not read as mathtext
    fig = pi_soft_figure(recs, ["ig"], [0.3, 0.7], title=title)
    fig.canvas.draw()
    assert _suptitle(fig) == title
    assert _suptitle(pi_soft_figure(recs, ["ig"], [0.3, 0.7])) == ""


def test_evaluate_plot_names_model_and_dataset(tiny_gpt2, tmp_path, monkeypatch):
    saved = _saved_titles(monkeypatch)
    res = E.evaluate(tiny_gpt2, dataset="sst2-sample", n=1, methods="saliency", out_dir=tmp_path, n_steps=2, n_samples=1,
                     pis=(0.5,), labels=(10, 11), template="{text} :", max_tokens=12, progress=False, plot=True)
    assert res["plot"] is not None and len(saved) == len(res["plots"]) == 2  # the relu and minmax maps
    config = json.loads((tmp_path / "config.json").read_text())
    want = run_title(config)
    assert config["model"] in want and "sst2-sample" in want
    assert all(titles[0] == want for titles in saved)
    assert res["summary_md"].splitlines()[0] == f"# Faithfulness: {want}"


def test_a_plot_is_written_whole_or_not_at_all(tmp_path):
    """save_figure draws in memory and replaces the file whole: a failed draw leaves the last
    plot as it was (savefig into the file cut it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from aieg_fast.eval.report import save_figure

    path = tmp_path / "pi_soft_curves.png"
    fig = plt.figure()
    save_figure(fig, path, dpi=50)
    first = path.read_bytes()
    assert first.startswith(b"\x89PNG")

    def broken(target, **kw):
        target.write(b"half a plot")
        raise RuntimeError("the renderer failed")

    fig.savefig = broken
    with pytest.raises(RuntimeError, match="the renderer failed"):
        save_figure(fig, path, dpi=50)
    assert path.read_bytes() == first
    plt.close(fig)


def test_a_run_where_every_example_is_degenerate_says_so(tiny_gpt2, tmp_path, monkeypatch):
    """Every example degenerate (the empty input at least as likely as the full one): summary.md
    had dropped its soft columns and the π-Soft figures were empty axes, without a word."""
    kw = dict(dataset="sst2-sample", n=2, methods="saliency", out_dir=tmp_path, n_steps=2, n_samples=1, pis=(0.5,),
              labels=(10, 11), template="{text} :", max_tokens=12, progress=False, plot=False)
    E.evaluate(tiny_gpt2, **kw)
    records = tmp_path / "records.jsonl"
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    for r in rows:  # as an evaluation whose examples are all degenerate records them
        r["degenerate"] = True
        for part in list(r["methods"].values()) + list(r["controls"].values()):
            for key, value in part.items():
                if "soft" in key:
                    part[key] = [None] * len(value) if isinstance(value, list) else None
    records.write_text("".join(json.dumps(r) + "\n" for r in rows))
    drawn = []
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda fig, *a, **k: drawn.append(
        [t.get_text() for ax in fig.axes for t in ax.texts]))
    res = E.evaluate(tiny_gpt2, **dict(kw, plot=True))
    assert res["computed"] == 0 and "**Every example is degenerate**" in res["summary_md"]
    assert drawn and all(any("every example is degenerate" in t for t in texts) for texts in drawn)
