"""The attention RNN baseline: attention weights, incremental == teacher-forced, padding, overfitting, search."""

import pytest
import torch

from mt.data.tokenizer import BOS, EOS, PAD
from mt.decoding.search import beam_search, greedy_search
from mt.model import RNNAttention

from conftest import overfit, pad_ids, reversal_task

VOCAB = 20


def batch(lengths, max_len, seed=0):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(4, VOCAB, (len(lengths), max_len), generator=g)
    for row, n in enumerate(lengths):
        tokens[row, n:] = PAD
    return tokens


@pytest.mark.parametrize("cell, kind", [("gru", "bahdanau"), ("lstm", "general"), ("gru", "dot")])
def test_attention_weights_sum_to_one_and_ignore_padding(cell, kind):
    torch.manual_seed(0)
    model = RNNAttention(VOCAB, VOCAB, d_model=32, rnn_cell=cell, attention=kind, dropout=0.0).eval()
    src = batch([7, 3, 5], 7)
    with torch.no_grad():
        state = model.start_state(src)
        model.step(torch.full((3,), BOS), state, need_weights=True)
    weights = model.cross_attention()[:, 0, 0]  # (B, S)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3))
    assert weights[src == PAD].abs().max() == 0


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_incremental_steps_equal_teacher_forced_forward(cell):
    torch.manual_seed(0)
    model = RNNAttention(VOCAB, VOCAB, d_model=32, rnn_cell=cell, dropout=0.0, tie_embeddings=False).eval()
    src, tgt = batch([6, 2, 4], 6), batch([5, 5, 5], 5, seed=1)
    with torch.no_grad():
        full = model(src, tgt)
        state = model.start_state(src)
        steps = [model.step(tgt[:, t], state)[0] for t in range(tgt.size(1))]
    torch.testing.assert_close(torch.stack(steps, 1), full, atol=1e-5, rtol=1e-5)


def test_source_padding_changes_nothing():
    torch.manual_seed(0)
    model = RNNAttention(VOCAB, VOCAB, d_model=32, dropout=0.0).eval()
    src, tgt = batch([6, 2], 6), batch([4, 4], 4, seed=1)
    padded = torch.cat([src, torch.zeros(2, 5, dtype=torch.long)], 1)
    with torch.no_grad():
        torch.testing.assert_close(model(src, tgt), model(padded, tgt), atol=1e-5, rtol=1e-5)


def test_overfits_a_tiny_corpus_and_search_works_unchanged():
    torch.manual_seed(0)
    pairs = reversal_task(32, VOCAB, seed=1, max_len=6)
    model = overfit(RNNAttention(VOCAB, VOCAB, d_model=64, dropout=0.0), pairs, steps=300)
    src = pad_ids([s for s, _ in pairs], suffix=[EOS])
    greedy = greedy_search(model, src)
    assert sum(h.tokens == t for h, (_, t) in zip(greedy, pairs)) >= 30
    beams = beam_search(model, src, beam=4, nbest=2)
    assert sum(n[0].tokens == t for n, (_, t) in zip(beams, pairs)) >= 30
    assert all(n[0].score >= n[1].score for n in beams)
