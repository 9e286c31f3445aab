"""The ops a GPU would launch for one step of the base Transformer, counted on the CPU (no GPU needed): on a
GPU each op of an eager step costs host time, so these counts bound how fast an eager step can be issued.

    .venv/bin/python scripts/count_ops.py            # base 6+6 model, vocabulary 37k
    .venv/bin/python scripts/count_ops.py --json

- training: forward + label-smoothed loss + backward on the `meta` device (shapes only), at 64 and at 780
  sentences of 32 tokens: the same count at both, or the step could not be one captured graph;
- decoding: one step of beam search as `mt/decoding/search.py` runs it (`model.step`, the cache grown by
  concatenation, and the hypotheses' reorder; not the search's own books) and one whole step of fixed-slot
  beam search (`mt/decoding/fixed_slots.py`: the model, the beam's books, the reorder), 16 sentences of 20
  tokens, beam 5, with the stock ops (the path a GPU takes).

Views (no kernel) are left out. Reports, never asserts; the tests hold the counts flat across batch sizes.
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.fx.experimental._config as fx_config

from mt import fastpath
from mt.decoding.fixed_slots import FixedSlotBeam
from mt.fastpath.op_count import OpCounter
from mt.model import Transformer
from mt.training.loss import label_smoothed_loss

BASE = dict(d_model=512, heads=8, ffn_dim=2048, encoder_layers=6, decoder_layers=6)


def training_step_ops(batch: int, vocab: int, length: int = 32) -> int:
    """Kernel ops of forward + loss + backward of the base model on `meta`."""
    torch.manual_seed(0)
    with torch.device("meta"):
        model = Transformer(vocab, vocab, dropout=0.1, **BASE).train()
        src = torch.randint(4, vocab, (batch, length))
        tgt = torch.randint(4, vocab, (batch, length))
    with OpCounter() as counter:
        logits = model(src, tgt, keep=torch.ones_like(tgt, dtype=torch.bool))
        loss, _ = label_smoothed_loss(logits, tgt.reshape(-1), 0.1)
        loss.backward()
    return sum(counter.ops.values())


def decoding_step_ops(vocab: int, sentences: int = 16, length: int = 20, beam: int = 5) -> dict[str, int]:
    """Kernel ops of a beam search step of the base model, stock ops on the CPU, after two warm-up steps."""
    torch.manual_seed(0)
    model = Transformer(vocab, vocab, dropout=0.0, **BASE).eval()
    src = torch.randint(4, vocab, (sentences, length))
    counts = {}
    with fastpath.stock_ops(), torch.no_grad():  # not inference_mode, which would hide the ops inside SDPA
        state = model.start_state(src, copies=beam)
        tokens, order = torch.full((sentences * beam,), 5), torch.arange(sentences * beam).flip(0)
        for _ in range(3):
            with OpCounter() as counter:
                _, state = model.step(tokens, state)
                state = state.reorder_same_source(order)
        counts["beam search: model.step and the reorder"] = sum(counter.ops.values())
        search = FixedSlotBeam(model, src, beam=beam)
        for _ in range(3):
            with OpCounter() as counter:
                search.step()
        counts["fixed-slot beam search: whole step"] = sum(counter.ops.values())
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab", type=int, default=37000)
    parser.add_argument("--json", action="store_true", help="one JSON object instead of lines of text")
    args = parser.parse_args()
    with fx_config.patch(meta_nonzero_assume_all_nonzero=True):  # the CPU's h[keep] on meta
        counts = {f"training step, {b} x 32 tokens": training_step_ops(b, args.vocab) for b in (64, 780)}
    counts.update(decoding_step_ops(args.vocab))
    if args.json:
        print(json.dumps(counts))
    else:
        width = max(map(len, counts))
        for name, n in counts.items():
            print(f"{name:<{width}}  {n:>6,} ops")


if __name__ == "__main__":
    main()
