#!/usr/bin/env bash
# The faithfulness runs of benchmarks/RESULTS_faithfulness.md, as they were run (2-core CPU).
# Usage: bash benchmarks/faithfulness_runs.sh [OUT_ROOT]   (default runs/faithfulness)
# SST-2 dev / test and the first 200 IMDb reviews are shipped with the package; train-nano needs
# a folder holding sst2_train.tsv: DATA=/path/to/folder (default ../shared/data, the developers'
# copy). Every run resumes when rerun.
# Each block is independent; on 2 cores we ran two shards / runs side by side with
# OMP_NUM_THREADS=1 each.
set -euo pipefail
OUT=${1:-runs/faithfulness}
DATA=${DATA:-../shared/data}
# grad_ellm ran with its default of the time, preset paper_v1; the default is now "consistent"
# (issue 13), so write grad_ellm:preset=paper_v1 in M to reproduce the recorded Grad-ELLM rows.
M=aieg,integrated_gradients,integrated_decision_gradients,saliency,input_x_gradient,attention,scaled_attention,grad_ellm,random
SOFT="--n-samples 2 --pis 0.1,0.3,0.5,0.7,0.9"
SWEEP="--topk-sweep 0.05,0.1,0.2,0.3"

# 1. SmolLM2-135M-Instruct, zero-shot sentiment prompt, SST-2 dev, first 200 sentences, in two shards
aieg-fast evaluate --dataset sst2-dev --n 200 --methods $M --n-steps 20 $SOFT $SWEEP --prob-space labels \
    --seed 0 --out "$OUT/sst2_dev" --no-progress &
aieg-fast evaluate --dataset sst2-dev --n 200 --start 100 --methods $M --n-steps 20 $SOFT $SWEEP --prob-space labels \
    --seed 0 --out "$OUT/sst2_dev_b" --no-progress > /dev/null &
wait
cat "$OUT/sst2_dev_b/records.jsonl" >> "$OUT/sst2_dev/records.jsonl"   # merge the shards (same config.json)
aieg-fast evaluate --dataset sst2-dev --n 200 --methods $M --n-steps 20 $SOFT $SWEEP --prob-space labels \
    --seed 0 --out "$OUT/sst2_dev" --no-progress      # computes nothing; writes the summary and plot

# 2. GPT-nano (trained here) on the full SST-2 test set
aieg-fast train-nano --epochs 3 --data-dir "$DATA"
aieg-fast evaluate --model gpt-nano --dataset sst2-test --n 1821 --methods $M --n-steps 20 $SOFT $SWEEP \
    --prob-space labels --seed 0 --out "$OUT/nano_sst2_test" --no-progress

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
