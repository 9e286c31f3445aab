#!/usr/bin/env bash
# The GPU figures of docs/benchmarks.md in one script (under 10 minutes on one H100). Run it from the
# repository root with the package importable (`pip install -e .`, or PYTHONPATH pointing at what the
# machine lacks; the repository root is added). Every result lands under $OUT (default /tmp/gpu_check),
# packed at the end into $OUT/results.tgz:
#   steps.log           what ran when, each run's wall time, the ensembles' and runs' test scores
#   recipe_<name>/      mt-train experiment=multi30k_base (+ the variant's overrides), each to its own budget
#                       (TRAIN_SECONDS, if set, caps the training seconds); the variants run side by side on
#                       the one GPU (each is launch-bound), so their speed is a lower bound of a run alone
#   ensemble_<name>.*   BLEU of ensembles of the variants' final models (ENSEMBLES): valid at each length
#                       penalty of ALPHAS, test2016 at valid's choice
#   bench_model.txt     if BENCH=1: training step, ours vs nn.Transformer at a WMT-like and a Multi30k batch, MFU
#   bench_decode.txt    if DECODE=1: translate's path on test2016 with the first variant's model: greedy and
#                       beam 5, fp32 and bf16, sent/s and BLEU
#   decode_profile.txt  if DECODE=1: torch.profiler of greedy decoding, fp32 beside bf16
#   bench_compile.txt   if COMPILE=1: the training step under torch.compile (ours and nn.Transformer)
set -u
OUT=${OUT:-/tmp/gpu_check}
TRAIN_SECONDS=${TRAIN_SECONDS:-0}
PY=${PY:-python3}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TQDM_DISABLE=1
DATA="$PWD/data/multi30k"
step() { echo "== $(date +%T) $*" | tee -a "$OUT/steps.log"; }

# name:overrides (space-separated Hydra overrides after experiment=multi30k_base), one variant a line:
# by default the preset with two seeds, and three variations of it (longer, a higher peak rate, larger
# batches). A name starting with "cudnn" runs with MT_FASTPATH=stock: torch's own choice of attention kernels.
COMMON=${COMMON:-""}
VARIANTS=${VARIANTS:-"base_seed1:train.seed=1
base_seed2:train.seed=2
long7200:train.max_steps=7200
lr1e3:train.lr=1e-3
tokens6k:train.max_tokens=6144"}
# Ensembles scored after the runs (translate --ensemble: the mean of the members' next-token
# probabilities), name:variants; each member is the checkpoint its run scored on test2016.
ENSEMBLES=${ENSEMBLES:-"seeds2:base_seed1 base_seed2
all5:base_seed1 base_seed2 long7200 lr1e3 tokens6k"}
THREADS=${THREADS:-3}  # CPU threads per run (16 cores, five runs)
# TRAIN_SECONDS=360 ends every variant within ~8 minutes: on one H100 about 80-100 s of each run go to
# start-up, validations, averaging, the length-penalty choice and the test score.
# A capped run still cools down to 0 at the cap (the budget is whichever of time and updates ends first).

step "device"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > "$OUT/nvidia-smi.csv" 2>&1
$PY -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())" >> "$OUT/steps.log"

if [ "${BENCH:-0}" = 1 ]; then
    step "bench_model (eager)"
    timeout 100 $PY scripts/bench_model.py --device cuda > "$OUT/bench_model.txt" 2> "$OUT/bench_model.err"
fi

step "recipes side by side"
FIRST=""
while IFS= read -r line; do
    name=${line%%:*}; overrides=${line#*:}
    [ -z "$FIRST" ] && FIRST=$name
    run=/tmp/recipe_$name; mkdir -p "$OUT/recipe_$name"
    (
        start=$(date +%s)
        [[ $name == cudnn* ]] && export MT_FASTPATH=stock
        # Inductor's compile workers default to one per core: keep them off the other runs' launch threads.
        [[ $name == compile* ]] && export TORCHINDUCTOR_COMPILE_THREADS=4
        # shellcheck disable=SC2086  # $overrides splits into Hydra overrides
        timeout "${RUN_TIMEOUT:-575}" $PY -m mt.cli.train experiment=multi30k_base data.cache_dir=null \
            hydra.run.dir=$run train.max_time=$TRAIN_SECONDS train.threads=$THREADS $COMMON $overrides \
            > "$OUT/recipe_$name/train.log" 2>&1
        echo "rc=$? wall_s=$(( $(date +%s) - start )) overrides=$overrides" > "$OUT/recipe_$name/wall.txt"
        cp $run/train.jsonl $run/metrics.jsonl $run/results.json $run/test.hyp "$OUT/recipe_$name/" 2>/dev/null
    ) &
done <<< "$VARIANTS"
wait
cat "$OUT"/recipe_*/wall.txt >> "$OUT/steps.log"

step "ensembles, side by side"
# Each ensemble (the mean of the members' next-token probabilities; each member the checkpoint its run
# scored) decodes valid at every alpha of ALPHAS, beam 5, fp32 as the runs' test score, then test2016
# once at the alpha valid chose (mt-evaluate --choose-on valid), as a run does (decode.alpha_candidates).
# Each stops at END seconds (default 585) after the start at the latest, so the archive is still made.
ALPHAS=${ALPHAS:-"0.6 1.0 1.2"}
evaluate() { # label, then mt-evaluate's arguments, into $OUT/label.{txt,json}
    local label=$1 start left; shift
    start=$(date +%s); left=$(( ${END:-585} - SECONDS )); [ "$left" -gt 200 ] && left=200
    [ "$left" -lt 10 ] && echo "$label: skipped, past the deadline" >> "$OUT/steps.log" && return
    timeout "$left" $PY -c "from mt.cli.commands import evaluate; evaluate()" "$@" --device "${EVAL_DEVICE:-cuda}" \
        --json "$OUT/$label.json" > "$OUT/$label.txt" 2>&1
    echo "rc=$? seconds=$(( $(date +%s) - start ))" >> "$OUT/$label.txt"
}
scored() { # the model a run ended with (results.json: final.pt)
    local picked
    picked=$($PY -c "import json, sys; print(json.load(open(sys.argv[1]))['checkpoint'])" \
        /tmp/recipe_$1/results.json 2>/dev/null) && echo /tmp/recipe_$1/checkpoints/$picked
}
while IFS= read -r line; do
    [ -z "$line" ] && continue
    name=${line%%:*}; members=()
    for variant in ${line#*:}; do checkpoint=$(scored "$variant") && members+=("$checkpoint"); done
    echo "ensemble $name: ${members[*]}" >> "$OUT/steps.log"
    # shellcheck disable=SC2086  # ALPHAS splits into values
    evaluate "ensemble_$name" --ensemble --checkpoint "${members[@]}" --split test2016 --alpha $ALPHAS \
        --choose-on valid &
done <<< "$ENSEMBLES"
wait
grep -H "BLEU [0-9]\|chosen on\|rc=" "$OUT"/ensemble_*.txt >> "$OUT/steps.log" 2>/dev/null
grep -H "length penalty\|test test2016" "$OUT"/recipe_*/train.log >> "$OUT/steps.log" 2>/dev/null

step "bench_decode ($FIRST)"
if [ "${DECODE:-0}" = 1 ] && [ -f /tmp/recipe_$FIRST/checkpoints/final.pt ]; then
    timeout 90 $PY scripts/bench_decode.py --checkpoint /tmp/recipe_$FIRST/checkpoints/best.pt \
        --src "$DATA/test2016.de" --ref "$DATA/test2016.en" --device cuda --repeats 1 \
        > "$OUT/bench_decode.txt" 2> "$OUT/bench_decode.err"
fi

step "decode profile ($FIRST)"
if [ "${DECODE:-0}" = 1 ] && [ -f /tmp/recipe_$FIRST/checkpoints/final.pt ]; then
    timeout 90 $PY scripts/profile_decode.py --checkpoint /tmp/recipe_$FIRST/checkpoints/best.pt \
        --src "$DATA/test2016.de" --device cuda > "$OUT/decode_profile.txt" 2>&1
fi
if [ "${COMPILE:-0}" = 1 ]; then
    step "bench_model under torch.compile"
    timeout 150 $PY scripts/bench_model.py --device cuda --compile --shapes wmt --no-decode \
        > "$OUT/bench_compile.txt" 2> "$OUT/bench_compile.err"
fi
step "done"
# One archive of everything under $OUT.
tar czf /tmp/gpu_check_results.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete \
    && mv /tmp/gpu_check_results.tgz "$OUT/results.tgz"
