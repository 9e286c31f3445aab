"""Scoring given translations (forced decoding): every target piece's log-probability, as the model gives
it one step at a time, in any batch, through the Python API, `mt-score` and the CTranslate2 engine."""

import json
import math

import pytest
import torch
from omegaconf import OmegaConf

from mt.config.schema import DataConfig
from mt.data.sources import load_split
from mt.data.tokenizer import BOS, EOS
from mt.decoding.scoring import score_ids
from mt.decoding.search import beam_search, greedy_search, max_output_lengths
from mt.errors import MTError
from mt.inference import load_translator
from mt.model import RNNAttention, Transformer
from mt.model.ensemble import Ensemble

from conftest import pad_ids, reversal_task, run_cli

VOCAB = 20


def transformer(seed: int, norm_first: bool) -> Transformer:
    torch.manual_seed(seed)
    model = Transformer(VOCAB, VOCAB, d_model=32, heads=4, ffn_dim=64, encoder_layers=2, decoder_layers=2,
                        dropout=0.0, norm_first=norm_first)  # fmt: skip
    return model.eval()


def rnn(seed: int) -> RNNAttention:
    torch.manual_seed(seed)
    return RNNAttention(VOCAB, VOCAB, d_model=32, dropout=0.0).eval()


MODELS = {
    "post-norm": lambda: transformer(1, False),
    "pre-norm": lambda: transformer(2, True),
    "attention RNN": lambda: rnn(3),
    "ensemble": lambda: Ensemble([transformer(4, False), rnn(5)]),
}


def stepwise(model, src: list[int], tgt: list[int]) -> list[float]:
    """Ground truth: each piece of tgt + EOS scored by incremental decoding, one token fed at a time."""
    state = model.start_state(torch.tensor([src + [EOS]]))
    token, found = BOS, []
    for piece in tgt + [EOS]:
        logits, state = model.step(torch.tensor([token]), state)
        found.append(float(logits.log_softmax(-1, dtype=torch.float32)[0, piece]))
        token = piece
    return found


def pairs(n: int = 9) -> tuple[list[list[int]], list[list[int]]]:
    """Pairs of many lengths (a batch pads most of them), targets unlike what an untrained model says."""
    task = reversal_task(n, VOCAB, seed=7, max_len=9)
    return [s for s, _ in task], [t[1:] + t[:1] for _, t in task]


@pytest.mark.parametrize("kind", MODELS)
@torch.no_grad()
def test_one_forced_pass_scores_each_piece_as_incremental_decoding_does(kind):
    """A look-ahead mask that let a position see the pieces after it, or padding that leaked into a
    row, would make the full pass disagree with feeding the target one token at a time."""
    model = MODELS[kind]()
    sources, targets = pairs()
    batched = score_ids(model, sources, targets, torch.device("cpu"), batch_tokens=4096)
    for src, tgt, found in zip(sources, targets, batched):
        assert len(found) == len(tgt) + 1
        assert found == pytest.approx(stepwise(model, src, tgt), abs=1e-5)


@torch.no_grad()
def test_a_pairs_score_does_not_depend_on_its_batch():
    model = transformer(6, False)
    sources, targets = pairs(12)
    together = score_ids(model, sources, targets, torch.device("cpu"), batch_tokens=4096)
    alone = score_ids(model, sources, targets, torch.device("cpu"), batch_tokens=1)  # one pair a batch
    for a, b in zip(together, alone):
        assert a == pytest.approx(b, abs=1e-5)


def corpus_config(corpus):
    """The data section that names the tiny corpus's files (the rest as every config has it)."""
    return OmegaConf.merge(
        OmegaConf.structured(DataConfig), {"source": "files", "dir": str(corpus), "src_lang": "de", "tgt_lang": "en"}
    )


@pytest.fixture(scope="module")
def translator(trained_run):
    return load_translator(trained_run / "checkpoints" / "best.pt", device="cpu")


@torch.no_grad()
def test_the_searches_own_scores_are_what_scoring_gives_their_output(translator, tiny_corpus):
    """Greedy search and beam search at alpha 0 report the summed log-probability of what they chose,
    EOS included: scoring their tokens must give the same number."""
    model, tokenizer = translator.model, translator.tokenizer
    ids = tokenizer.encode_src(load_split(corpus_config(tiny_corpus), "test").src[:20])
    src = pad_ids(ids, suffix=[EOS])
    limits = max_output_lengths(src, 1.2, 10)
    greedy = greedy_search(model, src)
    beam = [hyps[0] for hyps in beam_search(model, src, beam=4, alpha=0.0)]
    for hyps in (greedy, beam):
        ended = [i for i, h in enumerate(hyps) if len(h.tokens) < int(limits[i])]  # by EOS, not the limit
        assert len(ended) >= 18
        found = score_ids(model, [ids[i] for i in ended], [hyps[i].tokens for i in ended], torch.device("cpu"))
        assert [sum(f) for f in found] == pytest.approx([hyps[i].score for i in ended], abs=1e-4)


def test_a_trained_model_prefers_the_reference_to_another_lines(translator, tiny_corpus):
    test = load_split(corpus_config(tiny_corpus), "test")
    right = translator.score(test.src, test.tgt)
    wrong = translator.score(test.src, test.tgt[1:] + test.tgt[:1])
    better = sum(r.mean_log_prob > w.mean_log_prob for r, w in zip(right, wrong))
    assert better >= 0.9 * len(right)
    assert all(r.pieces[-1] == translator.tokenizer.tgt.id_to_piece(EOS) for r in right)


def test_the_api_refuses_misaligned_lists(translator):
    with pytest.raises(MTError, match="targets: 1 given for 2 lines"):
        translator.score(["ein hund", "eine katze"], ["a dog"])


@pytest.fixture(scope="module")
def pair_files(tiny_corpus, tmp_path_factory):
    """The test split with an empty pair and a pair with an empty target inside: every line is scored."""
    test = load_split(corpus_config(tiny_corpus), "test")
    sources = test.src[:5] + ["", test.src[5]] + test.src[6:12]
    targets = test.tgt[:5] + ["", ""] + test.tgt[6:12]
    folder = tmp_path_factory.mktemp("score")
    (folder / "src.de").write_text("".join(s + "\n" for s in sources), encoding="utf-8")
    (folder / "tgt.en").write_text("".join(t + "\n" for t in targets), encoding="utf-8")
    tsv = "".join(f"{s}\t{t}\n" for s, t in zip(sources, targets))
    return folder / "src.de", folder / "tgt.en", tsv, len(sources)


def test_mt_score_writes_a_line_per_pair_from_files_or_stdin(trained_run, pair_files, tmp_path):
    src, tgt, tsv, n = pair_files
    summary = tmp_path / "summary.json"
    from_files = run_cli("mt-score", "-c", str(trained_run), "--src", str(src), "--tgt", str(tgt),
                         "--json", str(summary), "--pieces")  # fmt: skip
    rows = [line.split("\t") for line in from_files.stdout.splitlines()]
    assert len(rows) == n and all(len(r) == 3 for r in rows)
    sums = [float(r[0]) for r in rows]
    pieces = [r[1].split(" ") for r in rows]
    for total, piece_lps, row_pieces in zip(sums, (r[2].split(" ") for r in rows), pieces):
        assert len(piece_lps) == len(row_pieces) and total < 0
        assert total == pytest.approx(sum(map(float, piece_lps)), abs=5e-4 * len(piece_lps))
    assert len(pieces[5]) == 1 and len(pieces[6]) == 1  # empty targets: EOS alone
    result = json.loads(summary.read_text())
    assert result["pairs"] == n and result["target_pieces"] == sum(map(len, pieces))
    assert result["perplexity"] == pytest.approx(math.exp(-sum(sums) / result["target_pieces"]), rel=1e-3)
    assert "perplexity" in from_files.stderr

    from_stdin = run_cli("mt-score", "-c", str(trained_run), "--pieces", "-q", input_text=tsv)
    assert from_stdin.stdout == from_files.stdout and from_stdin.stderr == ""

    normalised = run_cli("mt-score", "-c", str(trained_run), "--src", str(src), "--tgt", str(tgt), "--normalize")
    means = [float(x) for x in normalised.stdout.splitlines()]
    assert means == pytest.approx([s / len(p) for s, p in zip(sums, pieces)], abs=1e-4)


def test_mt_score_refuses_bad_input_in_one_line(trained_run, pair_files, tmp_path):
    src, tgt, _, n = pair_files
    short = tmp_path / "short.en"
    short.write_text("a dog\n", encoding="utf-8")
    cases = {
        "line-aligned": ["--src", str(src), "--tgt", str(short)],
        "go together": ["--src", str(src)],
        "needs --device cuda": ["--src", str(src), "--tgt", str(tgt), "--dtype", "fp16", "--device", "cpu"],
    }
    for message, flags in cases.items():
        result = run_cli("mt-score", "-c", str(trained_run), *flags, check=False)
        assert result.returncode == 2 and result.stdout == ""
        assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    result = run_cli("mt-score", "-c", str(trained_run), input_text="ein hund\ta dog\nkein tab hier\n", check=False)
    assert result.returncode == 2 and "<stdin>:2: expected 'source<TAB>target', found no tab" in result.stderr
    assert result.stdout == ""  # the first chunk is checked whole before anything is written
    assert (
        f"has {n} lines but --tgt {short} has 1"
        in run_cli("mt-score", "-c", str(trained_run), "--src", str(src), "--tgt", str(short), check=False).stderr
    )


def test_the_ctranslate2_engine_scores_as_ours(trained_run, pair_files, tmp_path):
    pytest.importorskip("ctranslate2")
    from mt.export import export

    exported = export([str(trained_run / "checkpoints" / "best.pt")], tmp_path / "ct2")
    src, tgt, _, _ = pair_files
    ours = run_cli("mt-score", "-c", str(trained_run / "checkpoints" / "best.pt"), "--src", str(src),
                   "--tgt", str(tgt), "--pieces", "-q")  # fmt: skip
    theirs = run_cli("mt-score", "--engine", "ctranslate2", "-c", str(exported), "--src", str(src),
                     "--tgt", str(tgt), "--pieces", "-q")  # fmt: skip
    ours_rows, their_rows = ([line.split("\t") for line in r.stdout.splitlines()] for r in (ours, theirs))
    assert [r[1] for r in ours_rows] == [r[1] for r in their_rows]  # the same pieces, EOS included
    for a, b in zip(ours_rows, their_rows):
        assert [float(x) for x in b[2].split(" ")] == pytest.approx([float(x) for x in a[2].split(" ")], abs=2e-3)
