"""
label2vec and PIFA label embeddings in two dimensions
=====================================================

A label tree groups labels by their embeddings. PIFA represents a label by the sum of the
TF-IDF vectors of its training texts (what the labels' texts *say*);
:class:`~skxmc.Label2VecTransformer` (MatchXML's label2vec) learns a dense vector
per label with Skip-gram over the label sets of the training texts (which labels *occur
together*). The two views give different trees.

We embed the labels of Reuters-21578 (all five category fields: topics, places, people,
organisations, exchanges) both ways, build a :class:`~skxmc.HierarchicalLabelTree` on
each (``label_embedding="pifa"`` and ``label_embedding="label2vec"``), and plot a 2-D
projection of each embedding coloured by the label's top-level cluster in its own tree.
Without the reference datasets (``skxmc.datasets.get_data_dir()``), the TIBKAT demo data
shipped with skxmc is used instead.
"""

# %%
# Data and embeddings
# -------------------
import time
from collections import Counter

import matplotlib.pyplot as plt
import numpy as np
import scipy.sparse as sp
from sklearn.decomposition import PCA, TruncatedSVD
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics import adjusted_rand_score

from skxmc import HierarchicalLabelTree
from skxmc.datasets import get_data_dir, load_demo, load_text_jsonl
from skxmc.labels import encode_labels
from skxmc.tree import pifa_embeddings

data_dir = get_data_dir()
path = None if data_dir is None else data_dir / "reuters21578_allcats" / "train.jsonl.gz"
if path is not None and path.is_file():
    name = "Reuters-21578 (all categories)"
    texts, labels = load_text_jsonl(path)
else:
    name = "TIBKAT demo"
    demo = load_demo()
    texts, labels = demo.train_texts, demo.train_labels
Y, classes = encode_labels(labels)
print(f"{name}: {len(texts)} texts, {len(classes)} labels")

X = TfidfVectorizer(sublinear_tf=True, min_df=2, dtype=np.float32).fit_transform(texts)

# Leaves of at most 50 labels, 8 children per node: 8 top-level clusters on Reuters.
tree_params = dict(max_leaf_size=50, branching_factor=8, random_state=0)
start = time.perf_counter()
pifa_tree = HierarchicalLabelTree(label_embedding="pifa", **tree_params).fit(X, Y)
print(f"PIFA tree: {time.perf_counter() - start:.1f} s")
start = time.perf_counter()
l2v_tree = HierarchicalLabelTree(label_embedding="label2vec", **tree_params).fit(None, Y)
print(f"label2vec tree (training included): {time.perf_counter() - start:.1f} s")
label2vec = l2v_tree.label_embedder_.embeddings_  # (n_labels, 100), unit rows


def top_clusters(tree: HierarchicalLabelTree) -> np.ndarray:
    """Cluster of each label in the first layer below the root."""
    M = tree.cluster_chain_[-1]
    for C in tree.cluster_chain_[-2:0:-1]:
        M = M @ C
    return np.asarray(M.argmax(axis=1)).ravel()


pifa_top, l2v_top = top_clusters(pifa_tree), top_clusters(l2v_tree)
print(
    f"leaf clusters: {pifa_tree.cluster_chain_[-1].shape[1]}, top-level clusters: "
    f"{pifa_top.max() + 1}; agreement of the two trees' top clusters "
    f"(adjusted Rand index): {adjusted_rand_score(pifa_top, l2v_top):.2f}"
)

# %%
# Neighbours of a frequent label
# ------------------------------
# label2vec puts a label next to the labels it is assigned with; PIFA next to labels whose
# texts use the same words.
pifa = pifa_embeddings(X, Y)  # what the PIFA tree clustered (sparse, unit rows)
counts = Counter(label for row in labels for label in row)
query = "topic:crude" if "topic:crude" in counts else counts.most_common(1)[0][0]
q = int(np.searchsorted(classes, query))
for title, E in (("label2vec", label2vec), ("PIFA", pifa)):
    sims = E @ E[q].T
    sims = sims.toarray().ravel() if sp.issparse(sims) else np.ravel(sims)
    nearest = [classes[i] for i in np.argsort(-sims)[1:6]]
    print(f"{title:9s} neighbours of {query}: {', '.join(map(str, nearest))}")

# %%
# Labels that never occur together with another label get no Skip-gram training pair:
# their label2vec vector is its random initial value. PIFA still places them by their texts.
n_labels_per_text = np.diff(Y.indptr)
alone = np.ones(len(classes), dtype=bool)
alone[np.unique(Y[n_labels_per_text > 1].indices)] = False
print(f"labels that never co-occur with another label: {alone.sum()} of {len(classes)}")

# %%
# Projections
# -----------
# PCA of the dense label2vec vectors, truncated SVD of the sparse PIFA rows (PCA would
# densify them); each point is a label, coloured by its top-level cluster; crosses mark
# the labels that never co-occur (on the demo data, label2vec sets them apart in a cloud
# of random directions).
xy_l2v = PCA(n_components=2, random_state=0).fit_transform(label2vec)
xy_pifa = TruncatedSVD(n_components=2, random_state=0).fit_transform(pifa)
frequent = [int(np.searchsorted(classes, c)) for c, _ in counts.most_common(8)]

fig, axes = plt.subplots(1, 2, figsize=(12, 5.5))
for ax, xy, top, title in (
    (axes[0], xy_l2v, l2v_top, "label2vec (PCA), label2vec tree clusters"),
    (axes[1], xy_pifa, pifa_top, "PIFA (truncated SVD), PIFA tree clusters"),
):
    ax.scatter(
        xy[~alone, 0],
        xy[~alone, 1],
        c=top[~alone],
        cmap="tab10",
        vmin=0,
        vmax=9,
        s=12,
        alpha=0.8,
        linewidths=0,
    )
    ax.scatter(
        xy[alone, 0],
        xy[alone, 1],
        c=top[alone],
        cmap="tab10",
        vmin=0,
        vmax=9,
        s=14,
        alpha=0.8,
        marker="x",
        linewidths=0.8,
    )
    for i in frequent:
        ax.annotate(str(classes[i]), xy[i], fontsize=8, alpha=0.9)
    ax.set_title(title)
    ax.set_xticks([])
    ax.set_yticks([])
fig.suptitle(f"{name}: {len(classes)} labels")
fig.tight_layout()
plt.show()
