"""Nyström approximation: kernel k-means in an explicit m-dimensional feature space.

With m landmarks L (rows of X drawn uniformly without replacement, seeded) and the eigen-
decomposition K_mm = K(L, L) = U Λ Uᵀ, the transform is the symmetric pseudo-inverse square
root

    T = K_mm^{-½} = U_r Λ_r^{-½} U_rᵀ        (eigenvalues λ ≤ ``EIG_RTOL`` · λ_max dropped)

and the features of any point x are φ(x) = K(x, L) T (an m-vector), so that φ(x)·φ(y) is the
Nyström approximation of K(x, y) (exact when the landmarks are all the points). The n×m feature
matrix Φ = K_nm T is computed in row blocks, each one BLAS product.

Kernel k-means on the approximate kernel Φ Φᵀ is ordinary k-means on Φ. :class:`FeatureSpaceSource`
is a kernel source (``kernel_source.py``) backed by Φ instead of K: with the cluster sums
S[c] = Σ_{j∈c} w_j φ_j (k×m), the outer sums are one matrix product F = S Φᵀ (O(n·m·k)), so
Lloyd, k-means++, restarts and relocation run unchanged in O(n·m + n·k) memory.

A fitted model keeps L (``landmarks_``), T (``nystroem_transform_``) and the centres
μ_c = S[c]/W_c (``centers_``); predicting a point costs one kernel row K(x, L) and
d(x, c) = ‖φ(x)‖² − 2 φ(x)·μ_c + ‖μ_c‖², O(m·(d + m + k)).

Threads: every product runs on one BLAS thread per call, split into fixed chunks of
``CHUNK_ROWS`` rows of Φ that ``n_threads`` Python threads share (NumPy releases the GIL). The
chunks do not depend on the thread count, so neither do the results (checked in
``tests/test_scale.py``); and no idle multi-threaded BLAS pool spins against the OpenMP passes
of the engine that follow each product.
"""
from dataclasses import dataclass

import numpy as np

from .._text import plural
from ..engine.threads import blas_threads, thread_pool
from ..memory import BLOCK_BYTES, default_landmarks, row_blocks
from .sources import KernelSource

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


# -- the feature map ------------------------------------------------------------------------
def choose_landmarks(n, m, rng):
    """Indices of m landmarks among n points: uniform without replacement, sorted."""
    if not 1 <= m <= n:
        raise ValueError(f"n_landmarks must be between 1 and n_samples = {n}; got {m}")
    return np.sort(rng.choice(n, size=m, replace=False))


def landmark_transform(kernel, landmarks, n_threads=1):
    """T = K_mm^{-½}, the symmetric pseudo-inverse square root of K(L, L) (m×m float64).

    Eigenvalues ≤ ``EIG_RTOL`` · λ_max (and negative ones, from a kernel that is not positive
    semidefinite or from rounding) are dropped. Returns T and the rank kept. One BLAS thread
    (m ≤ 1,000 by default), so T does not depend on the thread count.
    """
    with blas_threads(1):  # LAPACK on several threads would round differently
        Kmm = kernel.matrix(landmarks, dtype=np.float64, n_threads=n_threads)
        lam, U = np.linalg.eigh(Kmm)
        top = lam.max() if lam.size else 0.0
        keep = lam > EIG_RTOL * top if top > 0 else np.zeros(lam.shape, dtype=bool)
        Ur = U[:, keep]
        T = (Ur / np.sqrt(lam[keep])) @ Ur.T
    return np.ascontiguousarray(T), int(keep.sum())


def features(X, landmarks, transform, kernel, n_threads=1, progress=None, out=None):
    """Φ = K(X, L) T in row blocks (each block one kernel evaluation and one BLAS product).

    Parameters
    ----------
    X : ndarray (n, d)
    landmarks : ndarray (m, d)
    transform : ndarray (m, m), or (m, s) for rank-restricted features
    kernel : Kernel
        With resolved parameters.
    n_threads : int
    progress : callable, optional
        Called as ``progress(rows_done, n)`` after each block.
    out : ndarray (n, m), optional

    Returns
    -------
    ndarray (n, m) (or (n, s)) float64
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    n, m = X.shape[0], transform.shape[1]
    Phi = np.empty((n, m)) if out is None else out
    step = max(1, BLOCK_BYTES // (8 * max(m, 1)))
    for i0 in range(0, n, step):
        i1 = min(n, i0 + step)
        Kb = kernel.cross(X[i0:i1], landmarks, dtype=np.float64, n_threads=n_threads)
        rows_times(Kb, transform, Phi[i0:i1], n_threads)
        if progress is not None:
            progress(i1, n)
    return Phi


def _sq_norms(A):
    return np.einsum("ij,ij->i", A, A)


# -- the kernel source ----------------------------------------------------------------------
class FeatureSpaceSource(KernelSource):
    """A kernel source (``kernels/sources.py``) for the linear kernel of explicit features Φ.

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
        self.diag = _sq_norms(self.Phi)
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

    # -- Elkan (kernels/sources.py): the sums S are explicit, so an outer sum F[c, i] is
    # recomputed when needed, S[c]·φ_i (O(m)), instead of replayed from the log of moves.
    explicit_features = True

    def refresh_outer_sums(self, points, stamps, log, F):
        """Never called: with explicit features Elkan recomputes F per pair (:meth:`pair_sums`)
        instead of replaying a log of moves."""
        raise NotImplementedError("explicit features recompute outer sums with pair_sums")

    def record_moves(self, moved, src, dst, w_moved):
        self.S += self._delta_sums(moved, src, dst, w_moved)

    def pair_sums(self, points, clusters, labels, weights, F):
        """F[c, i] = S[c] · φ_i for each pair (O(m) each)."""
        from ..engine import _elkan

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
        over Φ and an m×m eigh instead of n×n work (for ``optima.spectral_embedding``).
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


# -- the fitted approximation ---------------------------------------------------------------
@dataclass
class NystroemFeatures:
    """Nyström features of the training data, computed once and shared (e.g. by every k of a
    sweep: ``KernelKMeans(approx='nystroem').kernel_matrix(X)`` returns one).

    Attributes: ``Phi`` (n×m), ``landmarks`` (m×d), ``transform`` (m×m), ``landmark_index``
    (rows of X), ``rank`` (eigenvalues kept), ``kernel`` (resolved).
    """

    Phi: np.ndarray
    landmarks: np.ndarray
    transform: np.ndarray
    landmark_index: np.ndarray
    rank: int
    kernel: object

    @property
    def shape(self):
        """(n, n): the shape of the kernel matrix these features stand for."""
        return (self.Phi.shape[0], self.Phi.shape[0])

    def scores(self, labels, sample_weight=None, n_threads=None, *, max_exact=20_000,
               sample_size=10_000, random_state=0, metrics=None):
        """The quality measures of ``metrics.scores`` on the Nyström kernel Φ Φᵀ."""
        return scores(self.Phi, labels, sample_weight=sample_weight, n_threads=n_threads,
                      max_exact=max_exact, sample_size=sample_size, random_state=random_state,
                      **({} if metrics is None else {"metrics": metrics}))


def landmark_rng(random_state):
    """The generator of the landmark draw: independent of the gamma sample and the starts,
    and the same for every k (so a sweep and a direct fit of one k use the same landmarks)."""
    if isinstance(random_state, np.random.Generator):
        return np.random.default_rng(random_state.bit_generator.seed_seq.spawn(3)[2])
    return np.random.default_rng(np.random.SeedSequence(random_state, spawn_key=(2,)))


def fit_features(X, kernel, n_landmarks, random_state, n_threads=1, progress=None):
    """Choose landmarks, compute the transform and the features of X.

    Returns
    -------
    NystroemFeatures
    """
    idx = choose_landmarks(X.shape[0], int(n_landmarks), landmark_rng(random_state))
    L = np.ascontiguousarray(X[idx])
    T, rank = landmark_transform(kernel, L, n_threads)
    Phi = features(X, L, T, kernel, n_threads, progress)
    return NystroemFeatures(Phi=Phi, landmarks=L, transform=T, landmark_index=idx, rank=rank,
                            kernel=kernel)


def resolve_landmarks(n_landmarks, n, k):
    """m: ``n_landmarks`` if given (at most n), else :func:`memory.default_landmarks`."""
    if n_landmarks is None:
        return default_landmarks(n, k)
    return min(int(n_landmarks), n)


# -- estimator hooks ------------------------------------------------------------------------
def feature_engine_applies(objective, refine):
    """Whether a Nyström fit of this objective and refinement (and not a sweep's shared
    features) runs on the explicit-feature engine."""
    return objective == "kmeans" and refine != "hartigan"


def engine_applies(estimator, kernel_matrix):
    """Whether a Nyström fit runs on the explicit-feature engine (``engine/features.py``):
    rank-restricted float32 features, Lloyd on them, restarts on a sample. Not for a sweep's
    shared features (``kernel_matrix``), the objective 'ncut' or ``refine='hartigan'``, which
    keep :class:`FeatureSpaceSource`."""
    return ((kernel_matrix is None or isinstance(kernel_matrix, NystroemFeatures))
            and feature_engine_applies(estimator.objective, estimator.refine))


class FeatureEngine:
    """Stage 1 of a Nyström fit on the explicit-feature engine: the feature map and the
    features Φ (n×s float32) of the training data; :meth:`run_restarts` is stage 2
    (``KernelKMeans._run_restarts`` hands over to it: ``runs_restarts``)."""

    holds_matrix = False
    explicit_features = True
    runs_restarts = True

    def __init__(self, fmap, Phi, x_sq, diag, landmark_index, stage_seconds):
        self.fmap, self.Phi, self.x_sq, self.diag = fmap, Phi, x_sq, diag
        self.n = Phi.shape[0]
        self.landmark_index = landmark_index
        self.stats = {"stage_seconds": dict(stage_seconds),
                      "approximation_error": _engine().approximation_error(diag, x_sq)}
        self.best = None

    def run_restarts(self, estimator, weights, init_labels, rng, n_threads):
        """Candidate starts on a seeded sample, the best completed on all data
        (``engine/restarts.py``); or Lloyd from ``init_labels``. Returns the
        ``restarts.Restarts`` of the best result (a ``LloydResult``) and the full-data
        objectives of the completed candidates."""
        import time

        from ..engine.restarts import Restarts, default_sample_size, sampled_restarts

        F = _engine()
        k, w = estimator.n_clusters, np.asarray(weights, dtype=np.float64)
        progress = _progress(estimator, stages=True)
        t0 = time.perf_counter()
        if init_labels is not None:
            S = FeatureSpaceSource.cluster_sums(self, init_labels, w, k)
            W = np.bincount(init_labels, weights=w, minlength=k)
            best = F.lloyd(self.Phi, self.x_sq, w, F.centres_from_sums(S, W),
                           estimator.max_iter, n_threads, labels=init_labels)
            self.stats.update(start_kinds=["labels"], best_start="labels")
            inertias = [best.inertia]
        else:
            # the estimator's start mix (engine/optima.start_kinds; no import: optima
            # imports this module)
            estimator._reset_optima(estimator.n_init, False, n_threads)
            kinds = list(estimator._optima.kinds)
            used = list(kinds)
            sample_threads = 1  # a sample pass is too small for a parallel region

            def solve_sample(sample, restart, r):
                Y, ys, ws = self.Phi[sample], self.x_sq[sample], w[sample]
                mu, used[restart] = F.sample_start(Y, ws, k, kinds[restart], r)
                res = F.lloyd(Y, ys, ws, mu, estimator.max_iter, sample_threads)
                return res.inertia, res.centres

            def complete(mu):
                return F.lloyd(self.Phi, self.x_sq, w, mu, estimator.max_iter, n_threads)

            out = sampled_restarts(self.n, estimator.n_init, rng, solve_sample, complete,
                                   sample_size=default_sample_size(self.n, k),
                                   progress=progress)
            best = out.best
            inertias = out.full_objectives
            self.stats.update(start_kinds=used, best_start=used[out.best_candidate],
                              sample_size=int(out.sample.size),
                              sample_objectives=out.sample_objectives,
                              completed=out.completed)
        self.stats["stage_seconds"]["restarts"] = time.perf_counter() - t0
        self.best = best
        estimator._optima = _EngineStarts(self.stats)
        from ..engine.lloyd import LloydResult

        W = best.W
        g = W ** 2 * np.einsum("ij,ij->i", best.centres, best.centres)
        result = LloydResult(labels=best.labels, distances=None, inner_sums=g,
                             cluster_weights=W, inertia=best.inertia, n_iter=best.n_iter,
                             converged=best.converged, n_relocated=best.n_relocated,
                             objective_trace=best.objective_trace)
        best_index = int(np.argmin(inertias))
        inertias = list(inertias)
        inertias[best_index] = best.inertia
        return Restarts(result, inertias)


def _progress(estimator, stages=False):
    """The estimator's ``progress_callback`` as ``progress(done, total, what)``: a callback
    of three parameters sees every stage; one of two (``(done, total)``, the original
    protocol) sees the feature rows only."""
    import inspect

    cb = getattr(estimator, "progress_callback", None)
    if cb is None:
        return None
    try:
        params = inspect.signature(cb).parameters.values()
        takes_what = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                         for p in params) >= 3 or any(p.kind == p.VAR_POSITIONAL
                                                      for p in params)
    except (TypeError, ValueError):
        takes_what = False
    if takes_what:
        return cb
    return None if stages else (lambda done, total, what: cb(done, total))


class _EngineStarts:
    """Stands for ``optima.OptimaState`` after the engine's restarts (``fit`` calls
    ``finish``): the start mix and the stages for ``fit_stats_``."""

    def __init__(self, stats):
        self.stats = stats

    def finish(self, est, best, inertias):
        est.fit_stats_.update({
            "start_kinds": list(self.stats.get("start_kinds", [])),
            "best_start": self.stats.get("best_start"),
            "refine": "none", "spectral_method": "features",
            "lloyd_objective": float(best.inertia), "refined_objective": float(best.inertia),
            "refine_moves": 0, "nystroem": dict(self.stats)})


def _engine():
    from ..engine import features

    return features


def engine_source(estimator, X, n_threads):
    """Stage 1 on the explicit-feature engine: landmarks, the rank-restricted feature map and
    the float32 features of X (:class:`FeatureEngine`)."""
    import time

    from ..memory import check, plan

    F = _engine()
    n, k = X.shape[0], estimator.n_clusters
    m = resolve_landmarks(estimator.n_landmarks, n, k)
    rank = getattr(estimator, "nystroem_rank", None)
    rank = F.default_rank(k, m) if rank is None else min(int(rank), m)
    planned = dict(k=k, approx="nystroem", n_landmarks=m, rank=rank, feature_engine=True,
                   n_threads=n_threads)
    check(plan(n, **planned), estimator.memory_limit, **planned)
    t0 = time.perf_counter()
    idx = choose_landmarks(n, m, landmark_rng(estimator.random_state))
    fmap = F.feature_map(estimator.kernel_, X[idx], rank)
    t1 = time.perf_counter()
    progress = _progress(estimator)
    Phi, x_sq = F.build_features(
        fmap, X, n_threads,
        None if progress is None else lambda done, total: progress(done, total,
                                                                   "Nyström features, rows"))
    t2 = time.perf_counter()
    engine = FeatureEngine(fmap, Phi, x_sq, estimator.kernel_.diag(X), idx,
                           {"landmarks": t1 - t0, "features": t2 - t1})
    estimator.landmarks_ = fmap.landmarks
    estimator.nystroem_transform_ = fmap.projection
    estimator.n_landmarks_ = fmap.n_landmarks
    estimator.nystroem_rank_ = fmap.rank
    estimator.nystroem_dtype_ = np.dtype(fmap.dtype).name
    return engine


def fit_source(estimator, X, kernel_matrix, n_threads):
    """Stage 1 of a Nyström fit: the :class:`FeatureSpaceSource` of X.

    Uses ``kernel_matrix`` when it is the :class:`NystroemFeatures` of X (a sweep), else
    computes them. Records ``landmarks_``, ``nystroem_transform_``, ``n_landmarks_`` and
    ``nystroem_rank_`` on the estimator.
    """
    n = X.shape[0]
    if estimator.kernel == "precomputed":
        raise ValueError("approx='nystroem' needs the data, not a precomputed kernel matrix")
    estimator.nystroem_dtype_ = None
    if engine_applies(estimator, kernel_matrix):
        if kernel_matrix is not None and kernel_matrix.Phi.shape[0] != n:
            raise ValueError(f"the Nyström features have {kernel_matrix.Phi.shape[0]} rows "
                             f"for {n} samples")
        return engine_source(estimator, X, n_threads)
    if isinstance(kernel_matrix, NystroemFeatures):
        if kernel_matrix.Phi.shape[0] != n:
            raise ValueError(f"the Nyström features have {kernel_matrix.Phi.shape[0]} rows for "
                             f"{n} samples")
        nf = kernel_matrix
    elif kernel_matrix is not None:
        raise ValueError("approx='nystroem' takes the NystroemFeatures of "
                         "kernel_matrix(X), not a kernel matrix")
    else:
        nf = shared_features(estimator, X, estimator.kernel_, n_threads)
    estimator.landmarks_ = nf.landmarks
    estimator.nystroem_transform_ = nf.transform
    estimator.n_landmarks_ = int(nf.landmarks.shape[0])
    estimator.nystroem_rank_ = int(nf.rank)
    return FeatureSpaceSource(nf.Phi, n_threads=n_threads)


def shared_features(estimator, X, kernel, n_threads):
    """The :class:`NystroemFeatures` of X for ``estimator``'s landmark count and seed, after
    the memory plan (``estimator.memory_limit``) allowed them."""
    from ..memory import check, plan

    n, k = X.shape[0], estimator.n_clusters
    if estimator.kernel == "precomputed":
        raise ValueError("approx='nystroem' needs the data, not a precomputed kernel matrix")
    m = resolve_landmarks(estimator.n_landmarks, n, k)
    check(plan(n, k, approx="nystroem", n_landmarks=m), estimator.memory_limit, k=k,
          approx="nystroem", n_landmarks=m)
    return fit_features(X, kernel, m, estimator.random_state, n_threads,
                        getattr(estimator, "progress_callback", None))


def finish_fit(estimator, source, result, weights):
    """After the restarts: the centres μ_c of the best labels; no X_fit_ is kept."""
    if isinstance(source, FeatureEngine):
        estimator.centers_ = source.best.centres
        estimator.nystroem_stats_ = source.stats
        estimator.X_fit_ = None
        return
    estimator.nystroem_stats_ = None
    estimator.centers_ = source.centers(result.labels, weights, estimator.n_clusters)
    estimator.X_fit_ = None


def nearest(estimator, X, want_distances):
    """Labels (and squared distances) of new points to the centres of a Nyström model.

    d(x, c) = ‖φ(x)‖² − 2 φ(x)·μ_c + ‖μ_c‖² (clamped at 0) with φ(x) = K(x, L) T, in row
    blocks; ties go to the lowest cluster.
    """
    from ..engine import _lloyd
    from ..engine.threads import effective_n_threads

    n_threads = effective_n_threads(estimator.n_threads)
    X = np.ascontiguousarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features); got {X.ndim}-D")
    if X.shape[1] != estimator.n_features_in_:
        raise ValueError(f"X has {X.shape[1]} features, the model expects "
                         f"{estimator.n_features_in_}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains NaN or infinity")
    from .functions import check_range

    check_range(estimator.kernel, X, max(len(estimator.labels_),
                                         float(np.sum(estimator.sample_weight_))),
                kernel=estimator.kernel_, offset=estimator.kernel_.offset)
    if getattr(estimator, "nystroem_dtype_", None):
        return _engine_nearest(estimator, X, want_distances, n_threads)
    k = estimator.n_clusters
    W = np.asarray(estimator.cluster_weights_, dtype=np.float64)
    g = np.asarray(estimator.inner_sums_, dtype=np.float64)
    S = estimator.centers_ * W[:, None]  # Σ w φ, so F = S φᵀ as in fit
    labels = np.empty(X.shape[0], dtype=np.int32)
    row_dist = np.empty(X.shape[0])
    dist = np.empty((X.shape[0], k)) if want_distances else None
    m = estimator.landmarks_.shape[0]
    step = max(1, BLOCK_BYTES // (8 * max(m, k)))
    with blas_threads(1):
        for i0 in range(0, X.shape[0], step):
            i1 = min(X.shape[0], i0 + step)
            Phi = features(X[i0:i1], estimator.landmarks_, estimator.nystroem_transform_,
                           estimator.kernel_, n_threads)
            F = times_rows_t(S, Phi, np.empty((k, i1 - i0)), n_threads)
            diag = _sq_norms(Phi)
            _lloyd.assign(F, g, W, diag, labels[i0:i1], row_dist[i0:i1], n_threads)
            if want_distances:
                _lloyd.distances(F, g, W, diag, dist[i0:i1], n_threads)
    return labels.astype(np.intp), dist


def _engine_nearest(estimator, X, want_distances, n_threads):
    """``nearest`` for a model of the explicit-feature engine: labels from its chunk
    functions (float32 features: the training data get exactly the fit's labels); the
    distances to every centre, when asked, from float64 features."""
    F = _engine()
    fmap = F.FeatureMap(kernel=estimator.kernel_, landmarks=estimator.landmarks_,
                        projection=estimator.nystroem_transform_,
                        eigenvalues=np.empty(0), dtype=F.DTYPES[estimator.nystroem_dtype_])
    with blas_threads(1):
        labels, _ = F.predict(fmap, X, estimator.centers_, n_threads)
        if not want_distances:
            return labels, None
        mu = np.asarray(estimator.centers_, dtype=np.float64)
        dist = np.empty((X.shape[0], mu.shape[0]))
        for i0 in range(0, X.shape[0], F.CHUNK_ROWS):
            i1 = min(X.shape[0], i0 + F.CHUNK_ROWS)
            Phi = fmap.kernel.cross(X[i0:i1], fmap.landmarks) @ fmap.projection
            dist[i0:i1] = np.maximum(_sq_norms(Phi)[:, None] - 2.0 * Phi @ mu.T
                                     + _sq_norms(mu)[None, :], 0.0)
    return labels, dist


# -- quality measures -----------------------------------------------------------------------
def silhouette_samples(Phi, labels, n_threads=1):
    """Exact silhouette of every point under the kernel Φ Φᵀ, rows of it made in blocks (never
    the n×n matrix): memory one block of rows."""
    from ..measures import _silhouette
    from ..measures.metrics import stacked

    n = Phi.shape[0]
    codes, counts = stacked([labels], n)
    diag = _sq_norms(Phi)
    out = np.empty((1, n))
    step = max(1, BLOCK_BYTES // (8 * n))
    for i0 in range(0, n, step):
        i1 = min(n, i0 + step)
        rows = times_rows_t(Phi[i0:i1], Phi, np.empty((i1 - i0, n)), n_threads)
        _silhouette.silhouette_rows(rows, i0, diag, codes, counts, out, n_threads)
    return out[0]


def silhouette_score(Phi, labels, *, max_exact=20_000, sample_size=10_000, random_state=0,
                     n_threads=1):
    """The silhouette under Φ Φᵀ: exact up to ``max_exact`` points (rows in blocks), else on
    the stratified sample of ``metrics.stratified_sample`` (an s×s matrix)."""
    from ..measures.metrics import SilhouetteScore, silhouette, stratified_sample

    n = Phi.shape[0]
    if max_exact is not None and n > max_exact:
        s = stratified_sample(labels, sample_size, random_state)
        sub = Phi[s]
        Ks = times_rows_t(sub, sub, np.empty((sub.shape[0], sub.shape[0])), n_threads)
        score = silhouette(Ks, np.asarray(labels)[s], n_threads)
        return SilhouetteScore(score=score, n_used=int(s.size), exact=s.size == n, indices=s)
    score = float(np.mean(silhouette_samples(Phi, labels, n_threads)))
    return SilhouetteScore(score=score, n_used=n, exact=True)


def feature_sums(Phi, labels, sample_weight=None, n_threads=1):
    """``metrics.FeatureSums`` under Φ Φᵀ: F = S Φᵀ, C = S Sᵀ (O(n·m·k), no n×n matrix)."""
    from ..measures.metrics import FeatureSums, check_labels, check_weights

    n = Phi.shape[0]
    codes, k = check_labels(labels, n, min_clusters=1)
    w = check_weights(sample_weight, n)
    src = FeatureSpaceSource(Phi, n_threads)
    F = np.empty((k, n))
    src.full_outer_sums(codes, w, F)
    C = src.S @ src.S.T
    C = 0.5 * (C + C.T)
    W = np.bincount(codes, weights=w, minlength=k)
    if np.any(W <= 0):
        raise ValueError("every cluster needs a point of positive sample_weight")
    return FeatureSums(diag=src.diag, weights=w, labels=codes, F=F, C=C, g=np.diagonal(C).copy(),
                       W=W, sizes=np.bincount(codes, minlength=k))


def scores(Phi, labels, metrics=("silhouette", "simplified_silhouette", "calinski_harabasz",
                                 "davies_bouldin"), sample_weight=None, n_threads=None, *,
           max_exact=20_000, sample_size=10_000, random_state=0):
    """``metrics.scores`` for the Nyström kernel Φ Φᵀ (same names, same silhouette rule)."""
    from ..measures import metrics as quality
    from ..engine.threads import effective_n_threads

    n_threads = effective_n_threads(n_threads)

    def silhouette():
        res = silhouette_score(Phi, labels, max_exact=max_exact, sample_size=sample_size,
                               random_state=random_state, n_threads=n_threads)
        return res.score, res.n_used, None

    return quality.scores_with(metrics, silhouette,
                               lambda: feature_sums(Phi, labels, sample_weight, n_threads))


# -- model file hooks (``model_file.py``) -----------------------------------------------------
def model_meta(estimator):
    """Meta entries of a model: ``approx`` and, for Nyström, ``n_landmarks`` and the rank."""
    if getattr(estimator, "approx", "none") != "nystroem":
        return {"approx": "none"}
    meta = {"approx": "nystroem", "n_landmarks": int(estimator.n_landmarks_),
            "nystroem_rank": int(estimator.nystroem_rank_)}
    if getattr(estimator, "nystroem_dtype_", None):
        # the explicit-feature engine: features K(x, L) P (P m×s) stored in this dtype
        meta["nystroem_features"] = estimator.nystroem_dtype_
    return meta


def model_arrays(estimator):
    """``landmarks`` (m×d), ``nystroem_transform`` (m×m), ``centers`` (k×m) of a Nyström model."""
    if getattr(estimator, "approx", "none") != "nystroem":
        return {}
    return {"landmarks": np.asarray(estimator.landmarks_, dtype=np.float64),
            "nystroem_transform": np.asarray(estimator.nystroem_transform_, dtype=np.float64),
            "centers": np.asarray(estimator.centers_, dtype=np.float64)}


def load_state(estimator, meta, arrays, n, fail):
    """Check and restore the Nyström state of a model read from a file (``fail(problem)``
    raises the model file error)."""
    approx = meta.get("approx", "none")
    if approx not in ("none", "nystroem"):
        fail(f"unknown approx {approx!r}")
    estimator.approx = approx
    if approx != "nystroem":
        return
    if meta["kernel"] in ("precomputed", "precomputed-distance"):
        fail("a Nyström model cannot have a precomputed kernel")
    d, k = meta["n_features"], meta["n_clusters"]
    for key in ("landmarks", "nystroem_transform", "centers"):
        if key not in arrays:
            fail(f"the required array '{key}' is missing (approx is 'nystroem')")
    L, T, C = arrays["landmarks"], arrays["nystroem_transform"], arrays["centers"]
    if L.ndim != 2 or L.shape[1] != d or L.shape[0] < 1:
        fail(f"'landmarks' has shape {L.shape}, expected (m, {d})")
    m = L.shape[0]
    engine = meta.get("nystroem_features")
    if engine is not None and engine not in ("float32", "float64"):
        fail(f"meta 'nystroem_features' is {engine!r}, expected 'float32' or 'float64'")
    # the engine's projection P is m×s (rank s ≤ m); the full transform K_LL^{-1/2} is m×m
    s = T.shape[1] if engine is not None and T.ndim == 2 and 1 <= T.shape[1] <= m else m
    for key, value, shape in (("landmarks", L, (m, d)), ("nystroem_transform", T, (m, s)),
                              ("centers", C, (k, s))):
        if value.shape != shape:
            fail(f"'{key}' has shape {value.shape}, expected {shape}")
        if value.dtype.kind not in "fiu":
            fail(f"'{key}' has dtype {value.dtype}, expected floats")
        if not np.all(np.isfinite(value)):
            fail(f"'{key}' holds NaN or infinite values")
    if meta.get("n_landmarks", m) != m:
        fail(f"meta 'n_landmarks' is {meta.get('n_landmarks')}, the landmarks are {m}")
    estimator.landmarks_ = np.ascontiguousarray(L, dtype=np.float64)
    estimator.nystroem_transform_ = np.ascontiguousarray(T, dtype=np.float64)
    estimator.centers_ = np.ascontiguousarray(C, dtype=np.float64)
    estimator.n_landmarks_ = estimator.n_landmarks = int(m)
    estimator.nystroem_rank_ = int(meta.get("nystroem_rank", m))
    estimator.nystroem_dtype_ = engine
    estimator.X_fit_ = None


def fit_silhouette(estimator, X, *, max_exact=20_000, sample_size=10_000, random_state=0,
                   n_threads=None):
    """The silhouette of a fitted Nyström estimator on its training data X, under the Nyström
    kernel: exact up to ``max_exact`` points (features of all rows, kernel rows in blocks),
    else on the stratified sample of ``metrics.stratified_sample`` (features of the sample)."""
    from ..engine.threads import effective_n_threads
    from ..measures.metrics import SilhouetteScore, silhouette, stratified_sample

    n_threads = effective_n_threads(n_threads)
    labels = estimator.labels_
    n = labels.shape[0]
    X = np.ascontiguousarray(X, dtype=np.float64)

    def phi(rows):
        return features(rows, estimator.landmarks_, estimator.nystroem_transform_,
                        estimator.kernel_, n_threads)

    if max_exact is not None and n > max_exact:
        s = stratified_sample(labels, sample_size, random_state)
        sub = phi(X[s])
        Ks = times_rows_t(sub, sub, np.empty((s.size, s.size)), n_threads)
        return SilhouetteScore(score=silhouette(Ks, labels[s], n_threads), n_used=int(s.size),
                               exact=s.size == n, indices=s)
    return silhouette_score(phi(X), labels, max_exact=None, n_threads=n_threads)


def report_rows(estimator):
    """Rows of the fit report (``report.fit_report``): the approximation, when there is one."""
    if getattr(estimator, "approx", "none") != "nystroem":
        return []
    stats = getattr(estimator, "nystroem_stats_", None)
    if stats:
        rows = [("approximation",
                 f"Nyström, {plural(estimator.n_landmarks_, 'landmark')}, rank {estimator.nystroem_rank_} "
                 f"({estimator.nystroem_dtype_} features); estimated error "
                 f"trace(K − K̃)/trace(K) = {stats['approximation_error']:.3g}; inertia in the "
                 f"Nyström feature space")]
        if "sample_size" in stats:
            rows.append(("restarts on a sample",
                         f"{len(stats['sample_objectives'])} starts run to convergence on "
                         f"{stats['sample_size']:,} points; the best "
                         f"{len(stats['completed'])} distinct completed on all data"))
        sec = stats["stage_seconds"]
        rows.append(("stages time", ", ".join(f"{name} {sec[name]:.2f} s" for name in
                                              ("landmarks", "features", "restarts")
                                              if name in sec)))
        return rows
    return [("approximation", f"Nyström, {plural(estimator.n_landmarks_, 'landmark')} (rank "
                              f"{estimator.nystroem_rank_}); inertia in the Nyström feature "
                              f"space; 'kernel matrix' time is the landmark features")]
