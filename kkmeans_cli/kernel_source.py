"""Where the engine gets kernel values from.

The iteration code never touches K directly: it asks a *kernel source* for the three things it
needs, so that a kernel matrix held in memory and one recomputed in blocks (for data whose n×n
matrix does not fit) run the same algorithms.

- ``diag``: K_ii (float64);
- ``full_outer_sums(labels, weights, F)``: F[c, i] = Σ_{j∈c} w_j K_ij, one pass over K;
- ``update_outer_sums(moved, src, dst, w_moved, F)``: F[src] −= w K[moved], F[dst] += w K[moved];
- ``rows(idx)``: rows of K as float64 (k-means++ reads columns of K, which are its rows).
"""
import numpy as np

from . import _lloyd


class InMemoryKernel:
    """A kernel matrix K held in memory (float32 or float64, C-contiguous, symmetric).

    ``diag`` is K_ii in float64 from the kernel function when there is one (then a float32 K
    does not round it, and fit and predict use the same values); K's diagonal otherwise.
    """

    def __init__(self, K, n_threads=1, diag=None):
        self.K = K
        self.n = K.shape[0]
        self.n_threads = n_threads
        self.diag = np.array(np.diagonal(K) if diag is None else diag, dtype=np.float64)

    def full_outer_sums(self, labels, weights, F):
        _lloyd.outer_sums_rows(self.K, 0, labels, weights, F, self.n_threads)

    def update_outer_sums(self, moved, src, dst, w_moved, F):
        _lloyd.update_outer_sums(self.K, moved.astype(np.int32), src, dst, w_moved, F,
                                 self.n_threads)

    def rows(self, idx):
        return np.asarray(self.K[np.asarray(idx)], dtype=np.float64)


class BlockedKernel:
    """Kernel rows recomputed from the data on demand: O(n·block) memory instead of n².

    A full pass recomputes every row once (n² kernel evaluations); an incremental update
    recomputes only the rows of the points that moved. ``kernel_evaluations`` counts them.
    Rows come from :meth:`Kernel.cross`, so they equal the in-memory matrix's rows up to
    BLAS's rounding (see ``tests/test_kernels.py``).
    """

    def __init__(self, kernel, X, dtype=np.float64, n_threads=1, diag=None):
        self.kernel = kernel
        self.X = np.ascontiguousarray(X, dtype=np.float64)
        self.n = self.X.shape[0]
        self.dtype = dtype
        self.n_threads = n_threads
        self.diag = np.asarray(kernel.diag(self.X) if diag is None else diag, dtype=np.float64)
        self.kernel_evaluations = 0

    def full_outer_sums(self, labels, weights, F):
        for i0, _, Kb in self.kernel.cross_blocks(self.X, self.X, dtype=self.dtype,
                                                  n_threads=self.n_threads):
            _lloyd.outer_sums_rows(Kb, i0, labels, weights, F, self.n_threads)
        self.kernel_evaluations += self.n * self.n

    def update_outer_sums(self, moved, src, dst, w_moved, F):
        # Chunks in order: every F entry sees the moves in the same order as in memory.
        for m0, m1, Kb in self.kernel.cross_blocks(self.X[moved], self.X, dtype=self.dtype,
                                                   n_threads=self.n_threads):
            _lloyd.update_outer_sums(Kb, np.arange(m1 - m0, dtype=np.int32), src[m0:m1],
                                     dst[m0:m1], w_moved[m0:m1], F, self.n_threads)
        self.kernel_evaluations += len(moved) * self.n

    def rows(self, idx):
        idx = np.asarray(idx)
        self.kernel_evaluations += idx.size * self.n
        return self.kernel.cross(self.X[idx], self.X, n_threads=self.n_threads)
