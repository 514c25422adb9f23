"""The kernel source of explicit features Φ (n×m): kernel k-means on the linear kernel Φ Φᵀ
is ordinary k-means on Φ, so Lloyd, Elkan, k-means++, the restarts and relocation run on it
unchanged in O(n·m + n·k) memory (Nyström's features, ``kernels/nystroem.py``; the spectral
start's embedding, ``spectral.embedding_kmeans``).

With the cluster sums S[c] = Σ_{j∈c} w_j φ_j (k×m), the outer sums are one matrix product
F = S Φᵀ (O(n·m·k)).

Threads: every product runs on one BLAS thread per call, split into fixed chunks of
``CHUNK_ROWS`` rows of Φ that ``n_threads`` Python threads share (NumPy releases the GIL). The
chunks do not depend on the thread count, so neither do the results (checked in
``tests/test_large_data.py``); and no idle multi-threaded BLAS pool spins against the OpenMP passes
of the engine that follow each product.
"""
import numpy as np

from ..memory import row_blocks
from . import _elkan
from .sources import KernelSource
from .threads import blas_threads, thread_pool

#: Eigenvalues of K_mm at most this fraction of the largest are dropped from the transform.
EIG_RTOL = 1e-10
#: Rows of Φ per product chunk (fixed: results independent of the thread count).
CHUNK_ROWS = 2048


def _chunked(n, fn, n_threads):
    """fn(i0, i1) for fixed chunks of ``CHUNK_ROWS`` rows, on ``n_threads`` threads."""
    bounds = [(i0, min(n, i0 + CHUNK_ROWS)) for i0 in range(0, n, CHUNK_ROWS)]
    if n_threads <= 1 or len(bounds) == 1:
        for i0, i1 in bounds:
            fn(i0, i1)
        return
    for f in [thread_pool(n_threads).submit(fn, i0, i1) for i0, i1 in bounds]:
        f.result()


def times_rows_t(A, Phi, out, n_threads=1):
    """out = A Φᵀ (A: r×m, Φ: n×m, out: r×n), in column chunks, one BLAS thread each."""
    def part(i0, i1):
        np.matmul(A, Phi[i0:i1].T, out=out[:, i0:i1])

    with blas_threads(1):
        _chunked(Phi.shape[0], part, n_threads)
    return out


def rows_times(A, T, out, n_threads=1):
    """out = A T (A: n×m, T: m×p, out: n×p), in row chunks, one BLAS thread each."""
    def part(i0, i1):
        np.matmul(A[i0:i1], T, out=out[i0:i1])

    with blas_threads(1):
        _chunked(A.shape[0], part, n_threads)
    return out


def sq_norms(A):
    """‖a_i‖² of every row."""
    return np.einsum("ij,ij->i", A, A)


# -- the kernel source ----------------------------------------------------------------------
class FeatureSpaceSource(KernelSource):
    """A kernel source (``engine/sources.py``) for the linear kernel of explicit features Φ.

    K = Φ Φᵀ is never formed: with S[c] = Σ_{j∈c} w_j φ_j (``S``, k×m, float64),

    - ``diag`` = ‖φ_i‖²;
    - ``full_outer_sums``: S from the labels (a sparse product), then F = S Φᵀ;
    - ``update_outer_sums``: ΔS from the moved rows, S += ΔS, F[c] += ΔS[c] Φᵀ for the
      clusters that changed;
    - ``rows(idx)`` = Φ[idx] Φᵀ.

    Memory O(n·m + n·k); a full pass is one GEMM of O(n·m·k).
    """

    def __init__(self, Phi, n_threads=1):
        self.Phi = np.ascontiguousarray(Phi, dtype=np.float64)
        self.n, self.m = self.Phi.shape
        self.n_threads = n_threads
        self.diag = sq_norms(self.Phi)
        self.S = None
        self._work = None  # k×n buffer of the updates (a fresh one would pay page faults)

    def _buffer(self, rows):
        if self._work is None or self._work.shape[0] < rows:
            self._work = np.empty((rows, self.n))
        return self._work[:rows]

    def cluster_sums(self, labels, weights, n_clusters):
        """S[c] = Σ_{j∈c} w_j φ_j, shape (k, m)."""
        from scipy import sparse

        A = sparse.csr_matrix((np.asarray(weights, dtype=np.float64),
                               (np.asarray(labels), np.arange(self.n))),
                              shape=(n_clusters, self.n))
        return np.asarray(A @ self.Phi)

    def centers(self, labels, weights, n_clusters):
        """μ_c = S[c] / W_c (zero for a cluster of no weight), shape (k, m)."""
        S = self.cluster_sums(labels, weights, n_clusters)
        W = np.bincount(labels, weights=weights, minlength=n_clusters)
        return np.where(W[:, None] > 0, S / np.where(W > 0, W, 1.0)[:, None], 0.0)

    def full_outer_sums(self, labels, weights, F):
        self.S = self.cluster_sums(labels, weights, F.shape[0])
        times_rows_t(self.S, self.Phi, F, self.n_threads)

    def _delta_sums(self, moved, src, dst, w_moved):
        """ΔS = Σ_moved w φ (into dst) − w φ (out of src), shape (k, m)."""
        from scipy import sparse

        moved = np.asarray(moved)
        cols = np.arange(moved.size)
        A = sparse.csr_matrix((np.concatenate([w_moved, -w_moved]),
                               (np.concatenate([dst, src]), np.concatenate([cols, cols]))),
                              shape=(self.S.shape[0], moved.size))
        return np.asarray(A @ self.Phi[moved])

    def update_outer_sums(self, moved, src, dst, w_moved, F):
        k = F.shape[0]
        dS = self._delta_sums(moved, src, dst, w_moved)
        changed = np.flatnonzero(np.any(dS != 0.0, axis=1))
        self.S += dS
        if changed.size == F.shape[0]:
            F += times_rows_t(dS, self.Phi, self._buffer(k), self.n_threads)
        elif changed.size:
            F[changed] += times_rows_t(dS[changed], self.Phi, self._buffer(changed.size),
                                       self.n_threads)

    # -- Elkan (engine/sources.py): the sums S are explicit, so an outer sum F[c, i] is
    # recomputed when needed, S[c]·φ_i (O(m)), instead of replayed from the log of moves.
    explicit_features = True

    def record_moves(self, moved, src, dst, w_moved):
        self.S += self._delta_sums(moved, src, dst, w_moved)

    def pair_sums(self, points, clusters, labels, weights, F):
        """F[c, i] = S[c] · φ_i for each pair (O(m) each)."""
        _elkan.pair_dots(self.Phi, np.ascontiguousarray(self.S),
                         np.ascontiguousarray(points, dtype=np.intp),
                         np.ascontiguousarray(clusters, dtype=np.intp),
                         F, self.n_threads)

    def centre_sq_distances(self, W):
        """‖μ_a − μ_b‖² for the centres μ_c = S[c] / W_c (k×k)."""
        M = self.S / np.where(W > 0, W, 1.0)[:, None]
        norms = np.einsum("ij,ij->i", M, M)
        return norms[:, None] + norms[None, :] - 2.0 * (M @ M.T)

    def own_outer_sums(self, labels, weights, n_clusters):
        S = self.cluster_sums(labels, weights, n_clusters)
        out = np.empty(self.n)
        for r0, r1 in row_blocks(self.n, self.m):
            out[r0:r1] = np.einsum("ij,ij->i", self.Phi[r0:r1], S[labels[r0:r1]])
        return out

    def spectral_embedding(self, weights, n_clusters):
        """Rows A (n×r, r ≤ k) with A Aᵀ the weighted top-k eigenspace part of Φ Φᵀ.

        The top eigenvectors of M = W^½ Φ Φᵀ W^½ are V = W^½ Φ U Λ^{-½}, with
        Φᵀ W Φ = U Λ Uᵀ (m×m), so the spectral start's A = W^{-½} V Λ^½ = Φ U_k: one pass
        over Φ and an m×m eigh instead of n×n work (for ``spectral.spectral_embedding``).
        """
        C = np.empty((self.m, self.m))
        wPhi = self.Phi * np.asarray(weights, dtype=np.float64)[:, None]
        with blas_threads(1):
            np.matmul(wPhi.T, self.Phi, out=C)
            lam, U = np.linalg.eigh(0.5 * (C + C.T))
        del wPhi
        order = np.argsort(-lam, kind="stable")[:min(n_clusters, self.m)]
        keep = order[lam[order] > EIG_RTOL * max(lam.max(), 0.0)] if lam.size else order
        return rows_times(self.Phi, np.ascontiguousarray(U[:, keep]),
                          np.empty((self.n, keep.size)), self.n_threads)

    def rows(self, idx):
        A = self.Phi[np.asarray(idx)]
        return times_rows_t(A, self.Phi, np.empty((A.shape[0], self.n)), self.n_threads)
