"""
==================================
Ranking metrics on the demo data
==================================

Score the labels of the shipped TIBKAT demo data with a simple k-nearest-neighbour
baseline and look at the XMC ranking metrics — precision, nDCG and propensity-scored
precision — as the cut-off ``k`` grows.

The demo data are 6,000 training and 1,500 test records (title and abstract) of the TIB
library catalogue, labelled with GND subject ids. It is a small but genuinely skewed
label space: most subjects occur once or twice.
"""

# %%
# Load the data and encode the labels
# -----------------------------------
# ``encode_labels`` turns the training label lists into a CSR indicator matrix plus the
# label identifier of each column (``classes``). Test labels are kept as lists: the metrics
# map them through ``classes`` and count the subjects never seen in training as misses.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from skxmc._baselines import knn_label_scores
from skxmc.datasets import load_demo
from skxmc.labels import LabelSpace, encode_labels
from skxmc.metrics import evaluate, inverse_propensity

demo = load_demo()
Y_train, classes = encode_labels(demo.train_labels)
n_unseen = LabelSpace(classes).transform(demo.test_labels).n_unknown.sum()
n_test_labels = sum(len(labels) for labels in demo.test_labels)
label_counts = np.asarray(Y_train.sum(axis=0)).ravel()

print(f"{len(demo.train_texts)} train / {len(demo.test_texts)} test records")
print(f"{len(classes)} labels, {np.mean(label_counts <= 2):.0%} of them on at most 2 records")
print(f"{n_unseen} of {n_test_labels} test label occurrences are unseen in training")

# %%
# Features and a nearest-neighbour ranker
# ---------------------------------------
# TF-IDF features, then each test record's labels are scored by the cosine-weighted
# votes of its 20 most similar training records. ``knn_label_scores`` returns a sparse
# ``(n_test, n_labels)`` matrix holding the 10 best labels of each row: the metrics rank
# its stored entries only.
vectorizer = TfidfVectorizer(sublinear_tf=True, min_df=2, dtype=np.float32)
X_train = vectorizer.fit_transform(demo.train_texts)
X_test = vectorizer.transform(demo.test_texts)
scores = knn_label_scores(X_train, Y_train, X_test, n_neighbors=20, top_k=10)
scores

# %%
# Metrics at k = 1 ... 10
# -----------------------
# The inverse propensities (Jain et al., 2016; ``A=0.55, B=1.5``) weight hits on rare
# labels more. ``evaluate`` ranks the predictions once and reports every metric at every
# cut-off. With ``normalize=True`` the propensity-scored metrics are divided by their value
# for the best achievable ranking, which puts them on a 0-1 scale.
ks = range(1, 11)
inv_propensity = inverse_propensity(Y_train)
raw = evaluate(demo.test_labels, scores, ks=ks, inv_propensity=inv_propensity, classes=classes)
normalised = evaluate(
    demo.test_labels,
    scores,
    ks=ks,
    inv_propensity=inv_propensity,
    classes=classes,
    normalize=True,
)

# Printed in percent, as ``skxmc demo`` and ``skxmc evaluate`` print them; skxmc's tables
# show normalised PSP, the un-normalised column is here to compare.
print("In percent:")
print("  k    P@k  nDCG@k  PSP@k (normalised)  PSP@k (un-normalised)")
for k in ks:
    print(
        f"{k:3d} {100 * raw[f'precision@{k}']:6.2f} {100 * raw[f'ndcg@{k}']:7.2f} "
        f"{100 * normalised[f'psprecision@{k}']:19.2f} {100 * raw[f'psprecision@{k}']:22.2f}"
    )

# %%
# Plot the metrics against k
# --------------------------
# Precision falls with ``k``: most records have two or three subjects, so the later slots
# are mostly misses, while nDCG, whose ideal denominator stops growing at
# ``min(k, |y|)`` relevant labels, stays nearly flat and creeps up as later ranks recover
# labels. Un-normalised PSP@k is on the scale of the inverse propensities (at least
# 1, larger for rare labels), so it gets its own panel; normalised PSP@k compares the
# ranker with the best achievable propensity-weighted ranking. It rises with ``k``: the
# best ranking runs out of relevant labels after ``|y|`` slots, while the ranker keeps
# finding some of them further down its list.
k_values = np.array(ks)


def series(result, metric):
    return [result[f"{metric}@{k}"] for k in k_values]


fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
left.plot(k_values, series(raw, "precision"), "o-", label="P@k")
left.plot(k_values, series(raw, "ndcg"), "s-", label="nDCG@k")
left.plot(k_values, series(normalised, "psprecision"), "^-", label="PSP@k (normalised)")
left.set(xlabel="k", ylabel="score", title="Metrics on a 0-1 scale", ylim=(0, None))
left.legend()
right.plot(k_values, series(raw, "psprecision"), "^-", color="C2", label="PSP@k")
right.set(xlabel="k", ylabel="score", title="PSP@k (un-normalised)", ylim=(0, None))
right.legend()
for ax in (left, right):
    ax.set_xticks(k_values)
    ax.grid(alpha=0.3)
fig.suptitle("TF-IDF + 20-nearest-neighbour label voting on the TIBKAT demo data")
plt.show()
