"""Draw ``docs/_static/xrlinear_tree.svg``: a small label tree searched with a beam of 2.

Run from the repository root: ``python scripts/make_xrlinear_figure.py``.
"""

from __future__ import annotations

from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "docs" / "_static" / "xrlinear_tree.svg"
BEAM_CLUSTERS = {1, 2}
TOP_LABELS = {5, 9}
LEGEND = [
    ("#1f77b4", "cluster kept in the beam (beam_size = 2)"),
    ("#ccc", "cluster pruned: its labels are never scored"),
    ("#ff7f0e", "label scored: child of a beam cluster"),
    ("#2ca02c", "top_k = 2 labels returned"),
]


def _line(a, b, color, width=1.5, dash=""):
    d = f' stroke-dasharray="{dash}"' if dash else ""
    return (
        f'<line x1="{a[0]}" y1="{a[1]}" x2="{b[0]}" y2="{b[1]}" stroke="{color}" '
        f'stroke-width="{width}"{d}/>'
    )


def main() -> None:
    width, height = 760, 330
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13">',
        '<rect width="100%" height="100%" fill="white"/>',
    ]
    root = (380, 40)
    layer1 = [(140 + i * 160, 140) for i in range(4)]
    labels = [
        (x - 54 + j * 36, 250, i, i * 4 + j) for i, (x, _) in enumerate(layer1) for j in range(4)
    ]
    for i, p in enumerate(layer1):
        kept = i in BEAM_CLUSTERS
        out.append(_line(root, p, "#1f77b4" if kept else "#bbb", 2.5 if kept else 1.2))
    for x, y, parent, _ in labels:
        scored = parent in BEAM_CLUSTERS
        out.append(
            _line(
                layer1[parent],
                (x, y),
                "#ff7f0e" if scored else "#ddd",
                2 if scored else 1,
                "" if scored else "4 3",
            )
        )
    out.append(
        f'<circle cx="{root[0]}" cy="{root[1]}" r="16" fill="#444"/>'
        f'<text x="{root[0] + 24}" y="{root[1] + 5}">root (all samples)</text>'
    )
    for i, (x, y) in enumerate(layer1):
        fill = "#1f77b4" if i in BEAM_CLUSTERS else "#ccc"
        out.append(
            f'<rect x="{x - 22}" y="{y - 14}" width="44" height="28" rx="6" fill="{fill}"/>'
            f'<text x="{x}" y="{y + 5}" text-anchor="middle" fill="white">C{i + 1}</text>'
        )
    for x, y, parent, k in labels:
        scored = parent in BEAM_CLUSTERS
        fill = "#2ca02c" if k in TOP_LABELS else ("#ff7f0e" if scored else "#eee")
        out.append(
            f'<circle cx="{x}" cy="{y}" r="12" fill="{fill}" stroke="#999"/>'
            f'<text x="{x}" y="{y + 4}" text-anchor="middle" font-size="10" '
            f'fill="{"white" if scored else "#999"}">{k + 1}</text>'
        )
    out.append(
        '<text x="20" y="145" font-weight="bold">layer 1</text>'
        '<text x="20" y="255" font-weight="bold">labels</text>'
    )
    for n, (color, text) in enumerate(LEGEND):
        x, y = 20 + (n % 2) * 370, 292 + (n // 2) * 20
        out.append(
            f'<rect x="{x}" y="{y}" width="14" height="14" fill="{color}"/>'
            f'<text x="{x + 20}" y="{y + 12}">{text}</text>'
        )
    out.append("</svg>")
    OUT.write_text("\n".join(out) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
