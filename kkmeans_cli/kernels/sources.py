"""The kernel sources made from kernel values: a matrix in memory (:class:`InMemoryKernel`),
rows recomputed from the data in blocks (:class:`BlockedKernel`) and the lazy hand-off
between the two (:class:`LazyKernel`). Each implements the contract the iterations read,
``engine.sources.KernelSource`` (its capability flags are listed there).

``kernel_evaluations`` counts the kernel values read (in memory) or computed (blocked).
"""
import time
from abc import abstractmethod

import numpy as np

from ..engine import _elkan, _lloyd
from ..engine.sources import KernelSource
from .. import memory
from ..memory import row_blocks
from .functions import SMALL_BLOCK, Workspace

# Own sums of a cluster of m points (BlockedKernel): block rows of at least this many rows,
# about OWN_SUM_BLOCKS of them, so ~(½ + 1/16) of K(Y, Y) is computed.
OWN_SUM_MIN_ROWS = 128
OWN_SUM_BLOCKS = 8


class _KernelLogSource(KernelSource):
    """What the kernel sources share: Elkan's lazy updates cost one kernel value per point
    and log entry, replayed from its log of moves (``replays_log``), and nothing to
    record."""

    def record_moves(self, moved, src, dst, w_moved):
        pass

    @abstractmethod
    def refresh_outer_sums(self, points, stamps, log, F):
        """F[:, i] brought up to date for the given points, replaying the log entries from
        ``stamps[i]`` on."""

    @abstractmethod
    def submatrix(self, idx):
        """K[idx][:, idx] as float64 (representatives of the clusters)."""


def _cluster_order(labels, n_clusters):
    """Points sorted by cluster (stable) and the start of each cluster in that order."""
    order = np.argsort(labels, kind="stable").astype(np.intp)
    starts = np.searchsorted(labels[order], np.arange(n_clusters + 1)).astype(np.intp)
    return order, starts


class InMemoryKernel(_KernelLogSource):
    """A kernel matrix K held in memory (float32 or float64, C-contiguous, symmetric).

    ``diag`` is K_ii in float64 from the kernel function when there is one (then a float32 K
    does not round it, and fit and predict use the same values); K's diagonal otherwise.
    ``not_euclidean``: why K is not positive semidefinite, when the PSD check found so and
    nothing repaired it (None: K is taken as PSD).
    """

    holds_matrix = True

    def __init__(self, K, n_threads=1, diag=None, not_euclidean=None):
        self.K = K
        self.n = K.shape[0]
        self.n_threads = n_threads
        self.diag = np.array(np.diagonal(K) if diag is None else diag, dtype=np.float64)
        self.kernel_evaluations = 0
        self.not_euclidean = not_euclidean

    @property
    def dtype(self):
        return self.K.dtype

    def full_outer_sums(self, labels, weights, F):
        _lloyd.outer_sums_rows(self.K, 0, labels, weights, F, self.n_threads)
        self.kernel_evaluations += self.n * self.n

    def update_outer_sums(self, moved, src, dst, w_moved, F):
        _lloyd.update_outer_sums(self.K, moved.astype(np.int32), src, dst, w_moved, F,
                                 self.n_threads)
        self.kernel_evaluations += len(moved) * self.n

    def refresh_outer_sums(self, points, stamps, log, F):
        points = np.asarray(points, dtype=np.intp)
        if points.size == 0 or log.size == 0:
            return
        point, src, dst, weight = log.entries()
        _elkan.refresh_from_matrix(self.K, points, stamps, point, src, dst, weight, F,
                                   self.n_threads)
        self.kernel_evaluations += int(np.sum(log.size - stamps[points]))

    def pair_sums(self, points, clusters, labels, weights, F):
        if len(points) == 0:
            return
        order, starts = _cluster_order(labels, F.shape[0])
        _elkan.pair_sums_from_matrix(self.K, np.ascontiguousarray(points, dtype=np.intp),
                                     np.ascontiguousarray(clusters, dtype=np.intp), order, starts,
                                     weights, F, self.n_threads)
        self.kernel_evaluations += int(np.sum(np.diff(starts)[clusters]))

    def own_outer_sums(self, labels, weights, n_clusters):
        order, starts = _cluster_order(labels, n_clusters)
        out = np.empty(self.n)
        _elkan.own_sums_from_matrix(self.K, order, starts, weights, out, self.n_threads)
        self.kernel_evaluations += int(np.sum(np.diff(starts) ** 2))
        return out

    def submatrix(self, idx):
        idx = np.asarray(idx)
        self.kernel_evaluations += idx.size ** 2
        return np.asarray(self.K[np.ix_(idx, idx)], dtype=np.float64)

    def outer_sums_of(self, points, labels, weights, n_clusters):
        """F[:, points] (k×p) from scratch: a full pass restricted to those rows."""
        F = np.empty((n_clusters, len(points)))
        _lloyd.outer_sums_rows(np.ascontiguousarray(self.K[np.asarray(points)]), 0, labels,
                               weights, F, self.n_threads)
        self.kernel_evaluations += len(points) * self.n
        return F

    def rows(self, idx):
        return np.asarray(self.K[np.asarray(idx)], dtype=np.float64)


class BlockedKernel(_KernelLogSource):
    """Kernel rows recomputed from the data on demand: O(n·block) memory instead of n².

    A full pass recomputes every row once (n² kernel evaluations); an incremental update
    recomputes only the rows of the points that moved. ``kernel_evaluations`` counts them.
    Rows come from :meth:`Kernel.cross`, so they equal the in-memory matrix's rows up to
    BLAS's rounding (see ``tests/test_kernels.py``).
    """

    computes_rows = True

    def __init__(self, kernel, X, dtype=np.float64, n_threads=1, diag=None):
        self.kernel = kernel
        self.X = np.ascontiguousarray(X, dtype=np.float64)
        self.n = self.X.shape[0]
        self.dtype = dtype
        self.n_threads = n_threads
        self.diag = np.asarray(kernel.diag(self.X) if diag is None else diag, dtype=np.float64)
        self.kernel_evaluations = 0
        self._work, self._out = Workspace(), Workspace()
        # rbf in float64: sums of kernel values fused with their computation, never stored
        # (Kernel.fused_outer_sums); a float32 storage rounds each value first, as K would.
        self.fused = kernel.name == "rbf" and np.dtype(dtype) == np.float64
        self._centred = None

    @property
    def centred(self):
        """The data as the kernel computes with it (``Kernel.centred``), made once: the fused
        replay reads its rows."""
        if self._centred is None:
            self._centred = np.ascontiguousarray(self.kernel.centred(self.X))
        return self._centred

    @property
    def not_euclidean(self):
        """Why the feature space may not be Euclidean (no PSD check without K): the sigmoid
        kernel; None for the kernels that are positive semidefinite (planning.py lets no
        other kernel that needs a check run blocked)."""
        if self.kernel.name == "sigmoid":
            return "the sigmoid kernel is not positive semidefinite in general"
        return None

    def subset(self, idx, n_threads=None):
        """The blocked kernel of the points ``idx`` (a sample)."""
        return BlockedKernel(self.kernel, self.X[idx], dtype=self.dtype,
                             n_threads=self.n_threads if n_threads is None else n_threads)

    def sample_matrix(self, idx, n_threads=None):
        """The kernel matrix of the points ``idx`` (a sample) in memory, an
        :class:`InMemoryKernel` with their K(x, x) as its diagonal."""
        threads = self.n_threads if n_threads is None else n_threads
        K = self.kernel.matrix(self.X[idx], dtype=self.dtype, n_threads=threads)
        return InMemoryKernel(K, n_threads=threads, diag=self.diag[idx])

    def outer_sums_against(self, idx, labels, weights, n_clusters):
        """F (k×n) of every point against the points ``idx`` in clusters ``labels`` with
        ``weights`` (int32 labels and float64 weights of those points): Σ_{j∈idx, c} w_j
        K(x_i, x_j), fused for rbf (``Kernel.fused_outer_sums``), else in row blocks."""
        Y = self.X[idx]
        F = self.kernel.fused_outer_sums(self.X, Y, labels, weights, n_clusters,
                                         self.n_threads)
        if F is None:
            F = np.empty((n_clusters, self.n))
            for i0, _, Kb in self.kernel.cross_blocks(self.X, Y, dtype=self.dtype,
                                                      n_threads=self.n_threads):
                _lloyd.outer_sums_rows(Kb, i0, labels, weights, F, self.n_threads)
        return F

    def _fused(self, rows, cols, labels, weights, n_clusters):
        """F[c, r] = Σ_{j ∈ cols, labels_j = c} w_j K(x_rows[r], x_j), fused (rbf float64)."""
        return self.kernel.fused_sums_of(self.centred, rows, cols, labels, weights, n_clusters,
                                         self.n_threads)

    def full_outer_sums(self, labels, weights, F):
        if self.fused:
            every = np.arange(self.n)
            F[...] = self._fused(every, every, labels, weights, F.shape[0])
            self.kernel_evaluations += self.n * self.n
            return
        for i0, _, Kb in self.kernel.cross_blocks(self.X, self.X, dtype=self.dtype,
                                                  n_threads=self.n_threads):
            _lloyd.outer_sums_rows(Kb, i0, labels, weights, F, self.n_threads)
        self.kernel_evaluations += self.n * self.n

    def update_outer_sums(self, moved, src, dst, w_moved, F):
        if self.fused:       # rbf: every point against the moves, fused (Kernel.fused_replay)
            self.kernel.fused_replay(self.centred, np.arange(self.n), np.zeros(self.n, np.intp),
                                     moved, src, dst, w_moved, F, self.n_threads)
            self.kernel_evaluations += len(moved) * self.n
            return
        # Chunks in order: every F entry sees the moves in the same order as in memory.
        for m0, m1, Kb in self.kernel.cross_blocks(self.X[moved], self.X, dtype=self.dtype,
                                                   n_threads=self.n_threads):
            _lloyd.update_outer_sums(Kb, np.arange(m1 - m0, dtype=np.int32), src[m0:m1],
                                     dst[m0:m1], w_moved[m0:m1], F, self.n_threads)
        self.kernel_evaluations += len(moved) * self.n

    def refresh_outer_sums(self, points, stamps, log, F):
        """rbf in float64: one fused pass, each point against its part of the log
        (``Kernel.fused_replay``); else the points grouped by stamp, one block K(points, moved
        since the stamp) per group."""
        points = np.asarray(points, dtype=np.intp)
        points = points[stamps[points] < log.size]
        if self.fused:
            point, src, dst, weight = log.entries()
            self.kernel.fused_replay(self.centred, points, stamps[points], point, src, dst,
                                     weight, F, self.n_threads)
            self.kernel_evaluations += int(np.sum(log.size - stamps[points]))
            return
        points = points[np.argsort(stamps[points], kind="stable")]
        group_stamps, starts = np.unique(stamps[points], return_index=True)
        bounds = np.append(starts, points.size)
        for stamp, g0, g1 in zip(group_stamps, bounds[:-1], bounds[1:]):
            group = points[g0:g1]
            point, src, dst, weight = log.entries(stamp)
            Y = self.X[point]
            for r0, r1 in row_blocks(group.size, point.size):
                Kb = self._out.block(r1 - r0, point.size, self.dtype)
                self.kernel.cross(self.X[group[r0:r1]], Y, dtype=self.dtype,
                                  n_threads=self.n_threads, out=Kb, work=self._work)
                _elkan.refresh_from_rows(Kb, group[r0:r1], src, dst, weight, F,
                                         self.n_threads if Kb.size >= SMALL_BLOCK else 1)
            self.kernel_evaluations += group.size * point.size

    def pair_sums(self, points, clusters, labels, weights, F):
        """Pairs grouped by cluster: one block K(points, members of c) per cluster."""
        if len(points) == 0:
            return
        order, starts = _cluster_order(labels, F.shape[0])
        points, clusters = np.asarray(points), np.asarray(clusters)
        by_cluster = np.argsort(clusters, kind="stable")
        bounds = np.searchsorted(clusters[by_cluster], np.arange(F.shape[0] + 1))
        for c in np.flatnonzero(np.diff(bounds)):
            rows = points[by_cluster[bounds[c]:bounds[c + 1]]]
            members = order[starts[c]:starts[c + 1]]
            w = weights[members]
            if self.fused:
                F[c, rows] = self._fused(rows, members, np.zeros(members.size, np.intp), w,
                                         1)[0]
                self.kernel_evaluations += rows.size * members.size
                continue
            Y = self.X[members]
            for r0, r1 in row_blocks(rows.size, members.size):
                Kb = self._out.block(r1 - r0, members.size, self.dtype)
                self.kernel.cross(self.X[rows[r0:r1]], Y, dtype=self.dtype,
                                  n_threads=self.n_threads, out=Kb, work=self._work)
                F[c, rows[r0:r1]] = np.asarray(Kb, dtype=np.float64) @ w
            self.kernel_evaluations += rows.size * members.size

    def submatrix(self, idx):
        idx = np.asarray(idx)
        self.kernel_evaluations += idx.size ** 2
        return self._float64_rows(self.X[idx], self.X[idx])

    def outer_sums_of(self, points, labels, weights, n_clusters):
        """F[:, points] (k×p) from scratch, from the kernel rows of those points in blocks."""
        if self.fused:
            self.kernel_evaluations += len(points) * self.n
            return self._fused(points, np.arange(self.n), labels, weights, n_clusters)
        F = np.empty((n_clusters, len(points)))
        for r0, _, Kb in self.kernel.cross_blocks(self.X[np.asarray(points)], self.X,
                                                  dtype=self.dtype, n_threads=self.n_threads):
            _lloyd.outer_sums_rows(Kb, r0, labels, weights, F, self.n_threads)
        self.kernel_evaluations += len(points) * self.n
        return F

    def own_outer_sums(self, labels, weights, n_clusters):
        order, starts = _cluster_order(labels, n_clusters)
        out = np.empty(self.n)
        for c in range(n_clusters):
            members = order[starts[c]:starts[c + 1]]
            if self.fused:
                out[members] = self._fused(members, members, np.zeros(members.size, np.intp),
                                           weights[members], 1)[0]
                self.kernel_evaluations += members.size ** 2
                continue
            out[members] = self._symmetric_row_sums(self.X[members], weights[members])
        return out

    def _symmetric_row_sums(self, Y, w):
        """Σ_j w_j K(y_i, y_j) for every row of Y from the block rows of K(Y, Y) on and right
        of the diagonal only (K is symmetric): ~(½ + 1/(2·OWN_SUM_BLOCKS)) of the m² values."""
        m = Y.shape[0]
        sums = np.zeros(m)
        step = max(1, min(max(OWN_SUM_MIN_ROWS, -(-m // OWN_SUM_BLOCKS)),
                          memory.BLOCK_BYTES // (8 * max(m, 1))))
        for p0 in range(0, m, step):
            p1 = min(p0 + step, m)
            Kb = self._out.block(p1 - p0, m - p0, self.dtype)
            self.kernel.cross(Y[p0:p1], Y[p0:], dtype=self.dtype, n_threads=self.n_threads,
                              out=Kb, work=self._work)
            Kb = np.asarray(Kb, dtype=np.float64)
            sums[p0:p1] += Kb @ w[p0:]
            sums[p1:] += Kb[:, p1 - p0:].T @ w[p0:p1]
            self.kernel_evaluations += Kb.size
        return sums

    def rows(self, idx):
        idx = np.asarray(idx)
        self.kernel_evaluations += idx.size * self.n
        return self._float64_rows(self.X[idx], self.X)

    def _float64_rows(self, A, B):
        """K(A, B) rounded to the storage dtype as a matrix in memory would be, as float64
        (k-means++ then reads the same values from a blocked and an in-memory float32 K)."""
        return np.asarray(self.kernel.cross(A, B, dtype=self.dtype, n_threads=self.n_threads),
                          dtype=np.float64)


class LazyKernel:
    """``storage='auto'`` for a fit with one start: kernel values computed in blocks only
    where Elkan's iterations need them (a :class:`BlockedKernel`), and the kernel matrix
    built only if they turn out to need most of it (``materialize``; then an
    :class:`InMemoryKernel`). Hartigan's refinement does not need it
    (``engine.hartigan.blocked_hartigan``).

    Building K costs n²/2 kernel values plus writing n² entries of fresh memory; Elkan on
    well-separated data converges after a fraction of that (``benchmarks/bench_fit.py``).
    ``budget`` is the number of kernel values the blocked iterations may compute before the
    matrix is built instead.
    """

    # Not a KernelSource itself (the iterations read ``current``), but it answers the same
    # capability questions: no matrix held at the start, no explicit features.
    holds_matrix = False
    explicit_features = False
    computes_rows = False
    lazy = True
    runs_restarts = False
    not_euclidean = None

    def __init__(self, blocked, build, budget):
        self.blocked, self._build, self.budget = blocked, build, budget
        self.matrix = None
        self.build_seconds = 0.0

    @property
    def current(self):
        """The source the iterations read now."""
        return self.blocked if self.matrix is None else self.matrix

    @property
    def n(self):
        return self.blocked.n

    @property
    def diag(self):
        return self.current.diag

    @property
    def kernel_evaluations(self):
        held = self.matrix.kernel_evaluations if self.matrix is not None else 0
        return self.blocked.kernel_evaluations + held

    def rows(self, idx):
        return self.current.rows(idx)

    def materialize(self):
        """The kernel matrix (an :class:`InMemoryKernel`), built on the first call."""
        if self.matrix is None:
            t0 = time.perf_counter()
            self.matrix = self._build()
            self.build_seconds = time.perf_counter() - t0
        return self.matrix
