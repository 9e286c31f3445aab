#!/usr/bin/env bash
# The CUDA-graph paths on one GPU beside the eager ones, in one script (the default parts' time limits add
# up to 585 s; on one H200 tests took 85 s, bench 52, bf16w 143, decode 87; profile and batches unmeasured).
# Run from the repository root with the package importable (PYTHONPATH may point at what the machine lacks;
# the repository root is added). Results under $OUT (default
# /tmp/gpu_graphs): steps.log (what ran when, wall times, the runs' median speeds), bench_model.txt,
# bench_decode.txt and profile_decode.txt, then all of the following in results.tgz. PARTS chooses and orders
# them (default: tests bench bf16w decode profile batches):
#   tests      tests.txt: the CUDA tests of tests/test_graphed_training.py, test_fixed_slots.py and test_loss.py
#              (replayed training updates, with fp32 and bf16 weights, and searches equal the eager ones, a
#              step captured by hand too; the loss's closed form equals the compiled stock one; the decode
#              part's TF32 switch reaches the matmuls)
#   bench      bench_model.txt: the training step at a WMT-like and a Multi30k batch: eager, graphs, graphs
#              on a bf16 copy of the weights (train.bf16_weights), the same with the loss's gradient in closed
#              form (mt/fastpath/loss_forms.py: does it beat the compiled stock loss at the WMT-like logits?),
#              the same with cuDNN's attention (off in mt-train on CUDA: does it pay at the graphs' fixed
#              shapes?), nn.Transformer; MFU
#   compiletest compiletest.txt: train.compile's CUDA test (a compiled step captured and replayed updates
#              as the eager one; compiling takes most of its time)
#   compiled   bench_compiled.txt: the graphs on bf16 weights, with either loss, the model compiled for the
#              WMT-like shape (the fastest step measured so far, and the loss's closed form on top of it)
#   graphs     graphs/: make train's default (multi30k_base) on the graph path with fp32 weights under autocast
#              (train.bf16_weights=false), the whole run
#   bf16w      bf16w/: make train's default as it is (on a bf16 copy of the weights), the whole run
#   eager      eager/: the same preset eagerly (train.cuda_graphs=false) for EAGER_STEPS updates: its speed
#   decode     bench_decode.txt: translate's path on test2016 with the model of the first of bf16w, graphs
#              that ran: greedy and beam 5, fp32 and bf16, with and without decode.cuda_graphs (search in
#              fixed slots), and the share of equal lines; bf16 also with SDPA's cuDNN attention off (on by
#              torch's default when decoding; off in mt-train, where it built a graph for every new shape);
#              tf32, fp32 with the matmuls on TF32 tensor cores (translate runs them in full fp32; a fixed-slot
#              beam step is ~55 GFLOP at 1,000 rows), its BLEU and lines equal to fp32's
#   profile    profile_decode.txt: sentencepiece's per-line decoding (as a list of one, alone), then that
#              model's beam 5 and greedy on 200 lines of test2016 in fixed slots, fp32 and bf16: first and
#              steady wall time, steps eager/captured/replayed, each captured step replayed alone (launch,
#              device and back-to-back time a replay), cProfile of the host's Python,
#              torch.profiler's op tables (host and device time); traces/ (each form's Chrome trace)
#   batches    bench_decode_64k.txt: beam 5 as in decode, in batches of 64,000 tokens instead of the
#              checkpoint's 16,000 (whether a GPU wants larger decoding batches)
#   checks     bench_decode_checks.txt: fixed slots alone, greedy and beam 5 in fp32, reading whether a batch is
#              done every 8 (the search's own), 4 or 1 steps: fewer steps past the last sentence's end
#              (test2016 beam 5 in fp32 with a smoke model: 168, 152, 145 steps) against more waits for
#              the device (not a default part)
#   threads    bench_decode_threads.txt: search.py's loop (decode.cuda_graphs off) in one thread and in two
#              (greedy and beam 5, fp32 and bf16): does a second thread hide a step's host time on a GPU, as
#              it does on a CPU? (not a default part)
#   trainprofile profile_train.txt: the kernels of one base training step at the WMT-like batch, under autocast
#              and on a bf16 copy of the weights (the graphs' kernels, run eagerly), with the time per kind of
#              kernel: where the step's GPU time goes on the way to the MFU sought; then the loss alone in each
#              of its forms, forward + backward, at the WMT-like and a Multi30k size (not a default part)
set -u
FINAL=${OUT:-/tmp/gpu_graphs}
OUT=$(mktemp -d)  # everything lands here, then is packed into $FINAL/results.tgz
PY=${PY:-python3}
PARTS=${PARTS:-tests bench bf16w decode profile batches}
EAGER_STEPS=${EAGER_STEPS:-600}
mkdir -p "$FINAL"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TQDM_DISABLE=1
step() { echo "== $(date +%T) $*" | tee -a "$OUT/steps.log"; }
pack() {  # also when stopped early: what ran so far comes back
    tar czf "$FINAL/results.tgz" -C "$OUT" .
    cp "$OUT/steps.log" "$OUT"/bench_*.txt "$OUT"/profile_*.txt "$FINAL/" 2>/dev/null
}
trap pack EXIT
trap 'exit 143' TERM

step "device; parts: $PARTS"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv >> "$OUT/steps.log" 2>&1
$PY -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())" >> "$OUT/steps.log"
# The host the steps are launched from: the cores this process may use, its CPU quota, torch's threads.
$PY -c "import os, torch; from mt.host import cpu_cores, cpu_quota; print('cpus', os.cpu_count(), 'usable',
      len(os.sched_getaffinity(0)), 'cgroup quota', cpu_quota(), 'cpu_cores', cpu_cores(), 'torch threads',
      torch.get_num_threads(), 'load', os.getloadavg())" >> "$OUT/steps.log" 2>&1
echo "cgroup cpu.max: $(cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo none)" >> "$OUT/steps.log"
$PY -c "from mt.cli.commands import info; info(['--system'])" >> "$OUT/steps.log" 2>&1  # mt-info --system

run() {  # name, timeout, overrides...: one mt-train run of make train's default preset
    local name=$1 limit=$2; shift 2
    local start; start=$(date +%s)
    mkdir -p "$OUT/$name"
    timeout "$limit" $PY -m mt.cli.train experiment=multi30k_base data.cache_dir=null hydra.run.dir=/tmp/run_$name "$@" \
        > "$OUT/$name/train.log" 2>&1
    echo "$name rc=$? wall_s=$(( $(date +%s) - start )) $*" | tee -a "$OUT/steps.log"
    cp /tmp/run_$name/train.jsonl /tmp/run_$name/metrics.jsonl /tmp/run_$name/results.json "$OUT/$name/" 2>/dev/null
    $PY - "$OUT/$name/train.jsonl" <<'PYEOF' >> "$OUT/steps.log" 2>&1
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
speeds = [r["tgt_tokens_per_s"] for r in rows if r["step"] > 100]
print(sys.argv[1], "median tgt tok/s after update 100", statistics.median(speeds), "padding", rows[-1].get("padding"),
      "mfu", rows[-1].get("mfu"))
PYEOF
    grep -h '"split"\|"bleu"' "$OUT/$name/results.json" >> "$OUT/steps.log" 2>/dev/null
}

trained_model() {  # the run directory of the first of bf16w, graphs that ran
    ls -d /tmp/run_bf16w /tmp/run_graphs 2>/dev/null | head -1
}

for part in $PARTS; do
    step "$part"
    case $part in
    tests)
        # The GPU's own tests alone (CI runs the rest on a CPU); train.compile's compiles for most of a minute
        # (part compiletest). No -x: a failure in one, a capture that does not replay say, leaves the others'.
        gpu_tests="(cuda or captured_by_hand or position_table) and not train_compile"
        timeout "${TESTS_TIMEOUT:-90}" $PY -m pytest tests/test_graphed_training.py tests/test_fixed_slots.py \
            tests/test_loss.py -q -p no:cacheprovider -k "$gpu_tests" > "$OUT/tests.txt" 2>&1
        grep -h "^FAILED\|capture failed" "$OUT/tests.txt" | head -5 >> "$OUT/steps.log"
        tail -3 "$OUT/tests.txt" >> "$OUT/steps.log" ;;
    bench)
        timeout "${BENCH_TIMEOUT:-85}" $PY scripts/bench_model.py --device cuda --no-decode \
            --kinds mt torch graphs graphs_bf16w graphs_bf16w_closed graphs_bf16w_cudnn > "$OUT/bench_model.txt" 2>&1 ;;
    compiletest)
        timeout "${COMPILETEST_TIMEOUT:-120}" $PY -m pytest tests/test_graphed_training.py -q -p no:cacheprovider \
            -k "train_compile and cuda" > "$OUT/compiletest.txt" 2>&1
        tail -3 "$OUT/compiletest.txt" >> "$OUT/steps.log" ;;
    compiled)
        timeout "${COMPILED_TIMEOUT:-240}" $PY scripts/bench_model.py --device cuda --no-decode --shapes wmt \
            --kinds graphs_bf16w graphs_bf16w_closed --compile only > "$OUT/bench_compiled.txt" 2>&1 ;;
    graphs)
        run graphs "${GRAPHS_TIMEOUT:-190}" train.bf16_weights=false ;;
    bf16w)
        run bf16w "${BF16W_TIMEOUT:-170}" ;;
    eager)
        run eager "${EAGER_TIMEOUT:-100}" train.cuda_graphs=false train.max_steps="$EAGER_STEPS" \
            train.valid_every=100000 data.test_split=null decode.alpha_candidates=[] train.keep_last=0 \
            train.average_last=0 ;;
    decode)
        model=$(trained_model)
        timeout "${DECODE_TIMEOUT:-140}" $PY scripts/bench_decode.py --checkpoint "$model" --device cuda \
            --src data/multi30k/test2016.de --ref data/multi30k/test2016.en --precisions fp32 tf32 bf16 --repeats 2 \
            --cudnn-attention both > "$OUT/bench_decode.txt" 2>&1
        # at a glance: did the fixed-slot steps replay (steps a timed call), and did a capture fail, where?
        grep -h "steps a timed call\|capture failed\|same lines as fp32" "$OUT/bench_decode.txt" | head -12 >> "$OUT/steps.log" ;;
    profile)
        timeout "${PROFILE_TIMEOUT:-65}" $PY scripts/profile_decode.py --checkpoint "$(trained_model)" --device cuda \
            --src data/multi30k/test2016.de --lines 200 --beams 5 1 --precisions fp32 bf16 --cuda-graphs on \
            --trace "$OUT/traces" > "$OUT/profile_decode.txt" 2>&1 ;;
    batches)
        timeout "${BATCHES_TIMEOUT:-35}" $PY scripts/bench_decode.py --checkpoint "$(trained_model)" --device cuda \
            --src data/multi30k/test2016.de --ref data/multi30k/test2016.en --precisions fp32 bf16 --beams 5 \
            --batch-tokens 64000 --repeats 2 > "$OUT/bench_decode_64k.txt" 2>&1 ;;
    checks)
        timeout "${CHECKS_TIMEOUT:-90}" $PY scripts/bench_decode.py --checkpoint "$(trained_model)" --device cuda \
            --src data/multi30k/test2016.de --precisions fp32 --cuda-graphs on --check-every 8 4 1 --repeats 2 \
            > "$OUT/bench_decode_checks.txt" 2>&1 ;;
    threads)
        timeout "${THREADS_TIMEOUT:-90}" $PY scripts/bench_decode.py --checkpoint "$(trained_model)" --device cuda \
            --src data/multi30k/test2016.de --precisions fp32 bf16 --cuda-graphs off --search-threads 1 2 \
            --repeats 2 > "$OUT/bench_decode_threads.txt" 2>&1 ;;
    trainprofile)
        timeout "${TRAINPROFILE_TIMEOUT:-100}" $PY scripts/profile_train_step.py --device cuda --shapes wmt \
            --rows 30 > "$OUT/profile_train.txt" 2>&1 ;;
    *)
        echo "unknown part: $part" | tee -a "$OUT/steps.log" ;;
    esac
done
step "done"
