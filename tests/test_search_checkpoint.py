"""A tiny model overfits a tiny task; greedy and beam search then reproduce its targets.
Checkpoints round-trip exactly, are written atomically and refuse foreign files."""

import errno
import os

import pytest
import torch

from mt.checkpoint import average_states, load_checkpoint, save_checkpoint
from mt.data.tokenizer import BOS, EOS
from mt.decoding.search import beam_search, greedy_search, length_penalty
from mt.errors import MTError
from mt.fastpath import top_log_probs
from mt.model import Transformer

from conftest import OpCounter, overfit, pad_ids, reversal_task, textbook_beam

VOCAB = 20


def task(n=64, seed=0):
    return reversal_task(n, VOCAB, seed)


pad = pad_ids


@pytest.fixture(scope="module")
def overfit_model():
    torch.manual_seed(0)
    data = task()
    model = Transformer(
        VOCAB, VOCAB, d_model=64, heads=4, ffn_dim=128, encoder_layers=2, decoder_layers=2, dropout=0.0, norm_first=True
    )
    return overfit(model, data, steps=400), data


def test_greedy_reproduces_training_targets(overfit_model):
    model, data = overfit_model
    src = pad([s for s, _ in data], suffix=[EOS])
    hyps = greedy_search(model, src, max_len_a=1.0, max_len_b=5)
    correct = sum(h.tokens == t for h, (_, t) in zip(hyps, data))
    assert correct == len(data)


def test_beam_reproduces_targets_and_ranks_nbest(overfit_model):
    model, data = overfit_model
    src = pad([s for s, _ in data[:16]], suffix=[EOS])
    nbest = beam_search(model, src, beam=4, alpha=0.6, max_len_a=1.0, max_len_b=5, nbest=3)
    assert all(len(n) == 3 for n in nbest)
    for hyps, (_, target) in zip(nbest, data):
        assert hyps[0].tokens == target
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)


def test_beam_search_stops_once_no_live_hypothesis_can_beat_the_kept_ones(overfit_model):
    """Sure of its targets, the model ends each sentence well inside a generous length limit: the search
    stops a step or two after the best hypothesis ends, not at the limit."""
    model, data = overfit_model
    sources = [s for s, _ in data[:8]]
    steps, step = [0], model.step

    def counted(*args, **kwargs):
        steps[0] += 1
        return step(*args, **kwargs)

    model.step = counted
    try:
        found = beam_search(model, pad(sources, suffix=[EOS]), beam=4, alpha=0.6, max_len_a=1.0, max_len_b=40)
    finally:
        del model.step
    assert [hyps[0].tokens for hyps in found] == [t for _, t in data[:8]]
    longest = max(len(t) for _, t in data[:8]) + 1  # EOS
    assert steps[0] <= longest + 2 < max(map(len, sources)) + 40


def test_batch_composition_does_not_change_results(overfit_model):
    model, data = overfit_model
    alone = [greedy_search(model, pad([s], suffix=[EOS]))[0].tokens for s, _ in data[:8]]
    together = [h.tokens for h in greedy_search(model, pad([s for s, _ in data[:8]], suffix=[EOS]))]
    assert alone == together
    beam_alone = [beam_search(model, pad([s], suffix=[EOS]), beam=3)[0][0].tokens for s, _ in data[:8]]
    beam_together = [n[0].tokens for n in beam_search(model, pad([s for s, _ in data[:8]], suffix=[EOS]), beam=3)]
    assert beam_alone == beam_together


def test_length_limit_and_penalty():
    model = Transformer(
        VOCAB, VOCAB, d_model=32, heads=2, ffn_dim=32, encoder_layers=1, decoder_layers=1, dropout=0.0
    ).eval()
    with torch.no_grad():  # never emit EOS: every output stops at a*|x|+b
        model.tgt_embed.weight[EOS].fill_(-100.0)
    src = pad([[5, 6, 7], [5]], suffix=[EOS])
    hyps = greedy_search(model, src, max_len_a=1.0, max_len_b=2)
    assert [len(h.tokens) for h in hyps] == [6, 4]
    beams = beam_search(model, src, beam=2, max_len_a=1.0, max_len_b=2)
    assert [len(n[0].tokens) for n in beams] == [6, 4]
    assert length_penalty(torch.tensor(1), 0.0) == 1.0
    assert length_penalty(torch.tensor(7), 1.0) == pytest.approx(2.0)


def test_length_penalty_prefers_longer_with_higher_alpha(overfit_model):
    """Same model, same inputs: raising alpha can only lengthen the best hypotheses on average."""
    model, data = overfit_model
    src = pad([s for s, _ in data[:16]], suffix=[EOS])
    short = beam_search(model, src, beam=5, alpha=0.0, nbest=5)
    # Re-rank the same n-best lists by the penalty: alpha=2 favours longer hypotheses.
    for hyps in short:
        raw = [(h.score, len(h.tokens)) for h in hyps]
        ranked0 = max(raw, key=lambda r: r[0])
        ranked2 = max(raw, key=lambda r: r[0] / float(length_penalty(torch.tensor(r[1] + 1), 2.0)))
        assert ranked2[1] >= ranked0[1]


def test_checkpoint_round_trip_gives_identical_outputs(overfit_model, tmp_path):
    model, data = overfit_model
    path = tmp_path / "ck.pt"
    save_checkpoint({"config": {}, "model": model.state_dict(), "tokenizer": {}}, path)
    state = load_checkpoint(path)
    clone = Transformer(
        VOCAB, VOCAB, d_model=64, heads=4, ffn_dim=128, encoder_layers=2, decoder_layers=2, dropout=0.0, norm_first=True
    ).eval()
    clone.load_state_dict(state["model"])
    src = pad([s for s, _ in data[:4]], suffix=[EOS])
    tgt = pad([t for _, t in data[:4]], prefix=[BOS])
    with torch.no_grad():
        assert torch.equal(model(src, tgt), clone(src, tgt))


def test_interrupted_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    save_checkpoint({"config": {}, "model": {"w": torch.ones(3)}, "tokenizer": {}}, path)

    def crash(obj, f, *args, **kwargs):
        f.write(b"half a checkpoint")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(
        MTError, match="last.pt: writing the checkpoint failed .No space left on device.; the previous one is kept"
    ):
        save_checkpoint({"config": {}, "model": {"w": torch.zeros(3)}, "tokenizer": {}}, path)
    monkeypatch.undo()
    assert torch.equal(load_checkpoint(path)["model"]["w"], torch.ones(3))
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]  # no temp file left behind


def test_foreign_and_malicious_files_are_refused(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned > " + str(tmp_path / "pwned"),))

    evil = tmp_path / "evil.pt"
    torch.save({"format": "mt-checkpoint", "version": 1, "x": Evil()}, evil)
    with pytest.raises(MTError, match=r"not a readable checkpoint \(it holds Python objects other than tensors"):
        load_checkpoint(evil)
    assert not (tmp_path / "pwned").exists()
    other = tmp_path / "other.pt"
    torch.save({"state_dict": {}}, other)
    with pytest.raises(MTError, match="not a checkpoint of this toolkit"):
        load_checkpoint(other)
    truncated = tmp_path / "truncated.pt"
    save_checkpoint({"config": {}, "model": {"w": torch.ones(1000)}, "tokenizer": {}}, truncated)
    whole = truncated.read_bytes()
    for cut in (500, len(whole) - 100):  # cut inside the first entry, and only the archive's directory
        truncated.write_bytes(whole[:cut])
        with pytest.raises(MTError, match=r"not a readable checkpoint \(truncated or damaged"):
            load_checkpoint(truncated)
    empty = tmp_path / "empty.pt"
    empty.touch()
    with pytest.raises(MTError, match=r"not a readable checkpoint \(the file is empty\)"):
        load_checkpoint(empty)


def test_average_states():
    a, b = {"w": torch.tensor([1.0, 3.0]), "n": torch.tensor(7)}, {"w": torch.tensor([3.0, 5.0]), "n": torch.tensor(7)}
    avg = average_states([a, b])
    assert avg["w"].tolist() == [2.0, 4.0] and avg["n"] == 7
    with pytest.raises(MTError):
        average_states([a, {"w": torch.zeros(3), "n": torch.tensor(7)}])


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_batched_beam_search_equals_textbook_beam_search(alpha):
    """On an untrained model (diverse, uncertain outputs) with sentences of different lengths."""
    torch.manual_seed(3)
    model = Transformer(
        VOCAB, VOCAB, d_model=32, heads=4, ffn_dim=64, encoder_layers=2, decoder_layers=2, dropout=0.0
    ).eval()
    sources = [s for s, _ in task(12, seed=7)]
    found = beam_search(model, pad(sources, suffix=[EOS]), beam=4, alpha=alpha, max_len_a=1.0, max_len_b=3)
    for src, hyps in zip(sources, found):
        tokens, score = textbook_beam(model, src, 4, alpha, max_len_a=1.0, max_len_b=3)
        assert hyps[0].tokens == tokens
        assert hyps[0].score == pytest.approx(score, abs=1e-4)


@pytest.mark.parametrize("nbest", [1, 2, 3])
def test_beam_search_stops_at_the_step_the_textbook_rule_stops(overfit_model, nbest):
    """A sentence is done once nbest hypotheses have finished and no live one can beat the nbest-th of them:
    not a step earlier (a worse n-best) nor later (wasted steps). Each sentence alone, its steps counted."""
    model, data = overfit_model
    step, steps = model.step, [0]

    def counted(*args, **kwargs):
        steps[0] += 1
        return step(*args, **kwargs)

    for src, _ in data[:6]:
        steps[0] = 0
        model.step = counted
        try:
            found = beam_search(model, pad([src], suffix=[EOS]), beam=4, alpha=0.6, max_len_b=20, nbest=nbest)
        finally:
            del model.step
        stats = {}
        tokens, _ = textbook_beam(model, src, 4, 0.6, max_len_b=20, nbest=nbest, stats=stats)
        assert found[0][0].tokens == tokens and len(found[0]) == nbest
        assert steps[0] == stats["steps"], src


def test_top_log_probs_in_bf16_match_fp32_log_softmax():
    torch.manual_seed(0)
    logits = (torch.randn(300, 1000) * 3).bfloat16()  # several blocks of rows
    values, ids = top_log_probs(logits, 10)
    ref_values, ref_ids = logits.float().log_softmax(-1).topk(10, dim=-1)
    assert values.dtype == torch.float32
    torch.testing.assert_close(values, ref_values, atol=1e-5, rtol=0)
    torch.testing.assert_close(logits.gather(1, ids), logits.gather(1, ref_ids))  # same scores (ties may swap)


def test_the_books_of_beam_search_cost_the_same_ops_a_step_at_any_batch_size(monkeypatch):
    """The host side of a beam step (BeamBooks) reads its tensors as lists, never sentence by sentence:
    on a GPU every search step waits for it, and an op per sentence would grow with the batch."""
    from mt.decoding import search

    worst: dict[int, int] = {}

    def counted(method, batch):
        def call(*args, **kwargs):
            with OpCounter() as counter:
                out = method(*args, **kwargs)
            worst[batch] = max(worst.get(batch, 0), sum(counter.ops.values()))
            return out

        return call

    torch.manual_seed(3)
    model = Transformer(
        VOCAB, VOCAB, d_model=32, heads=4, ffn_dim=64, encoder_layers=2, decoder_layers=2, dropout=0.0
    ).eval()
    for batch in (4, 48):
        for name in ("record_finished", "done", "advance"):
            monkeypatch.setattr(search.BeamBooks, name, counted(getattr(search.BeamBooks, name), batch))
        sources = [s for s, _ in task(batch, seed=7)]
        found = beam_search(model, pad(sources, suffix=[EOS]), beam=4, alpha=0.6, max_len_a=1.0, max_len_b=3)
        assert len(found) == batch and all(found)
        monkeypatch.undo()
    assert worst[48] == worst[4] > 0
