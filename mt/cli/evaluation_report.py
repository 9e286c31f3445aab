"""What mt-evaluate prints and --json writes: a line of scores per setting, the best of a sweep, the paired
test of several given translations, the mean over a model's directions."""

from __future__ import annotations

from mt.metrics import mean_over, paired_test, score_references, term_use


def chosen_label(row: dict) -> str:
    """A row's setting in words: beam 5, alpha 1.2 (and the reverse model's weight, where it reranks)."""
    weight = f", reverse weight {row['reverse_weight']:g}" if "reverse_weight" in row else ""
    return f"beam {row['beam']}, alpha {row['alpha']:g}{weight}"


def report(outputs, streams: list[list[str]], tokenize: str, terms=None, tgt_lang=None) -> list[dict]:
    """Print each output's scores against the references (one list, or several: streams), BLEU splitting words
    by tokenize, and with terms (each line's), how many the output holds; one row per output: its settings and
    scores."""
    rows = []
    for label, chosen, hypotheses in outputs:
        scores = score_references(hypotheses, streams, tokenize)
        print(f"{label}: BLEU {scores.bleu:.2f} | chrF {scores.chrf:.2f}")
        print(scores.bleu_detail)
        rows.append({**chosen, **scores.as_dict()})
        if terms is not None:
            use = term_use(hypotheses, terms, tgt_lang)
            print(use)
            rows[-1].update(use.as_dict())
    return rows


def best_row(rows: list[dict]) -> dict:
    """The row of the highest BLEU (the first of equals)."""
    return max(rows, key=lambda row: row["bleu"])


def summary(rows: list[dict], tuning_rows: list[dict], chosen_on: str | None = None):
    """Print the signatures and the best of a sweep; what --json writes for one direction (tuning_rows: the
    sweep on the split chosen_on, whose best setting scored rows)."""
    print(f"BLEU signature: {rows[-1]['bleu_signature']}")
    print(f"chrF signature: {rows[-1]['chrf_signature']}")
    if len(rows) > 1:
        best = best_row(rows)
        print(f"best BLEU: {best['bleu']:.2f} with {chosen_label(best)}")
    if tuning_rows:
        return {**rows[0], "chosen_on": chosen_on, "sweep": tuning_rows}
    return rows[0] if len(rows) == 1 else rows


def compared(systems: list[tuple[str, list[str]]], streams: list[list[str]], samples: int, tokenize: str) -> dict:
    """Every --hyp against the first by paired bootstrap resampling: printed a line each, and what --json
    writes (the test, its resamples, the baseline, a row per file)."""
    rows, signatures, samples = paired_test(systems, streams, samples, tokenize)
    base = rows[0]

    def cell(row: dict, metric: str) -> str:
        value = f"{row[metric]:.2f} ± {row[metric + '_ci']:.2f}"
        if metric + "_p" not in row:
            return value
        p = row[metric + "_p"]
        return f"{value} ({row[metric] - base[metric]:+.2f}, p = {p:.4f}){'*' * (p < 0.05)}"

    print(f"paired bootstrap resampling, {samples:,} resamples, each against {base['hyp']}:")
    for row in rows:
        print(f"{row['hyp']}: BLEU {cell(row, 'bleu')} | chrF {cell(row, 'chrf')}")
    print(
        "±: half the 95% confidence interval; p: how often systems that do not differ would differ as much; *: p < 0.05"
    )
    print(f"BLEU signature: {signatures[0]}")
    print(f"chrF signature: {signatures[1]}")
    return {"test": "paired bootstrap resampling", "samples": samples, "baseline": base["hyp"], "systems": rows}


def over_directions(results: dict) -> dict | list[dict]:
    """Several directions' results as a run's results.json holds them: each under directions, the mean of
    their BLEU and chrF on top; with a sweep (a row per setting), one such result per setting."""
    sweep = all(isinstance(r, list) for r in results.values())
    means = []
    for setting in zip(*(r if sweep else [r] for r in results.values())):
        each = dict(zip(results, setting))
        chosen = {"beam": setting[0]["beam"], "alpha": setting[0]["alpha"]} if sweep else {}
        mean = mean_over(each)
        said = f" (beam {chosen['beam']}, alpha {chosen['alpha']:g})" if sweep else ""
        print(f"mean over {', '.join(each)}{said}: BLEU {mean['bleu']:.2f} | chrF {mean['chrf']:.2f}")
        means.append({**chosen, **mean, "directions": each})
    if not sweep:
        return means[0]
    best = best_row(means)
    print(f"best mean BLEU: {best['bleu']:.2f} with beam {best['beam']}, alpha {best['alpha']:g}")
    return means
