#!/usr/bin/env bash
# CUDA-graph training on one GPU beside the eager path, in one script (under 9 minutes on one H100/H200).
# Run from the repository root with the package importable (PYTHONPATH may point at what the machine
# lacks; the repository root is added). Results under $OUT (default /tmp/gpu_graphs): steps.log (what ran
# when, wall times, the runs' median speeds) and bench_model.txt, then all of the following in results.tgz:
#   tests.txt          tests/test_graphed_training.py and test_fixed_slots.py, their CUDA tests included
#                      (replayed training updates and searches equal the eager ones)
#   bench_model.txt    the training step at a WMT-like and a Multi30k batch: eager, graphs, nn.Transformer
#   graphs/            make train's default (multi30k_base) on the graph path, the whole run
#   eager/             the same preset eagerly (train.cuda_graphs=false) for EAGER_STEPS updates: its speed
#   bench_decode.txt   translate's path on test2016 with the graphs run's model: greedy and beam 5, fp32,
#                      with and without decode.cuda_graphs (search in fixed slots), and the share of equal lines
set -u
FINAL=${OUT:-/tmp/gpu_graphs}
OUT=$(mktemp -d)  # everything lands here, then is packed into $FINAL/results.tgz
PY=${PY:-python3}
EAGER_STEPS=${EAGER_STEPS:-600}
mkdir -p "$FINAL"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TQDM_DISABLE=1
step() { echo "== $(date +%T) $*" | tee -a "$OUT/steps.log"; }
pack() {  # also when stopped early: what ran so far comes back
    tar czf "$FINAL/results.tgz" -C "$OUT" .
    cp "$OUT/steps.log" "$OUT/bench_model.txt" "$OUT/bench_decode.txt" "$FINAL/" 2>/dev/null
}
trap pack EXIT
trap 'exit 143' TERM

step "device"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv >> "$OUT/steps.log" 2>&1
$PY -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())" >> "$OUT/steps.log"

if [ "${TESTS:-1}" = 1 ]; then
step "tests"
timeout 150 $PY -m pytest tests/test_graphed_training.py tests/test_fixed_slots.py -q -x -p no:cacheprovider \
    > "$OUT/tests.txt" 2>&1
tail -3 "$OUT/tests.txt" >> "$OUT/steps.log"
fi

step "bench_model"
timeout "${BENCH_TIMEOUT:-150}" $PY scripts/bench_model.py --device cuda --graphs --no-decode > "$OUT/bench_model.txt" 2>&1

run() {  # name, timeout, overrides...
    local name=$1 limit=$2; shift 2
    local start; start=$(date +%s)
    mkdir -p "$OUT/$name"
    timeout "$limit" $PY -m mt.train experiment=multi30k_base data.cache_dir=null hydra.run.dir=/tmp/run_$name "$@" \
        > "$OUT/$name/train.log" 2>&1
    echo "$name rc=$? wall_s=$(( $(date +%s) - start )) $*" | tee -a "$OUT/steps.log"
    cp /tmp/run_$name/train.jsonl /tmp/run_$name/metrics.jsonl /tmp/run_$name/results.json "$OUT/$name/" 2>/dev/null
}

step "graphs: make train's default, the whole run"
run graphs "${GRAPHS_TIMEOUT:-270}"

step "decoding with the graphs run's model"
timeout "${DECODE_TIMEOUT:-90}" $PY scripts/bench_decode.py --checkpoint /tmp/run_graphs/checkpoints/final.pt --device cuda \
    --src data/multi30k/test2016.de --ref data/multi30k/test2016.en --precisions fp32 --repeats 2 \
    > "$OUT/bench_decode.txt" 2>&1

step "eager: the same preset, $EAGER_STEPS updates"
run eager "${EAGER_TIMEOUT:-100}" train.cuda_graphs=false train.max_steps="$EAGER_STEPS" train.valid_every=100000 \
    data.test_split=null decode.alpha_candidates=[] train.keep_last=0 train.average_last=0

step "speeds (median tgt tok/s of the log lines after update 100)"
for name in graphs eager; do
    $PY - "$OUT/$name/train.jsonl" <<'PYEOF' >> "$OUT/steps.log" 2>&1
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
speeds = [r["tgt_tokens_per_s"] for r in rows if r["step"] > 100]
print(sys.argv[1], "median tok/s", statistics.median(speeds), "padding", rows[-1].get("padding"), "mfu", rows[-1].get("mfu"))
PYEOF
done
step "done"
