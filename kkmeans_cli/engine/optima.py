"""Better optima: spectral starts, Hartigan refinement and the normalized-cut objective.

Spectral start (the trace formulation of kernel k-means)
    Weighted kernel k-means minimises Σ_i w_i K_ii − tr(Zᵀ W^½ K W^½ Z) over normalised
    indicators Z, so its spectral relaxation is spanned by the leading eigenvectors of
    M = W^½ K W^½ = V Λ Vᵀ. The rows of A = W^{-½} V_k Λ_k^½ (AAᵀ ≈ K; for unit weights this is
    the factor VΛ^½) are clustered by a small seeded weighted k-means, and its labels start the
    kernel iterations. Up to ``SPECTRAL_EXACT_MAX`` points M is decomposed exactly (Lanczos,
    ``scipy.sparse.linalg.eigsh`` with a seeded start vector; a full ``eigh`` for tiny n). Above
    it, ``SPECTRAL_LANDMARKS`` seeded landmarks L are drawn and the Nyström features
    A = K_{nL} W_L^½ U Λ^{-½} of the leading eigenpairs of W_L^½ K_LL W_L^½ = UΛUᵀ are used
    (AAᵀ is the Nyström approximation of K on that subspace); only m rows of K are read.

Hartigan refinement
    After Lloyd has converged, single points are moved while a move lowers the exact objective
    (``_hartigan.pyx`` gives the O(k) test and the update of the outer sums). Only points near
    a boundary can move: the sweeps run on the points whose move pays at the current sums
    (their outer sums exact, from the kernel rows of the candidates that Elkan's bounds or
    Lloyd's exact distances leave), with the kernel block of those points; the moves widen the
    other points' bounds by the centre shifts, which gives the next candidates
    (:func:`blocked_hartigan`). So no kernel matrix is needed, and the kernel matrix and the
    blocked kernel make the same moves. Lloyd then runs again from the result, and the two
    alternate until Hartigan finds no move, so the final labels are a Lloyd fixed point
    (``predict(X_fit) == labels_``) and a Hartigan optimum. The objective never increases: if
    a round ends higher (possible only for kernels that are not PSD, where a Lloyd step may
    increase it) the best labels seen are kept.

Normalized cut (Dhillon, Guan & Kulis, KDD 2004)
    With user weights u (1 by default) the degree of point i is d_i = Σ_j u_j K_ij, its weight
    w_i = u_i d_i and the kernel K'_ij = K_ij / (d_i d_j). Then the weighted kernel k-means
    objective on (K', w) equals C − Σ_c links(c, c)/vol(c) with links(c, c) = Σ_{i,j∈c} u_i u_j
    K_ij = g_c, vol(c) = Σ_{i∈c} u_i d_i = W_c and the constant C = Σ_i u_i K_ii / d_i, so
    minimising it minimises the normalized cut

        ncut = Σ_c cut(c, V∖c)/vol(c) = k − Σ_c links(c, c)/vol(c)   (between 0 and k).

    Integer u equal repeated rows. For a PSD K, D⁻¹KD⁻¹ is PSD too (congruence), so no σD⁻¹
    shift is added (it would move the objective by the constant σ(n − k) only); a kernel that
    is not PSD should be repaired first. A new point x gets the degree d_x = Σ_j u_j K(x, x_j)
    over the training points, and the row K'(x, j) = K(x, x_j)/(d_x d_j); for a training point
    this is its training degree and row, so ``predict(X_fit) == labels_``. Degrees must be
    positive (rbf, laplacian, chi2 and other non-negative kernels).
"""
import warnings

import numpy as np

from .. import _options
from ..errors import OptionConflictError
from . import _hartigan, _lloyd
from .elkan import ERR_RTOL, elkan
from .feature_source import FeatureSpaceSource
from .iterate import iterate
from .lloyd import inner_sums
from .records import NcutState
from .starts import kmeans_plusplus, random_centres

SPECTRAL_EXACT_MAX = 3000     # exact Lanczos up to this many points, landmarks above
SPECTRAL_LANDMARKS = 1000     # landmarks of the large-n spectral start
SPECTRAL_EIGH_MAX = 400       # up to this a full eigh is quicker than Lanczos (and its import)
SPECTRAL_EIGH_FALLBACK = 1500  # full eigh when Lanczos fails, up to this many points
LANCZOS_MAXITER = 300
EMBEDDING_N_INIT = 10         # k-means runs in the embedding; the lowest inertia wins
MAX_SWEEPS = 50               # Hartigan sweeps per round
MAX_ROUNDS = 20               # Lloyd ↔ Hartigan rounds
MIN_GAIN_RTOL = 1e-10         # a move must gain more than this × Σ w_i K_ii
# Blocked Hartigan (no kernel matrix): sweeps over at most this many points near a boundary,
# with their kernel block K(S, S) (4096² float64: 134 MB)
HARTIGAN_BLOCK_POINTS = 4096
ROW_BLOCK = 512
OBJECTIVES = _options.OBJECTIVES
REFINES = tuple(r for r in _options.REFINES if r != "auto")  # the refinements


# -- spectral start --------------------------------------------------------------------------
def spectral_embedding(source, weights, n_clusters, rng):
    """Rows A (n×k, float64) with AAᵀ ≈ K in the weighted top-k eigenspace (module docstring).

    Parameters
    ----------
    source : kernel source (``diag``, ``rows(idx)``; ``K`` when held in memory)
    weights : ndarray, shape (n,)
    n_clusters : int
    rng : numpy Generator
        Seeds the Lanczos start vector and the landmarks.

    Returns
    -------
    A : ndarray of float64, shape (n, r), r ≤ k
    how : str
        'eigh', 'lanczos', 'landmarks(m)' or 'features' (an explicit feature space, e.g.
        Nyström, gives the embedding from its m×m eigenproblem: no n×n or landmark rows).
    """
    if source.explicit_features:
        return source.spectral_embedding(weights, n_clusters), "features"
    n = source.n
    k = min(n_clusters, n)
    s = np.sqrt(weights)
    if n <= SPECTRAL_EXACT_MAX:
        K = source.K if source.holds_matrix else source.rows(np.arange(n))
        lam, V = _top_eigenpairs(K, s, k, rng)
        how = "eigh" if n <= SPECTRAL_EIGH_MAX or k >= n - 1 else "lanczos"
        with np.errstate(divide="ignore"):
            inv_s = np.where(s > 0, 1.0 / s, 0.0)
        return inv_s[:, None] * V * np.sqrt(lam)[None, :], how
    positive = np.flatnonzero(weights > 0)
    m = min(SPECTRAL_LANDMARKS, positive.size)
    idx = np.sort(rng.choice(positive, size=m, replace=False))
    rows = source.rows(idx)                       # K_{L n}, m×n (K is symmetric)
    lam, U = _top_eigenpairs(rows[:, idx], s[idx], k, rng)
    keep = lam > lam.max() * 1e-10 if lam.size and lam.max() > 0 else np.zeros(lam.size, bool)
    proj = (s[idx][:, None] * U[:, keep]) / np.sqrt(lam[keep])[None, :]
    return rows.T @ proj, f"landmarks({m})"


def _top_eigenpairs(K, s, k, rng):
    """The k largest eigenpairs of diag(s) K diag(s) (eigenvalues clipped at 0), largest first.

    Lanczos may not converge on a nearly flat spectrum (a very narrow kernel, K ≈ I); then a
    full ``eigh`` is used up to ``SPECTRAL_EIGH_FALLBACK`` points, else ``SpectralFailed`` is
    raised (the caller starts with k-means++ instead: such a spectrum carries no clusters).
    """
    n = K.shape[0]
    if n <= SPECTRAL_EIGH_MAX or k >= n - 1:
        return _eigh_top(K, s, k)
    from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

    def matvec(v):
        v = np.asarray(v, dtype=np.float64).reshape(-1)
        return s * (K @ (s * v))

    op = LinearOperator((n, n), matvec=matvec, dtype=np.float64)
    v0 = rng.uniform(0.5, 1.5, size=n)
    try:
        lam, V = eigsh(op, k=k, which="LA", v0=v0, tol=1e-8, maxiter=LANCZOS_MAXITER)
    except ArpackNoConvergence:
        if n > SPECTRAL_EIGH_FALLBACK:
            raise SpectralFailed("Lanczos did not converge") from None
        return _eigh_top(K, s, k)
    order = np.argsort(-lam, kind="stable")
    return np.maximum(lam[order], 0.0), V[:, order]


class SpectralFailed(Exception):
    """No spectral embedding could be computed (the start falls back to k-means++)."""


def _eigh_top(K, s, k):
    """Top-k eigenpairs of diag(s) K diag(s) by a full ``eigh``."""
    M = s[:, None] * np.asarray(K, dtype=np.float64) * s[None, :]
    lam, V = np.linalg.eigh(M)
    return np.maximum(lam[::-1][:k], 0.0), V[:, ::-1][:, :k]


def embedding_kmeans(A, weights, n_clusters, rng, n_init=EMBEDDING_N_INIT, max_iter=100,
                     n_threads=1):
    """Weighted k-means on the rows of A, best of ``n_init`` k-means++ starts by inertia: the
    engine itself on the explicit features A (``feature_source.FeatureSpaceSource``, Elkan's
    iterations), so a million-row embedding costs seconds, not minutes. Its warnings (a
    cluster refilled, max_iter reached) are about this inner problem, not the user's fit,
    and are not shown.

    Returns
    -------
    ndarray of int32, shape (n,)
    """
    source = FeatureSpaceSource(A, n_threads=n_threads)
    best = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(n_init):
            start = kmeans_plusplus(source, weights, n_clusters, rng)[0]
            result = elkan(source, weights, start, n_clusters, max_iter=max_iter, tol=0,
                           n_threads=n_threads)
            if best is None or result.inertia < best.inertia:
                best = result
    return best.labels.astype(np.int32)


def normalized_embedding(source, weights, n_clusters, rng):
    """The spectral embedding of the degree-normalised kernel D⁻¹KD⁻¹ with weights w·d
    (d = K w, the normalized-cut relaxation, Ng-Jordan-Weiss style), or None when
    n > ``SPECTRAL_EXACT_MAX``, a degree is not positive, or the source is an explicit
    feature space (Nyström, which has its own ``spectral_embedding``).

    K is the matrix in memory, or for a kernel recomputed in blocks (``storage='blocked'``,
    the lazy route) its rows, the values the matrix would hold: every storage route gets
    the same start (n ≤ ``SPECTRAL_EXACT_MAX``, so at most 72 MB, as for
    :func:`spectral_embedding`).

    Returns (A, cluster weights w·d) or None.
    """
    n = source.n
    if n > SPECTRAL_EXACT_MAX or source.explicit_features:
        return None
    K = source.K if source.holds_matrix else source.rows(np.arange(n))
    d = degrees(K, weights)
    if not np.all((d > 0) & np.isfinite(d)):
        return None
    wd = weights * d
    lam, V = _top_eigenpairs(K, np.sqrt(weights / d), min(n_clusters, n), rng)
    with np.errstate(divide="ignore"):
        inv = np.where(wd > 0, 1.0 / np.sqrt(wd), 0.0)
    return inv[:, None] * V * np.sqrt(lam)[None, :], wd


class SpectralStarts:
    """Spectral starting labels; each eigendecomposition is made once per fit and reused by
    every spectral restart (each one reruns the embedding k-means with new draws).

    'spectral': the embedding of K itself (:func:`spectral_embedding`); 'normalized-spectral':
    that of D⁻¹KD⁻¹ (:func:`normalized_embedding`), which lands in the basin of manifold-shaped
    optima (moons) where the plain embedding's eigenvalues are nearly flat.
    """

    def __init__(self, n_threads=1):
        self.n_threads = n_threads
        self.embedding = None
        self.normalized = None
        self.how = None

    def labels(self, source, weights, n_clusters, rng, kind="spectral"):
        """Labels (int32), or None when a normalized start is not possible. BLAS stays on
        one thread (as set by ``fit``), so the result does not depend on ``n_threads``."""
        try:
            if kind == "normalized-spectral":
                if self.normalized is None:
                    self.normalized = normalized_embedding(source, weights, n_clusters,
                                                           rng) or ()
                if not self.normalized:
                    return None
                A, wd = self.normalized
                return embedding_kmeans(A, wd, n_clusters, rng, n_threads=self.n_threads)
            if self.embedding is None:
                self.embedding, self.how = spectral_embedding(source, weights, n_clusters,
                                                              rng)
        except SpectralFailed:
            if kind == "normalized-spectral":
                self.normalized = ()
                return None
            self.embedding, self.how = np.empty((0, 0)), "failed"
        if self.embedding.shape[1] == 0 or not np.all(np.isfinite(self.embedding)):
            return None
        return embedding_kmeans(self.embedding, weights, n_clusters, rng,
                                n_threads=self.n_threads)


def start_kinds(init, n_init, objective="kmeans"):
    """The start method of each restart.

    'k-means++' (the default): with several restarts (or the objective 'ncut') restart 0 is
    a spectral start, and for the objective 'kmeans' with three or more restarts restart 1 is
    a normalized spectral start; the others are k-means++. 'spectral': restart 0 spectral,
    restart 1 normalized spectral (objective 'kmeans'), the rest spectral again (new draws of
    the embedding k-means). 'random': every restart random. (For 'ncut' the kernel is already
    degree-normalised, so its spectral start is the normalized one.)
    """
    second = "normalized-spectral" if objective == "kmeans" else None
    if init == "spectral":
        kinds = ["spectral"] * n_init
        if second and n_init >= 2:
            kinds[1] = second
        return kinds
    if init == "k-means++" and (n_init >= 2 or objective == "ncut"):
        kinds = ["spectral"] + ["k-means++"] * (n_init - 1)
        if second and n_init >= 3:
            kinds[1] = second
        return kinds
    return [init] * n_init


# -- Hartigan refinement ---------------------------------------------------------------------
def hartigan(source, weights, labels, n_clusters, n_threads=1, outer_sums=None):
    """Hartigan sweeps from ``labels`` (fresh sums from one full pass, or ``outer_sums``:
    F of exactly these labels from a full pass on this source, e.g. Lloyd's final one).

    Returns
    -------
    labels : ndarray of int32
    n_moves : int
    gain : float
        Decrease of the objective.
    """
    n = source.n
    labels = np.array(labels, dtype=np.int32)
    if outer_sums is not None:
        F = np.array(outer_sums, dtype=np.float64, order="C")  # a copy: the sweeps change it
    else:
        F = np.empty((n_clusters, n), dtype=np.float64)
        source.full_outer_sums(labels, weights, F)
    g, W = inner_sums(F, labels, weights, n_clusters)
    members = np.bincount(labels[weights > 0], minlength=n_clusters).astype(np.intp)
    min_gain = MIN_GAIN_RTOL * max(float(np.abs(weights @ source.diag)), 1e-300)
    n_moves, _, gain = _hartigan.hartigan_sweeps(source.K, source.diag, weights, labels, F,
                                                 g, W, members, min_gain, MAX_SWEEPS)
    return labels, int(n_moves), float(gain)


def _move_costs(F, diag, weights, labels, g, W, points):
    """Hartigan's change of the objective for the best move of each of ``points`` (p,) and
    that move's cluster, from their exact outer sums ``F`` (k×p): Δ = w·W_b/(W_b + w)·d(i, b)
    − w·W_a/(W_a − w)·d(i, a) as in ``_hartigan.pyx`` (+inf where i may not move: zero
    weight, the last member of its cluster)."""
    k = W.size
    p = np.arange(points.size)
    a = labels[points]
    w, Wa = weights[points, None], W[a][:, None]
    Ws = np.where(W > 0, W, 1.0)
    d = diag[points, None] - 2.0 * F.T / Ws + g / Ws ** 2                       # (p, k)
    own = d[p, a][:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        remove = np.where(Wa - w > 0, w * Wa / (Wa - w) * own, np.nan)
    cost = np.where(W > 0, w * W / (W + w) * d, 0.0) - remove
    cost[p, a] = np.inf
    members = np.bincount(labels[weights > 0], minlength=k)
    stuck = (weights[points] <= 0) | (members[a] < 2) | ~np.isfinite(remove[:, 0])
    cost[stuck] = np.inf
    best = np.argmin(cost, axis=1)
    return cost[p, best], best


def _candidate_sums(source, weights, labels, g, W, bounds, n_clusters):
    """The points whose move the bounds do not rule out (:func:`_bound_candidates`) and
    their outer sums F (k×p) for the pairs that matter: the own cluster and the clusters the
    bounds leave open (Σ n_c kernel values each, ``source.pair_sums``); −inf elsewhere, so
    that those moves cost +inf."""
    points, open_ = _bound_candidates(weights, labels, g, W, bounds, n_clusters,
                                      pairs=True)
    if points.size == 0:
        return points, None
    open_[np.arange(points.size), labels[points]] = True
    rows, clusters = np.nonzero(open_)
    full = np.zeros((n_clusters, labels.size))
    source.pair_sums(points[rows], clusters, labels, weights, full)
    F = np.full((n_clusters, points.size), -np.inf)
    F[clusters, rows] = full[clusters, points[rows]]
    return points, F


def _bound_candidates(weights, labels, g, W, bounds, n_clusters, pairs=False):
    """Points whose Hartigan move the bounds (upper ≥ √d(i, a), lower ≤ √d(i, b), with
    rounding allowances) do not rule out, for the clusters ``labels``, ``g``, ``W``; with
    ``pairs`` also which clusters are open to each of them (p×k)."""
    upper, lower = bounds
    n = labels.size
    members = np.bincount(labels[weights > 0], minlength=n_clusters)
    Wa = W[labels]
    movable = (weights > 0) & (members[labels] >= 2) & (Wa - weights > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        remove = np.where(movable, Wa / (Wa - weights) * upper ** 2, -np.inf)
        add = W[None, :] / (W[None, :] + weights[:, None]) * lower ** 2
    add[:, W <= 0] = -np.inf
    add[np.arange(n), labels] = np.inf
    points = np.flatnonzero(add.min(axis=1) < remove)
    if not pairs:
        return points
    return points, add[points] < remove[points, None]


def _centre_shifts(F0, points, labels0, labels, weights, g0, W0, g, W, err2):
    """‖μ_c − μ_c⁰‖ (upper bounds, with the rounding allowance) between the clusters
    ``labels0`` (sums g0, W0) and ``labels``, which differ only at ``points``; F0 (k×p) are
    the outer sums of those points for ``labels0``: Σ_{i∈c, j∈c⁰} w_i w_j K_ij =
    g0_c + Σ_{i moved into c} w_i F0[c, i] − Σ_{i moved out of c} w_i F0[c, i]."""
    k = W.size
    moved = np.flatnonzero(labels0[points] != labels[points])
    cross = g0.copy()
    if moved.size:
        i, w = points[moved], weights[points[moved]]
        np.add.at(cross, labels[i], w * F0[labels[i], moved])
        np.subtract.at(cross, labels0[i], w * F0[labels0[i], moved])
    ok = (W > 0) & (W0 > 0)
    Wn, Wo = np.where(ok, W, 1.0), np.where(ok, W0, 1.0)
    sq = g / Wn ** 2 - 2.0 * cross / (Wn * Wo) + g0 / Wo ** 2
    shift = np.where(ok, np.sqrt(np.maximum(sq, 0.0) + err2), np.inf)
    shift[(W <= 0) & (W0 <= 0)] = 0.0
    return shift[:k]


def blocked_hartigan(source, weights, result, n_clusters, max_points=HARTIGAN_BLOCK_POINTS):
    """Hartigan sweeps from a converged ``result`` without the kernel matrix, until no point
    can move (the same end as :func:`hartigan` on K: a Hartigan optimum).

    Only points near a boundary can move: those that Elkan's bounds do not settle (every
    point after Lloyd, whose final outer sums are exact). Their outer sums are computed
    exactly (``source.outer_sums_of``: |P|·n kernel values in blocks), their best moves
    tested as Hartigan's sweep does, and the sweeps run, in index order, on the
    ``max_points`` of them with the lowest move cost, with the kernel block K(S, S) of those
    points: a move of i updates F[:, S] by w·K(i, S) only. The moves shift the centres; the
    bounds of the other points are widened by those shifts (as Elkan does), which gives the
    next candidates, until the candidates' exact costs show no move. When none can move, no
    point can (the others are ruled out by the bounds or have higher costs).

    Returns
    -------
    labels : ndarray of int32
    n_moves : int
    gain : float
    """
    n = result.labels.size
    labels = np.array(result.labels, dtype=np.int32)
    g = np.array(result.inner_sums, dtype=np.float64)
    W = np.array(result.cluster_weights, dtype=np.float64)
    diag = source.diag
    min_gain = MIN_GAIN_RTOL * max(float(np.abs(weights @ diag)), 1e-300)
    err2 = ERR_RTOL[np.dtype(getattr(source, "dtype", np.float64))] \
        * max(float(np.max(np.abs(diag))), np.finfo(np.float64).tiny)
    outer = getattr(result, "outer_sums", None)
    if result.bounds is not None and result.converged:
        upper, lower = (np.array(b, dtype=np.float64) for b in result.bounds)
        points, F = _candidate_sums(source, weights, labels, g, W, (upper, lower),
                                    n_clusters)
    else:       # exact distances of every point bound them tightly
        points = np.arange(n)
        F = np.asarray(outer, dtype=np.float64) if outer is not None else \
            source.outer_sums_of(points, labels, weights, n_clusters)
        Ws = np.where(W > 0, W, 1.0)
        D = np.sqrt(np.maximum(diag[None, :] - 2.0 * F / Ws[:, None]
                               + (g / Ws ** 2)[:, None], 0.0)).T
        upper, lower = np.sqrt(D[np.arange(n), labels] ** 2 + err2), np.sqrt(
            np.maximum(D ** 2 - err2, 0.0))
        lower[:, W <= 0] = 0.0
        points = _bound_candidates(weights, labels, g, W, (upper, lower), n_clusters)
        F = F[:, points]
    total_moves, total_gain = 0, 0.0
    for _ in range(MAX_SWEEPS):
        if points.size == 0:
            break
        cost, _ = _move_costs(F, diag, weights, labels, g, W, points)
        if not np.any(cost < -min_gain):
            break
        keep = np.flatnonzero(cost < -min_gain)
        if keep.size > max_points:
            keep = np.sort(np.argsort(cost[keep], kind="stable")[:max_points])
        S = points[keep]
        F0 = np.ascontiguousarray(F[:, keep])
        labels0, g0, W0 = labels.copy(), g.copy(), W.copy()
        F_S, labels_S = F0.copy(), np.ascontiguousarray(labels[S])
        members = np.bincount(labels[weights > 0], minlength=n_clusters).astype(np.intp)
        moves, _, gain = _hartigan.hartigan_sweeps(
            source.submatrix(S), np.ascontiguousarray(diag[S]),
            np.ascontiguousarray(weights[S]), labels_S, F_S, g, W, members, min_gain,
            MAX_SWEEPS)
        labels[S] = labels_S
        total_moves += int(moves)
        total_gain += float(gain)
        if moves == 0:
            break
        # Widen every bound by the centre shifts; the moved points are exact again.
        shift = _centre_shifts(F0, S, labels0, labels, weights, g0, W0, g, W, err2)
        upper += shift[labels0]
        lower = np.maximum(lower - shift[None, :], 0.0)
        Ws = np.where(W > 0, W, 1.0)
        D = np.sqrt(np.maximum(diag[S, None] - 2.0 * F_S.T / Ws + g / Ws ** 2, 0.0))
        upper[S] = np.sqrt(D[np.arange(S.size), labels_S] ** 2 + err2)
        known = np.isfinite(F_S.T)          # the pairs computed; the others keep their bound
        lower[S] = np.where(known, np.sqrt(np.maximum(D ** 2 - err2, 0.0)), lower[S])
        points, F = _candidate_sums(source, weights, labels, g, W, (upper, lower),
                                    n_clusters)
    return labels, total_moves, total_gain


def refine(source, weights, result, n_clusters, iterate, n_threads=1):
    """Alternate Hartigan moves and Lloyd (``iterate(start) → result``) from a converged
    result until Hartigan finds no move. Never returns a higher objective than it was given.

    Returns
    -------
    result : the final iteration result (a Lloyd fixed point)
    stats : dict
        ``refine_moves``, ``refine_rounds`` and ``refine_gain`` (objective decrease). The
        result's ``n_iter`` counts the Lloyd iterations of every round.
    """
    stats = {"refine_moves": 0, "refine_rounds": 0, "refine_gain": 0.0}
    if n_clusters < 2 or source.explicit_features:
        return result, stats          # nothing to move for k = 1; explicit features: none
    best = result
    start_inertia = result.inertia
    total_iter = result.n_iter
    for _ in range(MAX_ROUNDS):
        held = source.current
        labels, moves, _gain = blocked_hartigan(held, weights, result, n_clusters)
        stats["refine_rounds"] += 1
        if moves == 0:
            break
        stats["refine_moves"] += moves
        result = iterate(labels)
        total_iter += result.n_iter
        if result.inertia < best.inertia:
            best = result
        else:
            break
    stats["refine_gain"] = float(start_inertia - best.inertia)
    best.n_iter = total_iter
    return best, stats


# -- normalized cut --------------------------------------------------------------------------
def degrees(K_rows, point_weights, n_threads=1):
    """d_r = Σ_j u_j K_rows[r, j] for a block of kernel rows (float64), summed in a fixed order
    (the engine's outer-sum pass), so a row gives the same degree in fit and in predict."""
    K_rows = np.ascontiguousarray(K_rows)
    out = np.empty((1, K_rows.shape[0]), dtype=np.float64)
    zeros = np.zeros(K_rows.shape[1], dtype=np.int32)
    _lloyd.outer_sums_rows(K_rows, 0, zeros, np.ascontiguousarray(point_weights, np.float64),
                           out, n_threads)
    return out[0]


def check_degrees(d, what="training point"):
    """Degrees must be positive and finite for the normalized cut."""
    bad = np.flatnonzero(~(d > 0) | ~np.isfinite(d))
    if bad.size:
        # Training degrees follow from the kernel chosen: a different option is the remedy.
        error = OptionConflictError if what == "training point" else ValueError
        raise error(f"objective='ncut' needs positive degrees Σ_j u_j K_ij, but {what} "
                         f"{bad[0]} has degree {d[bad[0]]:.6g}; use a non-negative kernel "
                         f"(rbf, laplacian, chi2) or objective='kmeans'")


def scale_rows(K_rows, inv_row, inv_col):
    """K_rows[r, j] · inv_row[r] · inv_col[j] in float64, cast back to K_rows' dtype, in row
    blocks (the same elementwise arithmetic in fit and in predict). Returns a new array."""
    out = np.empty_like(K_rows)
    for r0 in range(0, K_rows.shape[0], ROW_BLOCK):
        r1 = min(r0 + ROW_BLOCK, K_rows.shape[0])
        block = np.asarray(K_rows[r0:r1], dtype=np.float64) * inv_row[r0:r1, None]
        block *= inv_col[None, :]
        out[r0:r1] = block
    return out


def ncut_value(inner_sums_, cluster_weights):
    """k − Σ_c links(c, c)/vol(c) over the non-empty clusters, from the sums on (K', w)."""
    nonempty = cluster_weights > 0
    return float(np.count_nonzero(nonempty)
                 - np.sum(inner_sums_[nonempty] / cluster_weights[nonempty]))


def ncut_fit_kernel(K, diag, weights, n_threads=1):
    """(K, diag, u) → (K', diag', w) of the normalized cut (module docstring), and the
    :class:`~kkmeans_cli.engine.records.NcutState` (degrees d and weights u) that
    :func:`ncut_rows` needs for new points. K' is a new array (K may be shared)."""
    d = degrees(K, weights, n_threads)
    check_degrees(d)
    inv = 1.0 / d
    state = NcutState(degrees=d, degree_weights=np.array(weights, dtype=np.float64))
    return scale_rows(K, inv, inv), diag * inv * inv, np.ascontiguousarray(weights * d), state


def ncut_rows(state, Kb, diag):
    """Kernel rows K(new, train) and K(new, new) → the normalized-cut kernel's, with the degree
    of a new point d_x = Σ_j u_j K(x, x_j) over the training points (``state``: the fit's
    :class:`~kkmeans_cli.engine.records.NcutState`)."""
    dx = degrees(Kb, state.degree_weights)
    check_degrees(dx, "new point")
    inv = 1.0 / dx
    Kb = scale_rows(np.ascontiguousarray(Kb), inv, 1.0 / state.degrees)
    return Kb, (None if diag is None else np.asarray(diag, dtype=np.float64) * inv * inv)


class OptimaState:
    """Per-fit bookkeeping of the start mix and the refinement (for ``fit_stats_``), and the
    starts and refinement themselves, from the :class:`~kkmeans_cli.engine.records.FitSpec`
    of the fit (``spec.init`` is 'labels' when starting labels are given)."""

    def __init__(self, spec, n_init):
        given_labels = spec.init == "labels"
        self.spec = spec
        self.kinds = ["labels"] if given_labels else start_kinds(spec.init, n_init,
                                                                spec.objective)
        self.do_refine = spec.refine == "hartigan" or (spec.refine == "auto"
                                                       and not given_labels)
        self.spectral = SpectralStarts(spec.n_threads)
        self.records = []

    def spectral_start(self, source, weights, n_clusters, rng, restart):
        """Labels of a spectral restart; None for other kinds. A spectral start that is not
        possible (no kernel rows, or no positive degrees for the normalized one) becomes
        k-means++, recorded in ``kinds``."""
        kind = self.kinds[restart]
        if kind not in ("spectral", "normalized-spectral"):
            return None
        labels = None
        if hasattr(source, "rows") and n_clusters <= source.n:
            labels = self.spectral.labels(source, weights, n_clusters, rng, kind)
        if labels is None:
            self.kinds[restart] = "k-means++"
        return labels

    def start(self, source, weights, rng, restart=0):
        """Starting labels of restart number ``restart``: its kind of ``kinds`` (a spectral
        start, else random centres or k-means++, ``starts.py``)."""
        k = self.spec.n_clusters
        labels = self.spectral_start(source, weights, k, rng, restart)
        if labels is not None:
            return labels
        if self.kinds[restart] == "random":
            labels, _ = random_centres(source, weights, k, rng)
        else:
            labels, _ = kmeans_plusplus(source, weights, k, rng)
        return labels

    def refine(self, source, weights, result, start):
        """Hartigan's refinement of a converged ``result`` when the fit refines (recorded
        for ``fit_stats_`` either way)."""
        trace = getattr(result, "objective_trace", None)
        record = {"start_objective": float(trace[0]) if trace else None,
                  "lloyd_objective": float(result.inertia), "refine_moves": 0}
        if self.do_refine:
            spec = self.spec
            result, stats = refine(
                source, weights, result, spec.n_clusters,
                lambda labels: iterate(source, weights, labels, spec), spec.n_threads)
            record["refine_moves"] = stats["refine_moves"]
        record["refined_objective"] = float(result.inertia)
        self.records.append(record)
        return result

    def finish(self, inertias):
        """The ``fit_stats_`` entries of the start mix and the refinement of the winner."""
        b = int(np.argmin(inertias))
        stats = {"start_kinds": list(self.kinds[:len(inertias)]),
                 "best_start": self.kinds[b] if b < len(self.kinds) else None,
                 "refine": "hartigan" if self.do_refine else "none",
                 "spectral_method": self.spectral.how}
        if b < len(self.records):
            stats.update(self.records[b])
            stats["restart_refine_moves"] = [r["refine_moves"] for r in self.records]
        return stats
