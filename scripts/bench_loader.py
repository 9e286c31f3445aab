"""Can the training loader feed a GPU at WMT scale? Target tokens/s of batching and collation on one core.

A synthetic corpus of WMT14 en-de's size (4.5M pairs; lengths log-normal, mean ~30 pieces, tail to 250)
is batched for an epoch as the trainer does (token_batches, 25k tokens) and the batches are collated
(source + EOS, BOS + target, target + EOS as int64 tensors). An H100 at 30% MFU trains the base model
on ~700k target tokens/s, so the loader must make several times that on the one core it shares.

    .venv/bin/python scripts/bench_loader.py [--pairs 4500000] [--max-tokens 25000] [--batches 3000]
Prints JSON lines, then a summary. Reports, never asserts.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from mt.data.batching import EncodedCorpus, Ragged, collate, pad_sequences, token_batches
from mt.data.tokenizer import BOS, EOS


def synthetic_corpus(pairs: int, vocab: int, seed: int = 0) -> EncodedCorpus:
    """Random token ids with WMT-like lengths: log-normal source lengths, targets within ~15% of them."""
    rng = np.random.default_rng(seed)
    src_lens = np.clip(np.rint(rng.lognormal(np.log(26), 0.55, pairs)), 1, 250).astype(np.int64)
    tgt_lens = np.clip(np.rint(src_lens * rng.lognormal(0, 0.15, pairs)), 1, 250).astype(np.int64)

    def ragged(lengths):
        offsets = np.zeros(pairs + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return Ragged(rng.integers(4, vocab, int(offsets[-1]), dtype=np.int32), offsets)

    return EncodedCorpus(ragged(src_lens), ragged(tgt_lens), np.arange(1, pairs + 1))


def collate_one_at_a_time(corpus: EncodedCorpus, indices):
    """The collation before it was vectorised (a sentence at a time), for comparison."""
    tgts = [corpus.tgt[i] for i in indices]
    return (
        pad_sequences([corpus.src[i] for i in indices], suffix=[EOS]),
        pad_sequences(tgts, prefix=[BOS]),
        pad_sequences(tgts, suffix=[EOS]),
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=int, default=4_500_000)
    p.add_argument("--vocab", type=int, default=37_000)
    p.add_argument("--max-tokens", type=int, default=25_000)
    p.add_argument("--batches", type=int, default=3000, help="batches collated for the timing")
    p.add_argument("--old-batches", type=int, default=200, help="batches collated one sentence at a time")
    args = p.parse_args()
    torch.set_num_threads(1)

    start = time.perf_counter()
    corpus = synthetic_corpus(args.pairs, args.vocab)
    made = time.perf_counter() - start
    lens = corpus.tgt_lens
    print(
        json.dumps(
            {
                "bench": "corpus",
                "pairs": args.pairs,
                "mean_src": round(float(corpus.src_lens.mean()), 1),
                "mean_tgt": round(float(lens.mean()), 1),
                "max_len": int(max(lens.max(), corpus.src_lens.max())),
                "seconds": round(made, 1),
            }
        ),
        flush=True,
    )

    start = time.perf_counter()
    batches = token_batches(corpus.src_lens, lens, args.max_tokens, np.random.default_rng([1, 0]))
    batching = time.perf_counter() - start
    epoch_tokens = int(lens.sum() + len(lens))
    print(
        json.dumps(
            {
                "bench": "token_batches",
                "batches": len(batches),
                "seconds": round(batching, 2),
                "tgt_tokens_per_s": round(epoch_tokens / batching),
            }
        ),
        flush=True,
    )

    rows = {}
    for name, fn, count in (
        ("vectorised", collate, args.batches),
        ("one_at_a_time", collate_one_at_a_time, args.old_batches),
    ):
        chosen = batches[:count]
        tokens = int(sum(lens[b].sum() + len(b) for b in chosen))
        start = time.perf_counter()
        for b in chosen:
            fn(corpus, b)
        seconds = time.perf_counter() - start
        rows[name] = {
            "bench": "collate",
            "form": name,
            "batches": len(chosen),
            "seconds": round(seconds, 2),
            "tgt_tokens_per_s": round(tokens / seconds),
        }
        print(json.dumps(rows[name]), flush=True)

    per_token = batching / epoch_tokens + 1 / rows["vectorised"]["tgt_tokens_per_s"]
    print(f"\n{args.pairs:,} pairs, {len(batches):,} batches of <= {args.max_tokens:,} tokens, one core:")
    print(f"  batching an epoch: {batching:.1f} s ({epoch_tokens / batching / 1e6:.1f}M target tokens/s)")
    for r in rows.values():
        print(f"  collate ({r['form']}): {r['tgt_tokens_per_s'] / 1e6:.2f}M target tokens/s")
    print(f"  together: {1 / per_token / 1e6:.2f}M target tokens/s")


if __name__ == "__main__":
    main()
