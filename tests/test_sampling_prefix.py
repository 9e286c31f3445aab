"""Sampling (temperature, top-k, top-p) and target prefixes, against ground truth: the limits that must
equal greedy search, the distribution the draws must follow, per-line seeds that no batch changes, and
a prefix-constrained beam search equal to a textbook beam search that continues the prefix."""

import math
from collections import Counter

import pytest
import torch

import mt
from mt.data.tokenizer import BOS, EOS
from mt.decoding.prefix import Prefixes
from mt.decoding.sampling import Sampler, uniforms
from mt.decoding.search import beam_search, greedy_search, sample_search
from mt.decoding.settings import DecodeSettings, line_seed, verbatim
from mt.errors import MTError
from mt.model import Transformer

from conftest import pad_ids, reversal_task, run_cli, textbook_beam

VOCAB = 20


@pytest.fixture(scope="module")
def untrained():
    """An untrained model: uncertain, diverse next-token distributions (what sampling must respect)."""
    torch.manual_seed(3)
    model = Transformer(VOCAB, VOCAB, d_model=32, heads=4, ffn_dim=64, encoder_layers=2, decoder_layers=2, dropout=0.0)
    sources = [s for s, _ in reversal_task(10, VOCAB, seed=7)]
    return model.eval(), sources


def sampler_for(sources, seeds, samples=1, steps=40, **shape):
    return Sampler(uniforms(seeds, samples, steps), **shape)


def tokens_of(found):
    return [[h.tokens for h in hyps] for hyps in found]


@pytest.mark.parametrize("shape", [dict(temperature=0.0), dict(temperature=1e-4), dict(topk=1), dict(topp=1e-6)])
def test_sampling_at_its_limits_is_greedy_search(untrained, shape):
    model, sources = untrained
    src = pad_ids(sources, suffix=[EOS])
    greedy = greedy_search(model, src, 1.0, 5)
    sampled = sample_search(model, src, sampler_for(sources, range(len(sources)), **shape), 1, 1.0, 5)
    assert [h[0].tokens for h in sampled] == [g.tokens for g in greedy]
    assert [h[0].score for h in sampled] == pytest.approx([g.score for g in greedy], abs=1e-5)


def test_a_lines_samples_depend_on_its_seed_only(untrained):
    model, sources = untrained
    seeds = [line_seed(11, i) for i in range(len(sources))]
    together = sample_search(model, pad_ids(sources, suffix=[EOS]), sampler_for(sources, seeds, 3), 3, 1.0, 5)
    order = list(reversed(range(len(sources))))
    shuffled = sample_search(
        model,
        pad_ids([sources[i] for i in order], suffix=[EOS]),
        sampler_for(sources, [seeds[i] for i in order], 3),
        3,
        1.0,
        5,
    )
    alone = [
        sample_search(model, pad_ids([s], suffix=[EOS]), sampler_for([s], [seed], 3), 3, 1.0, 5)[0]
        for s, seed in zip(sources, seeds)
    ]
    assert tokens_of(together) == tokens_of([shuffled[order.index(i)] for i in range(len(sources))])
    assert tokens_of(together) == tokens_of(alone)
    distinct = {tuple(h.tokens) for hyps in together for h in hyps}
    assert len(distinct) > len(sources)  # samples of one line differ: this is no greedy search in disguise
    other = sample_search(model, pad_ids(sources, suffix=[EOS]), sampler_for(sources, [s + 1 for s in seeds], 3), 3)
    assert tokens_of(other) != tokens_of(together)


@torch.no_grad()
def first_token_probs(model, src_ids, temperature=1.0):
    memory, mask = model.encode(torch.tensor([src_ids + [EOS]]))
    logits = model.logits(model.decode(torch.tensor([[BOS]]), memory, mask))[0, -1]
    return (logits / temperature).softmax(-1)


@pytest.mark.parametrize(
    "shape", [dict(), dict(temperature=2.0), dict(topk=3), dict(topp=0.5), dict(epsilon=0.06), dict(epsilon=0.9)]
)
def test_first_tokens_follow_the_shaped_distribution(untrained, shape):
    """4,000 draws of one sentence's first token against the distribution the shape defines."""
    model, sources = untrained
    draws = 4000
    probs = first_token_probs(model, sources[0], shape.get("temperature", 1.0))
    if "topk" in shape:
        cut = probs.topk(shape["topk"]).indices
        probs = torch.zeros_like(probs).index_fill(0, cut, 1.0) * probs
    if "topp" in shape:
        sorted_p, order = probs.sort(descending=True)
        keep = (sorted_p.cumsum(0) - sorted_p) < shape["topp"]
        probs = torch.zeros_like(probs).index_fill(0, order[keep], 1.0) * probs
    if "epsilon" in shape:  # below epsilon never drawn, the most likely token always can be
        probs = torch.where((probs >= shape["epsilon"]) | (probs == probs.max()), probs, 0.0)
    probs = probs / probs.sum()
    src = pad_ids([sources[0]], suffix=[EOS])
    with torch.no_grad():
        logits = model.step(torch.tensor([BOS]), model.start_state(src))[0].expand(draws, -1)
        _, picked = Sampler(uniforms([5], draws, 1), **shape)(logits, torch.arange(draws), 0)
    counts = Counter(picked.tolist())
    assert all(probs[tok] > 0 for tok in counts)  # nothing outside the top-k / nucleus
    for tok in range(VOCAB):  # each frequency within 4.5 standard deviations of its probability
        p = float(probs[tok])
        assert abs(counts.get(tok, 0) / draws - p) <= 4.5 * math.sqrt(p * (1 - p) / draws) + 1e-9


def test_a_forced_prefix_starts_every_output(untrained):
    model, sources = untrained
    prefixes = [[5, 6, 7], [], [9], [4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4]] + [[8, 4]] * (len(sources) - 4)
    src = pad_ids(sources, suffix=[EOS])
    forced = Prefixes.of(prefixes, src.device)
    outputs = {
        "greedy": [[h] for h in greedy_search(model, src, 1.0, 5, forced)],
        "beam": beam_search(model, src, 3, 0.6, 1.0, 5, nbest=3, prefixes=forced),
        "sample": sample_search(model, src, sampler_for(sources, range(10), 2, steps=60), 2, 1.0, 5, forced),
    }
    free = greedy_search(model, src, 1.0, 5)
    for name, found in outputs.items():
        for prefix, hyps in zip(prefixes, found):
            for h in hyps:
                assert h.tokens[: len(prefix)] == prefix, name  # the 11-token one is over the length limit
    assert tokens_of(outputs["greedy"])[1] == [free[1].tokens]  # no prefix: free decoding
    # A prefix that is greedy's own start changes nothing.
    own = [g.tokens[:2] for g in free]
    again = greedy_search(model, src, 1.0, 5, Prefixes.of(own, src.device))
    assert [g.tokens for g in again] == [g.tokens for g in free]


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_search_under_a_prefix_equals_scoring_its_continuations(untrained, alpha):
    model, sources = untrained
    prefixes = [[5, 6], [9], [7, 7, 7], [4]] + [[10 + i] for i in range(len(sources) - 4)]
    src = pad_ids(sources, suffix=[EOS])
    found = beam_search(model, src, 4, alpha, 1.0, 3, prefixes=Prefixes.of(prefixes, src.device))
    for src_ids, prefix, hyps in zip(sources, prefixes, found):
        tokens, score = textbook_beam(model, src_ids, 4, alpha, 1.0, 3, prefix)
        assert hyps[0].tokens == tokens
        assert hyps[0].score == pytest.approx(score, abs=1e-4)


def test_the_prefix_comes_back_as_written():
    assert verbatim("Zwei  Hunde ", "Zwei Hunde", "Zwei Hunde laufen.") == "Zwei  Hunde laufen."
    assert verbatim("Ein ☃", "Ein ⁇", "Ein ⁇ schmilzt.") == "Ein ☃ schmilzt."
    assert verbatim("", "", "A dog.") == "A dog."


def test_out_of_range_settings_are_one_line_errors():
    for bad, field in (
        (dict(strategy="nucleus"), "strategy"),
        (dict(strategy="sample", temperature=-1.0), "temperature"),
        (dict(strategy="sample", topp=0.0), "topp"),
        (dict(strategy="sample", topk=-2), "topk"),
        (dict(beam=2, nbest=3), "nbest"),
        (dict(alpha="1.0"), "alpha"),  # of another type: the same one line, not a TypeError from inside
        (dict(beam=2.0), "beam"),
        (dict(beam=True), "beam"),
        (dict(split_sentences="yes"), "split_sentences"),
    ):
        with pytest.raises(MTError, match=f"decode setting {field}=") as err:
            DecodeSettings(**bad)
        assert "\n" not in str(err.value)
    assert DecodeSettings(strategy="sample", nbest=4).rows_per_line == 4  # samples need no beam
    assert DecodeSettings(alpha=1, temperature=0).alpha == 1  # an integer where a number is asked for


@pytest.fixture(scope="module")
def translator(trained_run):
    return mt.load_translator(trained_run / "checkpoints" / "final.pt", device="cpu", beam=1)


def test_the_translator_samples_each_line_alike_in_any_batch(translator, tiny_corpus):
    lines = (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()[:16]
    sampling = DecodeSettings(strategy="sample", nbest=3, seed=4, temperature=1.5)
    big = translator.with_settings(sampling).translate_nbest(lines)
    small = translator.with_settings(sampling.updated(batch_tokens=30)).translate_nbest(lines)
    seeds = [line_seed(4, i) for i in range(len(lines))]
    reverse = translator.with_settings(sampling).translate_nbest(lines[::-1], seeds=seeds[::-1])[::-1]
    later = translator.with_settings(sampling).translate_nbest(lines[8:], first_line=8)  # a later chunk of a file
    text = [[t.text for t in found] for found in big]
    assert text == [[t.text for t in found] for found in small]
    assert text == [[t.text for t in found] for found in reverse]
    assert text[8:] == [[t.text for t in found] for found in later]
    assert len({t for found in text for t in found}) > len(lines)  # samples vary


def test_the_translator_keeps_prefixes_and_line_alignment(translator, tiny_corpus):
    lines = (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()[:6] + ["", "Hund"]
    prefixes = ["the  dog", "", "Ein ☃ ", "cat", "", "quickly", "ignored", "slowly"]
    for strategy in (dict(), dict(beam=3, nbest=2), dict(strategy="sample", nbest=2)):
        chosen = translator.with_settings(translator.settings.updated(**strategy))
        found = chosen.translate_nbest(lines, prefixes=prefixes)
        assert len(found) == len(lines) and found[6][0].text == ""  # an empty line stays empty
        for line, prefix, hyps in zip(lines, prefixes, found):
            for t in hyps:
                assert not line or t.text.startswith(prefix), (strategy, prefix, t.text)
    with pytest.raises(MTError, match="prefixes: 2 given for 8 lines"):
        translator.translate_nbest(lines, prefixes=prefixes[:2])


def test_translate_samples_and_forces_prefixes_from_the_command_line(trained_run, tiny_corpus, tmp_path):
    """Chunks of 3 lines give what the API gives on the whole file: line numbers and prefixes stay aligned."""
    ckpt = str(trained_run / "checkpoints" / "final.pt")
    lines = (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()[:8] + ["", "Hund"]
    prefixes = ["the", "", "a", "", "", "quickly", "", "", "x", "dog"]
    src, pre = tmp_path / "in.de", tmp_path / "prefix.en"
    src.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    pre.write_text("".join(x + "\n" for x in prefixes), encoding="utf-8")
    flags = ["--strategy", "sample", "--seed", "7", "--topp", "0.9", "--nbest", "2"]
    out = run_cli("translate", "-c", ckpt, "-i", str(src), "--prefix", str(pre), *flags, "--chunk-lines", "3", "-q")
    api = mt.load_translator(ckpt, device="cpu", strategy="sample", seed=7, topp=0.9, nbest=2)
    expected = [
        (str(i), str(k), t.score, t.text)
        for i, found in enumerate(api.translate_nbest(lines, prefixes=prefixes))
        for k, t in enumerate(found)
    ]
    printed = [line.split("\t") for line in out.stdout.splitlines()]
    assert [(i, k, text) for i, k, _, text in printed] == [(i, k, text) for i, k, _, text in expected]
    # batches of 3 lines pad differently from the whole file: scores agree to float noise, not to the last digit
    assert [float(score) for _, _, score, _ in printed] == pytest.approx([s for _, _, s, _ in expected], abs=2e-4)
    pre.write_text("the\n" * 4, encoding="utf-8")
    short = run_cli("translate", "-c", ckpt, "-i", str(src), "--prefix", str(pre), "-q", check=False)
    assert short.returncode == 2 and short.stderr.strip().endswith(
        "4 prefix lines for 10 or more input lines (one each)"
    )
    one = tmp_path / "one.de"
    one.write_text(lines[0] + "\n", encoding="utf-8")
    long = run_cli("translate", "-c", ckpt, "-i", str(one), "--prefix", str(pre), "-q", check=False)
    assert long.returncode == 2 and long.stderr.strip().endswith("more prefix lines than the 1 input line (one each)")
    refused = run_cli("translate", "-c", ckpt, "-i", str(src), "--topk", "5", check=False)
    assert refused.returncode == 2 and "--topk is a sampling setting: add --strategy sample" in refused.stderr
    greedy = run_cli("translate", "-c", ckpt, "-i", str(src), "--strategy", "greedy", "--nbest", "2", check=False)
    assert greedy.returncode == 2 and "for --beam or --nbest use --strategy beam" in greedy.stderr


def test_a_checkpoint_set_to_sample_samples_unless_told_otherwise(trained_run, tiny_corpus, tmp_path):
    """decode.strategy=sample in a checkpoint's config is translate's default; --strategy overrides it."""
    from mt.checkpoint import load_checkpoint, save_checkpoint

    state = load_checkpoint(trained_run / "checkpoints" / "final.pt")
    state["config"]["decode"].update(strategy="sample", seed=3, temperature=1.5)
    save_checkpoint(state, tmp_path / "sampler.pt")
    lines = (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()[:10]
    text = "".join(x + "\n" for x in lines)
    sampler = mt.load_translator(tmp_path / "sampler.pt", device="cpu")
    assert sampler.settings.sampling and sampler.settings.seed == 3
    assert run_cli("translate", "-c", str(tmp_path / "sampler.pt"), "-q", input_text=text).stdout.splitlines() == (
        sampler.translate(lines)
    )
    greedy = run_cli("translate", "-c", str(tmp_path / "sampler.pt"), "-q", "--strategy", "greedy", input_text=text)
    assert greedy.stdout.splitlines() == mt.load_translator(trained_run / "checkpoints" / "final.pt", beam=1).translate(
        lines
    )
