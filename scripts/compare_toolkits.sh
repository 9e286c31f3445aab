#!/usr/bin/env bash
# The same Transformer trained and decoded by this toolkit, by JoeyNMT 2.3.0, by OpenNMT-py 3.5.1 and by fairseq
# 0.12.2 on the same machine, one after the other: multi30k_cpu_fp32's model (3+3 layers, d_model 192, 4 heads,
# FFN 768, pre-norm, tied embeddings, dropout 0.2 on the residual branches and embeddings, none on attention
# weights; JoeyNMT 2.3.0 also drops attention weights and FFN activations at that rate, OpenNMT-py 3.5.1 FFN
# activations, neither can be told otherwise) and tokenizer (the others read the same sentencepiece model);
# about the same target tokens per update (our batches of 1,800 tokens counted with padding hold ~1,630, as do
# OpenNMT-py's; fairseq's held ~1,565 at 1,800, hence FAIRSEQ_BATCH=1900; JoeyNMT draws sentences at random, so
# its batches carry more padding: at 1,800 they held about half as many, hence JOEY_BATCH=3600); Adam (0.9,
# 0.98) at a peak of 2e-3 after 400 warm-up updates, then 1/sqrt(step); label smoothing 0.1, clipping at 1.0,
# fp32, UPDATES updates. Then each decodes test2016 with beam 5 and length penalty 1.0 (GNMT's, except
# fairseq's, which divides by length), with its own output length limit, in ROUNDS rounds (default 3) that
# alternate the toolkits, whole commands timed. Where the CPU has native bf16, our run is repeated with
# train.precision=bf16 (the same model under autocast), which is what mt-train does there.
#   bash scripts/compare_toolkits.sh   # PARTS="ours joeynmt opennmt fairseq" UPDATES=1000 OUT=/tmp/compare_toolkits
# Needs the project's .venv (make venv) and PyPI: each other toolkit goes into a venv of its own under $OUT,
# with this project's torch version. Prints one TSV table (also $OUT/summary.tsv); the logs stay under $OUT.
# The others read the tokenizer of our fp32 run: PARTS without "ours" reuses the one under $OUT; PARTS= (empty)
# only decodes and sums up what $OUT holds.
set -euo pipefail
UPDATES=${UPDATES:-1000}
JOEY_BATCH=${JOEY_BATCH:-3600}
FAIRSEQ_BATCH=${FAIRSEQ_BATCH:-1900}
LOG_EVERY=$((UPDATES < 100 ? UPDATES / 2 : 50))  # JoeyNMT wants it below the validation interval (= UPDATES)
OUT=${OUT:-/tmp/compare_toolkits}
PARTS=${PARTS-"ours joeynmt opennmt fairseq"}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY="$ROOT/.venv/bin/python"
DATA="$ROOT/data/multi30k"
mkdir -p "$OUT"
[ -x "$PY" ] || { echo "error: $PY missing: run make venv first" >&2; exit 1; }
TORCH=$("$PY" -c "import torch; print(torch.__version__.split('+')[0])")

wanted() { [[ " $PARTS " == *" $1 "* ]]; }

venv() {  # name, pip arguments...: a venv under $OUT with this project's torch, then the packages
    local dir="$OUT/$1-venv"
    shift
    if [ ! -x "$dir/bin/python" ]; then
        python3 -m venv "$dir"
        "$dir/bin/pip" -q install "torch==$TORCH"
        "$dir/bin/pip" -q install "$@"
    fi
}

timed() {  # name, command...: the command's wall time, start-up included, appended to $OUT/name.decode.time
    local name=$1 t0 t1
    shift
    t0=$(date +%s.%N)
    "$@"
    t1=$(date +%s.%N)
    echo "$t0 $t1" >> "$OUT/$name.decode.time"
}

ours() {  # name, extra overrides...
    local name=$1
    shift
    rm -rf "${OUT:?}/$name"
    "$ROOT/.venv/bin/mt-train" experiment=multi30k_cpu_fp32 "hydra.run.dir=$OUT/$name" train.seed=1 \
        train.max_time=0 "train.max_steps=$UPDATES" train.cooldown=0 "train.valid_every=$UPDATES" \
        "train.save_every=$UPDATES" "train.log_every=$LOG_EVERY" "$@" > "$OUT/$name.train.log" 2>&1
}

decode_ours() {  # name
    "$ROOT/.venv/bin/translate" -c "$OUT/$1/checkpoints/best.pt" -i "$DATA/test2016.de" \
        -o "$OUT/$1.test2016.en" --beam 5 --alpha 1.0 -q
}

if wanted ours; then
    echo "== $(date +%T) this toolkit, fp32"
    ours ours_fp32 train.precision=fp32
    if grep -q -E 'avx512_bf16|amx_bf16' /proc/cpuinfo; then
        echo "== $(date +%T) this toolkit, bf16 autocast"
        ours ours_bf16 train.precision=bf16
    fi
fi
[ -f "$OUT/ours_fp32/tokenizer/spm.model" ] || { echo "error: no tokenizer under $OUT: run PARTS=ours" >&2; exit 1; }
cp "$OUT/ours_fp32/tokenizer/spm.model" "$OUT/spm.model"
# its pieces but the control and unknown ones, one a line: JoeyNMT's and fairseq's vocabularies (each adds its
# own <unk> <pad> <s> </s> first)
"$PY" - "$OUT" <<'END'
import sys

import sentencepiece as spm

sp = spm.SentencePieceProcessor(model_file=f"{sys.argv[1]}/spm.model")
pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if not (sp.is_control(i) or sp.is_unknown(i))]
with open(f"{sys.argv[1]}/spm.pieces", "w", encoding="utf-8") as f:
    f.write("".join(p + "\n" for p in pieces))
END

joeynmt_side() {  # lang
    cat <<END
    lang: "$1"
    level: "bpe"
    max_length: 256
    voc_file: "$OUT/spm.pieces"
    tokenizer_type: "sentencepiece"
    tokenizer_cfg:
      model_file: "$OUT/spm.model"
END
}

joeynmt_layers() {
    cat <<END
    type: "transformer"
    num_layers: 3
    num_heads: 4
    embeddings: {embedding_dim: 192, scale: True, dropout: 0.2}
    hidden_size: 192
    ff_size: 768
    dropout: 0.2
    layer_norm: "pre"
END
}

joeynmt() {
    # JoeyNMT 2.3.0 as published: it imports importlib_metadata without declaring it, and calls
    # SentencePieceProcessor.SetVocabulary, which sentencepiece 0.2 no longer has.
    venv joeynmt joeynmt==2.3.0 "sentencepiece<0.2" importlib_metadata
    local joey="$OUT/joeynmt-venv/bin/python"
    cat > "$OUT/joeynmt.yaml" <<END
name: "multi30k_cpu_fp32"
joeynmt_version: "2.3.0"
model_dir: "$OUT/joeynmt"
use_cuda: False
fp16: False
random_seed: 1
data:
  train: "$DATA/train"
  dev: "$DATA/valid"
  test: "$DATA/test2016"
  dataset_type: "plain"
  src:
$(joeynmt_side de)
  trg:
$(joeynmt_side en)
testing:
  beam_size: 5
  beam_alpha: 1.0
  batch_size: 3600
  batch_type: "token"
  eval_metrics: ["bleu"]
training:
  optimizer: "adam"
  adam_betas: [0.9, 0.98]
  scheduling: "warmupinversesquareroot"
  learning_rate: 0.002
  learning_rate_min: 1.0e-8
  learning_rate_warmup: 400
  clip_grad_norm: 1.0
  label_smoothing: 0.1
  normalization: "tokens"
  batch_size: $JOEY_BATCH
  batch_type: "token"
  updates: $UPDATES
  epochs: 1000
  validation_freq: $UPDATES
  logging_freq: $LOG_EVERY
  early_stopping_metric: "ppl"
  keep_best_ckpts: 1
  overwrite: True
  shuffle: True
model:
  initializer: "xavier_uniform"
  embed_initializer: "xavier_uniform"
  bias_initializer: "zeros"
  tied_embeddings: True
  tied_softmax: True
  encoder:
$(joeynmt_layers)
  decoder:
$(joeynmt_layers)
END
    "$joey" -m joeynmt train "$OUT/joeynmt.yaml" --skip-test > "$OUT/joeynmt.train.log" 2>&1
}

decode_joeynmt() {
    # to stdout: its --output-path fails after decoding in 2.3.0 (AttributeError: 'BaseConfig' object has no
    # attribute 'n_best'); its log goes to stderr
    "$OUT/joeynmt-venv/bin/python" -m joeynmt translate "$OUT/joeynmt.yaml" < "$DATA/test2016.de" \
        > "$OUT/joeynmt.test2016.en" 2> "$OUT/joeynmt.decode.log"
}

opennmt() {
    # OpenNMT-py 3.5.1 pins torch < 2.3: installed without its dependencies, then those it imports.
    venv opennmt --no-deps OpenNMT-py==3.5.1
    local bin="$OUT/opennmt-venv/bin"
    "$bin/pip" -q install configargparse "ctranslate2>=4,<5" tensorboard pyonmttok pyyaml sacrebleu rapidfuzz \
        pyahocorasick six spacy waitress flask fasttext-wheel sentencepiece
    mkdir -p "$OUT/opennmt"
    cat > "$OUT/opennmt.yaml" <<END
save_data: $OUT/opennmt/data
src_vocab: $OUT/opennmt/vocab.txt
share_vocab: true
overwrite: true
data:
  corpus_1:
    path_src: $DATA/train.de
    path_tgt: $DATA/train.en
    transforms: [sentencepiece, filtertoolong]
  valid:
    path_src: $DATA/valid.de
    path_tgt: $DATA/valid.en
    transforms: [sentencepiece]
src_subword_model: $OUT/spm.model
tgt_subword_model: $OUT/spm.model
src_seq_length: 256
tgt_seq_length: 256
src_vocab_size: 8100
tgt_vocab_size: 8100
encoder_type: transformer
decoder_type: transformer
position_encoding: true
enc_layers: 3
dec_layers: 3
heads: 4
hidden_size: 192
word_vec_size: 192
transformer_ff: 768
dropout: [0.2]
attention_dropout: [0.0]
share_embeddings: true
share_decoder_embeddings: true
batch_type: tokens
batch_size: 1800
valid_batch_size: 1800
batch_size_multiple: 1
accum_count: [1]
optim: adam
adam_beta1: 0.9
adam_beta2: 0.98
# noam: learning_rate * 192^-0.5 * min(step^-0.5, step * 400^-1.5): 2e-3 at step 400
decay_method: noam
learning_rate: 0.5543
warmup_steps: 400
max_grad_norm: 1.0
label_smoothing: 0.1
param_init: 0
param_init_glorot: true
normalization: tokens
train_steps: $UPDATES
valid_steps: $UPDATES
save_checkpoint_steps: $UPDATES
report_every: $LOG_EVERY
seed: 1
model_dtype: fp32
save_model: $OUT/opennmt/model
END
    "$bin/onmt_build_vocab" -config "$OUT/opennmt.yaml" -n_sample -1 > "$OUT/opennmt.vocab.log" 2>&1
    "$bin/onmt_train" -config "$OUT/opennmt.yaml" > "$OUT/opennmt.train.log" 2>&1
}

decode_opennmt() {
    # its checkpoints hold an argparse.Namespace, which torch >= 2.6 refuses to unpickle by default
    TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 "$OUT/opennmt-venv/bin/onmt_translate" \
        -model "$OUT/opennmt/model_step_$UPDATES.pt" -src "$DATA/test2016.de" \
        -output "$OUT/opennmt.test2016.en" -beam_size 5 -length_penalty wu -alpha 1.0 -batch_type tokens \
        -batch_size 3600 -transforms sentencepiece -src_subword_model "$OUT/spm.model" \
        -tgt_subword_model "$OUT/spm.model" > "$OUT/opennmt.decode.log" 2>&1
}

fairseq_install() {
    # fairseq 0.12.2, the last PyPI release, does not install on Python 3.11 as published: its sdist lacks the
    # sources of its C++ extensions (none of which a Transformer needs), so setup.py is told to skip them; and
    # fairseq, like the hydra-core 1.0 it pins, gives dataclass fields instance defaults, which Python 3.11
    # refuses, so those become default_factory (what fairseq's main branch did after the release).
    local bin="$OUT/fairseq-venv/bin"
    [ -x "$bin/fairseq-train" ] && return
    venv fairseq cython "numpy<2" setuptools wheel
    "$bin/pip" -q install "pip<24.1"  # omegaconf 2.0.6's metadata reads "PyYAML>=5.1.*", which newer pip rejects
    "$bin/pip" -q install "hydra-core==1.0.7" "omegaconf==2.0.6" bitarray sacrebleu regex tqdm cffi sentencepiece
    rm -rf "$OUT/fairseq-src"
    "$bin/pip" -q download --no-deps --no-build-isolation fairseq==0.12.2 -d "$OUT/fairseq-src"
    tar -xzf "$OUT/fairseq-src/fairseq-0.12.2.tar.gz" -C "$OUT/fairseq-src"
    "$bin/python" - "$OUT/fairseq-src/fairseq-0.12.2" <<'END'
import sys
from pathlib import Path

setup = Path(sys.argv[1]) / "setup.py"
text = setup.read_text()
old = "    from torch.utils import cpp_extension\n"
assert old in text, "fairseq's setup.py changed"
setup.write_text(text.replace(old, '    raise ImportError("the sdist lacks the C++ sources")\n'))
END
    "$bin/pip" -q install --no-deps --no-build-isolation "$OUT/fairseq-src/fairseq-0.12.2"
    "$bin/python" - <<'END'
import re
import sysconfig
from pathlib import Path

site = Path(sysconfig.get_paths()["purelib"])


def patch(path: str, pattern: str, replacement: str) -> None:
    file = site / path
    text, n = re.subn(pattern, replacement, file.read_text(), flags=re.MULTILINE)
    assert n, f"{path}: nothing matched {pattern!r}"
    file.write_text(text)


instance_default = r"^(\s+\w+: (\w+) = )\2\(\)$"  # e.g. "common: CommonConfig = CommonConfig()"
for path in ("fairseq/dataclass/configs.py", "fairseq/models/transformer/transformer_config.py",
             "hydra/conf/__init__.py"):
    patch(path, instance_default, r"\1field(default_factory=\2)")
patch("fairseq/models/transformer/transformer_config.py", r"field\(default=QuantNoiseConfig\(\)\)",
      "field(default_factory=QuantNoiseConfig)")
patch("fairseq/dataclass/initialize.py", r"^(\s+)v = FairseqConfig.__dataclass_fields__\[k\].default$",
      r"\1f = FairseqConfig.__dataclass_fields__[k]\n\1v = f.default if f.default_factory is MISSING"
      r" else f.default_factory()")
patch("fairseq/dataclass/initialize.py", r"^from hydra.core.config_store import ConfigStore$",
      "from dataclasses import MISSING\n\\g<0>")
END
    "$bin/fairseq-train" --help > /dev/null
}

fairseq() {
    fairseq_install
    local bin="$OUT/fairseq-venv/bin" dir="$OUT/fairseq"
    rm -rf "$dir"
    mkdir -p "$dir/pieces"
    # the same subwords as ours, and the whole sentencepiece vocabulary as one dictionary for both sides
    "$PY" - "$OUT" "$DATA" <<'END'
import sys

import sentencepiece as spm

out, data = sys.argv[1:]
sp = spm.SentencePieceProcessor(model_file=f"{out}/spm.model")
for split in ("train", "valid"):
    for lang in ("de", "en"):
        with open(f"{data}/{split}.{lang}", encoding="utf-8") as f:
            lines = f.read().splitlines()
        with open(f"{out}/fairseq/pieces/{split}.{lang}", "w", encoding="utf-8") as f:
            f.write("".join(" ".join(sp.encode(line, out_type=str)) + "\n" for line in lines))
END
    sed 's/$/ 1/' "$OUT/spm.pieces" > "$dir/dict.txt"  # fairseq's dictionary: a piece and a count a line
    "$bin/fairseq-preprocess" --source-lang de --target-lang en --trainpref "$dir/pieces/train" \
        --validpref "$dir/pieces/valid" --destdir "$dir/bin" --srcdict "$dir/dict.txt" --joined-dictionary \
        --workers 2 > "$OUT/fairseq.preprocess.log" 2>&1
    # --max-tokens bounds sentences x the longer side, padding included, as ours does, but fairseq's batches
    # held fewer target tokens at the same bound; by default it also rounds the sentences of a batch down to a
    # multiple of 8, which ours does not
    "$bin/fairseq-train" "$dir/bin" --cpu --seed 1 --arch transformer --share-all-embeddings \
        --encoder-layers 3 --decoder-layers 3 --encoder-embed-dim 192 --decoder-embed-dim 192 \
        --encoder-ffn-embed-dim 768 --decoder-ffn-embed-dim 768 --encoder-attention-heads 4 \
        --decoder-attention-heads 4 --encoder-normalize-before --decoder-normalize-before --dropout 0.2 \
        --optimizer adam --adam-betas "(0.9, 0.98)" --lr 2e-3 --lr-scheduler inverse_sqrt --warmup-updates 400 \
        --warmup-init-lr 1e-7 --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --clip-norm 1.0 \
        --max-tokens "$FAIRSEQ_BATCH" --required-batch-size-multiple 1 --max-update "$UPDATES" \
        --validate-interval 1000 --validate-interval-updates "$UPDATES" \
        --save-interval 1000 --save-interval-updates "$UPDATES" --no-epoch-checkpoints --save-dir "$dir/checkpoints" \
        --log-format simple --log-interval "$LOG_EVERY" > "$OUT/fairseq.train.log" 2>&1
}

decode_fairseq() {
    # fairseq-interactive reads raw text and applies the sentencepiece model itself, as our translate does;
    # its length penalty divides the score by length ** lenpen (GNMT's, which the others use, differs)
    # its checkpoints hold an argparse.Namespace too
    TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 "$OUT/fairseq-venv/bin/fairseq-interactive" "$OUT/fairseq/bin" --cpu \
        --path "$OUT/fairseq/checkpoints/checkpoint_last.pt" --input "$DATA/test2016.de" --source-lang de \
        --target-lang en --bpe sentencepiece --sentencepiece-model "$OUT/spm.model" --beam 5 --lenpen 1.0 \
        --buffer-size 2000 --max-tokens 3600 > "$OUT/fairseq.decode.log" 2>&1
    grep '^D-' "$OUT/fairseq.decode.log" | sort -t- -k2 -n | cut -f3 > "$OUT/fairseq.test2016.en"
}

if wanted joeynmt; then
    echo "== $(date +%T) JoeyNMT 2.3.0, fp32"
    joeynmt
fi
if wanted opennmt; then
    echo "== $(date +%T) OpenNMT-py 3.5.1, fp32"
    opennmt
fi
if wanted fairseq; then
    echo "== $(date +%T) fairseq 0.12.2, fp32"
    fairseq
fi

# Decoding timed in rounds, the toolkits alternating (ROUNDS, default 3), for every model under $OUT
ROUNDS=${ROUNDS:-3}
models=()
[ -f "$OUT/ours_fp32/checkpoints/best.pt" ] && models+=("ours ours_fp32")
[ -f "$OUT/ours_bf16/checkpoints/best.pt" ] && models+=("ours ours_bf16")
[ -f "$OUT/joeynmt/best.ckpt" ] && models+=("joeynmt joeynmt")
[ -f "$OUT/opennmt/model_step_$UPDATES.pt" ] && models+=("opennmt opennmt")
[ -f "$OUT/fairseq/checkpoints/checkpoint_last.pt" ] && models+=("fairseq fairseq")
for model in "${models[@]}"; do rm -f "$OUT/${model#* }.decode.time"; done
for round in $(seq "$ROUNDS"); do
    echo "== $(date +%T) decoding test2016, round $round of $ROUNDS"
    for model in "${models[@]}"; do
        read -r kind name <<< "$model"
        if [ "$kind" = ours ]; then timed "$name" decode_ours "$name"; else timed "$name" "decode_$kind"; fi
    done
done

echo "== $(date +%T) summary"
"$PY" - "$OUT" "$DATA" <<'END' | tee "$OUT/summary.tsv"
import datetime as dt
import re
import statistics
import sys
from pathlib import Path

import sacrebleu

out, data = Path(sys.argv[1]), Path(sys.argv[2])
refs = (data / "test2016.en").read_text(encoding="utf-8").splitlines()


def stamp(line: str) -> dt.datetime:
    found = re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[,.]\d+)?", line)[0]
    return dt.datetime.fromisoformat(found.replace(",", "."))


def training(log: Path, start: str, step: str, rate: str) -> tuple[float, float, int]:
    """Seconds from the first batch to the last update's log line, median logged tok/s, updates logged."""
    lines = log.read_text(encoding="utf-8").splitlines()
    first = next(line for line in lines if start in line)
    steps = [line for line in lines if re.search(step, line)]
    rates = [float(re.search(rate, line)[1]) for line in steps]
    seconds = (stamp(steps[-1]) - stamp(first)).total_seconds()
    return seconds, statistics.median(rates), int(re.search(step, steps[-1])[1])


rows = []
for name, label, start, step, rate in (
    ("ours_fp32", "this toolkit, fp32", "training: ", r"- step (\d+) \|", r"\| (\d+) tgt tok/s"),
    ("ours_bf16", "this toolkit, bf16 autocast", "training: ", r"- step (\d+) \|", r"\| (\d+) tgt tok/s"),
    ("joeynmt", "JoeyNMT 2.3.0, fp32", "EPOCH 1", r"Step:\s+(\d+),", r"Tokens per Sec:\s+(\d+)"),
    ("opennmt", "OpenNMT-py 3.5.1, fp32", "Start training loop", r"Step (\d+)/", r"; \d+/(\d+) tok/s"),
    ("fairseq", "fairseq 0.12.2, fp32", "begin training epoch 1", r"\| train_inner \|.*num_updates=(\d+),",
     r"\bwps=(\d+)"),
):
    if not (out / f"{name}.decode.time").exists():
        continue
    seconds, tok_s, updates = training(out / f"{name}.train.log", start, step, rate)
    hyps = (out / f"{name}.test2016.en").read_text(encoding="utf-8").splitlines()
    spans = (line.split() for line in (out / f"{name}.decode.time").read_text().splitlines())
    rounds = [float(t1) - float(t0) for t0, t1 in spans]
    bleu = sacrebleu.corpus_bleu(hyps, [refs]).score if len(hyps) == len(refs) else float("nan")
    per_update = tok_s * seconds / updates
    rows.append((label, updates, f"{per_update:.0f}", f"{seconds:.0f}", f"{tok_s:.0f}", f"{bleu:.2f}", len(hyps),
                 f"{statistics.median(rounds):.1f}", " ".join(f"{x:.1f}" for x in rounds)))
print("toolkit\tupdates\t~target tokens/update\ttraining s\tmedian target tok/s\ttest2016 BLEU (beam 5)\tlines out"
      "\tdecode s, median (start-up incl.)\teach round")
for row in rows:
    print("\t".join(map(str, row)))
END
