"""Nyström approximation: kernel k-means in an explicit m-dimensional feature space.

With m landmarks L (rows of X drawn uniformly without replacement, seeded) and the eigen-
decomposition K_mm = K(L, L) = U Λ Uᵀ, the transform is the symmetric pseudo-inverse square
root

    T = K_mm^{-½} = U_r Λ_r^{-½} U_rᵀ        (eigenvalues λ ≤ ``EIG_RTOL`` · λ_max dropped)

and the features of any point x are φ(x) = K(x, L) T (an m-vector), so that φ(x)·φ(y) is the
Nyström approximation of K(x, y) (exact when the landmarks are all the points). The n×m feature
matrix Φ = K_nm T is computed in row blocks, each one BLAS product.

Kernel k-means on the approximate kernel Φ Φᵀ is ordinary k-means on Φ: the kernel source
``engine.feature_source.FeatureSpaceSource`` is backed by Φ instead of K, and the
explicit-feature engine (``engine/features.py``, driven by :class:`FeatureEngine`) runs on
rank-restricted float32 features. The quality measures under Φ Φᵀ are in
``measures/features.py``.

A fitted model keeps L (``landmarks_``), T (``nystroem_transform_``) and the centres
μ_c = S[c]/W_c (``centers_``); predicting a point costs one kernel row K(x, L) and
d(x, c) = ‖φ(x)‖² − 2 φ(x)·μ_c + ‖μ_c‖², O(m·(d + m + k)).

Threads: every product runs on one BLAS thread per call, in fixed chunks of rows that
``n_threads`` Python threads share (``engine/feature_source.py``), so the results do not
depend on the thread count (checked in ``tests/test_large_data.py``).
"""
import time
from dataclasses import dataclass, replace

import numpy as np

from ..engine import _lloyd
from ..engine.feature_source import (EIG_RTOL, FeatureSpaceSource, rows_times, sq_norms,
                                     times_rows_t)
from ..engine.threads import blas_threads
from ..engine.lloyd import LloydResult
from ..engine.optima import start_kinds
from ..engine.records import NystroemState
from ..engine.restarts import Restarts, default_sample_size, sampled_restarts
from .. import memory
from ..memory import check, default_landmarks
from ..progress import progress_adapter
from ..memory import plan as plan_memory
from .functions import check_range


def _feature_engine():
    """``engine/features.py``, imported when a Nyström model needs it: its compiled chunk
    passes load SciPy's BLAS, which an exact model's predict never loads."""
    from ..engine import features

    return features


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
    step = max(1, memory.BLOCK_BYTES // (8 * max(m, 1)))
    for i0 in range(0, n, step):
        i1 = min(n, i0 + step)
        Kb = kernel.cross(X[i0:i1], landmarks, dtype=np.float64, n_threads=n_threads)
        rows_times(Kb, transform, Phi[i0:i1], n_threads)
        if progress is not None:
            progress(i1, n)
    return Phi


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


# -- stage 1 of a Nyström fit, and predict --------------------------------------------------
def feature_engine_applies(objective, refine):
    """Whether a Nyström fit of this objective and refinement (and not a sweep's shared
    features) runs on the explicit-feature engine."""
    return objective == "kmeans" and refine != "hartigan"


@dataclass(frozen=True)
class NystroemPlan:
    """The settings of stage 1 of a Nyström fit, resolved from the estimator's parameters.

    ``n_clusters``; ``n_landmarks`` (m, resolved: :func:`resolve_landmarks`); ``rank`` (s of
    the explicit-feature engine, resolved: ``features.default_rank`` or the parameter, at
    most m); ``random_state`` (seeds the landmark draw, :func:`landmark_rng`);
    ``memory_limit`` (the memory plan's); ``feature_engine`` (:func:`feature_engine_applies`
    for this objective and refinement).
    """

    n_clusters: int
    n_landmarks: int
    rank: int
    random_state: object
    memory_limit: object
    feature_engine: bool


class FeatureEngine:
    """Stage 1 of a Nyström fit on the explicit-feature engine: the feature map and the
    features Φ (n×s float32) of the training data; :meth:`run_restarts` is stage 2
    (``engine.run.run_restarts`` hands over to it: ``runs_restarts``)."""

    holds_matrix = False
    explicit_features = True
    computes_rows = False
    lazy = False
    runs_restarts = True
    not_euclidean = None

    def __init__(self, fmap, Phi, x_sq, diag, landmark_index, stage_seconds):
        F = _feature_engine()
        self.fmap, self.Phi, self.x_sq, self.diag = fmap, Phi, x_sq, diag
        self.n = Phi.shape[0]
        self.landmark_index = landmark_index
        self.stats = {"stage_seconds": dict(stage_seconds),
                      "approximation_error": F.approximation_error(diag, x_sq)}
        self.best = None

    def run_restarts(self, weights, init_labels, rng, spec, progress=None):
        """Candidate starts on a seeded sample, the best completed on all data
        (``engine/restarts.py``); or Lloyd from ``init_labels``. Returns the
        ``restarts.Restarts`` of the best result (a ``LloydResult``), the full-data
        objectives of the completed candidates and the stages for ``fit_stats_``."""
        F = _feature_engine()
        k, w = spec.n_clusters, np.asarray(weights, dtype=np.float64)
        n_threads = spec.n_threads
        progress = progress_adapter(progress, stages=True)
        t0 = time.perf_counter()
        if init_labels is not None:
            S = FeatureSpaceSource.cluster_sums(self, init_labels, w, k)
            W = np.bincount(init_labels, weights=w, minlength=k)
            best = F.lloyd(self.Phi, self.x_sq, w, F.centres_from_sums(S, W),
                           spec.max_iter, n_threads, labels=init_labels)
            self.stats.update(start_kinds=["labels"], best_start="labels")
            inertias = [best.inertia]
        else:
            kinds = start_kinds(spec.init, spec.n_init, spec.objective)
            used = list(kinds)
            sample_threads = 1  # a sample pass is too small for a parallel region

            def solve_sample(sample, restart, r):
                Y, ys, ws = self.Phi[sample], self.x_sq[sample], w[sample]
                mu, used[restart] = F.sample_start(Y, ws, k, kinds[restart], r)
                res = F.lloyd(Y, ys, ws, mu, spec.max_iter, sample_threads)
                return res.inertia, res.centres

            def complete(mu):
                return F.lloyd(self.Phi, self.x_sq, w, mu, spec.max_iter, n_threads)

            out = sampled_restarts(self.n, spec.n_init, rng, solve_sample, complete,
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
        W = best.W
        g = W ** 2 * np.einsum("ij,ij->i", best.centres, best.centres)
        result = LloydResult(labels=best.labels, distances=None, inner_sums=g,
                             cluster_weights=W, inertia=best.inertia, n_iter=best.n_iter,
                             converged=best.converged, n_relocated=best.n_relocated,
                             objective_trace=best.objective_trace)
        best_index = int(np.argmin(inertias))
        inertias = list(inertias)
        inertias[best_index] = best.inertia
        return Restarts(result, inertias, engine_stats(self.stats, best.inertia))


def engine_stats(stats, inertia):
    """The ``fit_stats_`` entries of the explicit-feature engine's restarts (``stats``: its
    start mix, sample and stage times) and its final objective: no refinement."""
    return {"start_kinds": list(stats.get("start_kinds", [])),
            "best_start": stats.get("best_start"),
            "refine": "none", "spectral_method": "features",
            "lloyd_objective": float(inertia), "refined_objective": float(inertia),
            "refine_moves": 0, "nystroem": dict(stats)}


def engine_source(X, kernel, plan, n_threads, progress=None):
    """Stage 1 on the explicit-feature engine: landmarks, the rank-restricted feature map and
    the float32 features of X (:class:`FeatureEngine`) after the memory plan allowed them.
    Returns the engine and the map's :class:`~kkmeans_cli.engine.records.NystroemState`
    (no centres yet)."""
    F = _feature_engine()
    n, k, m, rank = X.shape[0], plan.n_clusters, plan.n_landmarks, plan.rank
    planned = dict(k=k, approx="nystroem", n_landmarks=m, rank=rank, feature_engine=True,
                   n_threads=n_threads)
    check(plan_memory(n, **planned), plan.memory_limit, **planned)
    t0 = time.perf_counter()
    idx = choose_landmarks(n, m, landmark_rng(plan.random_state))
    fmap = F.feature_map(kernel, X[idx], rank)
    t1 = time.perf_counter()
    progress = progress_adapter(progress)
    Phi, x_sq = F.build_features(
        fmap, X, n_threads,
        None if progress is None else lambda done, total: progress(done, total,
                                                                   "Nyström features, rows"))
    t2 = time.perf_counter()
    engine = FeatureEngine(fmap, Phi, x_sq, kernel.diag(X), idx,
                           {"landmarks": t1 - t0, "features": t2 - t1})
    state = NystroemState(landmarks=fmap.landmarks, transform=fmap.projection,
                          n_landmarks=fmap.n_landmarks, rank=fmap.rank,
                          dtype=np.dtype(fmap.dtype).name)
    return engine, state


def fit_source(X, kernel, kernel_matrix, plan, n_threads, progress=None):
    """Stage 1 of a Nyström fit: the explicit-feature engine (:func:`engine_source`) when
    ``plan.feature_engine``, else the :class:`FeatureSpaceSource` of X's features (those of
    ``kernel_matrix`` when it is the :class:`NystroemFeatures` of X, a sweep's). Returns the
    source and the map's :class:`~kkmeans_cli.engine.records.NystroemState`."""
    n = X.shape[0]
    if kernel.name == "precomputed":
        raise ValueError("approx='nystroem' needs the data, not a precomputed kernel matrix")
    if plan.feature_engine and (kernel_matrix is None
                                or isinstance(kernel_matrix, NystroemFeatures)):
        if kernel_matrix is not None and kernel_matrix.Phi.shape[0] != n:
            raise ValueError(f"the Nyström features have {kernel_matrix.Phi.shape[0]} rows "
                             f"for {n} samples")
        return engine_source(X, kernel, plan, n_threads, progress)
    if isinstance(kernel_matrix, NystroemFeatures):
        if kernel_matrix.Phi.shape[0] != n:
            raise ValueError(f"the Nyström features have {kernel_matrix.Phi.shape[0]} rows for "
                             f"{n} samples")
        nf = kernel_matrix
    elif kernel_matrix is not None:
        raise ValueError("approx='nystroem' takes the NystroemFeatures of "
                         "kernel_matrix(X), not a kernel matrix")
    else:
        nf = shared_features(X, kernel, plan, n_threads, progress)
    state = NystroemState(landmarks=nf.landmarks, transform=nf.transform,
                          n_landmarks=int(nf.landmarks.shape[0]), rank=int(nf.rank))
    return FeatureSpaceSource(nf.Phi, n_threads=n_threads), state


def shared_features(X, kernel, plan, n_threads, progress=None):
    """The :class:`NystroemFeatures` of X for the plan's landmark count and seed, after the
    memory plan (``plan.memory_limit``) allowed them (``progress``: see ``progress.py``)."""
    n, k, m = X.shape[0], plan.n_clusters, plan.n_landmarks
    if kernel.name == "precomputed":
        raise ValueError("approx='nystroem' needs the data, not a precomputed kernel matrix")
    check(plan_memory(n, k, approx="nystroem", n_landmarks=m), plan.memory_limit, k=k,
          approx="nystroem", n_landmarks=m)
    progress = progress_adapter(progress)
    return fit_features(X, kernel, m, plan.random_state, n_threads,
                        None if progress is None else lambda done, total: progress(
                            done, total, "Nyström features, rows"))


def fitted_state(source, state, result, weights, n_clusters):
    """The map's ``state`` completed after the restarts: the centres μ_c of the best labels
    (and the explicit-feature engine's stages)."""
    if isinstance(source, FeatureEngine):
        return replace(state, centers=source.best.centres, stats=source.stats)
    return replace(state, centers=source.centers(result.labels, weights, n_clusters))


@dataclass(frozen=True)
class NystroemModel:
    """What predicting with a fitted Nyström model needs (picklable: the Dask route sends it
    to the workers): the resolved ``kernel``, ``landmarks``, ``transform``, ``centers``,
    ``cluster_weights``, ``inner_sums``, the engine's feature ``dtype`` name (None for
    float64 features), ``n_features``, and the training size and total weight (the range
    check of new rows: ``functions.check_range``)."""

    kernel: object
    landmarks: object
    transform: object
    centers: object
    cluster_weights: object
    inner_sums: object
    dtype: object
    n_features: int
    n_train: int
    total_weight: float


def nearest(model, X, want_distances, n_threads=1):
    """Labels (and squared distances) of new points to the centres of a Nyström model.

    d(x, c) = ‖φ(x)‖² − 2 φ(x)·μ_c + ‖μ_c‖² (clamped at 0) with φ(x) = K(x, L) T, in row
    blocks; ties go to the lowest cluster.
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features); got {X.ndim}-D")
    if X.shape[1] != model.n_features:
        raise ValueError(f"X has {X.shape[1]} feature{'s' * (X.shape[1] != 1)}, the model "
                         f"expects {model.n_features}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains NaN or infinity")
    check_range(model.kernel.name, X, max(model.n_train, model.total_weight),
                kernel=model.kernel, offset=model.kernel.offset)
    if model.dtype:
        return _engine_nearest(model, X, want_distances, n_threads)
    W = np.asarray(model.cluster_weights, dtype=np.float64)
    k = W.shape[0]
    g = np.asarray(model.inner_sums, dtype=np.float64)
    S = model.centers * W[:, None]  # Σ w φ, so F = S φᵀ as in fit
    labels = np.empty(X.shape[0], dtype=np.int32)
    row_dist = np.empty(X.shape[0])
    dist = np.empty((X.shape[0], k)) if want_distances else None
    m = model.landmarks.shape[0]
    step = max(1, memory.BLOCK_BYTES // (8 * max(m, k)))
    with blas_threads(1):
        for i0 in range(0, X.shape[0], step):
            i1 = min(X.shape[0], i0 + step)
            Phi = features(X[i0:i1], model.landmarks, model.transform, model.kernel,
                           n_threads)
            Fo = times_rows_t(S, Phi, np.empty((k, i1 - i0)), n_threads)
            diag = sq_norms(Phi)
            _lloyd.assign(Fo, g, W, diag, labels[i0:i1], row_dist[i0:i1], n_threads)
            if want_distances:
                _lloyd.distances(Fo, g, W, diag, dist[i0:i1], n_threads)
    return labels.astype(np.intp), dist


def _engine_nearest(model, X, want_distances, n_threads):
    """``nearest`` for a model of the explicit-feature engine: labels from its chunk
    functions (float32 features: the training data get exactly the fit's labels); the
    distances to every centre, when asked, from float64 features."""
    F = _feature_engine()
    fmap = F.FeatureMap(kernel=model.kernel, landmarks=model.landmarks,
                        projection=model.transform, eigenvalues=np.empty(0),
                        dtype=F.DTYPES[model.dtype])
    with blas_threads(1):
        labels, _ = F.predict(fmap, X, model.centers, n_threads)
        if not want_distances:
            return labels, None
        mu = np.asarray(model.centers, dtype=np.float64)
        dist = np.empty((X.shape[0], mu.shape[0]))
        for i0 in range(0, X.shape[0], F.CHUNK_ROWS):
            i1 = min(X.shape[0], i0 + F.CHUNK_ROWS)
            Phi = fmap.kernel.cross(X[i0:i1], fmap.landmarks) @ fmap.projection
            dist[i0:i1] = np.maximum(sq_norms(Phi)[:, None] - 2.0 * Phi @ mu.T
                                     + sq_norms(mu)[None, :], 0.0)
    return labels, dist
