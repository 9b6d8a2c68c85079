"""
XR-Linear: why a text got its labels
====================================

:meth:`~skxmc.XRLinearClassifier.explain` tells, for each predicted label, which path
the beam search took through the label tree (each node's linear score and the path score
the post-processor makes of it) and which terms of the text weigh most in the label's own
linear model (``weight x TF-IDF value``). Through a :class:`~skxmc.pipeline.Pipeline` the
features are named by the vectoriser's vocabulary.

We fit TF-IDF + XR-Linear on the TIBKAT demo data shipped with skxmc (library records with
GND subject headings) and explain the top labels of a test record whose best label is right.
"""

# %%
# Fit
# ---
import matplotlib.pyplot as plt
import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from skxmc import HierarchicalLabelTree, XRLinearClassifier
from skxmc.datasets import load_demo
from skxmc.pipeline import make_pipeline

demo = load_demo()
pipe = make_pipeline(
    TfidfVectorizer(sublinear_tf=True, min_df=2, dtype=np.float32),
    XRLinearClassifier(tree=HierarchicalLabelTree(max_leaf_size=32, branching_factor=8)),
)
pipe.fit(demo.train_texts[:3000], demo.train_labels[:3000])
best_labels, _ = pipe.predict_topk(demo.test_texts[:100], k=1)
i = next(i for i, label in enumerate(best_labels[:, 0]) if label in demo.test_labels[i])
text = demo.test_texts[i]
print(text[:300], "...")

# %%
# Explain the top labels
# ----------------------
# Each explanation prints the path from the first layer to the label as
# ``node (linear score -> path score)``: with the default ``"l3-hinge"`` post-processor a
# node's path score is its parent's times ``exp(-max(1 - v, 0) ** 3)``, so a label scores
# high only when every cluster above it does. The last path score is the label's
# ``predict_topk`` score.
explained = pipe.explain([text], k=3, n_features=8)[0]
for e in explained:
    print(e)
print("true labels:", sorted(demo.test_labels[i]))

# %%
# Plot the best label's features
# ------------------------------
# The bars are the terms' contributions ``weight x value`` to the best label's linear
# score; with the bias term (``bias_contribution``) and the smaller contributions they sum
# to its score ``v`` at the last layer.
best = explained[0]
names = [f.name for f in best.features][::-1]
values = [f.contribution for f in best.features][::-1]
fig, ax = plt.subplots(figsize=(7, 4))
ax.barh(names, values, color=["C0" if v > 0 else "C3" for v in values])
ax.axvline(0, color="black", linewidth=0.8)
ax.set(
    xlabel="contribution to the label's linear score (weight x TF-IDF)",
    title=f"label {best.label}: score {best.score:.3f}, bias term {best.bias_contribution:+.2f}",
)
fig.tight_layout()
plt.show()
