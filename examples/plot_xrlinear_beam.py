"""
XR-Linear: accuracy and prediction time against the beam size
==============================================================

:class:`~skxmc.XRLinearClassifier` predicts by a beam search through its label tree: at
every layer each text keeps the ``beam_size`` best clusters, and only their children are
scored at the next layer. A wider beam explores more of the tree (fewer good labels lost
in a wrong branch) at a cost that grows linearly with the beam.

We fit TF-IDF + XR-Linear once on the TIBKAT demo data shipped with skxmc (library records
with GND subject headings) and predict the test set with beams from 1 to 50.
"""

# %%
# Fit once
# --------
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from skxmc import HierarchicalLabelTree, XRLinearClassifier
from skxmc.datasets import load_demo
from skxmc.metrics import evaluate

demo = load_demo()
vectorizer = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), min_df=2, dtype=np.float32)
X_train = vectorizer.fit_transform(demo.train_texts)
X_test = vectorizer.transform(demo.test_texts)

# A deeper tree than the default (leaves of at most 32 labels, 8 children per node) makes
# the effect of the beam easy to see on a few thousand labels.
tree = HierarchicalLabelTree(max_leaf_size=32, branching_factor=8)
clf = XRLinearClassifier(tree=tree, n_jobs=2).fit(X_train, demo.train_labels)
print(f"{len(clf.classes_)} labels, tree layers: {[C.shape[0] for C in clf.tree_.cluster_chain_]}")

# %%
# Predict with growing beams
# --------------------------
beams = [1, 2, 5, 10, 20, 50]
rows = []
for beam in beams:
    clf.set_params(beam_size=beam)
    clf.predict_topk(X_test[:10], k=5)  # warm-up (compiled kernels, caches)
    start = time.perf_counter()
    predictions = clf.predict_topk(X_test, k=5)
    seconds = time.perf_counter() - start
    result = evaluate(demo.test_labels, predictions, ks=(1, 5), classes=clf.classes_)
    rows.append((beam, result["precision@1"], result["precision@5"], result["recall@5"], seconds))
    print(
        f"beam {beam:3d}: P@1 {100 * rows[-1][1]:5.2f}  P@5 {100 * rows[-1][2]:5.2f}  "
        f"R@5 {100 * rows[-1][3]:5.2f}  predict {seconds:.2f} s"
    )

# %%
# Plot
# ----
# Accuracy saturates after a beam of about 10 (PECOS's default) while the time keeps
# growing with the beam.
beam_axis = [r[0] for r in rows]
fig, (ax_acc, ax_time) = plt.subplots(1, 2, figsize=(10, 4))
ax_acc.plot(beam_axis, [100 * r[1] for r in rows], "o-", label="P@1")
ax_acc.plot(beam_axis, [100 * r[2] for r in rows], "s-", label="P@5")
ax_acc.plot(beam_axis, [100 * r[3] for r in rows], "^-", label="R@5")
ax_acc.set(xscale="log", xlabel="beam size", ylabel="percent", title="Accuracy")
ax_acc.legend()
ax_time.plot(beam_axis, [r[4] for r in rows], "o-", color="C3")
ax_time.set(
    xscale="log",
    xlabel="beam size",
    ylabel="seconds",
    title=f"Prediction time, {X_test.shape[0]} texts",
)
fig.tight_layout()
plt.show()
