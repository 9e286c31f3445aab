"""Required terms (lexically constrained decoding): every translation holds its line's phrases, with the
score the model gives it; lines without terms translate as before; what cannot be placed is counted."""

import json
import random
import re

import pytest
import torch

import mt
from mt.data.tokenizer import BOS, EOS
from mt.decoding.constraints import Constraints
from mt.decoding.glossary import Glossary
from mt.decoding.prefix import Prefixes
from mt.decoding.search import beam_search, length_penalty
from mt.decoding.terms import Need, Progress, allocate, holds, missing, terms_beam_search
from mt.errors import MTError
from mt.languages import phrase_pattern
from mt.model import Transformer

from conftest import overfit, pad_ids, reversal_task, run_cli

VOCAB = 20


@pytest.fixture(scope="module")
def half_trained():
    """A model half-way to reversing its input: confident enough to have preferences, not to be right."""
    torch.manual_seed(0)
    model = Transformer(VOCAB, VOCAB, d_model=32, heads=4, ffn_dim=64, encoder_layers=2, decoder_layers=2, dropout=0.0)
    return overfit(model, reversal_task(64, VOCAB), steps=60)


@torch.no_grad()
def model_score(model, src_ids: list[int], tokens: list[int], alpha: float, max_len_b: int) -> float:
    """The model's log-probability of tokens and EOS, re-run whole (no cache), over the GNMT length penalty
    of their length; an output cut at the length limit (1.0 * |x| + max_len_b) has no EOS, as in beam search."""
    at_limit = len(tokens) == len(src_ids) + 1 + max_len_b
    written = tokens if at_limit else tokens + [EOS]
    memory, mask = model.encode(torch.tensor([src_ids + [EOS]]))
    logits = model.logits(model.decode(torch.tensor([[BOS] + written[:-1]]), memory, mask))[0]
    lp = logits.log_softmax(-1).gather(1, torch.tensor([written]).T).sum()
    return float(lp / length_penalty(torch.tensor(len(written)), alpha))


def test_progress_follows_a_phrase_as_whole_words_and_starts_again_where_it_breaks_off():
    need = Need([[5, 6, 7], [9], [5, 8]], joins=frozenset({15}))  # 15 continues a word
    p = Progress()
    assert p.wanted(need) == [5, 9] and p.pieces(need) == 0
    p = p.after(5, need)  # the first piece of [5, 6, 7] (the first phrase that starts with it)
    assert p.inside == (0, 1) and p.wanted(need) == [6] and p.pieces(need) == 1
    p = p.after(5, need)  # breaks off [5, 6, 7] and starts it again
    assert p.inside == (0, 1)
    p = p.after(4, need)  # breaks off: 4 starts nothing, so the count falls back to the phrases met
    assert p == Progress() and p.pieces(need) == 0
    p = p.after(9, need)  # [9] written whole: met once the next piece starts a word, or the output ends
    assert p.inside == (1, 1) and not p.met and p.wanted(need) == [5]
    assert Progress().after(9, Need([[9]], need.joins)).complete(Need([[9]], need.joins))
    assert p.after(15, need) == Progress()  # "9" went on as a longer word: not met
    for token in (5, 6, 7):
        p = p.after(token, need)
    assert p.met == {1} and p.inside == (0, 3) and p.pieces(need) == 4 and p.wanted(need) == [5]
    p = p.after(5, need).after(8, need)  # [5, 6, 7] met as 5 starts a word, and [5, 8]
    assert p.met == {0, 1} and p.complete(need) and p.pieces(need) == 6 and p.wanted(need) == []
    assert not p.after(15, need).complete(need) and p.after(4, need).complete(need)
    assert holds([1, 5, 6, 7], [5, 6, 7]) and not holds([5, 6, 1, 7], [5, 6, 7])
    assert holds([5, 6, 7, 4], [5, 6, 7], need.joins) and not holds([5, 6, 7, 15], [5, 6, 7], need.joins)
    assert holds([5, 6, 7, 15, 5, 6, 7], [5, 6, 7], need.joins)  # the second occurrence ends the output
    assert missing([9, 5, 8], need.phrases) == 1


def test_the_beam_is_shared_among_the_banks_fullest_first():
    need = Need([[5, 6]])
    none, one, two = Progress(), Progress(inside=(0, 1)), Progress(inside=(0, 2))
    candidates = [(-1.0, 0, 1, none), (-1.5, 0, 2, none), (-2.0, 0, 3, none), (-9.0, 0, 5, one), (-7.0, 1, 6, two)]
    kept = allocate(candidates, need, beam=4)
    # one from each bank (2 pieces, then 1, then 0), then the next of bank 2 (empty), 1 (empty), 0
    assert [c[2] for c in kept] == [1, 2, 6, 5]
    assert [c[2] for c in allocate(candidates, need, beam=2)] == [6, 5]  # hypotheses holding none wait
    assert [c[2] for c in allocate(candidates[:3], need, beam=2)] == [1, 2]  # one bank: plain beam search


def test_every_translation_holds_its_phrases_with_the_models_own_score(half_trained):
    sources = [s for s, _ in reversal_task(10, VOCAB, seed=4)]
    src = pad_ids(sources, suffix=[EOS])
    free = beam_search(half_trained, src, beam=4, alpha=0.6, max_len_a=1.0, max_len_b=3)
    # for each sentence a phrase the free search does not write: two pieces it lacks, and one it lacks
    absent = [[t for t in range(4, VOCAB) if t not in hyps[0].tokens] for hyps in free]
    phrases = [[[a[0], a[1]], [a[2]]] for a in absent]
    found = terms_beam_search(half_trained, src, phrases, beam=4, alpha=0.6, max_len_a=1.0, max_len_b=3, nbest=3)
    for source, need, hyps in zip(sources, phrases, found):
        assert len(hyps) == 3
        for hyp in hyps:
            assert missing(hyp.tokens, need) == 0, (need, hyp.tokens)
            assert hyp.score == pytest.approx(model_score(half_trained, source, hyp.tokens, 0.6, 3), abs=1e-4)
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
    assert all(found[i][0].tokens != free[i][0].tokens for i in range(len(free)))


def test_what_cannot_be_placed_gives_the_best_translation_without_it(half_trained):
    sources = [s for s, _ in reversal_task(4, VOCAB, seed=9)]
    src = pad_ids(sources, suffix=[EOS])
    too_long = [[list(range(4, VOCAB))] for _ in sources]  # 16 pieces: over every sentence's length limit
    found = terms_beam_search(half_trained, src, too_long, beam=4, alpha=0.6, max_len_a=1.0, max_len_b=3)
    for source, hyps in zip(sources, found):
        assert hyps[0].tokens and missing(hyps[0].tokens, too_long[0]) == 1
        assert hyps[0].score == pytest.approx(model_score(half_trained, source, hyps[0].tokens, 0.6, 3), abs=1e-4)


def test_a_forced_prefix_comes_first_and_may_write_a_phrase_itself(half_trained):
    sources = [s for s, _ in reversal_task(6, VOCAB, seed=7)]
    src = pad_ids(sources, suffix=[EOS])
    prefixes = [[4 + i, 5 + i] for i in range(len(sources))]
    forced = Prefixes.of(prefixes, src.device)
    free = beam_search(half_trained, src, beam=4, alpha=0.6, max_len_a=1.0, max_len_b=3, prefixes=forced)
    absent = [[t for t in range(4, VOCAB) if t not in hyps[0].tokens] for hyps in free]
    phrases = [[[a[0]], [a[1], a[2]]] for a in absent]
    found = terms_beam_search(
        half_trained, src, phrases, beam=4, alpha=0.6, max_len_a=1.0, max_len_b=3, nbest=2, prefixes=forced
    )
    for source, prefix, need, hyps in zip(sources, prefixes, phrases, found):
        for hyp in hyps:
            assert hyp.tokens[:2] == prefix and missing(hyp.tokens, need) == 0, (prefix, need, hyp.tokens)
            assert hyp.score == pytest.approx(model_score(half_trained, source, hyp.tokens, 0.6, 3), abs=1e-4)
    # a phrase the prefix writes is met there: nothing is left to place, and the search is beam search's
    written = terms_beam_search(
        half_trained, src, [[p[1:]] for p in prefixes], beam=4, alpha=0.6, max_len_a=1.0, max_len_b=3, prefixes=forced
    )
    assert [h[0].tokens for h in written] == [h[0].tokens for h in free]
    # constraints leave the prefix alone: no piece twice after it (4 is there twice), at least 6 pieces
    rules = Constraints(min_len=6, no_repeat_ngram=1)
    repeated = Prefixes.of([[4, 4]] * len(sources), src.device)
    once = [[[next(t for t in a if t != 4)]] for a in absent]
    ruled = terms_beam_search(
        half_trained, src, once, beam=4, alpha=0.6, max_len_a=1.0, max_len_b=3, constraints=rules, prefixes=repeated
    )
    for need, hyps in zip(once, ruled):
        tokens = hyps[0].tokens
        assert tokens[:2] == [4, 4] and 4 not in tokens[2:] and len(set(tokens[2:])) == len(tokens) - 2, tokens
        assert len(tokens) >= 6 and missing(tokens, need) == 0, (need, tokens)


def test_translate_and_the_api_hold_the_terms(trained_run, tiny_corpus, tmp_path):
    checkpoint = trained_run / "checkpoints" / "final.pt"
    lines = (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()[:6]
    translator = mt.load_translator(checkpoint, device="cpu", beam=5)
    plain = translator.translate(lines)
    words = ["dog", "cat", "red", "blue", "quickly", "here"]
    terms = [[next(w for w in words if w not in p.split())] for p in plain]  # a word each line lacks
    terms[1] = []  # a line without terms
    terms[2] = [terms[2][0], "big small"]  # two, one of two words
    got = translator.translate(lines, terms=terms)
    for line_terms, text in zip(terms, got):
        assert all(f" {term} " in f" {text.rstrip('.')} " for term in line_terms), (line_terms, text)  # as words
    assert got[1] == plain[1] and translator.terms_missed == 0  # searched as without terms
    assert translator.translate(lines[0], terms=terms[0]) == got[0]  # one line, its list

    (tmp_path / "in.de").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "terms").write_text("".join("\t".join(t) + "\n" for t in terms), encoding="utf-8")
    (tmp_path / "short").write_text("dog\n", encoding="utf-8")

    def translate(terms_file: str, *flags: str, check: bool = True):
        """translate's answer on the lines with this terms file."""
        return run_cli(
            "translate", "-c", str(checkpoint), "-i", str(tmp_path / "in.de"), "--terms", str(tmp_path / terms_file),
            *flags, check=check,
        )  # fmt: skip

    assert translate("terms").stdout.splitlines() == got  # the checkpoint decodes greedily: --terms takes beam 5
    short = translate("short", check=False)
    said = f"error: {tmp_path / 'short'}: 1 terms line for 6 or more input lines (one each)"
    assert short.returncode == 2 and short.stderr.strip() == said
    unplaceable = translate("terms", "--max-len-a", "0", "--max-len-b", "2")
    cut = unplaceable.stdout.splitlines()
    lacking = sum(not all(term in text.split() for term in " ".join(t).split()) for t, text in zip(terms, cut))
    assert len(cut) == 6 and lacking and f"the translation of {lacking} line" in unplaceable.stderr
    refused = translate("terms", "--beam", "1", check=False)
    assert refused.returncode == 2 and "--terms needs beam search" in refused.stderr
    prefixes = ["Look:", "", "A", "", "", "Here"]
    (tmp_path / "prefixes").write_text("\n".join(prefixes) + "\n", encoding="utf-8")
    started = translate("terms", "--prefix", str(tmp_path / "prefixes")).stdout.splitlines()
    api = [best.text for best, *_ in translator.translate_nbest(lines, terms=terms, prefixes=prefixes)]
    assert started == api and started[1] == got[1]
    for prefix, line_terms, text in zip(prefixes, terms, started):
        assert text.startswith(prefix) and all(f" {t} " in f" {text.rstrip('.')} " for t in line_terms), text

    with pytest.raises(MTError, match="beam search"):
        translator.translate(lines, terms=terms, beam=1)
    with pytest.raises(MTError, match="split_sentences"):
        translator.translate(lines, terms=terms, split_sentences=True)
    with pytest.raises(MTError, match="one entry per line"):
        translator.translate(lines, terms="dog")
    with pytest.raises(MTError, match=r"terms\[0\]\[0\]: a str is expected"):
        translator.translate(lines, terms=[[1]] + [[]] * 5)


def test_a_glossary_names_the_targets_of_the_source_entries_a_line_holds(tmp_path):
    path = tmp_path / "glossary.tsv"
    path.write_text("# source<TAB>target\nVertrag\tcontract\n\nNew York\tNew York City\nYork\tYork town\n", "utf-8")
    glossary = Glossary.load(path, "en")
    lines = ["Der Vertrag gilt.", "Verträge, Vertrags", "in New York and York", "Vertrag Vertrag", "nichts"]
    assert glossary.terms(lines) == [["contract"], [], ["New York City", "York town"], ["contract"], []]
    assert Glossary({"汽车": "car"}, "zh").terms(["我的汽车很好"]) == [["car"]]  # no spaces between words
    ignoring = tmp_path / "any_case.tsv"
    ignoring.write_text("vertrag\tContract\nNEW YORK\tNYC\nnew york\tNYC\nStraße\tstreet\n", encoding="utf-8")
    any_case = Glossary.load(ignoring, "de", ignore_case=True)
    assert any_case.terms(["Der Vertrag", "VERTRAG in New York", "vertrags", "die STRASSE, die Straße"]) == [
        ["Contract"], ["Contract", "NYC"], [], ["street"]]  # fmt: skip
    assert Glossary.load(ignoring, "de").terms(["Der Vertrag", "NEW YORK"]) == [[], ["NYC"]]  # as written
    assert Glossary({"汽车": "car"}, "de").terms(["我的汽车很好"]) == [[]]
    for text, message in [
        ("Vertrag\n", r"glossary.tsv:1: expected source<TAB>target, got 'Vertrag'"),
        ("a\tb\tc\n", r"glossary.tsv:1: expected source<TAB>target"),
        ("a\tb\n# x\na\tc\n", r"glossary.tsv:3: 'a' is given two targets \('b', 'c'\)"),
        ("# nothing\n\n", r"glossary.tsv: no entries"),
        ("Bank\tbank\nbank\tbench\n", r"glossary.tsv:2: 'bank' \(as 'Bank', the case ignored\) is given two targets"),
    ]:
        path.write_text(text, encoding="utf-8")
        with pytest.raises(MTError, match=f"^{re.escape(str(tmp_path))}/{message}"):
            Glossary.load(path, ignore_case=True)
    assert Glossary.load(path).terms(["bank"]) == [["bench"]]  # two entries where the case counts


@pytest.mark.parametrize("code, ignore_case", [("de", False), ("de", True), ("zh", False)])
def test_entries_stacked_on_a_glossary_find_what_one_glossary_of_them_all_finds(code, ignore_case):
    """A request's entries on top of a server's (with_entries, matched by searching the two patterns) give
    each line the targets a glossary of the merged entries compiled as one gives it."""
    rng = random.Random(1)

    def text(most: int) -> str:
        return "".join(rng.choice("abAB. ") for _ in range(rng.randint(1, most)))

    def on_top(entries: dict[str, str], added: dict[str, str]) -> dict[str, str]:
        keys = {(s.casefold() if ignore_case else s) for s in added}
        return {s: t for s, t in entries.items() if (s.casefold() if ignore_case else s) not in keys} | added

    for _ in range(80):
        below = {text(6).strip() or "a": f"below{i}" for i in range(rng.randint(0, 25))}
        added = {text(6).strip() or "b": f"top{i}" for i in range(rng.randint(1, 6))}
        stacked, merged = Glossary(below, code, ignore_case).with_entries(added), on_top(below, added)
        if rng.random() < 0.3:  # stacked again: the later entries on top of both
            more = {text(4).strip() or "a": f"more{i}" for i in range(rng.randint(1, 3))}
            stacked, merged = stacked.with_entries(more), on_top(merged, more)
        lines = [text(50) for _ in range(20)]
        assert stacked.terms(lines) == Glossary(merged, code, ignore_case).terms(lines), (below, added)
        assert stacked.entries == merged


@pytest.mark.parametrize("code, ignore_case", [("de", False), ("de", True), ("zh", False)])
def test_the_phrase_trie_finds_what_an_alternation_of_the_phrases_finds(code, ignore_case):
    """phrase_pattern compiles the phrases as a trie; an alternation of them, longest first, is the reference:
    the same matches, at the same places, in random text over a small alphabet (many shared prefixes)."""
    rng = random.Random(0)
    alphabet = "abAB. "

    def text(most: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, most)))

    before, after = ("", "") if code == "zh" else (r"(?<!\w)", r"(?!\w)")
    for _ in range(60):
        phrases = list({text(6).strip() or "a" for _ in range(rng.randint(1, 25))})
        longest_first = sorted(phrases, key=len, reverse=True)
        reference = "|".join(before + re.escape(p) + after for p in longest_first)
        reference = re.compile(reference, re.IGNORECASE if ignore_case else 0)
        trie = phrase_pattern(phrases, code, ignore_case)
        for line in (text(60) for _ in range(20)):
            found = [(m.start(), m.group(0)) for m in trie.finditer(line)]
            assert found == [(m.start(), m.group(0)) for m in reference.finditer(line)], (phrases, line)
    for deepest in (600, 1200):  # nested past what the regex compiler (600) or the trie's walk (1200) recurses
        phrases = ["a" * n for n in range(1, deepest)]
        reference = "|".join(before + re.escape(p) + after for p in sorted(phrases, key=len, reverse=True))
        reference = re.compile(reference, re.IGNORECASE if ignore_case else 0)
        line = "b" + "a" * 40 + " " + "A" * 3 + " a."
        found = [(m.start(), m.group(0)) for m in phrase_pattern(phrases, code, ignore_case).finditer(line)]
        assert found == [(m.start(), m.group(0)) for m in reference.finditer(line)] and found


def test_translate_applies_a_glossary_to_the_lines_that_hold_its_entries(trained_run, tiny_corpus, tmp_path):
    checkpoint = trained_run / "checkpoints" / "final.pt"
    lines = (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()[:10]
    (tmp_path / "in.de").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "glossary.tsv").write_text("hund\tcat\n", encoding="utf-8")
    out = run_cli(
        "translate", "-c", str(checkpoint), "-i", str(tmp_path / "in.de"), "--glossary", str(tmp_path / "glossary.tsv")
    )
    plain = mt.load_translator(checkpoint, device="cpu", beam=5).translate(lines)
    got = out.stdout.splitlines()
    assert any("hund" in line.split() for line in lines) and any("hund" not in line.split() for line in lines)
    held = sum("hund" in line.split() for line in lines)
    said = "1 line holds" if held == 1 else f"{held} lines hold"
    assert f"beam 5, {said} glossary entries)" in out.stderr.splitlines()[-1], out.stderr
    for line, text, before in zip(lines, got, plain):
        assert ("cat" in text.rstrip(".").split()) if "hund" in line.split() else text == before
    (tmp_path / "upper.tsv").write_text("HUND\tcat\n", encoding="utf-8")
    upper = [
        "translate",
        "-c",
        str(checkpoint),
        "-i",
        str(tmp_path / "in.de"),
        "--glossary",
        str(tmp_path / "upper.tsv"),
    ]
    assert run_cli(*upper, "--glossary-ignore-case").stdout == out.stdout  # HUND found as hund
    assert run_cli(*upper).stdout.splitlines() == plain  # as written: HUND is in no line
    alone = run_cli("translate", "-c", str(checkpoint), "--glossary-ignore-case", input_text="x\n", check=False)
    assert alone.returncode == 2 and "--glossary-ignore-case says how --glossary's entries are found" in alone.stderr


def test_a_glossary_holds_sentence_by_sentence(trained_run, tiny_corpus, tmp_path):
    """With split_sentences, a glossary's target is required of the sentence that holds its entry (terms given
    per line are still refused: no sentence alone must hold them)."""
    lines = (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()
    with_entry = next(line for line in lines if "hund" in line.split())
    without = next(line for line in lines if "hund" not in line.split())
    sentences = [without.capitalize() + ".", with_entry.capitalize() + "."]
    paragraph = " ".join(sentences)
    translator = mt.load_translator(trained_run, device="cpu", beam=5)
    glossary = mt.Glossary({"hund": "cat"}, "de")
    each = translator.translate(sentences, terms=[[], ["cat"]])  # the term in the second sentence alone
    assert translator.translate([paragraph], glossary=glossary, split_sentences=True) == [" ".join(each)]
    assert "cat" in each[1].rstrip(".").split() and each[0] == translator.translate(sentences[:1])[0]
    (tmp_path / "glossary.tsv").write_text("hund\tcat\n", encoding="utf-8")
    flags = ["-c", str(trained_run), "--glossary", str(tmp_path / "glossary.tsv"), "--split-sentences", "-q"]
    assert run_cli("translate", *flags, input_text=paragraph + "\n").stdout == " ".join(each) + "\n"
    (tmp_path / "terms.tsv").write_text("cat\n", encoding="utf-8")
    refused = run_cli("translate", *flags, "--terms", str(tmp_path / "terms.tsv"), input_text="x\n", check=False)
    assert refused.returncode == 2 and "--terms hold for a whole line: not with --split-sentences" in refused.stderr
    with pytest.raises(MTError, match="terms hold for a whole line: not with split_sentences"):
        translator.translate([paragraph], terms=[["cat"]], glossary=glossary, split_sentences=True)


def test_mt_evaluate_places_the_terms_and_counts_those_translations_hold(trained_run, tiny_corpus, tmp_path):
    glossary, every_line = tmp_path / "glossary.tsv", tmp_path / "terms.tsv"
    glossary.write_text("hund\tcat\n", encoding="utf-8")
    sources = (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()
    every_line.write_text("red\n" * len(sources), encoding="utf-8")
    asked = sum("hund" in line.split() for line in sources)
    placed, plain = tmp_path / "placed.en", tmp_path / "plain.en"
    refs = ["--ref", str(tiny_corpus / "test.en")]

    def evaluate(*flags: str, check: bool = True):
        """mt-evaluate's answer, and the JSON it wrote."""
        said = run_cli("mt-evaluate", *flags, "--json", str(tmp_path / "scores.json"), check=check)
        return said, json.loads((tmp_path / "scores.json").read_text()) if said.returncode == 0 else None

    said, scores = evaluate("-c", str(trained_run), "--split", "test", "--glossary", str(glossary), "-o", str(placed))
    assert asked and scores["terms_asked"] == scores["terms_held"] == asked and scores["term_accuracy"] == 100
    assert scores["beam"] == 5 and f"terms: {asked} of {asked} held (100.0%)" in said.stdout  # greedy checkpoint
    run_cli("translate", "-c", str(trained_run), "-i", str(tiny_corpus / "test.de"), "-o", str(plain))
    glossed = ["--src", str(tiny_corpus / "test.de"), "--glossary", str(glossary)]
    said, compared = evaluate("--hyp", str(plain), str(placed), *glossed, *refs)
    without = sum("cat" in re.findall(r"\w+", hyp) for line, hyp in zip(sources, plain.read_text().splitlines())
                  if "hund" in line.split())  # fmt: skip
    held = [(row["terms_held"], row["terms_asked"]) for row in compared["systems"]]
    assert held == [(without, asked), (asked, asked)] and without < asked, said.stdout  # hund is "dog" unless placed
    _, scores = evaluate("-c", str(trained_run), "--split", "test", "--terms", str(every_line), "--beam", "3")
    assert scores["terms_held"] == scores["terms_asked"] == len(sources) and scores["beam"] == 3
    every_line.write_text("red\n", encoding="utf-8")
    for flags, message in [
        (["-c", str(trained_run), "--split", "test", "--terms", str(every_line)], f"{every_line} has 1 line but "),
        (["-c", str(trained_run), "--split", "test", "--glossary", str(glossary), "--beam", "1"], "needs beam search"),
        (["--hyp", str(plain), "--glossary", str(glossary), *refs], "--glossary with --hyp needs --src"),
    ]:
        refused, _ = evaluate(*flags, check=False)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
