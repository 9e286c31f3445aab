"""Download a Hugging Face dataset once and save it as a local folder that training reads offline.

    .venv/bin/python scripts/prepare_hub_dataset.py wmt/wmt14 --subset de-en --out data/wmt14_de_en
    make train NPROC=8 ARGS="experiment=wmt14_en_de_base data.name=data/wmt14_de_en"

Useful for GPU nodes without internet access: copy the folder there. Without --out, the
dataset only lands in the datasets cache (~/.cache/huggingface), which training also finds.
"""

from __future__ import annotations

import argparse
import sys

from mt.errors import MTError, report_errors


@report_errors
def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", help="hub id, e.g. wmt/wmt14 or bentrevett/multi30k")
    p.add_argument("--subset", help="configuration, e.g. de-en")
    p.add_argument("--out", help="folder to save_to_disk into")
    args = p.parse_args()
    import datasets

    try:
        dataset = datasets.load_dataset(args.name, args.subset)
    except Exception as err:  # noqa: BLE001 - network, missing dataset, bad subset: all one message
        raise MTError(f"cannot download {args.name!r} ({args.subset}): {str(err).splitlines()[0][:200]}") from None
    for split, table in dataset.items():
        print(f"{split}: {table.num_rows:,} rows, columns {table.column_names}", file=sys.stderr)
    if args.out:
        dataset.save_to_disk(args.out)
        print(f"saved to {args.out}: use data=hub data.name={args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
