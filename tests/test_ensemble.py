"""Ensemble decoding: the mean of the members' next-token probabilities, through the unchanged search."""

import copy
import math

import pytest
import torch

from mt.checkpoint import load_checkpoint, save_checkpoint
from mt.data.tokenizer import BOS, EOS
from mt.decoding.search import beam_search, greedy_search, max_output_lengths
from mt.model import RNNAttention, Transformer
from mt.model.ensemble import Ensemble

from conftest import pad_ids, reversal_task, run_cli

VOCAB = 20


def member(seed: int, norm_first: bool) -> Transformer:
    torch.manual_seed(seed)
    model = Transformer(VOCAB, VOCAB, d_model=32, heads=4, ffn_dim=64, encoder_layers=2, decoder_layers=2,
                        dropout=0.0, norm_first=norm_first)  # fmt: skip
    return model.eval()


def sources(n=6):
    return pad_ids([s for s, _ in reversal_task(n, VOCAB, seed=5)], suffix=[EOS])


def ensemble_log_probs(members, src_row: torch.Tensor, tokens: list[int]) -> torch.Tensor:
    """Ground truth from full forward passes: log mean_m p_m(next | prefix) at every position."""
    tgt_in = torch.tensor([[BOS, *tokens]])
    probs = [m(src_row[None], tgt_in)[0].float().softmax(-1) for m in members]
    return torch.stack(probs).mean(0).log()


def rnn_member(seed: int) -> RNNAttention:
    torch.manual_seed(seed)
    return RNNAttention(VOCAB, VOCAB, d_model=32, dropout=0.0).eval()


@pytest.mark.parametrize("kinds", ["post-norm + pre-norm", "Transformer + attention RNN"])
@torch.no_grad()
def test_beam_scores_of_an_ensemble_are_its_mean_probabilities_rescored(kinds):
    """Two different members: every hypothesis beam search returns has the score that full forward
    passes of both give it; a member whose state followed another's reordering would not."""
    second = member(2, norm_first=True) if kinds == "post-norm + pre-norm" else rnn_member(2)
    members = [member(1, norm_first=False), second]
    src = sources()
    limits = max_output_lengths(src, 1.0, 3)
    found = beam_search(Ensemble(members), src, beam=4, alpha=0.0, max_len_a=1.0, max_len_b=3, nbest=2)
    for i, hyps in enumerate(found):
        for hyp in hyps:
            ended_by_eos = len(hyp.tokens) < int(limits[i])
            targets = hyp.tokens + ([EOS] if ended_by_eos else [])
            log_probs = ensemble_log_probs(members, src[i], hyp.tokens)[: len(targets)]
            rescored = log_probs.gather(1, torch.tensor(targets)[:, None]).sum()
            assert hyp.score == pytest.approx(float(rescored), abs=1e-4)


@torch.no_grad()
def test_an_ensemble_of_copies_decodes_as_the_model():
    model = member(3, norm_first=True)
    src = sources(8)
    twice = Ensemble([model, copy.deepcopy(model)])
    alone, both = beam_search(model, src, beam=4, nbest=3), beam_search(twice, src, beam=4, nbest=3)
    assert [[h.tokens for h in n] for n in alone] == [[h.tokens for h in n] for n in both]
    assert [h.score for n in alone for h in n] == pytest.approx([h.score for n in both for h in n], abs=1e-5)
    assert [h.tokens for h in greedy_search(model, src)] == [h.tokens for h in greedy_search(twice, src)]


@torch.no_grad()
def test_ensemble_step_is_a_normalised_mean():
    members = [member(4, norm_first=False), member(5, norm_first=False), member(6, norm_first=True)]
    src = sources(3)
    ensemble = Ensemble(members)
    log_probs, _ = ensemble.step(torch.full((3,), BOS), ensemble.start_state(src))
    assert log_probs.dtype == torch.float32
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(3))
    expected = torch.stack([m.step(torch.full((3,), BOS), m.start_state(src))[0].softmax(-1) for m in members])
    torch.testing.assert_close(log_probs, expected.mean(0).log(), rtol=1e-5, atol=1e-5)
    assert not math.isclose(float(log_probs[0, 5]), float(expected[0, 0, 5].log()), abs_tol=1e-4)


def test_translate_ensemble_keeps_lines_and_refuses_what_it_cannot(trained_run, tmp_path):
    ckpts = trained_run / "checkpoints"
    best, last = str(ckpts / "best.pt"), str(ckpts / "last.pt")
    out = run_cli("translate", "--ensemble", "-c", best, last, input_text="ein hund läuft\n\nein kind\n")
    assert out.stdout.split("\n")[:3] == ["a dog runs", "", "a child"] and out.stdout.count("\n") == 3
    assert "an ensemble of 2" in out.stderr
    result = run_cli("translate", "--ensemble", "-c", best, last, "--alignments", check=False, input_text="x\n")
    assert result.returncode == 2 and "not with --ensemble" in result.stderr
    state = load_checkpoint(best)
    state["tokenizer"] = {**state["tokenizer"], "src": state["tokenizer"]["src"] + b"\x00"}
    other = tmp_path / "other_tokenizer.pt"
    save_checkpoint({k: v for k, v in state.items() if k not in ("format", "version")}, other)
    result = run_cli("translate", "--ensemble", "-c", best, str(other), check=False, input_text="x\n")
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0
    assert "other_tokenizer.pt: its tokenizer differs" in result.stderr
    scores = run_cli("mt-evaluate", "--ensemble", "-c", best, last, "--split", "test", "--beam", "2")
    assert "BLEU" in scores.stdout
