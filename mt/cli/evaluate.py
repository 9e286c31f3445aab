"""mt-evaluate: translate a split (or any source/reference files) and print BLEU and chrF.

    mt-evaluate --checkpoint runs/multi30k.de-en/smoke/checkpoints/final.pt   # its test split
    mt-evaluate --checkpoint runs/multi30k.de-en/smoke/checkpoints/final.pt --split valid
    mt-evaluate --checkpoint CKPT --src test.de --ref test.en --beam 5
    mt-evaluate --hyp output.en --ref test.en          # score a file, no model
    mt-evaluate --hyp base.en new.en --ref test.en     # each against the first: a paired significance test
    mt-evaluate --checkpoint CKPT --split valid --beam 4 5 --alpha 0.6 1.0 1.4   # tune decoding
    mt-evaluate --checkpoint CKPT --split test2016 --alpha 0.6 1.0 1.2 --choose-on valid
    mt-evaluate --checkpoint runs/m30k.de+fr+cs-en/smoke      # each direction's test pairs, then the mean
    mt-evaluate --checkpoint CKPT --src test.de --ref test.en --glossary terms.tsv   # terms placed, and counted
    mt-evaluate --hyp output.en --ref test.en --src test.de --glossary terms.tsv     # terms counted

It prints the scores with their sacreBLEU signatures (--json writes them to a file too). Several
--beam or --alpha values decode every combination with the model loaded once, a line each, then
name the best: tune them on a validation split, then score the test split once with the choice.
--choose-on SPLIT does both in one call: the grid on SPLIT, then the scored split once with its best.
Several --hyp files are each compared with the first on the same references (paired bootstrap
resampling): is a difference in BLEU larger than another sample of test sentences could give by chance?
--terms FILE (tab-separated, a line per source line) or --glossary FILE (source<TAB>target entries) name
the terms each translation must hold: beam search places them, and the report counts those the
translations hold (exact-match term accuracy); with --hyp, it counts them in the given translations.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mt.cli.decoding_options import check_glossary_args
from mt.cli.evaluation_report import best_row, chosen_label, compared, over_directions, report, summary
from mt.config.validation import training_splits
from mt.data.held_out_from_train import drawn_split
from mt.data.lines import COMPRESSED, open_for_writing, read_lines
from mt.data.prepare import load_split
from mt.data.sources import split_paths
from mt.decoding.glossary import load_glossary, terms_of, with_glossary
from mt.decoding.rerank import DEFAULT_REVERSE_WEIGHT, check_reverse, ranked, reverse_scores
from mt.decoding.sentences import several_sentences_note
from mt.decoding.settings import DEFAULT_BEAM, MBR_FIELDS, RULE_FIELDS
from mt.decoding.translator import DecodeSettings, Translator
from mt.errors import MTError, check_output_file, counted
from mt.fastpath import decode_precision
from mt.inference import decoding_device, load_for_decoding, load_translator
from mt.languages import direction_name, directions, source_tag, tagged
from mt.metrics import bleu_tokenize, check_bleu_tokenize


def settings_grid(args) -> list[tuple[int | None, float | None, float]]:
    """Every (beam, alpha, reverse weight) combination asked for; None = the checkpoint's."""
    weights = args.reverse_weight or [DEFAULT_REVERSE_WEIGHT]
    return [
        (beam, alpha, weight) for beam in args.beam or [None] for alpha in args.alpha or [None] for weight in weights
    ]


def check_args(args) -> None:
    inputs = {"--src": args.src, "--ref": args.ref, "--hyp": args.hyp, "--checkpoint": args.checkpoint}
    inputs |= {"--terms": args.terms, "--glossary": args.glossary}
    check_output_file(args.output, "--output", inputs)
    check_output_file(args.json, "--json", {**inputs, "--output": args.output})
    check_bleu_tokenize(args.bleu_tokenize, "--bleu-tokenize")
    check_glossary_args(args)
    if args.hyp:
        if not args.ref:
            raise MTError("--hyp needs --ref")
        if args.choose_on or args.reverse:
            flag = "--choose-on" if args.choose_on else "--reverse"
            raise MTError(f"{flag} decodes with a model: give --checkpoint instead of --hyp")
        if args.samples < 0:
            raise MTError("--samples must be >= 0 (0: sacreBLEU's default)")
        if args.glossary and not args.src:
            raise MTError("--glossary with --hyp needs --src: the source lines its entries are found in")
        if args.src and not args.glossary:
            raise MTError("--src with --hyp is read for --glossary alone: the translations are given (--hyp)")
        return
    if not args.checkpoint:
        raise MTError("give --checkpoint (with --split, or --src and --ref), or --hyp and --ref")
    if bool(args.src) != bool(args.ref):
        raise MTError("--src and --ref go together")
    if args.split and args.src:
        raise MTError("give --split or --src/--ref, not both")
    if any(beam < 1 for beam in args.beam or []):
        raise MTError("--beam must be at least 1")
    if any(alpha < 0 for alpha in args.alpha or []):
        raise MTError("--alpha must be >= 0")
    for flag, value in (("--min-len", args.min_len), ("--no-repeat-ngram", args.no_repeat_ngram)):
        if value is not None and value < 0:
            raise MTError(f"{flag} must be >= 0 (0: off)")
    if args.mbr is not None and (args.mbr < 0 or args.mbr == 1):
        raise MTError("--mbr must be 0 (off) or >= 2 candidates a line")
    several = len(settings_grid(args)) > 1
    if several and args.output and not args.choose_on:
        raise MTError("--output takes the translations of one setting: give one --beam and one --alpha")
    if args.choose_on and not several:
        raise MTError("--choose-on needs several --beam or --alpha values to choose from")
    check_terms_args(args)
    if args.reverse and (1 in (args.beam or []) or args.mbr):
        raise MTError("--reverse reranks a beam's candidates: not --beam 1 or --mbr")
    if any(weight < 0 for weight in args.reverse_weight or []):
        raise MTError("--reverse-weight must be >= 0")
    if args.reverse_weight and not args.reverse:
        raise MTError("--reverse-weight weighs the reverse model: give --reverse")


def check_terms_args(args) -> None:
    """--terms and --glossary with a model: placed by beam search; --terms in whole lines."""
    flag = "--terms" if args.terms else "--glossary" if args.glossary else None
    if flag is None:
        return
    if 1 in (args.beam or []):
        raise MTError(f"{flag} needs beam search, which places the terms: not --beam 1")
    if args.terms and args.split_sentences:
        raise MTError(
            "--terms hold for a whole line: not with --split-sentences (--glossary's hold sentence by sentence)"
        )
    if args.terms and args.choose_on:
        raise MTError("--terms are the scored lines': --choose-on tunes on another split (--glossary serves both)")


def read_terms(path: str | None, count: int, name: str) -> list[list[str]] | None:
    """The --terms file's terms, a list per line (None without one), refused unless it has a line for each of
    the count lines of name."""
    if not path:
        return None
    lines = read_lines(path)
    if len(lines) != count:
        raise MTError(f"--terms {path} has {counted(len(lines), 'line')} but {name} has {count:,}")
    return terms_of(lines)


def read_references(paths: list[str]) -> list[list[str]]:
    """The lines of each --ref file (one list per file), refused if their counts differ."""
    streams = [read_lines(path) for path in paths]
    for path, stream in zip(paths[1:], streams[1:]):
        if len(stream) != len(streams[0]):
            have = counted(len(stream), "line")
            raise MTError(f"--ref {path} has {have} but --ref {paths[0]} has {len(streams[0]):,}")
    return streams


def paired_lines(path: str, flag: str, refs: list[str], streams=None) -> tuple[list[str], list[list[str]]]:
    """The lines of path and of the --ref files (or streams, their lines read before), refused before any
    decoding if their counts differ."""
    lines, streams = read_lines(path), read_references(refs) if streams is None else streams
    if len(lines) != len(streams[0]):
        raise MTError(f"{flag} {path} has {counted(len(lines), 'line')} but --ref {refs[0]} has {len(streams[0]):,}")
    return lines, streams


def language_of(path: str) -> str:
    """The language a file's name gives, as this toolkit's corpora are named (test.zh, test.zh.gz): its last
    suffix but a compression's; "" where it has none."""
    name = Path(path).name
    for _, suffix, _ in COMPRESSED.values():
        name = name.removesuffix(suffix)
    return Path(name).suffix.lstrip(".")


def chosen_directions(data_cfg, args) -> list[tuple[str, str]]:
    """The directions to evaluate ("de-en") with their target languages: the one asked for (--direction),
    else every one of the model's; with --src (one file, one direction) the model's only one."""
    known = {direction_name(s, t): t for s, t in directions(data_cfg)}
    checkpoint = args.checkpoint[0]
    if args.direction is None and (len(known) == 1 or not args.src):
        if len(known) > 1 and args.output:
            raise MTError(f"{checkpoint}: --output takes one direction's translations: give --direction")
        return list(known.items())
    if args.direction not in known:
        said = f"--direction {args.direction}: not" if args.direction else "--src: give --direction, one of"
        raise MTError(f"{checkpoint}: {said} the model's directions ({', '.join(known)})")
    return [(args.direction, known[args.direction])]


def decode_grid(
    model, tokenizer, cfg, grid, sources: list[str], name: str, args, device, placing=None, reverse=None
) -> list[tuple[str, dict, list]]:
    """Per (beam, alpha, reverse weight) of grid (None = the checkpoint's): its label, its settings, its
    translations; in the precision asked for, else the one the model's run scored in
    (fastpath.decode_precision). placing: translate_nbest's terms (each line's required terms) and glossary
    (whose targets the lines, or sentences, holding its entries require), placed by beam search; reverse: a
    target -> source translator that reranks the beam (beam 5 for a greedy checkpoint's, for either), the
    candidates decoded and scored once for all the weights of a (beam, alpha)."""
    outputs, precision = [], args.dtype or decode_precision(device, cfg.train.precision)
    placing = placing or {}
    weights_of: dict[tuple, list[float]] = {}
    for beam, alpha, weight in grid:
        weights_of.setdefault((beam, alpha), []).append(weight)
    for (beam, alpha), weights in weights_of.items():
        settings = DecodeSettings.from_config(
            cfg.decode,
            strategy="search",
            beam=beam or (DEFAULT_BEAM if (any(placing.values()) or reverse) and cfg.decode.beam == 1 else None),
            alpha=alpha,
            precision=precision,
            **{name: getattr(args, name) for name in RULE_FIELDS + MBR_FIELDS},
        )
        translator = Translator(model, tokenizer, settings, device)
        unset = DecodeSettings()  # a rule is said where it differs from the default (off; protect: its kinds)
        rules = {k: getattr(settings, k) for k in RULE_FIELDS if getattr(settings, k) != getattr(unset, k)}
        if settings.mbr:
            rules.update(mbr=settings.mbr, mbr_utility=settings.mbr_utility)
        for weight, results in zip(weights, decoded(translator, sources, placing, reverse, weights)):
            chosen = {"beam": settings.beam, "alpha": settings.alpha, **rules}  # what decoded them, in the JSON too
            if reverse is not None:
                chosen.update(reverse_weight=weight)
            said = "".join(", sentence by sentence" if v is True else f", {k} {v}" for k, v in rules.items())
            said += f", reverse weight {weight:g}" if reverse is not None else ""
            label = f"{name} (beam {settings.beam}, alpha {settings.alpha:g}{said})"
            outputs.append((label, chosen, [r[0].text for r in results]))
    if translator.several_sentences:  # counted as it decoded them whole (the same for every setting)
        print(several_sentences_note(translator.several_sentences, len(sources), name), file=sys.stderr)
    return outputs


def decoded(translator, sources: list[str], placing: dict, reverse, weights: list[float]) -> list[list[list]]:
    """Each weight's n-best lists: without a reverse model, the translator's (one weight: unused); with one,
    the beam's candidates reranked at each weight, decoded and scored by the reverse model once (decoded per
    weight where lines are cut into sentences, each reranked apart)."""
    progress = sys.stderr.isatty()
    if reverse is None:
        return [translator.translate_nbest(sources, **placing, progress=progress)]
    if translator.settings.split_sentences:
        return [
            translator.with_reverse(reverse, weight).translate_nbest(sources, **placing, progress=progress)
            for weight in weights
        ]
    found = translator.translate_nbest(sources, **placing, nbest=translator.settings.beam, progress=progress)
    back = reverse_scores(found, sources, reverse)
    return [ranked(found, back, weight) for weight in weights]


def run(args) -> None:
    """mt-evaluate with the arguments of mt.cli.commands's parser."""
    check_args(args)
    if args.hyp:
        streams = read_references(args.ref)
        systems = [(path, paired_lines(path, "--hyp", args.ref, streams)[0]) for path in args.hyp]
        target = language_of(args.ref[0])
        tokenize = bleu_tokenize(target, args.bleu_tokenize)
        terms = read_terms(args.terms, len(streams[0]), f"--ref {args.ref[0]}")
        if args.glossary:
            sources = paired_lines(args.src, "--src", args.ref, streams)[0]
            glossary = load_glossary(args.glossary, (language_of(args.src), target), args.glossary_ignore_case)
            terms = with_glossary(terms, sources, glossary)
        rows = report([(path, {}, hypotheses) for path, hypotheses in systems], streams, tokenize, terms, target)
        result = summary(rows, []) if len(systems) == 1 else compared(systems, streams, args.samples, tokenize)
        if len(systems) > 1 and terms is not None:  # each file's term counts beside its paired test
            for row, counted in zip(result["systems"], rows):
                row.update({k: v for k, v in counted.items() if k.startswith("term")})
    else:
        device = decoding_device(args.device)
        model, tokenizer, cfg = load_for_decoding(args.checkpoint, device, ensemble=args.ensemble)
        chosen = chosen_directions(cfg.data, args)
        if (args.terms or args.glossary or args.reverse) and len(chosen) > 1:
            raise MTError(f"--terms, --glossary and --reverse hold for one direction: give --direction, one of the "
                          f"model's ({', '.join(direction for direction, _ in chosen)})")  # fmt: skip
        scored = scored_pairs(cfg, args, chosen)  # every file read and checked before any decoding
        check_outputs_against_splits(cfg.data, args)
        tuning = load_split(cfg.data, args.choose_on) if args.choose_on else {}
        sources_of = {direction_name(s, t): s for s, t in directions(cfg.data)}
        reverse = load_reverse(args.reverse, device, (sources_of[chosen[0][0]], chosen[0][1]))
        results = {}
        for direction, target in chosen:
            if len(chosen) > 1:
                print(f"direction {direction}:")
            glossary = load_glossary(args.glossary, (sources_of[direction], target), args.glossary_ignore_case)
            rows, tuning_rows = evaluate_direction(
                model, tokenizer, cfg, args, device, scored[direction], target, tuning.get(direction), glossary, reverse
            )
            results[direction] = summary(rows, tuning_rows, args.choose_on)
        result = results[chosen[0][0]] if len(chosen) == 1 else over_directions(results)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)


def load_reverse(path: str | None, device, languages: tuple[str, str]):
    """The --reverse model's translator (None without one), refused unless it translates languages the other
    way."""
    if not path:
        return None
    reverse = load_translator(path, device)
    check_reverse(languages, reverse)
    return reverse


def scored_pairs(cfg, args, chosen: list[tuple[str, str]]) -> dict[str, tuple[list[str], list[str], str]]:
    """Each chosen direction's (sources, references, name): its pairs of the split, or the --src/--ref files
    (the sources tagged as the model's training sources were); references as a list per reference file."""
    if args.src:
        (sources, streams), target = paired_lines(args.src, "--src", args.ref), chosen[0][1]
        return {chosen[0][0]: (tagged(sources, source_tag(cfg.data, target)), streams, args.src)}
    split = args.split or cfg.data.test_split
    if not split:
        raise MTError(f"{args.checkpoint[0]}: its data has no test split (data.test_split): give --split")
    corpora = load_split(cfg.data, split)
    return {
        direction: (corpora[direction].src, [corpora[direction].tgt], corpora[direction].origin)
        for direction, _ in chosen
    }


def check_outputs_against_splits(data_cfg, args) -> None:
    """--output and --json may not be a file of the splits read (the model's data, known once it is loaded):
    the translations would overwrite the references they were scored against."""
    if not (args.output or args.json):
        return
    splits = [args.choose_on] + ([] if args.src else [args.split or data_cfg.test_split])
    inputs = {f"--split {split}": read_paths(data_cfg, split) for split in filter(None, splits)}
    check_output_file(args.output, "--output", inputs)
    check_output_file(args.json, "--json", inputs)


def read_paths(data_cfg, split: str) -> list:
    """The files a split's pairs are read from: its own, or the training split's where drawn from it."""
    if drawn_split(data_cfg, split):
        return [path for train in training_splits(data_cfg) for path in split_paths(data_cfg, train)]
    return split_paths(data_cfg, split)


def evaluate_direction(
    model, tokenizer, cfg, args, device, pairs: tuple, target: str, tuning=None, glossary=None, reverse=None
):
    """One direction's scored rows (one per setting of the grid) and, with --choose-on, its tuning rows;
    BLEU splitting words as the target language is written; --terms and the glossary's terms placed and
    counted; the beam reranked by the reverse model, where there is one."""
    sources, streams, name = pairs
    grid, tuning_rows = settings_grid(args), []
    tokenize = bleu_tokenize(target, args.bleu_tokenize or cfg.decode.bleu_tokenize)
    given = read_terms(args.terms, len(sources), name)
    terms = with_glossary(given, sources, glossary)  # what the translations must hold, counted
    if tuning is not None:
        outputs = decode_grid(
            model, tokenizer, cfg, grid, tuning.src, tuning.origin, args, device, {"glossary": glossary}, reverse
        )
        tuning_rows = report(outputs, [tuning.tgt], tokenize, with_glossary(None, tuning.src, glossary), target)
        best = best_row(tuning_rows)
        print(f"chosen on {args.choose_on}: {chosen_label(best)} (BLEU {best['bleu']:.2f})")
        grid = [(best["beam"], best["alpha"], best.get("reverse_weight", DEFAULT_REVERSE_WEIGHT))]
    outputs = decode_grid(
        model, tokenizer, cfg, grid, sources, name, args, device, {"terms": given, "glossary": glossary}, reverse
    )
    if args.output:
        with open_for_writing(args.output) as f:
            f.write("".join(h + "\n" for h in outputs[0][2]))
    return report(outputs, streams, tokenize, terms, target), tuning_rows
