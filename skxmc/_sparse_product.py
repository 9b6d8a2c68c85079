"""``A @ B`` for CSR float32 matrices, threaded, with sorted rows (PIFA's ``Y.T @ X``), and
what skxmc's sparse kernels share: the radix sort they use instead of ``np.sort`` and the
one dtype set (``csr_arrays``) their arguments are converted to. The compiled kernels are
in :mod:`skxmc._kernels.sparse`.

scipy's sparse product is single-threaded and leaves each row's columns in the order they
were first reached, so a caller that needs canonical rows (the label tree's kernels do)
sorts them afterwards, which took as long as the product itself on PIFA-sized inputs.
Here each row is accumulated in a dense per-thread buffer, in scipy's order (rows of
``B`` in the order ``A``'s row lists them, float32 products and sums), so the values are
those scipy computes, and written out sorted; blocks of rows run on threads (the kernels
release the GIL).
"""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp

from ._kernels.jit import interruptible
from ._kernels.sparse import _product_rows, radix_sort

__all__ = ["csr_arrays", "radix_bits", "radix_sort", "sorted_product"]

# Below this many multiply-adds, scipy's product and a sort take milliseconds, less than
# compiling _product_rows costs the first fit after an install (benchmarks/first_run.py);
# both give the same matrix.
_KERNEL_MIN_WORK = 1 << 20

# Row blocks per thread: blocks of equal estimated work, several per thread taken from a
# shared queue, as the estimate ignores cache effects.
_BLOCKS_PER_THREAD = 8


def csr_arrays(M: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(indptr int64, indices int32, data float32)`` of a CSR matrix.

    One dtype set for the compiled kernels, which then compile once: scipy stores int32
    or int64 indices depending on the matrix size and how it was built. Copies only what
    has another dtype (in practice the ``n + 1`` entries of an int32 ``indptr``).
    """
    return (
        M.indptr.astype(np.int64, copy=False),
        M.indices.astype(np.int32, copy=False),
        M.data.astype(np.float32, copy=False),
    )


def radix_bits(n: int) -> int:
    """Bits that :func:`radix_sort` needs for keys in ``[0, n)``."""
    return max(1, int(n - 1).bit_length())


def sorted_product(
    A: sp.csr_matrix, B: sp.csr_matrix, *, n_jobs: int = 1, min_work: int = _KERNEL_MIN_WORK
) -> sp.csr_matrix:
    """``A @ B`` as a float32 CSR matrix with sorted, duplicate-free rows.

    Parameters
    ----------
    A : csr_matrix of shape (m, n)
    B : csr_matrix of shape (n, d)
    n_jobs : int, default=1
        Threads.
    min_work : int, default=2**20
        Products with fewer multiply-adds are left to scipy (and sorted), which is faster
        than compiling the kernel; ``skxmc warmup`` passes 0 to compile it.

    Returns
    -------
    csr_matrix of float32, shape (m, d)
        The entries scipy's ``A @ B`` computes in float32 (entries that sum to zero are
        dropped, as scipy drops them).
    """
    A = sp.csr_matrix(A, dtype=np.float32)
    B = sp.csr_matrix(B, dtype=np.float32)
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"shapes {A.shape} and {B.shape} do not align")
    m, d = A.shape[0], B.shape[1]
    a, b = csr_arrays(A), csr_arrays(B)
    n_threads = max(1, min(int(n_jobs), m))
    # blocks of about equal work: a row costs the entries of the rows of B it adds
    work = np.cumsum(A @ np.diff(B.indptr).astype(np.float64))
    if not m or work[-1] < min_work:
        C = sp.csr_matrix(A @ B, dtype=np.float32)
        C.sort_indices()
        return C
    n_blocks = n_threads * _BLOCKS_PER_THREAD if n_threads > 1 else 1
    targets = np.linspace(0, work[-1] if m else 0, n_blocks + 1)[1:-1]
    bounds = np.concatenate([[0], np.searchsorted(work, targets), [m]]).astype(np.int64)
    blocks = [(int(lo), int(hi)) for lo, hi in itertools.pairwise(bounds) if hi > lo]
    counts = np.zeros(m, dtype=np.int64)
    indptr = np.zeros(m + 1, dtype=np.int64)
    out = {"indices": np.empty(0, np.int32), "data": np.empty(0, np.float32)}
    # per-thread scratch, handed out by a queue of free buffers
    n_bits = radix_bits(d)
    free = [
        (
            np.zeros(d, np.int64),  # mark
            np.zeros(d, np.float32),  # acc
            np.empty(d, np.int64),  # touched
            np.empty(d, np.int64),  # radix_sort's tmp
            np.empty(2049, np.int64),  # radix_sort's counts
            n_bits,
        )
        for _ in range(n_threads)
    ]

    def run(block: tuple[int, int], fill: bool) -> None:
        scratch = free.pop()
        try:
            _product_rows(
                *a,
                *b,
                block[0],
                block[1],
                indptr,
                fill,
                *scratch,
                out["indices"],
                out["data"],
                counts,
            )
        finally:
            free.append(scratch)

    with interruptible(), ThreadPoolExecutor(max_workers=n_threads) as pool:
        list(pool.map(lambda blk: run(blk, False), blocks))
        np.cumsum(counts, out=indptr[1:])
        out["indices"] = np.empty(int(indptr[-1]), np.int32)
        out["data"] = np.empty(int(indptr[-1]), np.float32)
        list(pool.map(lambda blk: run(blk, True), blocks))
    C = sp.csr_matrix((out["data"], out["indices"], indptr), shape=(m, d))
    C.has_sorted_indices = True
    C.eliminate_zeros()
    return C
