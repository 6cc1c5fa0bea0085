#!/usr/bin/env bash
# The faithfulness runs of benchmarks/RESULTS_faithfulness.md, as they were run (2-core CPU).
# Usage: bash benchmarks/faithfulness_runs.sh [OUT_ROOT]   (default runs/faithfulness)
# SST-2 train / dev / test, the first 200 IMDb reviews, BoolQ, LongRA, WikiBio and WikiText are
# shipped with the package; TellMeWhy (run 7) is not (no licence is stated): DATA=/path/to/folder
# holding its files (default ../shared/data, the developers' copy). Every evaluation resumes when rerun (the train-nano lines train again: the same weights
# on the same machine, at the cost of the training).
# Each block is independent. Run 1 is shared by two processes under torchrun (one per core,
# OMP_NUM_THREADS=1 each): each takes every other missing example and rank 0 merges them into
# one records.jsonl. (The first version ran two `--start` shards in separate folders and
# concatenated their records; `--start` still skips examples, but the folders must then be
# merged by hand.)
set -euo pipefail
OUT=${1:-runs/faithfulness}
DATA=${DATA:-../shared/data}
# Runs 2, 3 and 4 (not 2b and 2c, which came after it and run with today's defaults) were recorded before issue 13: grad_ellm with its default of the time, preset paper_v1
# (write grad_ellm:preset=paper_v1 in M), the raw label logit as F (--target-fn logit), lower-index
# ties (--ties first) and the relu soft map only (--soft-maps relu) reproduce them.
# `aieg` in these runs is AIEG's reading of the time, preset v1 (the default until issue 19's study
# made v2 the default); it is written `aieg:preset=v1` now so that a rerun computes the same reading
# (a folder whose `aieg` records are v1 refuses a plain `aieg`, which now means v2).
M=aieg:preset=v1,integrated_gradients,integrated_decision_gradients,saliency,input_x_gradient,attention,scaled_attention,grad_ellm,random
SOFT="--n-samples 2 --pis 0.1,0.3,0.5,0.7,0.9"
SWEEP="--topk-sweep 0.05,0.1,0.2,0.3"

# 1. SmolLM2-SST2 (the shipped LoRA fine-tune of SmolLM2-135M-Instruct, `aieg-fast train-sentiment`),
#    SST-2 dev, first 200 sentences, two processes under torchrun. Every method explains the decision:
#    the predicted label's logit minus the other label's (--target-fn contrast); Grad-ELLM runs its
#    default preset (consistent: pre-o gradient, grouped KV). (The zero-shot SmolLM2 runs of the
#    first version used the raw label logit; see RESULTS_faithfulness.md §2.)
FT="--model smollm2-sst2 --dataset sst2-dev --methods $M --n-steps 20 $SOFT $SWEEP --target-fn contrast --seed 0"
OMP_NUM_THREADS=1 python -m torch.distributed.run --standalone --nproc-per-node 2 \
    -m aieg_fast.cli evaluate $FT --n-examples 200 --out "$OUT/sst2_dev_ft" --no-progress

# 2. GPT-nano (trained here) on the full SST-2 test set
aieg-fast train-nano --epochs 3
aieg-fast evaluate --model gpt-nano --dataset sst2-test --n 1821 --methods $M --n-steps 20 $SOFT $SWEEP \
    --prob-space labels --seed 0 --out "$OUT/nano_sst2_test" --no-progress

# 2b. HETA and occlusion (issue 20) on the same GPT-nano, the first 600 SST-2 test sentences, with IG and
#     random from the same run as anchors (HETA: 10 probes per token, the paper preset; occlusion: one
#     token at a time, F(x) minus F with the token replaced, the defaults)
aieg-fast evaluate --model gpt-nano --dataset sst2-test --n 600 --methods heta,occlusion,integrated_gradients,random \
    --n-steps 20 $SOFT $SWEEP --prob-space labels --seed 0 --out "$OUT/nano_heta_occlusion" --no-progress

# 2c. Which HETA term ranks the tokens (RESULTS_faithfulness §1b): each component alone and the
#     sum-normalised combination, the first 200 test sentences, hard metrics (archived as
#     faithfulness/nano_heta_occlusion/components_summary.md and components_config.json)
aieg-fast evaluate --model gpt-nano --dataset sst2-test --n 200 --metrics hard --n-steps 20 --prob-space labels --seed 0 \
    --methods heta,heta:components=gate,heta:components=curvature,heta:components=information,heta:component_norm=sum,occlusion,integrated_gradients \
    --out "$OUT/nano_heta_components" --no-progress

# 3. AIEG ablations (spec §6.12) with the k sweep on GPT-nano, hard metrics, paired tests against AIEG
aieg-fast evaluate --model gpt-nano --dataset sst2-test --n 1821 --metrics hard $SWEEP --prob-space labels \
    --n-steps 20 --seed 0 --reference aieg \
    --methods aieg,aieg:ef_mode=none,aieg:attn_layers=none,aieg:posnorm=none,integrated_gradients,random \
    --out "$OUT/nano_ablation" --no-progress

# 4. SmolLM2 on IMDb, AIEG's 50 / 200 / 400-token buckets, hard metrics
for spec in "50 25" "200 8" "400 2"; do
  set -- $spec
  aieg-fast evaluate --dataset imdb --max-tokens "$1" --n "$2" --methods $M --n-steps 20 --metrics hard \
      --prob-space labels --seed 0 --out "$OUT/imdb_$1" --no-progress
done

# 5. BoolQ (issue 17): the zero-shot SmolLM2 on the first 300 dev questions (passage and question
#    attributed, the contrast target by default), then the same recipe as run 1 on BoolQ: LoRA on the
#    even-idx half of the dev set, evaluated on the odd-idx half (boolq-heldout, disjoint). The training
#    runs its batches of 16 in pieces of 4 rows (--micro-batch-size, gradients accumulated; 19.2 GB peak).
#    The held-out evaluation runs in bfloat16 (a deviation from float32, 3.2x faster side by side on this AMX CPU; checked
#    against float32 on its first 17 questions: benchmarks/faithfulness/boolq_bf16_check/, RESULTS.md
#    "bfloat16 for a whole evaluation run"), two processes under torchrun. It takes several sessions, so its
#    records travel in the repository: restored into the run folder first, archived again when the run
#    stops (also while it runs: the same `save` line; commit the archive).
aieg-fast evaluate --dataset boolq --n 300 --methods $M --n-steps 20 $SOFT $SWEEP --seed 0 --out "$OUT/boolq" --no-progress
#    The adapter is kept in the repository (benchmarks/faithfulness/boolq_heldout_ft/adapter, 9.8 MB: the
#    training's adapter_config.json, adapter_model.safetensors and training.json), so the evaluation does not
#    need the 1-hour training on a fresh machine; the first two lines made it (2026-12-03).
#    bfloat16 was measured fast on a CPU with AMX bfloat16 units (3.2x for this evaluation) and for IG with
#    avx512_bf16 alone (2.2x, RESULTS.md "bfloat16 for a whole evaluation run"; this run's first question 2.69x,
#    2026-12-07); on an AMD EPYC VM without avx512_bf16 (2026-12-04) no question finished in 19 minutes: look for
#    amx_bf16 or avx512_bf16 in /proc/cpuinfo, and time one question both ways on your machine first.
#    The evaluation runs at 50 steps (issue 19's setting for every rerun) with the study's AIEG reading
#    (aieg:preset=v3), Grad-ELLM's paper_v1 preset and occlusion besides the nine methods.
#    aieg-fast train-sentiment --task boolq --out "$OUT/smollm2-boolq" --no-progress
#    mkdir -p benchmarks/faithfulness/boolq_heldout_ft/adapter && cp "$OUT"/smollm2-boolq/{adapter_config.json,adapter_model.safetensors,training.json} benchmarks/faithfulness/boolq_heldout_ft/adapter/
BQ="--model benchmarks/faithfulness/boolq_heldout_ft/adapter --dataset boolq-heldout --methods $M,aieg:preset=v3,grad_ellm:preset=paper_v1,occlusion --n-steps 50 $SOFT $SWEEP --seed 0 --dtype bfloat16"
BQ_ARCHIVE=benchmarks/faithfulness/boolq_heldout_ft/records.jsonl.gz
python benchmarks/archive_records.py restore "$BQ_ARCHIVE" "$OUT/boolq_heldout_ft_bf16"
rc=0  # saved also when the run stops early (a kill -TERM, an error); its status is the script's then
OMP_NUM_THREADS=1 python -m torch.distributed.run --standalone --nproc-per-node 2 \
    -m aieg_fast.cli evaluate $BQ --n-examples 300 --out "$OUT/boolq_heldout_ft_bf16" --no-progress || rc=$?
python benchmarks/archive_records.py save "$OUT/boolq_heldout_ft_bf16" "$BQ_ARCHIVE"
[ "$rc" = 0 ] || exit "$rc"
#    The report with and without the questions about passages seen in training (RESULTS_faithfulness §5.2):
python benchmarks/boolq_report.py "$OUT/boolq_heldout_ft_bf16" --out benchmarks/faithfulness/boolq_heldout_ft/report
#    The bfloat16 check (RESULTS.md; benchmarks/faithfulness/boolq_bf16_check/) compared 20-step runs of the nine
#    methods. To check this 50-step run the same way, run its first questions in float32 with the same settings
#    (bench_eval_precision.py refuses folders that differ in more than the dtype):
#    aieg-fast evaluate ${BQ/--dtype bfloat16/--dtype float32} --n-examples 17 --out "$OUT/boolq_heldout_ft_f32" --no-progress
#    python benchmarks/bench_eval_precision.py "$OUT/boolq_heldout_ft_f32" "$OUT/boolq_heldout_ft_bf16"

# 6. LongRA (issue 17), the embedded SmolLM2-135M-Instruct: every rebuilt instance; the filter (one-token
#    words, right with and without the distractor) decides which are scored (98 of 573). Run as written: the
#    first call, then the same folder again with HETA added (the run computes only the missing method).
aieg-fast evaluate --dataset longra --n 573 --methods $M,occlusion --n-steps 20 --seed 0 --out "$OUT/longra" --no-progress
aieg-fast evaluate --dataset longra --n 573 --methods $M,occlusion,heta --n-steps 20 --seed 0 --out "$OUT/longra" --no-progress

# 7. Open generation (issue 17; WikiText first): attributions of generated text, per generated step, on the
#    embedded SmolLM2-135M-Instruct. Each prompt is continued greedily for 10 tokens (ReAGent's setting),
#    or its reference is explained (--teacher-forced); the metrics perturb the whole context, prompt and
#    generated prefix (--prompt-only: the prompt). WikiBio and WikiText are shipped; TellMeWhy is read from
#    $DATA only (its licence is unknown). HETA is left out for its cost on a CPU; add it on a GPU.
#    Each run takes several sessions on a CPU, so its records travel in the repository as run 5's do:
#    restored from benchmarks/faithfulness/<name>/records.jsonl.gz first, saved there when the run stops
#    (to stop a part-run, `kill -TERM` the torchrun launcher: it stops both workers and the save line still
#    runs; a SIGKILL leaves the workers running, each in its own session; commit the archive).
#    Methods (fixed 2026-12-04, before any generation record was read): the nine of M, AIEG's default
#    reading (preset v2, issue 19), Grad-ELLM's paper preset and occlusion. 20 path steps (cost). The small
#    sets run first (WikiText, then TellMeWhy-ReAGent), each as two processes under torchrun.
#    The recency control (scores rising with the position) was added after the WikiText run was read
#    (RESULTS_faithfulness §5.3): a control, not a method; a resumed folder computes only it.
GEN="--methods $M,aieg,grad_ellm:preset=paper_v1,occlusion,recency --n-new-tokens 10 --n-steps 20 $SOFT --seed 0 --no-progress"
gen() {  # gen NAME EVALUATE-ARGS...: one archived generation run in $OUT/NAME
    local name=$1 rc=0; shift
    python benchmarks/archive_records.py restore "benchmarks/faithfulness/$name/records.jsonl.gz" "$OUT/$name"
    OMP_NUM_THREADS=1 python -m torch.distributed.run --standalone --nproc-per-node 2 \
        -m aieg_fast.cli evaluate "$@" $GEN --out "$OUT/$name" || rc=$?
    python benchmarks/archive_records.py save "$OUT/$name" "benchmarks/faithfulness/$name/records.jsonl.gz"
    return "$rc"
}
gen gen_wikitext --dataset wikitext --n-examples 22
gen gen_tellmewhy_reagent --dataset tellmewhy-reagent --data-dir "$DATA" --n-examples 25
gen gen_wikibio --dataset wikibio --n-examples 100
gen gen_tellmewhy --dataset tellmewhy --data-dir "$DATA" --n-examples 464
gen gen_tellmewhy_forced --dataset tellmewhy --data-dir "$DATA" --n-examples 464 --teacher-forced

# 8. Issue 19's reruns at 50 path steps with the fixed metrics and targets (contrast target, random
#    ties, both soft maps; the study's settings, benchmarks/study19/protocol.json), on the two nano
#    models trained again (their weights differ from the study's: they were trained on another
#    machine, RESULTS_faithfulness.md §4.2). Every method, Grad-ELLM's default and paper_v1 presets,
#    AIEG's v1 (the default of the time) and v3 (the study's dev selection) presets, occlusion and HETA on the
#    whole SST-2 test set, then the ablations of both AIEG readings (hard metrics, paired tests against
#    each reading). Each model's runs take about an hour on one core.
R50="--n-steps 50 --target-fn contrast --prob-space labels --seed 0 --no-progress"
ALL50="$M,grad_ellm:preset=paper_v1,aieg:preset=v3,occlusion,heta"
ABL="ef_mode=none attn_layers=none posnorm=none"
for arch in gpt2 llama; do
  name=$([ $arch = gpt2 ] && echo gpt-nano || echo llama-nano)
  aieg-fast train-nano --arch $arch --epochs 3 --seed 0 --out "$OUT/$name-s0" --no-progress
  aieg-fast evaluate --model "$OUT/$name-s0" --dataset sst2-test --n 1821 --methods $ALL50 $SOFT $SWEEP $R50 \
      --out "$OUT/${name}_sst2_test_50"
  # The archived v1 folders are named *_ablation_50_aieg and key the reading `aieg` (v1 when they
  # were computed, 2026-12-03); this loop names it aieg:preset=v1 (folders *_ablation_50_aieg_preset_v1).
  for ref in aieg:preset=v1 aieg:preset=v3; do
    abl=$ref,integrated_gradients,random; for a in $ABL; do abl=$abl,$ref:$a; done
    aieg-fast evaluate --model "$OUT/$name-s0" --dataset sst2-test --n 1821 --metrics hard $SWEEP $R50 \
        --reference $ref --methods $abl --out "$OUT/${name}_ablation_50_${ref//[:=]/_}"
  done
done

# 9. Issue 19's rerun of run 1 (SmolLM2-SST2, SST-2 dev, first 200) at 50 steps. The study's dev records
#    (IG and IG from zero, the AIEG variants V1 to V8, random; the same settings) are restored into the
#    folder, and the run adds the other methods, occlusion and the ablations of V1 (aieg under the
#    protocol's pin of AIEG's reading, --method-options '{"aieg": {"preset": "v1"}}', which the restored
#    folder's config is given too: the study's specs name options over preset v1) and of
#    V3 (the dev selection, written out as the study wrote it) with every metric (each reading's ablation table is
#    reported from a copy of the records with --reference). The k sweep is computed afterwards from the records'
#    stored scores (the study's records were written without one): the last line, benchmarks/topk_sweep.py (2 h).
#    Several sessions on a CPU: archived as run 5 is. HETA is left out for its cost (about 90 s a sentence).
variants() { python -c "import json, sys; v = json.load(open('benchmarks/study19/protocol.json'))['variants']; print(','.join(v[k] for k in sys.argv[1:] or v))" "$@"; }
STUDY=$(variants); V3=$(variants V3)  # the study's method specs, as its protocol names them
OTHERS="integrated_decision_gradients,saliency,input_x_gradient,attention,scaled_attention,grad_ellm,grad_ellm:preset=paper_v1,occlusion"
ABL1="aieg:ef_mode=none,aieg:attn_layers=none,aieg:posnorm=none"
ABL3="$V3:ef_mode=none,$V3:attn_layers=none,aieg:posnorm=none:attn_source=path"
D9="$OUT/smollm2_sst2_dev_50"; A9=benchmarks/faithfulness/smollm2_sst2_dev_50/records.jsonl.gz
[ -f "$A9" ] || python benchmarks/archive_records.py restore benchmarks/study19/records/dev/smollm2-sst2.jsonl.gz "$D9"
python benchmarks/archive_records.py restore "$A9" "$D9"
PIN='{"aieg": {"preset": "v1"}}'
python -c "import json, sys; p = sys.argv[1] + '/config.json'; c = json.load(open(p)); c['method_options'] = c['method_options'] or json.loads(sys.argv[2]); json.dump(c, open(p, 'w'), indent=1)" "$D9" "$PIN"
rc=0; OMP_NUM_THREADS=1 python -m torch.distributed.run --standalone --nproc-per-node 2 -m aieg_fast.cli evaluate \
    --model smollm2-sst2 --dataset sst2-dev --n-examples 200 --methods "$STUDY,$OTHERS,$ABL1,$ABL3" $SOFT $R50 --out "$D9" \
    --method-options "$PIN" || rc=$?
python benchmarks/archive_records.py save "$D9" "$A9"
[ "$rc" = 0 ] || exit "$rc"
for v in 1 3; do  # each reading's ablation table, from a copy of the records (nothing is computed again)
  ref=$([ $v = 1 ] && echo aieg || echo "$V3"); abl=$([ $v = 1 ] && echo "$ABL1" || echo "$ABL3")
  mkdir -p "${D9}_ablation_v$v" && cp "$D9/config.json" "$D9/records.jsonl" "${D9}_ablation_v$v/"
  aieg-fast evaluate --model smollm2-sst2 --dataset sst2-dev --n 200 --methods "$ref,$abl,integrated_gradients,random" \
      $SOFT $R50 --reference "$ref" --out "${D9}_ablation_v$v" --method-options "$PIN"
done
# the k sweep of §2, from the scores the records keep (the study's records were written without one;
# the script first checks that it reproduces every recorded metric at the run's own top-k)
[ -d "${D9}_topk" ] || python benchmarks/topk_sweep.py "$D9" --out "${D9}_topk" --ks 0.05,0.1,0.2,0.3
