"""Constraints on a search (mt/decoding/constraints.py) against the obvious way to find what they forbid,
and constrained greedy and beam search against the textbook searches with the same rules."""

import json

import pytest
import torch

import mt
from mt.data.tokenizer import EOS
from mt.decoding.constraints import Constraints
from mt.decoding.prefix import Prefixes
from mt.decoding.sampling import Sampler, uniforms
from mt.decoding.search import beam_search, greedy_search, sample_search
from mt.model import Transformer

from conftest import overfit, pad_ids, reversal_task, ruled_out, run_cli, textbook_beam

VOCAB = 20


def repeats(tokens: list[int], n: int) -> bool:
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return len(grams) != len(set(grams))


@pytest.fixture(scope="module")
def untrained():
    """An untrained model: uncertain, repetitive outputs, so that the rules bind."""
    torch.manual_seed(3)
    return Transformer(
        VOCAB, VOCAB, d_model=32, heads=4, ffn_dim=64, encoder_layers=2, decoder_layers=2, dropout=0.0
    ).eval()


@pytest.fixture(scope="module")
def half_trained():
    """A model half-way to reversing its input: it ends its outputs, often too early or too late."""
    torch.manual_seed(0)
    model = Transformer(VOCAB, VOCAB, d_model=32, heads=4, ffn_dim=64, encoder_layers=2, decoder_layers=2, dropout=0.0)
    return overfit(model, reversal_task(64, VOCAB), steps=60)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_the_ruled_out_tokens_are_the_ones_found_by_hand(n):
    g = torch.Generator().manual_seed(n)
    for t in range(n, 14):
        history = torch.randint(4, 8, (40, t), generator=g)  # 4 token ids: many repeated n-grams
        free = torch.rand(40, generator=g) > 0.2
        logits = torch.randn(40, VOCAB, generator=g).to(torch.bfloat16)
        before = logits.clone()
        Constraints(min_len=9, no_repeat_ngram=n).apply(logits, t, history, free)
        for row in range(40):
            want = ruled_out(history[row].tolist(), 9, n) if free[row] else set()
            got = set((logits[row] == float("-inf")).nonzero().flatten().tolist())
            assert got == want, (t, row)
            kept = [v for v in range(VOCAB) if v not in want]
            assert torch.equal(logits[row, kept], before[row, kept])  # nothing else moves
    assert any(ruled_out(h.tolist(), 0, n) for h in history)  # the case that bites came up


@pytest.mark.parametrize(
    "model, min_len, no_repeat_ngram",
    [("half_trained", 8, 0), ("untrained", 0, 2), ("half_trained", 6, 2), ("untrained", 0, 1)],
)
def test_constrained_beam_search_equals_the_textbook_one(request, model, min_len, no_repeat_ngram):
    model = request.getfixturevalue(model)
    sources = [s for s, _ in reversal_task(12, VOCAB, seed=7)]
    src = pad_ids(sources, suffix=[EOS])
    rules = Constraints(min_len, no_repeat_ngram)
    found = beam_search(model, src, beam=4, alpha=0.6, max_len_a=1.0, max_len_b=3, constraints=rules)
    for source, hyps in zip(sources, found):
        tokens, score = textbook_beam(model, source, 4, 0.6, 1.0, 3, min_len=min_len, no_repeat_ngram=no_repeat_ngram)
        assert hyps[0].tokens == tokens
        assert hyps[0].score == pytest.approx(score, abs=1e-4)
    free = beam_search(model, src, beam=4, alpha=0.6, max_len_a=1.0, max_len_b=3)
    assert [h[0].tokens for h in found] != [h[0].tokens for h in free]  # the rules changed some outputs


@pytest.mark.parametrize(
    "model, min_len, no_repeat_ngram", [("half_trained", 8, 0), ("untrained", 0, 2), ("half_trained", 5, 1)]
)
def test_constrained_greedy_search_equals_the_textbook_one(request, model, min_len, no_repeat_ngram):
    model = request.getfixturevalue(model)
    sources = [s for s, _ in reversal_task(12, VOCAB, seed=5)]
    src = pad_ids(sources, suffix=[EOS])
    found = greedy_search(model, src, 1.0, 3, constraints=Constraints(min_len, no_repeat_ngram))
    for source, hyp in zip(sources, found):
        tokens, score = textbook_beam(model, source, 1, 0.0, 1.0, 3, min_len=min_len, no_repeat_ngram=no_repeat_ngram)
        assert hyp.tokens == tokens
        assert hyp.score == pytest.approx(score, abs=1e-4)
        assert len(hyp.tokens) >= min(min_len, len(source) + 1 + 3)  # at least min_len, or the length limit
        assert not (no_repeat_ngram and repeats(hyp.tokens, no_repeat_ngram))
    free = greedy_search(model, src, 1.0, 3)
    assert [h.tokens for h in found] != [h.tokens for h in free]  # the rules changed some outputs


def test_samples_keep_the_rules_and_a_forced_prefix_is_exempt(untrained):
    sources = [s for s, _ in reversal_task(8, VOCAB, seed=2)]
    src = pad_ids(sources, suffix=[EOS])
    sampler = Sampler(uniforms(list(range(8)), 3, 40), temperature=1.5)
    found = sample_search(untrained, src, sampler, 3, 1.5, 6, constraints=Constraints(6, 2))
    outputs = [h.tokens for line in found for h in line]
    assert all(len(t) >= 6 and not repeats(t, 2) for t in outputs)
    unconstrained = sample_search(untrained, src, Sampler(uniforms(list(range(8)), 3, 40), temperature=1.5), 3, 1.5, 6)
    assert any(repeats(h.tokens, 2) for line in unconstrained for h in line)  # without the rule, repeats come up

    prefix = [5, 5, 5, 5]  # repeats itself: forced all the same, and scored as the model scores it
    forced = Prefixes.of([prefix] * len(sources), src.device)
    rules = Constraints(0, 1)
    for hyp, source in zip(greedy_search(untrained, src, 1.0, 3, prefixes=forced, constraints=rules), sources):
        assert hyp.tokens[:4] == prefix and 5 not in hyp.tokens[4:] and not repeats(hyp.tokens[4:], 1)
        tokens, score = textbook_beam(untrained, source, 1, 0.0, 1.0, 3, prefix=prefix, no_repeat_ngram=1)
        assert hyp.tokens == tokens and hyp.score == pytest.approx(score, abs=1e-4)


def test_translate_mt_evaluate_and_the_api_take_the_rules(trained_run, tiny_corpus, tmp_path):
    source = tiny_corpus / "test.de"
    lines = source.read_text(encoding="utf-8").splitlines()
    found = mt.load_translator(str(trained_run), beam=1, min_len=9, device="cpu").translate_nbest(lines)
    assert all(len(f[0].tgt_pieces) >= 10 for f in found)  # 9 pieces and EOS at least (the limit is further)
    flags = ["--beam", "1", "--min-len", "9"]
    out = run_cli("translate", "-c", str(trained_run), "-q", "-i", str(source), *flags)
    assert out.stdout.splitlines() == [f[0].text for f in found]
    hyp = tmp_path / "hyp.en"
    scores = tmp_path / "scores.json"
    out = run_cli(
        "mt-evaluate", "-c", str(trained_run), "--split", "test", "-o", str(hyp), "--json", str(scores), *flags
    )
    assert hyp.read_text(encoding="utf-8").splitlines() == [f[0].text for f in found]
    assert json.loads(scores.read_text())["min_len"] == 9 and ", min_len 9): BLEU" in out.stdout
    for command in ("translate", "mt-evaluate"):
        refused = run_cli(command, "-c", str(trained_run), "--no-repeat-ngram", "-1", check=False, input_text="x\n")
        assert refused.returncode == 2 and "--no-repeat-ngram must be >= 0" in refused.stderr
