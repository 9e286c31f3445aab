"""A model card for the Hugging Face Hub (mt-info MODEL --card OWNER/NAME > README.md, uploaded beside the
model): the Hub shows it on the model's page, and its header tags the model as translation between its
languages, which the Hub's search filters on. The body is mt-info's description and the commands that use
the model by its Hub name.
"""

from __future__ import annotations

from pathlib import Path

from mt.cli.info import describe, described
from mt.errors import MTError


def run(args) -> None:
    """mt-info --card with the arguments of mt.cli.commands's parser."""
    if args.json:
        raise MTError("--card prints the card as Markdown: not with --json")
    print(model_card(args.checkpoint, args.card), end="")


def model_card(paths: list[str], repo: str) -> str:
    """The card of the one model at paths[0] (a checkpoint, a run directory or an export), as Markdown, for
    the Hub repository repo (OWNER/NAME, or hf:OWNER/NAME)."""
    name = repo.removeprefix("hf:").removeprefix("//")
    if name.count("/") != 1 or not all(name.split("/")):
        raise MTError(f"--card {repo}: name the Hub repository the card is for, OWNER/NAME")
    if len(paths) != 1 or (Path(paths[0]) / "sweep.json").is_file():
        raise MTError("--card describes one model: give one checkpoint, run directory or export directory")
    info = describe(paths[0])
    if info.get("data", {}).get("dir"):  # folders by name, not where they lie on this machine
        info["data"]["dir"] = Path(info["data"]["dir"]).name
    if "export" in info:
        info["export"]["from"] = [Path(p).name for p in info["export"]["from"]]
    src, tgt = (info["languages"][side] for side in ("src", "tgt"))
    languages = list(dict.fromkeys(src + tgt))
    header = ["---", "language:", *(f"- {code}" for code in languages), "tags:", "- translation"]
    header += ["pipeline_tag: translation", "---", ""]
    title = f"# {', '.join(src)} → {', '.join(tgt)} translation"
    table = ["| | |", "| --- | --- |", *(f"| {label} | {text} |" for label, text in described(info))]
    model = f"hf:{name}"
    if "export" in info:
        kind = "a CTranslate2 export of an `mt` model: model.bin, its tokenizer and decode settings"
        use = [f"translate --engine ctranslate2 -c {model} < input.txt > output.txt", f"mt-serve --export {model}"]
        python = f'translator = mt.load_translator("{model}")  # decoded by CTranslate2'
    else:
        kind = "one `mt` checkpoint, `final.pt`, which holds its weights, tokenizer and decode settings"
        use = [
            f"translate -c {model} < input.txt > output.txt",
            f"mt-evaluate -c {model} --src test.src --ref test.ref   # BLEU and chrF",
            f"mt-serve -c {model}                                   # an HTTP API and a web page",
            f"mt-train experiment=finetune train.init_from={model} data=files data.dir=DIR "
            f"data.src_lang={hydra_value(src)} data.tgt_lang={hydra_value(tgt)}   # fine-tune it on DIR's pairs",
        ]
        python = f'translator = mt.load_translator("{model}")'
    body = [
        title, "", f"A neural machine translation model, {kind}.", "", *table, "",
        "## Use", "", f"With the `mt` toolkit installed, name it `{model}` wherever a model goes:", "",
        "```bash", *use, "```", "", "```python", "import mt", "", python,
        'print(translator.translate(["a sentence to translate"]))', "```", "",
    ]  # fmt: skip
    return "\n".join(header + body)


def hydra_value(codes: list[str]) -> str:
    """Language codes as a command-line override takes them: de, or [de,fr]."""
    return codes[0] if len(codes) == 1 else f"[{','.join(codes)}]"
