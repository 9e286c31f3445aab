#!/usr/bin/env bash
# The GPU figures of the README in one run (about 7 minutes on one H100), for the lent GPU machine:
# prepare .gpu/ as ../shared/gpu/README.md says, then run this from the repository root there
# (device tool: command "bash scripts/gpu_check.sh", carry [".gpu"]). Every result lands under $OUT:
#   bench_model.jsonl   training step: ours vs nn.Transformer at a WMT-like and a Multi30k batch, MFU
#   train.log, train.jsonl, metrics.jsonl, results.json   mt-train experiment=multi30k_base, TRAIN_SECONDS
#   bench_decode.jsonl  translate's path on test2016: greedy and beam 5, fp32 and bf16, sent/s and BLEU
#   bench_compile.jsonl the training step under torch.compile (ours and nn.Transformer)
set -u
OUT=${OUT:-/tmp/gpu_check}
TRAIN_SECONDS=${TRAIN_SECONDS:-150}
PY=${PY:-python3}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/.gpu/site:$PWD" PYTHONUNBUFFERED=1 TQDM_DISABLE=1
DATA="$PWD/.gpu/data"
RUN=/tmp/gpu_check_run
step() { echo "== $(date +%T) $*" | tee -a "$OUT/steps.log"; }

step "device"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > "$OUT/nvidia-smi.csv" 2>&1
$PY -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())" >> "$OUT/steps.log"

step "bench_model (eager)"
timeout 150 $PY scripts/bench_model.py --device cuda > "$OUT/bench_model.txt" 2> "$OUT/bench_model.err"

step "mt-train multi30k_base for ${TRAIN_SECONDS}s of training"
timeout $((TRAIN_SECONDS + 150)) $PY -m mt.train experiment=multi30k_base data=files data.dir="$DATA" \
    data.src_lang=de data.tgt_lang=en data.test_split=test2016 data.cache_dir=null hydra.run.dir=$RUN \
    train.max_time=$TRAIN_SECONDS > "$OUT/train.log" 2>&1
cp $RUN/train.jsonl $RUN/metrics.jsonl $RUN/results.json "$OUT/" 2>/dev/null

step "bench_decode"
if [ -f $RUN/checkpoints/best.pt ]; then
    timeout 150 $PY scripts/bench_decode.py --checkpoint $RUN/checkpoints/best.pt --src "$DATA/test2016.de" \
        --ref "$DATA/test2016.en" --device cuda --repeats 2 > "$OUT/bench_decode.txt" 2> "$OUT/bench_decode.err"
fi

step "bench_model under torch.compile"
timeout 150 $PY scripts/bench_model.py --device cuda --compile --shapes wmt --no-decode \
    > "$OUT/bench_compile.txt" 2> "$OUT/bench_compile.err"
step "done"
