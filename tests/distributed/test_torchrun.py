"""Data parallel runs under torchrun (2 CPU processes, gloo): attribute-dataset and evaluate give
the records of a single process, every example once; a run interrupted with parts left behind
resumes. Each launch starts two Python processes (about 10 to 20 s on 2 cores)."""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from aieg_fast import cli
from aieg_fast.dataset_attribution import RECORDS_FILE
from aieg_fast.eval import evaluate, read_records

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.distributed,
    pytest.mark.skipif(not (torch.distributed.is_available() and torch.distributed.is_gloo_available()),
                       reason="this torch has no torch.distributed with the gloo backend"),
]

ROWS = [
    {"text": "the movie is good", "id": "a"},
    {"text": "the film was bad , slow and boring", "target": " good"},
    {"text": "what a wonderful story", "template": "Review: {text} :"},
    {"text": "a positive review of a negative film", "target": " good", "contrast": " bad"},
    {"text": " ".join(["good"] * 80)},  # more tokens than the model's 64 positions: a skipped record
    {"text": "great"},
    {"text": "terrible , amazing story"},
    {"text": "positive negative good bad great awful"},
]


@pytest.fixture(autouse=True)
def _one_thread():
    """The torchrun processes run with one thread (OMP_NUM_THREADS=1); the single-process
    reference does too, so reductions happen in the same order and the records compare exactly."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _torchrun(*args, nproc=2, ok=True):
    """stdout of the launch (``ok``: which must succeed), else the finished process."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc), *args]
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    if not ok:
        return out
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    return out.stdout


def _records(folder):
    recs = [json.loads(line) for line in (folder / RECORDS_FILE).read_text(encoding="utf-8").splitlines()]
    for r in recs:
        r.pop("timing", None)
    return recs


def test_attribute_dataset_two_processes_equal_one(tiny_gpt2_dir, tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    args = ["attribute-dataset", str(data), "--model", str(tiny_gpt2_dir), "--method", "integrated_gradients",
            "--n-steps", "4", "--batch-size", "2", "--no-progress"]
    assert cli.main([*args, "--out", str(tmp_path / "one")]) == 0
    one = _records(tmp_path / "one")
    assert [r["index"] for r in one] == list(range(8)) and "skipped" in one[4]

    ran = _torchrun("-m", "aieg_fast.cli", *args, "--out", str(tmp_path / "two"), ok=False)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-5000:]
    assert "8 example(s): 7 computed now, 1 skipped now (input refused), 0 done before, on 2 processes" in ran.stdout
    for column in ("target", "contrast", "template", "id"):  # the note on the columns used: once, by rank 0
        assert ran.stderr.count(f"column {column!r} is each row's") == 1, ran.stderr[-3000:]
    assert _records(tmp_path / "two") == one  # the same records, each example once, in order
    assert not (tmp_path / "two" / "parts").exists()

    # a parallel run killed midway: rows 0-2 merged, rows 3-4 in rank 1's part, row 4's line cut
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    shutil.copy(tmp_path / "one" / "config.json", resumed)
    lines = (tmp_path / "one" / RECORDS_FILE).read_text(encoding="utf-8").splitlines(keepends=True)
    (resumed / RECORDS_FILE).write_text("".join(lines[:3]), encoding="utf-8")
    (resumed / "parts").mkdir()
    (resumed / "parts" / "attributions.rank00001.jsonl").write_text(lines[3] + lines[4][:30], encoding="utf-8")
    said = _torchrun("-m", "aieg_fast.cli", *args, "--out", str(resumed))
    assert "8 example(s): 3 computed now, 1 skipped now (input refused), 4 done before, on 2 processes" in said
    assert _records(resumed) == one
    assert (resumed / "parts" / "attributions.rank00001.jsonl.torn").read_text() == lines[4][:30] + "\n"


def test_a_refused_parallel_run_says_so_once_and_leaves_no_folder(tiny_gpt2_dir, tmp_path):
    """A folder in use: rank 0's refusal reaches rank 1 through the group (rank 1 sat in the
    group's start until torchrun killed it, 30 s later: "Unable to shutdown process"). A run
    refused after the model loads leaves no new folder whichever rank made it (rank 0's lock
    kept one when rank 1 had made it). Each error is printed once."""
    import fcntl

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS[:2] + [{"text": "fine", "target": " good bad"}]),
                    encoding="utf-8")
    args = ["-m", "aieg_fast.cli", "attribute-dataset", str(data), "--model", str(tiny_gpt2_dir), "--method", "saliency",
            "--no-progress"]
    busy = tmp_path / "busy"
    busy.mkdir()
    fd = os.open(busy / ".lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as another run holds it
        out = _torchrun(*args, "--limit", "2", "--out", str(busy), ok=False)
        ev = _torchrun("-m", "aieg_fast.cli", "evaluate", "--model", str(tiny_gpt2_dir), "--methods", "saliency",
                       "--n-examples", "2", "--no-progress", "--out", str(busy), ok=False)
    finally:
        os.close(fd)
    for out in (out, ev):
        assert out.returncode != 0 and out.stderr.count("is in use by another run") == 1, out.stderr[-3000:]
        assert "Unable to shutdown" not in out.stderr
    for attempt in range(2):  # which rank makes the folder first varies
        fresh = tmp_path / f"fresh{attempt}"
        out = _torchrun(*args, "--out", str(fresh), ok=False)
        assert out.returncode != 0 and out.stderr.count("is not a single token") == 1, out.stderr[-3000:]
        assert not fresh.exists()


EVAL_SCRIPT = """
import json, sys
from aieg_fast.eval import evaluate
res = evaluate(model=sys.argv[1], out_dir=sys.argv[2], **json.loads(sys.argv[3]))
print(json.dumps({"rank": res.get("rank", 0), "computed": res["computed"], "rows": len(res["rows"])}))
"""
EVAL_KW = dict(dataset="sst2-sample", methods="saliency,integrated_gradients,random", n=5, n_steps=2, n_samples=1,
               pis=[0.5], progress=False, plot=False, labels=[10, 11], template="{text} :", max_tokens=20)


def _eval_records(folder):
    recs = [json.loads(line) for line in (folder / "records.jsonl").read_text(encoding="utf-8").splitlines()]
    for r in recs:
        for m in r.get("methods", {}).values():
            m.pop("time_attribution_s"), m.pop("time_metrics_s", None)  # LongRA has no metric timing
    return recs


def test_evaluate_two_processes_equal_one(tiny_gpt2_dir, tmp_path):
    one = evaluate(model=str(tiny_gpt2_dir), out_dir=tmp_path / "one", **EVAL_KW)
    script = tmp_path / "run_eval.py"
    script.write_text(EVAL_SCRIPT, encoding="utf-8")
    said = _torchrun(str(script), str(tiny_gpt2_dir), str(tmp_path / "two"), json.dumps(EVAL_KW))
    # each process prints one JSON report; two processes share stdout, so one may land on the other's line
    reports = sorted((json.loads(m) for m in re.findall(r'\{"rank": [^{}]*\}', said)), key=lambda r: r["rank"])
    assert [r["rank"] for r in reports] == [0, 1] and all(r["computed"] == 5 for r in reports)
    assert reports[0]["rows"] == len(one["rows"]) and reports[1]["rows"] == 0  # rank 0 summarises
    assert _eval_records(tmp_path / "two") == _eval_records(tmp_path / "one")
    assert (tmp_path / "two" / "summary.csv").read_text() == (tmp_path / "one" / "summary.csv").read_text()
    assert set(read_records(tmp_path / "two" / "records.jsonl")) == {f"sst2-sample:{i}" for i in range(5)}


def test_evaluate_generation_two_processes_equal_one(tiny_gpt2_dir, tmp_path):
    """Generated text per step under torchrun: the lines of each prompt (the prompt, one per
    method, the control) come from one process, merged in the order one process writes them."""
    prompts = tmp_path / "prompts.jsonl"
    rows = [{"id": "a", "prompt": "the movie is good"}, {"id": "b", "prompt": " ".join(["good"] * 80)},
            {"id": "c", "prompt": "what a wonderful story"}]
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    args = ["evaluate", "--dataset", str(prompts), "--text-field", "prompt", "--id-field", "id", "--model", str(tiny_gpt2_dir),
            "--methods", "saliency,random",
            "--n-new-tokens", "2", "--n-samples", "1", "--pis", "0.5", "--device", "cpu", "--no-progress"]
    assert cli.main([*args, "--out", str(tmp_path / "one")]) == 0
    _torchrun("-m", "aieg_fast.cli", *args, "--out", str(tmp_path / "two"))
    one, two = (_eval_records(tmp_path / d) for d in ("one", "two"))
    assert two == one and [r["id"] for r in one] == ["a"] * 4 + ["b"] + ["c"] * 4  # "b" is too long: skipped


def test_notes_and_refusals_are_said_once(tiny_gpt2_dir, tmp_path):
    """Every process printed a note of the command line, a refusal of bad input found before the
    processes meet, and a refusal of a changed prompt that each process found in the records."""
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": i, "prompt": p}) + "\n" for i, p in (("a", "the movie is"), ("b", "what a"))),
                       encoding="utf-8")
    args = ["-m", "aieg_fast.cli", "evaluate", "--dataset", str(prompts), "--text-field", "prompt", "--id-field", "id",
            "--model", str(tiny_gpt2_dir), "--n-new-tokens", "1", "--n-samples", "1", "--pis", "0.5", "--device", "cpu",
            "--no-progress", "--out", str(tmp_path / "run")]

    def errors(out):
        return [ln for ln in out.stderr.splitlines() if ln.startswith("error: ")]

    shown = [a for a in args if a != "--no-progress"]  # with the progress bar: a note says what it counts, once
    out = _torchrun(*shown, "--methods", "saliency", ok=False)
    assert out.returncode == 0 and out.stderr.count("has no --label-field") == 1, out.stderr[-3000:]
    assert out.stderr.count("note: 2 processes share the 2 examples to compute; the progress bar counts rank 0's share (1)") == 1, out.stderr[-3000:]
    bad = _torchrun(*args, "--methods", "saliency,bogus", ok=False)
    assert bad.returncode != 0 and len(errors(bad)) == 1 and "bogus" in errors(bad)[0], bad.stderr[-3000:]
    prompts.write_text(prompts.read_text(encoding="utf-8").replace("the movie is", "the film is"), encoding="utf-8")
    changed = _torchrun(*args, "--methods", "saliency", ok=False)
    assert changed.returncode != 0 and len(errors(changed)) == 1 and "another prompt" in errors(changed)[0], changed.stderr[-3000:]
    missing = _torchrun("-m", "aieg_fast.cli", "evaluate", "--dataset", "sst2-dev", "--data-dir", str(tmp_path / "none"),
                        "--model", str(tiny_gpt2_dir), "--methods", "saliency", "--n-examples", "1", "--device", "cpu",
                        "--no-progress", "--out", str(tmp_path / "sst2"), ok=False)
    assert missing.returncode != 0 and len(errors(missing)) == 1 and "sst2_dev.tsv" in errors(missing)[0], missing.stderr[-3000:]


LONGRA_SCRIPT = """
import json, sys
import aieg_fast
from aieg_fast.eval import evaluate_longra
ex = aieg_fast.load_model(sys.argv[1])

def predict(text, template=None, top_k=5):  # scripted answers: kept unless the prompt starts with "a film"
    word = " bad" if text.startswith("a film") else " great"
    return [(word, ex.tokenizer.encode(word, add_special_tokens=False)[0], 0.9)]

ex.predict = predict
res = evaluate_longra(ex, out_dir=sys.argv[2], data_dir=sys.argv[3], **json.loads(sys.argv[4]))
print(json.dumps({"rank": res.get("rank", 0), "computed": res["computed"], "kept": res["kept"], "rows": len(res["rows"])}))
"""


def test_longra_two_processes_equal_one(tiny_gpt2_dir, tmp_path):
    """LongRA's run under torchrun: each process filters and evaluates its share, rank 0 merges
    and reports (every process ran every instance into one records file, each one twice)."""
    prompt = "the movie is good . (a terrible story) . the film was"
    rows = [{"id": f"t{i}", "index": i, "prompt": prompt if i != 2 else prompt.replace("the movie", "a film"),
             "target": "great", "reference": " great", "relative": "good", "distractor": "(a terrible story) ."} for i in range(5)]
    data = tmp_path / "data"
    data.mkdir()
    (data / "longra_full.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    kw = dict(dataset="longra", methods="saliency,integrated_gradients,random", n=5, n_steps=3, ks=[1, 2], progress=False,
              plot=False)
    script = tmp_path / "run_longra.py"
    script.write_text(LONGRA_SCRIPT, encoding="utf-8")
    for d in ("one", "two"):
        said = _torchrun(str(script), str(tiny_gpt2_dir), str(tmp_path / d), str(data), json.dumps(kw), nproc=1 if d == "one" else 2)
    reports = sorted((json.loads(m) for m in re.findall(r'\{"rank": [^{}]*\}', said)), key=lambda r: r["rank"])
    assert [r["rank"] for r in reports] == [0, 1] and all(r["computed"] == 4 for r in reports)
    assert reports[0]["kept"] == 4 and reports[1]["kept"] is None and reports[1]["rows"] == 0  # rank 0 summarises
    one, two = (_eval_records(tmp_path / d) for d in ("one", "two"))
    assert sorted(r["id"] for r in two) == [f"t{i}" for i in range(5)]  # each instance once
    assert sorted(two, key=lambda r: r["id"]) == sorted(one, key=lambda r: r["id"])
    assert (tmp_path / "two" / "summary.csv").read_text() == (tmp_path / "one" / "summary.csv").read_text()
    assert not (tmp_path / "two" / "parts").exists()
    # the command: rank 0 alone reports (here that the tiny model's 64 positions refuse every prompt)
    out = _torchrun("-m", "aieg_fast.cli", "evaluate", "--model", str(tiny_gpt2_dir), "--dataset", "longra", "--n-examples", "2",
                    "--methods", "saliency", "--n-steps", "2", "--no-progress", "--out", str(tmp_path / "cli"), ok=False)
    assert out.returncode != 0 and out.stderr.count("error: no instance passed the filter") == 1, out.stderr[-3000:]
    assert out.stdout.count("kept by the filter; results in") == 1, out.stdout


CLOSE_SCRIPT = """
import sys, weakref
import torch
from aieg_fast.runs import start
if sys.argv[1] == "user":  # a script's own group, made after importing the package
    torch.distributed.init_process_group("gloo")
with start() as procs:
    import torch.distributed.nn.functional  # transformers imports it while it loads a model
    made = weakref.ref(procs.group if procs.group is not None else torch.distributed.group.WORLD)
    procs.barrier()
said = f"rank {procs.rank}: freed {made() is None}"
if sys.argv[1] == "user":  # the caller's group is left as it was, and still works
    t = torch.ones(1)
    torch.distributed.all_reduce(t)
    said += f", caller's group {torch.distributed.is_initialized() and t.item() == 2}"
    world = weakref.ref(torch.distributed.group.WORLD)
    torch.distributed.destroy_process_group()
    said += f" and freed {world() is None}"  # else gloo's threads are torn down at exit, unsynchronised: an abort in some runs
print(said)
"""


@pytest.mark.parametrize("case", ["own", "user"])
def test_close_frees_the_group_it_made(tmp_path, case):
    """Dist.close destroys the group it made, even when torch.distributed.nn.functional, whose
    functions take ``group.WORLD`` as a default argument, is imported under it (transformers
    does as it loads a model, in every run, which kept the group alive): a group left alive keeps gloo's threads
    and sockets until interpreter exit, where they were torn down unsynchronised with the other
    process (rank 0 aborted there in some runs: "terminate called without an active exception").
    Beside the caller's own group (``case`` "user"), the subgroup it made goes and the caller's
    group is left as it was, and is freed by the script's own destroy_process_group: made after the
    package was imported, it is not held by that module either (the fresh-clone suite once aborted
    there)."""
    script = tmp_path / "close.py"
    script.write_text(CLOSE_SCRIPT, encoding="utf-8")
    said = _torchrun(str(script), case)
    lines = sorted(re.findall(r"rank \d: [^\n]*?(?=rank \d:|$)", said.replace("\n", "")))
    tail = ", caller's group True and freed True" if case == "user" else ""
    assert lines == [f"rank {r}: freed True{tail}" for r in (0, 1)], said


def _torchrun_passes(args):
    """Whether torchrun's own parser hands ``args`` (after ``-m aieg_fast.cli``) through unchanged."""
    from torch.distributed.run import get_args_parser

    try:
        with contextlib.redirect_stderr(io.StringIO()):
            ns = get_args_parser().parse_args(["--standalone", "--nproc-per-node", "2", "-m", "aieg_fast.cli", *args])
    except SystemExit:
        return False
    return [ns.training_script, *ns.training_script_args] == ["aieg_fast.cli", *args]


def test_every_option_has_a_spelling_torchrun_passes_through():
    """torchrun parses the whole command line and refuses an option of ours that abbreviates two of its
    own (``--n`` = --nnodes / --nproc-per-node, ``--start`` = --start-method / --start_method) before
    any process starts: every option of every command needs one spelling it passes on, and the
    README's torchrun commands must run as written."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    stuck = [(name, a.option_strings) for name, sp in sub.choices.items() for a in sp._actions
             if a.option_strings and a.dest != "help"
             and not any(_torchrun_passes([name, o, "1"]) for o in a.option_strings if o.startswith("--"))]
    assert stuck == []
    assert not _torchrun_passes(["evaluate", "--n", "1"])  # the refusal this guards against is real
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"^torchrun .*? -m aieg_fast\.cli (.*?)(?:\s+#.*)?$", readme, flags=re.M)
    assert len(commands) >= 2
    for line in commands:
        args = [a for a in line.split() if a != "..."]
        assert _torchrun_passes(args), line
        if args[0] == "evaluate":
            assert parser.parse_args(args).n == 872


def test_the_benchmark_scripts_torchrun_lines_pass_through():
    """faithfulness_runs.sh runs several pieces under torchrun; each must get past torchrun's parser as
    written (run 9 once wrote ``--n 200`` there, which torchrun refuses before any process starts)."""
    script = (ROOT / "benchmarks" / "faithfulness_runs.sh").read_text(encoding="utf-8").replace("\\\n", " ")
    lines = [ln for ln in script.splitlines() if "torch.distributed.run" in ln and not ln.lstrip().startswith("#")]
    assert len(lines) >= 2
    for ln in lines:
        args = shlex.split(ln.split("-m aieg_fast.cli", 1)[1], comments=True)
        assert _torchrun_passes(args), ln


TWICE_SCRIPT = """
import os, time
from aieg_fast.runs import start
for k in range(2):
    if k == 1 and os.environ["RANK"] == "0":
        time.sleep(3)  # rank 0 comes to the second run later (it merged the files and wrote the summary)
    with start() as procs:
        print(f"rank {procs.rank} run {k}: {procs.gather(procs.rank)}", flush=True)
"""


def test_a_script_makes_two_runs_one_after_the_other(tmp_path):
    """Two of the package's runs in one torchrun script (attribute_dataset, then evaluate): the
    second process group was made under the first one's rendezvous keys, which torchrun's store
    keeps, so rank 1 read rank 0's old gloo address and failed ('connectFullMesh failed ...
    Connection refused') or hung. Each group start() makes now has keys of its own."""
    script = tmp_path / "twice.py"
    script.write_text(TWICE_SCRIPT, encoding="utf-8")
    said = _torchrun(str(script))
    assert sorted(re.findall(r"rank \d run \d: \[0, 1\]", said)) == [f"rank {r} run {k}: [0, 1]" for r in (0, 1) for k in (0, 1)], said


UNLIKE_SCRIPT = """
import os, random, sys
sys.path.insert(0, os.path.join(sys.argv[1], "tests"))
import aieg_fast
from builders import make_tiny_gpt2
from aieg_fast.dataset_attribution import attribute_dataset
from aieg_fast.eval import evaluate
rank, base = int(os.environ["RANK"]), sys.argv[2]
for case in ("shuffled", "model", "copies"):
  out = os.path.join(base, case)
  texts = ["the movie is good", "bad film", "great story", "a slow and boring film", "what a wonderful story", "terrible"]
  try:
      if case == "shuffled":  # an unseeded shuffle: each process its own order
          random.Random(rank).shuffle(texts)
          attribute_dataset(texts, out, aieg_fast.load_model(*make_tiny_gpt2()), method="saliency", progress=False)
      elif case == "copies":  # the same rows from a copy of the file per process (a node's own copy): not a difference
          path = f"{out}.rank{rank}.jsonl"
          open(path, "w").write("".join('{"text": "%s"}\\n' % t for t in texts))
          res = attribute_dataset(path, out, aieg_fast.load_model(*make_tiny_gpt2()), method="saliency", progress=False)
          print(f"rank {rank} {case}: computed {res['computed']}")
      else:  # a model made in each process with its own seed
          rows = [{"text": t, "label": i % 2} for i, t in enumerate(texts)]
          evaluate(aieg_fast.load_model(*make_tiny_gpt2(seed=rank)), rows, methods=["saliency"], out_dir=out, progress=False,
                   labels=[" good", " bad"], template="{text}", label_field="label")
  except ValueError as err:
      print(f"rank {rank} {case}: {err}")
"""


def test_processes_given_different_runs_are_refused(tmp_path):
    """Each process reads its own arguments: an unseeded shuffle of the data (12 records held 10
    of the texts, two twice) or a model made per process (records of other weights under rank 0's
    digest) was run silently. Every process is now checked against rank 0 before any record. The
    same rows read from a copy of the file per process (a node's own copy, at another path) are
    not a difference: the row's place in the data as written was compared, and they were refused.
    One launch for the three cases."""
    script = tmp_path / "unlike.py"
    script.write_text(UNLIKE_SCRIPT, encoding="utf-8")
    said = _torchrun(str(script), str(ROOT), str(tmp_path))
    for case, differs in (("shuffled", "the data (its examples, in order)"), ("model", "model_weights")):
        for rank in (0, 1):
            assert re.search(rf"rank {rank} {case}: the processes were given different runs: rank 1 differs from rank 0 in "
                             rf"[^;]*{re.escape(differs)}", said), said
        assert not (tmp_path / case / RECORDS_FILE).exists()
    assert "rank 0 copies: computed 6" in said and "rank 1 copies: computed 6" in said and "copies: the processes" not in said, said



SPAWN_SCRIPT = """
import json, os, socket, sys
import torch
sys.path.insert(0, os.path.join(sys.argv[1], "tests"))

def work(rank, port, out):
    import aieg_fast
    from builders import make_tiny_gpt2
    from aieg_fast.dataset_attribution import attribute_dataset
    torch.set_num_threads(1)
    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    texts = ["the movie is good", "bad film", "great story", "a slow and boring film", "what a wonderful story"]
    res = attribute_dataset(texts, out, aieg_fast.load_model(*make_tiny_gpt2()), method="saliency", progress=False,
                            distributed=True)
    print(json.dumps({"rank": rank, "world_size": res["world_size"], "computed": res["computed"]}), flush=True)
    torch.distributed.destroy_process_group()

if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    torch.multiprocessing.spawn(work, args=(port, sys.argv[2]), nprocs=2)
"""


def test_a_process_group_made_without_torchrun_is_used(tmp_path, tiny_gpt2):
    """A group made with torch.multiprocessing.spawn and init_process_group (no torchrun
    environment) was ignored even with distributed=True: each process ran alone, one computed
    everything and the other was refused ('in use by another run'). With distributed=True its
    processes now share the work, as under torchrun."""
    from aieg_fast.dataset_attribution import attribute_dataset

    script = tmp_path / "spawn.py"
    script.write_text(SPAWN_SCRIPT, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")}
    out = subprocess.run([sys.executable, str(script), str(ROOT), str(tmp_path / "two")], cwd=ROOT, capture_output=True, text=True,
                         timeout=600, env=dict(env, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1"))
    assert out.returncode == 0, out.stderr[-3000:]
    reports = sorted((json.loads(m) for m in re.findall(r'\{"rank": [^{}]*\}', out.stdout)), key=lambda r: r["rank"])
    assert [(r["rank"], r["world_size"], r["computed"]) for r in reports] == [(0, 2, 5), (1, 2, 5)]
    texts = ["the movie is good", "bad film", "great story", "a slow and boring film", "what a wonderful story"]
    attribute_dataset(texts, tmp_path / "one", tiny_gpt2, method="saliency", progress=False)
    assert _records(tmp_path / "two") == _records(tmp_path / "one")


def test_refusals_found_once_the_model_loads_are_said_once(tiny_gpt2_dir, tmp_path):
    """A refusal each process finds after the processes meet (a method option the model refuses,
    label words that are not one token of its vocabulary) was printed by every process."""
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in ("the movie is good", "bad film")), encoding="utf-8")
    common = ["--model", str(tiny_gpt2_dir), "--device", "cpu", "--no-progress"]
    runs = {
        "attn_layers": ["attribute-dataset", str(data), "--out", str(tmp_path / "ad"), "--method", "aieg", "--option", "attn_layers=[9]"],
        "not a single token": ["evaluate", "--dataset", "sst2-sample", "--methods", "saliency", "--n-examples", "2",
                               "--out", str(tmp_path / "ev")],
    }
    for said, argv in runs.items():
        out = _torchrun("-m", "aieg_fast.cli", *argv, *common, ok=False)
        errors = [ln for ln in out.stderr.splitlines() if ln.startswith("error: ")]
        assert out.returncode != 0 and len(errors) == 1 and said in errors[0], out.stderr[-3000:]
