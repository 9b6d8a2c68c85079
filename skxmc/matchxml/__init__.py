"""MatchXML as a composition: a multi-stage matcher, static sentence embeddings, a ranker.

:class:`MultiStageMatcher` fine-tunes a transformer through a label tree (label2vec by
default) with the text-label matching loss; :class:`MatchXMLClassifier` joins TF-IDF,
static sentence embeddings (:class:`skxmc.text.SentenceEmbedder`) and the matcher's
fine-tuned embeddings, and ranks labels with :class:`~skxmc.XRLinearClassifier`.

The package's modules: ``_stages`` (what one stage trains, the label-table bootstrap,
the joint features), ``_matcher`` (:class:`MultiStageMatcher`), ``_classifier``
(:class:`MatchXMLClassifier`, :func:`make_matchxml`) and ``_explain``
(:class:`MatchXMLExplanation`). Saved models name the classes, so
models saved when this was one module ``skxmc/matchxml.py`` load unchanged.
"""

from ._classifier import MatchXMLClassifier, make_matchxml
from ._explain import MatchXMLExplanation
from ._matcher import MultiStageMatcher
from ._stages import DEFAULT_ENCODER as DEFAULT_ENCODER
from ._stages import linear_bootstrap, refined_label_embeddings

# DEFAULT_ENCODER: importable (the CLI and tests read it), not part of the API.

__all__ = [
    "MatchXMLClassifier",
    "MatchXMLExplanation",
    "MultiStageMatcher",
    "linear_bootstrap",
    "make_matchxml",
    "refined_label_embeddings",
]
