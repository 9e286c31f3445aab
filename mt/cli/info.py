"""mt-info: what a checkpoint is, read from the file alone: the direction it translates, its model and
tokenizer, the data and training that made it, how it decodes by default, and, for a run's final.pt, the
test score its run wrote beside it. For the checkpoint a colleague sent, or one of many under runs/.
"""

from __future__ import annotations

import datetime
import json
import re
import sys
from pathlib import Path

from mt.checkpoint import load_checkpoint, run_model, training_summary
from mt.cli.sweep import describe_sweep
from mt.decoding.ctranslate2_translator import is_export, load_export
from mt.languages import language_list
from mt.training.budget import METRIC_NAMES


def describe(path: str | Path) -> dict:
    """The checkpoint at path (or a run directory's model) as plain data, what --json prints."""
    path = Path(path)
    if is_export(path):
        return describe_export(path)
    if path.is_dir():
        path = run_model(path)
    state = load_checkpoint(path, mmap=True)  # tensors stay on disk: only their sizes are read
    cfg = state["config"]
    stat = path.stat()
    return {
        "path": str(path),
        "bytes": stat.st_size,
        "modified": datetime.datetime.fromtimestamp(stat.st_mtime).isoformat(timespec="seconds"),
        "languages": {side: language_list(cfg["data"][f"{side}_lang"]) for side in ("src", "tgt")},
        "model": {**{k: v for k, v in cfg["model"].items() if v is not None}, "parameters": parameters(state["model"])},
        "tokenizer": tokenizer_summary(cfg["tokenizer"], state["tokenizer"]),
        "data": {key: cfg["data"].get(key) for key in DATA_KEYS if cfg["data"].get(key) not in (None, 0)},
        "precision": cfg["train"].get("precision"),
        "training": training_summary(state),
        "origin": origin(state),
        "decode": decode_summary(cfg["decode"]),
        "test": test_score(path),
    }


def describe_export(folder: Path) -> dict:
    """An mt-export directory: what its mt_export.json and vocabulary say (the weights are CTranslate2's)."""
    tokenizer, export = load_export(str(folder))
    files = [f for f in folder.iterdir() if f.is_file()]
    return {
        "path": str(folder),
        "bytes": sum(f.stat().st_size for f in files),
        "modified": datetime.datetime.fromtimestamp(max(f.stat().st_mtime for f in files)).isoformat(
            timespec="seconds"
        ),
        "languages": dict(zip(("src", "tgt"), (language_list(side) for side in export["languages"]))),
        "export": {
            "quantization": export.get("quantization"),
            "arch": export.get("arch"),
            "from": export.get("checkpoints"),
        },
        "tokenizer": vocabulary_sizes(tokenizer),
        "decode": decode_summary(export["decode"]),
    }


DATA_KEYS = ("source", "name", "subset", "dir", "train_split", "valid_split", "test_split", "valid_from_train",
             "test_from_train")  # fmt: skip


def parameters(weights: dict) -> int:
    """Distinct weights: a tied embedding saved under two names counts once."""
    seen, total = set(), 0
    for tensor in weights.values():
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))
        if key not in seen:
            seen.add(key)
            total += tensor.numel()
    return total


def tokenizer_summary(tokenizer_cfg: dict, models: dict) -> dict:
    from mt.data.tokenizer import Tokenizer

    return {"type": tokenizer_cfg.get("type"), **vocabulary_sizes(Tokenizer.from_state_dict(models))}


def vocabulary_sizes(tokenizer) -> dict:
    sizes = {"joint": tokenizer.joint, "vocab_src": tokenizer.src_vocab_size, "vocab_tgt": tokenizer.tgt_vocab_size}
    return {**sizes, "normalization": getattr(tokenizer, "normalization", None)}


def origin(state: dict) -> dict:
    """What this file is: a run's final model, an average, or a training checkpoint (last.pt, with the optimizer
    to resume from; best.pt, stepN.pt: weights only); and whether its weights are a moving average of the
    trained ones (train.ema_decay: every file but last.pt)."""
    resumable = "optimizer" in state.get("trainer", {})
    if "final_from" in state:
        said = {"kind": "final", "from": state["final_from"]}
    elif "averaged_from" in state:
        said = {"kind": "averaged", "from": [Path(p).name for p in state["averaged_from"]]}
    else:
        said = {"kind": "training", "resumable": resumable}
    decay = state["config"].get("train", {}).get("ema_decay") or 0
    if decay and not resumable:
        said["ema_decay"] = decay
    return said


def test_score(path: Path) -> dict | None:
    """The run's test score where path is the model its results.json scored (RUN/checkpoints/final.pt)."""
    results = path.parent.parent / "results.json"
    if path.parent.name != "checkpoints" or not results.is_file():
        return None
    try:
        found = json.loads(results.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict) or found.get("checkpoint") != path.name:
        return None
    return {key: found[key] for key in ("split", "bleu", "chrf", "mean_of", "bleu_signature") if key in found}


def as_text(info: dict) -> str:
    """The description as a few aligned lines."""
    rows = described(info)
    size = f"{info['bytes'] / 1e6:.1f} MB" if info["bytes"] >= 1e5 else f"{info['bytes']:,} bytes"
    width = max(len(label) for label, _ in rows)
    about = f"{size}, written {info['modified'].replace('T', ' ')[:16]}"
    # a Hub model: its name, then the cache folder it was read from
    head = f"{info['hub']}  ({info['path']}, {about})" if info.get("hub") else f"{info['path']}  ({about})"
    return "\n".join([head] + [f"  {label:<{width}}  {text}" for label, text in rows])


def described(info: dict) -> list[tuple[str, str]]:
    """The description as (label, text) rows: what it translates, the model, its data, training and scores."""
    rows = [("translates", " -> ".join(", ".join(info["languages"][side]) for side in ("src", "tgt")))]
    t = info["tokenizer"]
    if "export" in info:
        e = info["export"]
        weights = "fp32" if e["quantization"] in (None, "none") else e["quantization"]
        exported = f"a CTranslate2 export ({e['arch']}, weights {weights}) of {', '.join(e['from'])}"
        rows += [("model", exported), ("tokenizer", vocabulary(t))]
    else:
        rows += [("model", model_line(info["model"])), ("tokenizer", f"sentencepiece {t['type']}, {vocabulary(t)}")]
        rows.append(("data", data_line(info["data"])))
        if info["training"]:
            rows.append(("training", training_line(info["training"], info["precision"])))
        rows.append(("this file", origin_line(info["origin"])))
    rows.append(("decodes with", decoding(info["decode"])))
    if info.get("test"):
        score = info["test"]
        mean = f" (the mean of {len(score['mean_of'])} directions)" if score.get("mean_of") else ""
        split = re.search(r"\btok:([^|]+)", score.get("bleu_signature", ""))  # how BLEU split words, if not as usual
        words = f" (tok:{split.group(1)})" if split and split.group(1) != "13a" else ""
        rows.append(
            ("test score", f"{score.get('split')}: BLEU {score.get('bleu')}{words}, chrF {score.get('chrf')}{mean}")
        )
    return rows


def model_line(m: dict) -> str:
    if m.get("arch", "transformer") != "transformer":
        return f"{m['arch']}, d_model {m.get('d_model')}; {m['parameters']:,} parameters"
    return (
        f"Transformer, {m['encoder_layers']}+{m['decoder_layers']} layers, d_model {m['d_model']}, "
        f"{m['heads']} heads, feed-forward {m['ffn_dim']}; {m['parameters']:,} parameters"
    )


def data_line(d: dict) -> str:
    """Where the corpus came from and which splits did what (pairs drawn from training, where they were)."""
    where = d.get("dir") if d.get("source") == "files" else " ".join(filter(None, (d.get("name"), d.get("subset"))))
    train = d.get("train_split")
    train = " + ".join(map(str, train)) if isinstance(train, list) else train
    held = {kind: d.get(f"{kind}_split") or "none" for kind in ("valid", "test")}
    if d.get("valid_from_train"):
        held["valid"] = f"{d['valid_from_train']:,} of its pairs"
    if d.get("test_from_train"):
        held["test"] = f"{d['test_from_train']:,} {'more' if d.get('valid_from_train') else 'of its pairs'}"
    return f"{where} ({d.get('source')}): {train} to train on, {held['valid']} to validate, {held['test']} to test"


def training_line(trained: dict, precision: str | None) -> str:
    said = f"{trained['step']:,} updates, {trained['elapsed_s'] / 60:.1f} min, {precision}"
    if trained.get("best_value") is not None:
        name = METRIC_NAMES[trained["best_metric"]]
        said += f"; best valid {name} {trained['best_value']:.2f} at update {trained['best_step']:,}"
    return said


def origin_line(o: dict) -> str:
    if o["kind"] == "final":
        said = f"the run's final model ({o['from']})"
    elif o["kind"] == "averaged":
        said = f"the average of {len(o['from'])} checkpoints ({', '.join(o['from'])})"
    else:
        said = "a training checkpoint, with the optimizer state to resume from" if o["resumable"] else "a checkpoint"
    if o.get("ema_decay"):
        said += f"; weights: their moving average over updates (train.ema_decay {o['ema_decay']:g})"
    return said


def vocabulary(t: dict) -> str:
    """The sizes, and the normalization where it is not sentencepiece's default (text as written, say)."""
    rule = f", normalization {t['normalization']}" if t.get("normalization") not in (None, "nmt_nfkc") else ""
    if t["joint"]:
        return f"one vocabulary of {t['vocab_src']:,} pieces for both sides{rule}"
    return f"{t['vocab_src']:,} source and {t['vocab_tgt']:,} target pieces{rule}"


def decode_summary(dec) -> dict:
    """The decode settings mt-info shows: strategy, beam, length penalty, and minimum Bayes risk where on."""
    shown = {key: dec[key] for key in ("strategy", "beam", "alpha") if key in dec}
    if dec.get("mbr"):
        shown.update(mbr=dec["mbr"], mbr_utility=dec.get("mbr_utility", "chrf"))
    return shown


def decoding(dec: dict) -> str:
    sampling = dec.get("strategy") == "sample"
    if dec.get("mbr"):
        drawn = "samples" if sampling else f"the best of a beam of {max(dec.get('beam') or 1, dec['mbr'])}"
        how = f"minimum Bayes risk by {dec['mbr_utility']} over {dec['mbr']} candidates ({drawn})"
        return f"{how}, length penalty {dec.get('alpha')}"
    how = "sampling" if sampling else "greedy search" if dec.get("beam") == 1 else "beam search"
    return f"{how}, beam {dec.get('beam')}, length penalty {dec.get('alpha')}"


def run(args) -> None:
    """mt-info with the arguments of mt.cli.commands's parser. A sweep's folder (mt-train -m): its runs side
    by side, as the sweep reported them at its end, but as they stand now."""
    infos, texts = [], []
    for path in args.checkpoint:
        if (Path(path) / "sweep.json").is_file():
            info, lines = describe_sweep(Path(path))
            infos.append(info)
            texts.append("\n".join(lines))
        else:
            infos.append(describe(path))
            if path in args.hub_names:  # named hf:OWNER/NAME: shown by that name
                infos[-1] = {"hub": args.hub_names[path], **infos[-1]}
            texts.append(as_text(infos[-1]))
    if args.json:
        json.dump(infos[0] if len(infos) == 1 else infos, sys.stdout, indent=2)
        print()
        return
    print("\n\n".join(texts))
