"""
Stochastic negative mining: how many negatives to mine, how many to sample
==========================================================================

:class:`~skxmc.SNMClassifier` never scores all labels while training: each batch draws
``B`` (``n_sampled``) candidate labels uniformly, and the loss weighs only the ``k``
(``n_hard_negatives``) highest-scoring of them (top-k stochastic negative mining, Reddi
et al. 2019). ``negative_sampling="uniform"`` instead averages the loss over all ``B``
sampled negatives (plain negative sampling, the paper's baseline).

This example trains small models on the bibtex bag-of-words data set (159 labels; rows
L2-normalised) and plots test precision@1 against ``k`` at a fixed ``B``, and against
``B`` at ``k = 1``, with the uniform baseline for reference. The network is narrower than
the paper's 512-512 and training short, so that the whole example runs in about a minute
on a laptop CPU; ``benchmarks/snm.py`` runs the full comparison.
"""

# %%
# Data: bibtex (XC-repository bag of words)
# -----------------------------------------
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.preprocessing import normalize

from skxmc import SNMClassifier
from skxmc.datasets import get_data_dir, load_xc_bow

data = get_data_dir(required=True) / "bibtex_bow"
X_train, Y_train = load_xc_bow(data / "train.txt")
X_test, Y_test = load_xc_bow(data / "test.txt")
X_train, X_test = normalize(X_train), normalize(X_test)
print(f"{X_train.shape[0]} train / {X_test.shape[0]} test texts, {X_train.shape[1]} "
      f"features, {Y_train.shape[1]} labels")  # fmt: skip

settings = dict(hidden_size=128, embedding_size=64, max_epochs=6, device="cpu", random_state=0)


def p_at_1(**params):
    clf = SNMClassifier(**settings, **params).fit(X_train, Y_train)
    return clf.score(X_test, Y_test)


start = time.perf_counter()

# %%
# Precision@1 against k (mined negatives), B = 64
# -----------------------------------------------
ks = [1, 2, 5, 10, 20]
p_k = [p_at_1(n_sampled=64, n_hard_negatives=k) for k in ks]
p_uniform_64 = p_at_1(n_sampled=64, negative_sampling="uniform")
for k, p in zip(ks, p_k):
    print(f"k {k:3d} (B 64): P@1 {100 * p:.2f}")
print(f"uniform (B 64): P@1 {100 * p_uniform_64:.2f}")

# %%
# Precision@1 against B (sampled candidates), k = 1
# -------------------------------------------------
Bs = [4, 16, 64, 159]
p_b = [p_at_1(n_sampled=b, n_hard_negatives=1) for b in Bs]
for b, p in zip(Bs, p_b):
    print(f"B {b:3d} (k 1): P@1 {100 * p:.2f}")
print(f"total {time.perf_counter() - start:.0f} s")

# %%
# The plots
# ---------
fig, (ax_k, ax_b) = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True)
ax_k.plot(ks, 100 * np.array(p_k), "o-", label="top-k SNM")
ax_k.axhline(100 * p_uniform_64, color="grey", ls="--", label="uniform sampling")
ax_k.set(xscale="log", xlabel="k (negatives mined of B = 64)", ylabel="test P@1 (%)",
         xticks=ks, xticklabels=[str(k) for k in ks])  # fmt: skip
ax_k.legend()
ax_b.plot(Bs, 100 * np.array(p_b), "o-", color="C1", label="top-1 SNM")
ax_b.set(xscale="log", xlabel="B (candidates sampled per batch; 159 = all labels)",
         xticks=Bs, xticklabels=[str(b) for b in Bs])  # fmt: skip
ax_b.legend()
fig.suptitle("SNMClassifier on bibtex (6 epochs, 128-64 network)")
fig.tight_layout()
plt.show()
