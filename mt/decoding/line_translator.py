"""The interface both engines offer callers (mt/decoding/translator.py, PyTorch; mt/decoding/ctranslate2_translator.py,
CTranslate2): translate lines, translate them n-best, score given translations; a copy decoding with
other settings."""

from __future__ import annotations

import copy
import inspect
import logging
from dataclasses import replace

from mt.decoding.glossary import Glossary, joined_terms
from mt.decoding.mbr import bleu_words, mbr_order
from mt.decoding.protected_spans import decode_protected, pattern_of
from mt.decoding.rerank import DEFAULT_REVERSE_WEIGHT, check_reverse, reranked
from mt.decoding.sentences import several_sentences, several_sentences_note, translate_by_sentence
from mt.decoding.settings import (
    SCORE_BATCH_TOKENS,
    SETTING_NAMES,
    DecodeSettings,
    PairScore,
    Translation,
    check_aligned,
    check_setting_names,
)
from mt.errors import MTError
from mt.languages import into, languages_label

log = logging.getLogger(__name__)


class LineTranslator:
    """What both engines offer callers: `translate(lines)` gives the best translation of every line as text;
    `translate_nbest(lines)` gives settings.nbest Translations per line (text, score, pieces, attention).
    Both take any of DecodeSettings' fields as keywords, for that call alone (beam=5, nbest=3, ...)."""

    languages: tuple[str, str] = ("", "")  # (source, target) language codes, where the model's config names them
    several_sentences: int = 0  # lines of several sentences translated whole, for the caller's note
    truncated: int = 0  # lines cut to max_src_len, for the caller's warning
    terms_missed: int = 0  # lines translated without one of their required terms, for the caller's warning
    protected: int = 0  # lines whose protected spans were carried through untranslated, for the caller's summary
    places_terms: bool = False  # whether _translate_nbest takes required terms (mt/decoding/terms.py)
    reverse: LineTranslator | None = None  # a target -> source model reranking the beam (mt/decoding/rerank.py)
    reverse_weight: float = DEFAULT_REVERSE_WEIGHT

    @property
    def target_language(self) -> str:
        """The language this translator writes: its chosen target, or the model's one; "" for a model of
        several with none chosen (a document's translation is named by it)."""
        target = self.settings.tgt_lang or self.languages[1]
        return target if isinstance(target, str) else ""

    def translate(
        self,
        lines: list[str] | str,
        tgt_lang: str | None = None,
        terms: list | None = None,
        glossary: Glossary | None = None,
        **settings,
    ) -> list[str] | str:
        """The best translation of every line, in order (an empty line gives an empty one). One string in,
        one string out. tgt_lang: the language to translate into, for a model of several; terms: the phrases
        each line's translation must hold (a list of str a line; for one string in, its list); glossary: an
        mt.Glossary, whose targets each line (or sentence) holding its entries must hold; settings: any of
        DecodeSettings' fields, for this call (beam=5, strategy="sample", ...)."""
        translator = self.for_call(tgt_lang=tgt_lang, **settings)
        before = translator.several_sentences
        one = isinstance(lines, str)
        found = [
            hyps[0].text
            for hyps in translator.translate_nbest(
                [lines] if one else lines, terms=[terms] if one and terms is not None else terms, glossary=glossary
            )
        ]
        if translator.several_sentences > before:  # said where a Python caller sees it: a warning logged
            note = several_sentences_note(
                translator.several_sentences - before, len(found), flag="split_sentences=True"
            )
            log.warning(note.removeprefix("note: "))
        return found[0] if isinstance(lines, str) else found

    def translate_nbest(self, lines: list[str] | str, **options) -> list[list[Translation]] | list[Translation]:
        """settings.nbest Translations for every line, in input order (one string in: that line's). options:
        any of DecodeSettings' fields, for this call (nbest=3, ...), and the engine's _translate_nbest's
        (prefixes, seeds, first_line, progress, attention_layer, attention_head). With
        settings.split_sentences, each line's sentences are translated apart and joined back. glossary: an
        mt.Glossary whose entries add required terms to the lines that hold them (to each sentence that holds
        them, with settings.split_sentences)."""
        glossary = options.pop("glossary", None)
        settings = {name: options.pop(name) for name in SETTING_NAMES & options.keys()}
        engine_options = inspect.signature(self._translate_nbest).parameters.keys() - {"lines"}
        unknown = sorted(options.keys() - engine_options)
        if unknown:
            raise MTError(
                f"{unknown[0]}: neither a decoding setting ({', '.join(sorted(SETTING_NAMES))}) "
                f"nor an option of translate_nbest ({', '.join(sorted(engine_options))})"
            )
        translator = self.for_call(**settings)
        if isinstance(lines, str):
            return translator.translate_nbest([lines], glossary=glossary, **options)[0]
        lines = checked_lines(lines)
        if options.get("prefixes") is not None:
            options["prefixes"] = checked_lines(options["prefixes"], "prefixes")
        if options.get("terms") is not None:
            options["terms"] = checked_terms(options["terms"])
            check_terms_use(translator, options)
        by_sentence = translator.settings.split_sentences
        if glossary is not None:
            found = glossary.terms(lines)
            check_terms_use(translator, {**options, "terms": found}, by_sentence=by_sentence)
            if not by_sentence:
                options["terms"] = joined_terms(options.get("terms"), found)  # the lines scanned once
        if by_sentence:
            return translate_by_sentence(translator._decode, translator.settings, lines, glossary=glossary, **options)
        self.several_sentences += several_sentences(lines)
        return translator._decode(lines, **options)

    def translate_with(self, lines: list[str], changes: dict, **options) -> list[Translation]:
        """The best Translation of every line, decoded with these settings changed (a document's batch: its
        target language, its spans to protect), counted on this translator (truncated, terms missed,
        protected) as its own call would be. options: translate_nbest's (glossary, progress, ...)."""
        call = self.for_call(nbest=1, **changes)  # a copy where a setting differs
        before = call.truncated, call.terms_missed, call.protected
        found = call.translate_nbest(lines, **options)
        if call is not self:  # what the copy counted, where the caller looks for it
            self.truncated += call.truncated - before[0]
            self.terms_missed += call.terms_missed - before[1]
            self.protected += call.protected - before[2]
        return [hyps[0] for hyps in found]

    def _decode(self, lines: list[str], **options) -> list[list[Translation]]:
        """_decode_text, with the spans settings.protect names carried through untranslated
        (mt/decoding/protected_spans.py); not where the caller asks for attention (maps, alignments), which
        shows the model's view of the whole line."""
        if options.get("attention_layer") is None and pattern_of(self.settings.protect):
            return decode_protected(self._decode_text, self, lines, **options)
        return self._decode_text(lines, **options)

    def _decode_text(self, lines: list[str], **options) -> list[list[Translation]]:
        """The engine's _translate_nbest; with settings.mbr, on that many candidates a line, of which the one
        that agrees most with the others is kept (mt/decoding/mbr.py); with a reverse model, the beam's
        candidates reranked by it (mt/decoding/rerank.py)."""
        s = self.settings
        if self.reverse is not None:
            return self._reranked(lines, **options)
        if not s.mbr:
            return self._translate_nbest(lines, **options)
        if options.get("attention_layer") is not None:
            raise MTError("attention maps and alignments show the search's best translation: not with mbr")
        candidates = self.with_settings(s.for_candidates())
        found = candidates._translate_nbest(lines, **options)
        self.truncated, self.terms_missed = candidates.truncated, candidates.terms_missed  # counted on the copy
        tokenize = bleu_words(s.tgt_lang or self.languages[1]) if s.mbr_utility == "bleu" else None
        return [[hyps[mbr_order([h.text for h in hyps], s.mbr_utility, tokenize)[0]]] for hyps in found]

    def _reranked(self, lines: list[str], **options) -> list[list[Translation]]:
        """Every candidate the beam holds, reranked with the reverse model; settings.nbest of them kept."""
        s = self.settings
        if s.sampling or s.beam < 2 or s.mbr:
            raise MTError("a reverse model reranks a beam's candidates: beam search with a beam of 2 or more, no mbr")
        # every candidate of a line, or of a sentence where split_sentences has split the lines already
        candidates = self.with_settings(replace(s, nbest=s.beam, split_sentences=False))
        found = candidates._translate_nbest(lines, **options)
        self.truncated, self.terms_missed = candidates.truncated, candidates.terms_missed  # counted on the copy
        return [hyps[: s.nbest] for hyps in reranked(found, lines, self.reverse, self.reverse_weight)]

    def with_reverse(self, reverse: LineTranslator | None, weight: float | None = None) -> LineTranslator:
        """A copy that reranks each line's beam candidates with reverse, a model translating the other way
        (mt.load_translator of it): by the beam's score + weight (None: DEFAULT_REVERSE_WEIGHT) x
        log P(source | candidate) per source piece. None: a copy without."""
        if reverse is not None:
            check_reverse(self.languages, reverse)
        other = copy.copy(self)
        other.reverse, other.reverse_weight = reverse, DEFAULT_REVERSE_WEIGHT if weight is None else weight
        return other

    def for_call(self, **choices) -> LineTranslator:
        """This translator, or a copy sharing its model with these DecodeSettings fields changed (None: kept).
        nbest alone asks for a beam that can hold it, as translate --nbest does."""
        choices = {name: value for name, value in choices.items() if value is not None}
        if not choices:
            return self
        check_setting_names(choices)
        sampling = choices.get("strategy", self.settings.strategy) == "sample"
        if not sampling and "beam" not in choices and choices.get("nbest", 1) > self.settings.beam:
            choices["beam"] = choices["nbest"]
        return self.with_settings(self.settings.updated(**choices))

    def __repr__(self) -> str:
        """What a Python user sees of it: direction, decoding, precision, device."""
        s = self.settings
        how = "sampling" if s.sampling else "greedy" if s.beam == 1 else f"beam {s.beam}, alpha {s.alpha:g}"
        into = f", into {s.tgt_lang}" if s.tgt_lang else ""
        direction = languages_label(self.languages) if all(self.languages) else "languages not named"
        return f"{type(self).__name__}({direction}{into}, {how}, {self._weights_type()}, {self.device})"

    def _weights_type(self) -> str:
        """The number type the model computes in, for repr."""
        return self.settings.precision

    def _translate_nbest(self, lines: list[str], **options) -> list[list[Translation]]:
        raise NotImplementedError

    def score(
        self, sources: list[str], targets: list[str], progress: bool = False, batch_tokens: int = SCORE_BATCH_TOKENS
    ) -> list[PairScore]:
        """How likely the model finds each target as the translation of its source (forced decoding), in
        order: one PairScore per pair, an empty target scored as EOS alone."""
        raise NotImplementedError

    def _sources(self, lines: list[str]) -> list[str]:
        """Lines as the model reads them: with the tag of settings.tgt_lang where the model has several
        target languages (mt/data/languages.py); a language it lacks, or none named, is one line."""
        return into(lines, self.settings.tgt_lang, self.languages)

    def _tag_pieces(self) -> int:
        """Source pieces _sources puts before each line (a target language's tag), 0 without a tag: what
        a translation's src_pieces and attention leave out, so they index the caller's own pieces."""
        tagged = self._sources(["x"])[0]
        return (
            0
            if tagged == "x"
            else len(self.tokenizer.encode_src([tagged])[0]) - len(self.tokenizer.encode_src(["x"])[0])
        )

    def _encode_pairs(self, sources: list[str], targets: list[str]) -> tuple[list[list[int]], list[list[int]]]:
        """The pairs as piece ids for score: sources cut to max_src_len (counted in truncated), targets whole."""
        sources, targets = checked_lines(sources, "sources"), checked_lines(targets, "targets")
        check_aligned(sources, targets, "targets")
        src_ids, cut = self.tokenizer.encode_src_truncated(self._sources(sources), self.max_src_len)
        self.truncated += cut
        return src_ids, self.tokenizer.encode_tgt(targets)

    def with_settings(self, settings: DecodeSettings) -> LineTranslator:
        """A translator sharing this one's model and tokenizer, decoding with other settings (a server's
        request), where the precision stays the one the model was loaded in."""
        if settings.precision != self.settings.precision:
            raise MTError(
                f"precision {settings.precision} differs from the loaded model's {self.settings.precision}: "
                f'load it with precision="{settings.precision}"'
            )
        other = copy.copy(self)
        other.settings = settings
        return other


def document_changes(changes: dict, split_sentences: bool = True) -> dict:
    """A document's setting changes (translate_with's): its paragraphs sentence by sentence (split_sentences=False:
    whole) whatever the translator's own setting, which is for lines of one sentence each (a model trained on
    sentences drops whole sentences of a paragraph translated at once); a change of the document's own stands."""
    return {"split_sentences": split_sentences, **changes}


def checked_terms(terms) -> list[list[str]]:
    """Required terms as a list of str per line (a str alone: one term, "" none), or a one-line MTError."""
    if isinstance(terms, str) or not hasattr(terms, "__iter__"):
        raise MTError(f"terms: one entry per line (a str or a list of str), not {type(terms).__name__}")
    return [
        ([entry] if entry.strip() else []) if isinstance(entry, str) else checked_lines(entry, f"terms[{i}]")
        for i, entry in enumerate(terms)
    ]


def check_terms_use(translator: LineTranslator, options: dict, by_sentence: bool = False) -> None:
    """Required terms are placed by the torch engine's beam search, on whole lines (by_sentence: terms a
    glossary finds in each sentence, where split_sentences splits lines): else one line."""
    if not any(options["terms"]):
        return
    if not translator.places_terms:
        raise MTError("required terms need the torch engine (CTranslate2 has no lexically constrained search)")
    settings = translator.settings
    if settings.sampling or settings.beam < 2:
        raise MTError("terms are placed by beam search: use a beam of 2 or more (beam=5), not sampling or greedy")
    if settings.split_sentences and not by_sentence:
        raise MTError("terms hold for a whole line: not with split_sentences (a glossary's hold sentence by sentence)")


def checked_lines(lines, name: str = "lines") -> list[str]:
    """lines as a list, each a str, or a one-line MTError naming the first that is not."""
    try:
        lines = list(lines)
    except TypeError:
        raise MTError(f"{name}: a list of str (or one str) is expected, not {type(lines).__name__}") from None
    for i, line in enumerate(lines):
        if not isinstance(line, str):
            raise MTError(f"{name}[{i}]: a str is expected, not {type(line).__name__} ({line!r:.40})")
    return lines
