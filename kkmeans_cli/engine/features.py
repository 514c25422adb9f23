"""k-means on explicit features at the hardware limit: rank-restricted Nyström features and
Lloyd's iterations on them, built chunk by chunk.

The features
------------
With m landmarks L and the eigendecomposition K(L, L) = U Λ Uᵀ (eigenvalues descending), the
rank-restricted Nyström features of Wang, Gittens & Mahoney ("Scalable kernel k-means
clustering with Nyström approximation: relative-error bounds", JMLR 2019) keep the top s
eigenpairs:

    φ(x) = K(x, L) P,        P = U_s Λ_s^{-½}        (m×s)

so φ(x)·φ(y) = K(x, L) U_s Λ_s⁻¹ U_sᵀ K(L, y), the best rank-s approximation of the Nyström
kernel in the landmarks' eigenbasis. They prove that linear k-means on these s ≈ k/ε features
is a (1 + ε)-approximation of kernel k-means (relative to the same algorithm on the exact
kernel); :func:`default_rank` takes s = ⌈k/ε⌉ with ε = ``EPSILON``, measured in
``benchmarks/bench_nystroem.py``. With s = m (and no eigenvalue dropped) the features are a
rotation of the full Nyström features K(x, L) K_LL^{-½}: the same kernel.

Features are stored in ``float32`` (half the memory and bandwidth of float64); every sum over
points is accumulated in double.

The chunk contract
------------------
All work on the n rows is done by two *chunk functions* on consecutive row ranges, and a
*reduction* of their outputs in a fixed order, so any driver that calls them on the same rows
gets the same numbers (this module's threads, or workers of a distributed scheduler):

1. ``feature_chunk(fmap, X_chunk) -> (Phi_chunk, x_sq_chunk)``: the features of the rows
   (r×s, ``fmap.dtype``) and their squared norms ‖φ_i‖² (double, from the stored features).
   Row i's features depend only on row i (and on the number of rows of the kernel block, which
   is fixed by ``CHUNK_ROWS`` when the chunk starts at a multiple of it).
2. ``step_chunk(Phi_chunk, x_sq_chunk, w_chunk, centres, labels_chunk, dist_chunk) ->
   StepParts``: one Lloyd assignment of the rows to ``centres`` (a :class:`Centres`, shared
   by every chunk of the pass). Writes the new labels (int32; the previous ones on entry) and
   the squared distances to the assigned centre, and returns the partial sums of the new
   assignment for each block of ``CHUNK_ROWS`` rows of the chunk, in row order:
   ``sums`` (t×k×s, Σ w φ per cluster), ``weights`` (t×k, Σ w per cluster), ``inertia`` (t,
   Σ w d) and ``moved`` (t, labels changed).
2b. ``bounded_step_chunk(Phi_chunk, x_sq_chunk, w_chunk, centres, shifts, labels_chunk,
   upper_chunk, lower_chunk) -> BoundedParts`` (optional, from the third pass on): the same
   step with Hamerly's bounds, kept per point with the chunk between passes; it returns the
   *changes* of the sums (reduced by ``reduce_bounded`` and added to the previous sums), and
   a pass where no label changes is confirmed with chunk function 2.
3. ``reduce_steps([StepParts, ...]) -> Step``: concatenates the parts of consecutive chunks in
   row order and sums them block by block in that order (:func:`_features.sum_in_order`).

A chunk must start at a multiple of ``CHUNK_ROWS`` (its last block may be short only if it is
the last chunk of the data); then the blocks, their sums and their order are those of the whole
array in one call, and the result is bitwise the same as :func:`assign` on the whole array,
for any number of threads or workers (``tests/test_features.py``).

From the reduced sums the next centres are μ_c = S_c / W_c (:func:`centres_from_sums`), and
the kernel k-means objective of the labels is Σ w ‖φ‖² − Σ_c ‖S_c‖² / W_c
(:func:`objective`).

The iterations
--------------
:func:`lloyd` alternates assignment and centre updates until no label changes (then the
labels are exactly the argmin under the stored centres, which are the means of the labels,
so ``predict`` of the training data returns them). The distances d(i, c) = ‖φ_i‖² − 2 φ_i·μ_c
+ ‖μ_c‖² take the products φ_i·μ_c from one BLAS GEMM per chunk (in the storage type) and the
rest in double. The starts (k-means++, random, spectral and normalized spectral on the
features) come from a sample (:func:`sample_starts`); ``restarts.py`` chooses which to
complete on all the data.
"""
import math
import warnings
from dataclasses import dataclass

import numpy as np

from .. import memory
from . import _features
from .lloyd import relocation_moves, warn_not_converged, warn_relocated
from .starts import kmeans_plusplus, random_centres
from .threads import blas_threads, thread_pool

#: Rows per block of every chunk computation (fixed: results independent of the thread count).
CHUNK_ROWS = memory.FEATURE_BLOCK_ROWS
#: Rows per part of the work shared by the threads when building features or predicting.
PART_ROWS = memory.FEATURE_PART_ROWS
#: ε of the default rank s = ⌈k/ε⌉ (Wang, Gittens & Mahoney: s ≈ k/ε features give a
#: (1 + ε)-approximation); measured in benchmarks/bench_nystroem.py.
EPSILON = memory.FEATURE_EPSILON
#: Eigenvalues of K(L, L) at most this fraction of the largest are dropped.
EIG_RTOL = 1e-10
DTYPES = {"float32": np.float32, "float64": np.float64}


def default_rank(n_clusters, n_landmarks, epsilon=EPSILON):
    """s = min(m, ⌈k/ε⌉): the rank of the features kept by default."""
    return int(min(n_landmarks, math.ceil(n_clusters / epsilon)))


# -- the feature map ---------------------------------------------------------------------------
@dataclass
class FeatureMap:
    """φ(x) = K(x, L) P with P = U_s Λ_s^{-½} (see the module docstring).

    Attributes: ``kernel`` (resolved), ``landmarks`` (m×d float64), ``projection`` (P, m×s
    float64), ``eigenvalues`` (the s kept, descending), ``spectrum_sum`` (Σ of all positive
    eigenvalues of K(L, L)), ``dtype`` (of the features).
    """

    kernel: object
    landmarks: np.ndarray
    projection: np.ndarray
    eigenvalues: np.ndarray
    spectrum_sum: float = 0.0
    dtype: type = np.float32

    @property
    def rank(self):
        return int(self.projection.shape[1])

    @property
    def n_landmarks(self):
        return int(self.landmarks.shape[0])


def feature_map(kernel, landmarks, rank=None, dtype=np.float32):
    """The :class:`FeatureMap` of ``landmarks`` (m×d) keeping the top ``rank`` eigenpairs of
    K(L, L) (all positive ones above ``EIG_RTOL``·λ_max when None). One BLAS thread: P does
    not depend on the thread count."""
    L = np.ascontiguousarray(landmarks, dtype=np.float64)
    with blas_threads(1):
        Kmm = kernel.matrix(L, dtype=np.float64, n_threads=1)
        lam, U = np.linalg.eigh(Kmm)
    lam, U = lam[::-1], U[:, ::-1]
    top = lam[0] if lam.size else 0.0
    keep = int(np.count_nonzero(lam > EIG_RTOL * top)) if top > 0 else 0
    if keep == 0:
        raise ValueError("the kernel matrix of the landmarks has no positive eigenvalue")
    s = keep if rank is None else max(1, min(int(rank), keep))
    P = np.ascontiguousarray(U[:, :s] / np.sqrt(lam[:s]))
    return FeatureMap(kernel=kernel, landmarks=L, projection=P,
                      eigenvalues=np.ascontiguousarray(lam[:s]),
                      spectrum_sum=float(lam[lam > 0].sum()), dtype=np.dtype(dtype).type)


def feature_chunk(fmap, X_chunk):
    """Chunk function 1: (Φ, ‖φ‖²) of the rows of ``X_chunk`` (r×d), on one thread.

    Φ = K(X, L) P computed in double, stored in ``fmap.dtype``; ‖φ_i‖² in double from the
    stored values.
    """
    X_chunk = np.ascontiguousarray(X_chunk, dtype=np.float64)
    r = X_chunk.shape[0]
    out = np.empty((r, fmap.rank), dtype=fmap.dtype)
    x_sq = np.empty(r)
    with blas_threads(1):
        _features_into(fmap, X_chunk, out, x_sq)
    return out, x_sq


def _features_into(fmap, X, out, x_sq):
    """Rows of X in blocks of ``CHUNK_ROWS``: out = K(X, L) P, x_sq = ‖out_i‖² (BLAS on one
    thread, set by the caller)."""
    for i0 in range(0, X.shape[0], CHUNK_ROWS):
        i1 = min(X.shape[0], i0 + CHUNK_ROWS)
        Kb = fmap.kernel.cross(X[i0:i1], fmap.landmarks, dtype=np.float64, n_threads=1)
        if out.dtype == np.float64:
            np.matmul(Kb, fmap.projection, out=out[i0:i1])
        else:
            out[i0:i1] = Kb @ fmap.projection
        _features.row_sq_norms(out[i0:i1], x_sq[i0:i1], 1)


def build_features(fmap, X, n_threads=1, progress=None):
    """Φ (n×s, ``fmap.dtype``) and ‖φ‖² of every row of X, in chunks of ``CHUNK_ROWS`` rows
    shared by ``n_threads`` threads (each chunk one kernel block and one BLAS product, BLAS
    on one thread). ``progress(rows_done, n)`` after each chunk, in order."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    n = X.shape[0]
    Phi = np.empty((n, fmap.rank), dtype=fmap.dtype)
    x_sq = np.empty(n)
    bounds = _bounds(n, PART_ROWS)

    def part(i0, i1):
        _features_into(fmap, X[i0:i1], Phi[i0:i1], x_sq[i0:i1])
        return i1

    with blas_threads(1):
        if n_threads <= 1 or len(bounds) == 1:
            done = (part(i0, i1) for i0, i1 in bounds)
        else:
            pool = thread_pool(n_threads)
            done = (f.result() for f in [pool.submit(part, i0, i1) for i0, i1 in bounds])
        for i1 in done:
            if progress is not None:
                progress(i1, n)
    return Phi, x_sq


def _bounds(n, step):
    return [(i0, min(n, i0 + step)) for i0 in range(0, n, step)]


def approximation_error(diag, x_sq):
    """trace(K − K̃) / trace(K) = Σ (K_ii − ‖φ_i‖²) / Σ K_ii over the given points."""
    total = float(np.sum(diag))
    return float(np.sum(diag) - np.sum(x_sq)) / total if total > 0 else 0.0


# -- one assignment step (chunk function 2 and the reduction) ---------------------------------
@dataclass
class Centres:
    """The centres of one pass: ``C`` (k×s in the features' dtype) and ‖C_c‖² in double."""

    C: np.ndarray
    c_sq: np.ndarray


def centres_from(means, dtype):
    """:class:`Centres` of float64 means μ (k×s), stored in ``dtype``."""
    C = np.ascontiguousarray(means, dtype=dtype)
    c_sq = np.empty(C.shape[0])
    _features.row_sq_norms(C, c_sq, 1)
    return Centres(C=C, c_sq=c_sq)


def centres_from_sums(S, W, previous=None):
    """μ_c = S_c / W_c (float64, k×s); a cluster of no weight keeps its ``previous`` centre
    (zero without one)."""
    mu = np.zeros_like(S) if previous is None else np.array(previous, dtype=np.float64)
    full = W > 0
    mu[full] = S[full] / W[full, None]
    return mu


@dataclass
class StepParts:
    """Partial sums of one assignment over consecutive blocks of ``CHUNK_ROWS`` rows."""

    sums: np.ndarray      # (t, k, s) double
    weights: np.ndarray   # (t, k) double
    inertia: np.ndarray   # (t,) double
    moved: np.ndarray     # (t,) intp


@dataclass
class Step:
    """The reduced sums of one assignment: S (k×s), W (k), Σ w d, labels changed."""

    S: np.ndarray
    W: np.ndarray
    inertia: float
    moved: int


def step_chunk(Phi, x_sq, w, centres, labels, dist, want_sums=True, n_threads=1):
    """Chunk function 2: assign the rows of a chunk to ``centres``; ``labels`` (int32, the
    previous labels on entry, −1 for none) and ``dist`` are written in place. Returns the
    :class:`StepParts` of the chunk's blocks (see the module docstring)."""
    n, s = Phi.shape
    k = centres.C.shape[0]
    t = max(1, -(-n // CHUNK_ROWS))
    parts = StepParts(sums=np.empty((t, k, s) if want_sums else (t, 1, 1)),
                      weights=np.empty((t, k) if want_sums else (t, 1)),
                      inertia=np.empty(t), moved=np.zeros(t, dtype=np.intp))
    if n == 0:
        parts.sums[:] = 0.0
        parts.weights[:] = 0.0
        parts.inertia[:] = 0.0
        return parts
    with blas_threads(1):
        _features.assign_chunks(Phi, x_sq, w, centres.C, centres.c_sq, labels, dist,
                                CHUNK_ROWS, parts.sums, parts.weights, parts.inertia,
                                parts.moved, want_sums, n_threads)
    return parts


def reduce_steps(parts):
    """The reduction: parts of consecutive chunks, in row order, summed block by block."""
    sums = np.concatenate([p.sums for p in parts])
    weights = np.concatenate([p.weights for p in parts])
    inertia = np.concatenate([p.inertia for p in parts])
    t, k, s = sums.shape
    S, W, tot = np.empty(k * s), np.empty(k), np.empty(1)
    _features.sum_in_order(sums.reshape(t, k * s), S)
    _features.sum_in_order(weights, W)
    _features.sum_in_order(inertia.reshape(t, 1), tot)
    moved = int(sum(int(p.moved.sum()) for p in parts))
    return Step(S=S.reshape(k, s), W=W, inertia=float(tot[0]), moved=moved)


def assign(Phi, x_sq, w, centres, labels, dist, n_threads=1):
    """One assignment step over all rows (chunk function 2 on the whole array, threads over
    its blocks), reduced: the :class:`Step` of the new labels."""
    return reduce_steps([step_chunk(Phi, x_sq, w, centres, labels, dist, True, n_threads)])


def objective(x_sq, w, S, W):
    """Σ w ‖φ‖² − Σ_c ‖S_c‖² / W_c: the k-means objective of labels with sums S, W."""
    full = W > 0
    return float(w @ x_sq - np.sum(np.einsum("ij,ij->i", S[full], S[full]) / W[full]))


def objective_at(x_sq, w, S, W, mu):
    """Σ_i w_i ‖φ_i − μ_{label_i}‖² for labels with sums S, W and centres μ (any)."""
    return float(w @ x_sq - 2.0 * np.sum(S * mu) + np.sum(W * np.einsum("ij,ij->i", mu, mu)))


# -- Lloyd -----------------------------------------------------------------------------------
@dataclass
class FeatureResult:
    """One Lloyd run on features. ``centres`` (k×s float64) are those the final ``labels``
    were assigned to (the means of the labels when converged); ``S``, ``W`` the sums of the
    labels; ``inertia`` = Σ w ‖φ − μ_label‖²."""

    labels: np.ndarray
    centres: np.ndarray
    S: np.ndarray
    W: np.ndarray
    inertia: float
    n_iter: int
    converged: bool
    n_relocated: int
    objective_trace: list


def _relocate(Phi, w, labels, dist, S, W):
    """Points farthest from their centres moved into clusters of no weight, by the rule of
    ``lloyd.relocation_moves``; S, W, labels and dist updated. Returns the moves."""
    moves = relocation_moves(labels, dist, w, np.flatnonzero(W <= 0), W.size)
    for i, c in moves:
        a = labels[i]
        row = w[i] * Phi[i].astype(np.float64)
        S[a] -= row
        W[a] -= w[i]
        S[c] += row
        W[c] += w[i]
        labels[i] = c
        dist[i] = 0.0
    warn_relocated(len(moves), stacklevel=4)
    return len(moves)


@dataclass
class BoundedParts:
    """Partial results of one bounded assignment over blocks of ``CHUNK_ROWS`` rows: the
    changes of the cluster sums (``dsums`` t×k×s, ``dweights`` t×k), labels changed and
    points given every distance (``n_full``)."""

    dsums: np.ndarray
    dweights: np.ndarray
    moved: np.ndarray
    n_full: np.ndarray


@dataclass
class Shifts:
    """What the bounds need to know of the centres of a pass: how far each moved since the
    previous pass (``shift``, its maximum ``max_shift``) and half the distance from each to
    its nearest other centre (``half_sep``)."""

    shift: np.ndarray
    max_shift: float
    half_sep: np.ndarray


def shifts(mu, previous):
    """:class:`Shifts` of centres ``mu`` after ``previous`` (both k×s float64)."""
    shift = np.sqrt(np.einsum("ij,ij->i", mu - previous, mu - previous))
    sq = np.einsum("ij,ij->i", mu, mu)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (mu @ mu.T), 0.0)
    np.fill_diagonal(d2, np.inf)
    half = 0.5 * np.sqrt(d2.min(axis=1)) if mu.shape[0] > 1 else np.full(1, np.inf)
    return Shifts(shift=shift, max_shift=float(shift.max()), half_sep=half)


def bounded_step_chunk(Phi, x_sq, w, centres, moves, labels, upper, lower, n_threads=1):
    """Chunk function 2b (optional): the assignment step of chunk function 2 with Hamerly's
    bounds ("Making k-means even faster", SDM 2010). Per point, state kept with the chunk
    between passes: ``upper`` (≥ distance to its centre) and ``lower`` (≤ distance to any
    other centre), both updated in place with ``labels``; ``moves`` is the :class:`Shifts`
    of ``centres``. Points the bounds settle keep their label without a distance; the others
    get all k from one BLAS product per block. Returns the :class:`BoundedParts`: the
    *changes* of the sums, so the driver adds their reduction to the previous sums."""
    n, s = Phi.shape
    k = centres.C.shape[0]
    t = max(1, -(-n // CHUNK_ROWS))
    if n == 0:
        return BoundedParts(dsums=np.zeros((t, k, s)), dweights=np.zeros((t, k)),
                            moved=np.zeros(t, dtype=np.intp), n_full=np.zeros(t, dtype=np.intp))
    # every block's slots are zeroed or written by the chunk function itself
    parts = BoundedParts(dsums=np.empty((t, k, s)), dweights=np.empty((t, k)),
                         moved=np.empty(t, dtype=np.intp), n_full=np.empty(t, dtype=np.intp))
    with blas_threads(1):
        _features.bounded_chunks(Phi, x_sq, w, centres.C, centres.c_sq, moves.half_sep,
                                 moves.shift, moves.max_shift, labels, upper, lower,
                                 CHUNK_ROWS, parts.dsums, parts.dweights, parts.moved,
                                 parts.n_full, n_threads)
    return parts


def reduce_bounded(parts):
    """The reduction of :class:`BoundedParts` in row order: (ΔS, ΔW, moved, n_full)."""
    dsums = np.concatenate([p.dsums for p in parts])
    dweights = np.concatenate([p.dweights for p in parts])
    t, k, s = dsums.shape
    dS, dW = np.empty(k * s), np.empty(k)
    _features.sum_in_order(dsums.reshape(t, k * s), dS)
    _features.sum_in_order(dweights, dW)
    return (dS.reshape(k, s), dW, int(sum(int(p.moved.sum()) for p in parts)),
            int(sum(int(p.n_full.sum()) for p in parts)))


def _maybe_empty(W, labels, w, k):
    """Whether a cluster has no weight. ``W`` is kept up to date from the moves, so it
    drifts from the exact weights by at most ~n·ε·ΣW; only a cluster within 10⁻⁶·ΣW of
    zero (far above that drift for n ≤ 10¹⁰) is recounted exactly from the labels."""
    if np.all(W > 1e-6 * max(float(W.sum()), np.finfo(float).tiny)):
        return False
    return bool(np.any(np.bincount(labels, weights=w, minlength=k) <= 0))


def lloyd(Phi, x_sq, w, means, max_iter=300, n_threads=1, labels=None, bounds=True):
    """Lloyd's iterations from the centres ``means`` (k×s float64) until no label changes.

    ``bounds``: from the third pass on, passes with Hamerly's bounds
    (:func:`bounded_step_chunk`), the sums updated with the changes of the points that
    moved; when no label changes, a full pass confirms (fresh sums, every distance), so the
    result is a fixed point of the plain iteration, as without bounds. Deterministic and
    independent of the thread count either way.

    Returns
    -------
    FeatureResult
    """
    n, k = Phi.shape[0], np.asarray(means).shape[0]
    labels = np.full(n, -1, dtype=np.int32) if labels is None else np.array(labels,
                                                                            dtype=np.int32)
    dist = np.empty(n)
    mu = np.array(means, dtype=np.float64)
    previous = upper = lower = None
    trace, n_iter, relocated, converged = [], 0, 0, False
    n_full = 0
    while True:
        centres = centres_from(mu, Phi.dtype)
        if upper is None:
            step = assign(Phi, x_sq, w, centres, labels, dist, n_threads)
            S, W = step.S, step.W
            n_full += n
            if step.moved == 0:
                converged = True
                break
            if np.any(W <= 0):
                relocated += _relocate(Phi, w, labels, dist, S, W)
            elif bounds and n_iter >= 1:  # not before the 3rd pass: a run that
                upper, lower = np.sqrt(dist), np.zeros(n)  # converges in 2 never pays
        else:
            parts = bounded_step_chunk(Phi, x_sq, w, centres, shifts(mu, previous), labels,
                                       upper, lower, n_threads)
            dS, dW, moved, full = reduce_bounded([parts])
            n_full += full
            S, W = S + dS, W + dW
            if moved == 0 or _maybe_empty(W, labels, w, k):
                upper = None  # confirm (or refill) with a full pass on the same centres
                continue
        trace.append(objective(x_sq, w, S, W))
        if n_iter == max_iter:
            break
        n_iter += 1
        previous, mu = mu, centres_from_sums(S, W, mu)
    inertia = objective_at(x_sq, w, S, W, mu)
    if not converged:
        warn_not_converged("Lloyd", False, max_iter)
    res = FeatureResult(labels=labels, centres=mu, S=S, W=W, inertia=inertia,
                        n_iter=n_iter + 1 if converged else n_iter, converged=converged,
                        n_relocated=relocated, objective_trace=trace)
    res.n_distances = n_full * k
    return res


def predict(fmap, X, means, n_threads=1):
    """Labels and squared distances of new points to the centres ``means`` (k×s float64):
    the features and the assignment of the chunk functions, so the training data get exactly
    the labels of the fit. Memory: one chunk of features per thread."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    n = X.shape[0]
    centres = centres_from(means, fmap.dtype)
    labels = np.full(n, -1, dtype=np.int32)
    dist = np.empty(n)
    w = np.ones(n)
    bounds = _bounds(n, PART_ROWS)

    def part(i0, i1):
        Phi, x_sq = feature_chunk(fmap, X[i0:i1])
        step_chunk(Phi, x_sq, w[i0:i1], centres, labels[i0:i1], dist[i0:i1],
                   want_sums=False, n_threads=1)

    if n_threads <= 1 or len(bounds) == 1:
        for i0, i1 in bounds:
            part(i0, i1)
    else:
        for f in [thread_pool(n_threads).submit(part, i0, i1) for i0, i1 in bounds]:
            f.result()
    return labels.astype(np.intp), dist


# -- starts on a sample of the features --------------------------------------------------------
class _SampleSource:
    """The linear kernel of a few explicit features as a kernel source for
    ``initialization.kmeans_plusplus`` / ``random_centres`` (rows of Y Yᵀ on demand)."""

    def __init__(self, Y):
        self.Y = np.ascontiguousarray(Y, dtype=np.float64)
        self.n = self.Y.shape[0]
        self.diag = np.einsum("ij,ij->i", self.Y, self.Y)

    def rows(self, idx):
        return self.Y[np.asarray(idx)] @ self.Y.T


def _means_of(Y, w, labels, k):
    W = np.bincount(labels, weights=w, minlength=k)
    S = np.zeros((k, Y.shape[1]))
    np.add.at(S, labels, w[:, None] * Y)
    return centres_from_sums(S, W)


def _spectral_embedding(Y, w, k, normalized):
    """Rows of the top-k eigenspace of the (normalized) linear kernel of Y (an s×s eigh):
    A = Ψ U_k with Ψᵀ W Ψ = U Λ Uᵀ, Ψ = Y (or Y / √degree, rows then scaled to unit length)."""
    Psi = np.asarray(Y, dtype=np.float64)
    if normalized:
        deg = Psi @ (Psi.T @ w)
        if np.any(deg <= 0):
            return None
        Psi = Psi / np.sqrt(deg)[:, None]
    C = (Psi * w[:, None]).T @ Psi
    lam, U = np.linalg.eigh(0.5 * (C + C.T))
    top = np.argsort(-lam, kind="stable")[:k]
    top = top[lam[top] > EIG_RTOL * max(lam.max(), 0.0)]
    A = Psi @ U[:, top]
    if normalized:
        norms = np.linalg.norm(A, axis=1)
        A = A / np.where(norms > 0, norms, 1.0)[:, None]
    return A


def sample_start(Y, w, k, kind, rng):
    """Starting centres (k×s float64) on the sample features Y for a start ``kind``:
    'k-means++', 'random', 'spectral' or 'normalized-spectral' (k-means++ and Lloyd on the
    spectral embedding, its clusters' means in feature space). Returns (means, kind used)."""
    if kind in ("spectral", "normalized-spectral"):
        A = _spectral_embedding(Y, w, k, kind == "normalized-spectral")
        if A is not None and A.shape[1] > 0:
            src = _SampleSource(A)
            labels, _ = kmeans_plusplus(src, w, k, rng)
            # Its warnings (100 iterations reached, a cluster refilled) are about this inner
            # problem, not the user's fit (as optima.embedding_kmeans): not shown.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = lloyd(np.ascontiguousarray(A), src.diag, w,
                            _means_of(src.Y, w, labels, k), max_iter=100)
            return _means_of(np.asarray(Y, dtype=np.float64), w, res.labels, k), kind
        kind = "k-means++"
    src = _SampleSource(Y)
    if kind == "random":
        _, idx = random_centres(src, w, k, rng)
    else:
        _, idx = kmeans_plusplus(src, w, k, rng)
    return src.Y[np.asarray(idx)].copy(), kind
