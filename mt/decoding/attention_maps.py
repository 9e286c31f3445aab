"""Cross-attention for people: heatmaps (SVG, readable labels, no plotting library), as in Bahdanau et al.'s
figures, and hard alignments: between words (translate --alignments), or the most attended source piece of
each target piece (--alignments pieces).
"""

from __future__ import annotations

import re
from html import escape
from typing import TYPE_CHECKING

from mt.decoding.inline_tags import token_alignment

if TYPE_CHECKING:  # the tensors come from the model; reading them needs no import of torch (mt-serve has none)
    import torch

WORD = re.compile(r"\S+")  # what --alignments counts: the line and its translation split at spaces


def hard_alignment(weights: torch.Tensor) -> list[tuple[int, int]]:
    """(T, S) weights -> [(source index, target index)] pairs, the argmax source for each target piece."""
    return [(int(s), t) for t, s in enumerate(weights.argmax(dim=-1).tolist())]


def word_alignment(translation, source: str) -> list[tuple[int, int]]:
    """(source word, target word) pairs of a Translation with attention and the line it translates, words as
    split at spaces: each source word with the target word attending to it most, and each target word no
    source word chose with the source word it attends to most (token_alignment, as inline codes are placed).
    Nearer a word's translation than each target piece's most attended piece (docs/benchmarks.md)."""
    aligned = token_alignment(translation.attention, translation.src_pieces, translation.tgt_pieces, source,
                              translation.text, WORD)  # fmt: skip
    return sorted((s, t) for s, targets in enumerate(aligned) for t in targets)


def format_alignment(pairs: list[tuple[int, int]]) -> str:
    """Pharaoh format, as fast_align and Moses write it: "0-0 1-2 ..." (source-target)."""
    return " ".join(f"{s}-{t}" for s, t in pairs)


def heatmap_svg(weights: torch.Tensor, src_pieces: list[str], tgt_pieces: list[str], title: str = "") -> str:
    """A (T, S) attention matrix as an SVG heatmap: source pieces across the top, target pieces down the side."""
    weights = weights.float().clamp(0, 1)
    rows, cols = weights.shape
    cell, left, top = (
        22,
        9 * max((len(p) for p in tgt_pieces), default=4) + 16,
        8 * max((len(p) for p in src_pieces), default=4) + 36,
    )
    width, height = left + cols * cell + 10, top + rows * cell + 10
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="monospace" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="4" y="14">{escape(title)}</text>',
    ]
    for j, piece in enumerate(src_pieces):
        x, y = left + j * cell + cell // 2 + 4, top - 6
        out.append(f'<text x="{x}" y="{y}" transform="rotate(-60 {x} {y})">{escape(piece)}</text>')
    for i, piece in enumerate(tgt_pieces):
        out.append(f'<text x="{left - 6}" y="{top + i * cell + 15}" text-anchor="end">{escape(piece)}</text>')
        for j in range(cols):
            shade = 255 - int(round(float(weights[i, j]) * 255))
            out.append(
                f'<rect x="{left + j * cell}" y="{top + i * cell}" width="{cell - 1}" height="{cell - 1}" '
                f'fill="rgb({shade},{shade},{shade})"><title>{float(weights[i, j]):.3f}</title></rect>'
            )
    out.append("</svg>")
    return "\n".join(out) + "\n"
