"""The numbers in the sentences of ``docs/matchxml.rst``, the MatchXML guide
(:mod:`benchmarks._figures`): the dev comparison that keeps the static sentence block on,
from the ``matchxml_final_features_dev_s{300,150}_thr0001`` files the page names (P@1 in
percent, seed 0, the variants ``1:refined`` with the block and ``1:refined:nosent``
without it).
"""

from __future__ import annotations

from benchmarks._figures import Figure, fig, mean

PAGE = "matchxml.rst"
# Decimals the prose may type anywhere, and why.
TYPED = {
    "0.9": "a setting: AdamW's first beta",
    "0.98": "a setting: AdamW's second beta",
    "0.001": "a setting: the ranker's weight threshold",
    "0.1": "a setting: XR-Linear's default weight threshold",
    "0.5": "a setting: the fine-tuned block's weight",
    "0.25": "a setting: the fine-tuned block's weight another dev split chose",
}

S300 = "matchxml_final_features_dev_s300_thr0001"
S150 = "matchxml_final_features_dev_s150_thr0001"


def _p1(file: str, variant: str):
    return mean(file, "P@1", variant=variant)


FIGURES: tuple[Figure, ...] = (
    fig("s300-nosent-p1", _p1(S300, "1:refined:nosent")),
    fig("s300-sent-p1", _p1(S300, "1:refined")),
    fig("s150-nosent-p1", _p1(S150, "1:refined:nosent")),
    fig("s150-sent-p1", _p1(S150, "1:refined")),
)
