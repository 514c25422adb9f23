"""Kernel matrices that are not positive semidefinite, and dissimilarity matrices.

After R. Kłopotek, M. Kłopotek and S. Wierzchoń, "A feasible k-means kernel trick under
non-Euclidean feature space".

Kernel k-means only uses the squared feature-space distances d²_ij = K_ii + K_jj − 2K_ij. They
are Euclidean exactly when the *double-centred* kernel J K J (J = I − 11ᵀ/n) is positive
semidefinite, so that is the matrix checked here; for a PSD K it is PSD too (interlacing), and
for a Gower kernel K = J K J already.

- ``check_square``: a precomputed kernel or dissimilarity matrix is square, finite, symmetric
  (within ``SYMMETRY_RTOL``), and for distances non-negative with a zero diagonal.
- ``gower_kernel``: K = −½ J D∘² J. For a new point x with distance row d(x, ·),
  K(x, j) = −½ (d²_xj − r_x − c_j + m) and K(x, x) = r_x − m/2, where r_x = mean_l d²_xl,
  c_j = mean_l d²_lj and m = mean_lj d²_lj. Since D has a zero diagonal, m = 2·mean_j K_jj and
  c_j = K_jj + m/2: the training diagonal is all predict needs.
- ``smallest_eigenvalue``: λ_min (and the largest |λ|) of J K J, by a full ``eigvalsh`` for
  n ≤ ``EXACT_EIG_MAX_N`` and by Lanczos (``scipy.sparse.linalg.eigsh``) above.
- Lingoes: K' = K + σ(I − 11ᵀ/n), σ = −λ_min (plus a margin), the same as adding 2σ to every
  squared distance between distinct points. For unit weights the objective of *every* labelling
  grows by σ(n − k), so the optimal clustering is kept (the paper's
  Theorems 4, 6, 7). With weights the shift is σ(W − Σ_c Σ_{i∈c} w_i² / W_c), which depends on
  the labels.
  A new point x gets K'(x, j) = K(x, j) + σ(δ_xj − 1/n) and K'(x, x) = K(x, x) + σ(1 − 1/n),
  where δ_xj = 1 when x coincides with training point j (zero feature-space distance; the first
  such j) — so the training rows predict their own labels, and a distinct point is at squared
  distance d²(x, j) + 2σ from every training point j, as Lingoes prescribes.
- clip: J K J = V Λ Vᵀ, negative eigenvalues set to zero, K' = V₊ Λ₊ V₊ᵀ (full eigh, so
  n ≤ ``CLIP_MAX_N``). This changes the clustering. A new row k(x, ·) is centred with the
  training means, k̃ = k − r_x − c + m, and projected: K'(x, ·) = V₊ V₊ᵀ k̃,
  K'(x, x) = Σ_l (v_lᵀ k̃)² / λ_l (exact for the training rows).
"""
import warnings
from dataclasses import dataclass, field

import numpy as np

from .. import _options
from ..engine import _lloyd
from ..engine.lloyd import objective
from ..engine.threads import blas_threads
from ..errors import KKMeansWarning

PRECOMPUTED = _options.PRECOMPUTED_KERNELS
PSD_REPAIRS = _options.PSD_REPAIRS
# |A − Aᵀ| up to this times max |A| is rounding in a symmetric matrix (then A is symmetrised).
SYMMETRY_RTOL = 1e-6
# Full eigendecomposition up to this n; Lanczos above.
EXACT_EIG_MAX_N = 2000
# clip needs every eigenvector: refuse above this n.
CLIP_MAX_N = 5000
# λ_min below −PSD_RTOL·max|λ| means "not PSD" (float64 storage; float32 uses the second).
PSD_RTOL = {np.dtype(np.float64): 1e-8, np.dtype(np.float32): 1e-5}
# σ = −λ_min + SIGMA_MARGIN·max|λ|, so K' is PSD despite rounding in λ_min.
SIGMA_MARGIN = 1e-9
LANCZOS_MARGIN = 1e-7


def needs_psd_check(kernel):
    """Whether fitting with ``kernel`` (a :class:`~kkmeans_cli.kernels.functions.Kernel`) needs the
    PSD check: sigmoid, precomputed matrices, distances, and poly with a negative coef0."""
    return (kernel.name in ("sigmoid",) + PRECOMPUTED
            or (kernel.name == "poly" and kernel.coef0 < 0))


# -- checks of precomputed matrices -----------------------------------------------------------
def check_square(A, kernel):
    """Check a precomputed kernel (``kernel='precomputed'``) or dissimilarity matrix
    (``'precomputed-distance'``); return it as a symmetric float64 array.

    Raises
    ------
    ValueError
        Not square, not finite, asymmetric beyond ``SYMMETRY_RTOL`` (with how far off and
        where), and for distances: negative entries or a nonzero diagonal.
    """
    what = "distance matrix" if kernel == "precomputed-distance" else "kernel matrix"
    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"a precomputed {what} must be square (n×n); got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        i, j = np.argwhere(~np.isfinite(A))[0]
        raise ValueError(f"the {what} contains NaN or infinity (first at row {i}, column {j})")
    scale = max(float(A.max()), -float(A.min()))
    worst, i, j = _worst_asymmetry(A)
    if worst > SYMMETRY_RTOL * max(scale, np.finfo(float).tiny):
        raise ValueError(f"the {what} is not symmetric: max |A - A^T| = {worst:.6g} at row {i}, "
                         f"column {j} ({A[i, j]:.6g} vs {A[j, i]:.6g}; allowed "
                         f"{SYMMETRY_RTOL:g} x max |A| = {SYMMETRY_RTOL * scale:.3g})")
    if kernel == "precomputed-distance":
        if np.any(A < 0):
            i, j = np.argwhere(A < 0)[0]
            raise ValueError(f"the distance matrix has negative entries (first at row {i}, "
                             f"column {j}: {A[i, j]:.6g}); dissimilarities must be >= 0")
        diag = np.abs(np.diagonal(A))
        if np.any(diag > SYMMETRY_RTOL * max(scale, np.finfo(float).tiny)):
            i = int(np.argmax(diag))
            raise ValueError(f"the distance matrix must have a zero diagonal (d(i, i) = 0); "
                             f"row {i} has {A[i, i]:.6g}")
    if worst > 0 or (kernel == "precomputed-distance" and np.any(np.diagonal(A) != 0)):
        A = np.array(A, dtype=np.float64, order="C")  # never change the caller's array
        for i0, i1 in _blocks(A.shape[0]):  # symmetrise: (A + Aᵀ)/2, a block at a time
            upper = 0.5 * (A[i0:i1, i1:] + A[i1:, i0:i1].T)
            A[i0:i1, i1:] = upper
            A[i1:, i0:i1] = upper.T
            sq = A[i0:i1, i0:i1]
            sq[...] = 0.5 * (sq + sq.T)
        if kernel == "precomputed-distance":
            np.fill_diagonal(A, 0.0)
    return np.ascontiguousarray(A)


def _blocks(n, rows_per_block=512):
    for i0 in range(0, n, rows_per_block):
        yield i0, min(i0 + rows_per_block, n)


def _worst_asymmetry(A):
    """max |A − Aᵀ| and where (row < column), in row blocks (no n×n temporary)."""
    worst, where = 0.0, (0, 0)
    for i0, i1 in _blocks(A.shape[0]):
        diff = np.abs(A[i0:i1] - A[:, i0:i1].T)
        k = int(np.argmax(diff))
        if diff.flat[k] > worst:
            worst = float(diff.flat[k])
            r, c = divmod(k, A.shape[0])
            where = (min(r + i0, c), max(r + i0, c))
    return worst, where[0], where[1]


def check_distance_rows(D):
    """Distance rows D(new, train) for predict: non-negative (finite is checked before)."""
    if np.any(D < 0):
        i, j = np.argwhere(D < 0)[0]
        raise ValueError(f"distance rows must be >= 0 (row {i}, column {j}: {D[i, j]:.6g})")


# -- Gower double centering ---------------------------------------------------------------
def gower_kernel(D, dtype=np.float64):
    """K = −½ J D∘² J of a dissimilarity matrix D (n×n), as a C-contiguous ``dtype`` array."""
    D2 = np.square(np.asarray(D, dtype=np.float64))
    c = D2.mean(axis=0)
    m = float(c.mean())
    D2 -= c[:, None]
    D2 -= c[None, :]
    D2 += m
    D2 *= -0.5
    return np.ascontiguousarray(D2, dtype=dtype)


def gower_rows(Db, train_diag):
    """Kernel rows K(x, train) and K(x, x) of new points from their distance rows.

    ``train_diag`` is the diagonal of the training Gower kernel (see the module docstring).
    """
    train_diag = np.asarray(train_diag, dtype=np.float64)
    m = 2.0 * float(train_diag.mean())
    c = train_diag + 0.5 * m
    D2 = np.square(np.asarray(Db, dtype=np.float64))
    r = D2.mean(axis=1)
    K = -0.5 * (D2 - r[:, None] - c[None, :] + m)
    return K, r - 0.5 * m


# -- the spectrum ------------------------------------------------------------------------------
def _centred(K):
    """J K J as a new float64 array."""
    Kc = np.array(K, dtype=np.float64)
    mean = Kc.mean(axis=0)
    Kc -= mean[:, None]
    Kc -= mean[None, :]
    Kc += mean.mean()
    return Kc


def smallest_eigenvalue(K, n_threads=1):
    """λ_min and max |λ| of J K J, and the method used ('eigvalsh' or 'lanczos')."""
    n = K.shape[0]
    with blas_threads(n_threads):
        if n <= EXACT_EIG_MAX_N:
            w = np.linalg.eigvalsh(_centred(K))
            return float(w[0]), float(np.max(np.abs(w))), "eigvalsh"
        from scipy.sparse.linalg import LinearOperator, eigsh

        def matvec(v):
            v = np.ravel(v)
            v = v - v.mean()
            u = np.asarray(K @ v.astype(K.dtype), dtype=np.float64)
            return u - u.mean()

        from scipy.sparse.linalg import ArpackNoConvergence

        op = LinearOperator((n, n), matvec=matvec, dtype=np.float64)
        v0 = np.random.default_rng(0).standard_normal(n)
        try:
            big = eigsh(op, k=1, which="LM", v0=v0, tol=1e-8, return_eigenvectors=False)
            small = eigsh(op, k=1, which="SA", v0=v0, tol=1e-8, maxiter=20 * n,
                          return_eigenvectors=False)
        except ArpackNoConvergence as exc:
            raise ValueError(f"the PSD check could not find the smallest eigenvalue of the "
                             f"kernel matrix (Lanczos did not converge: {exc})") from None
        return float(small[0]), float(abs(big[0])), "lanczos"


@dataclass
class PSDState:
    """What the PSD check found and what the repair did (``KernelKMeans.psd_``).

    ``train_diag`` is K_ii of the training kernel before the repair (precomputed kernels and
    distances, and every repaired model: predict needs it). For clip, ``components`` (n×r),
    ``eigenvalues`` (r), ``col_means`` (n) and ``grand_mean`` describe the projection.
    """

    repair: str = "none"
    checked: bool = False
    lambda_min: float = None
    lambda_max_abs: float = None
    method: str = None
    psd: bool = True
    sigma: float = 0.0
    train_diag: np.ndarray = None
    components: np.ndarray = None
    eigenvalues: np.ndarray = None
    col_means: np.ndarray = None
    grand_mean: float = 0.0
    original_K: np.ndarray = field(default=None, repr=False)  # clip: only during fit
    fit_diag: np.ndarray = field(default=None, repr=False)  # only during fit

    def stats(self):
        """JSON-able summary for ``fit_stats_`` and the model meta."""
        return {"psd_checked": self.checked, "psd": self.psd, "lambda_min": self.lambda_min,
                "lambda_max_abs": self.lambda_max_abs, "eig_method": self.method,
                "psd_repair": self.repair, "psd_sigma": float(self.sigma)}


def check_and_repair(K, diag, kernel, repair, n_threads=1):
    """The PSD check (with a warning when K is not PSD and not repaired) and the repair.

    Parameters
    ----------
    K : ndarray (n, n)
        The training kernel matrix; never modified (it may be shared by a sweep).
    diag : ndarray (n,)
        K_ii in float64.
    kernel : Kernel
    repair : {'none', 'lingoes', 'clip'}

    Returns
    -------
    K, diag, PSDState
    """
    n = K.shape[0]
    state = PSDState(repair=repair)
    if kernel.name in PRECOMPUTED or repair != "none":
        state.train_diag = np.array(diag, dtype=np.float64)
    if not (needs_psd_check(kernel) or repair != "none"):
        return K, diag, state
    if repair == "clip" and n > CLIP_MAX_N:
        raise ValueError(f"psd_repair='clip' needs a full eigendecomposition and is limited "
                         f"to n <= {CLIP_MAX_N} samples (got {n}); use psd_repair='lingoes'")
    lam, scale, method = smallest_eigenvalue(K, n_threads)
    state.checked, state.lambda_min, state.lambda_max_abs, state.method = True, lam, scale, method
    tol = PSD_RTOL.get(np.dtype(K.dtype), 1e-8) * scale
    state.psd = not lam < -tol
    if not state.psd and repair == "none":
        warnings.warn(f"the kernel matrix is not positive semidefinite: the double-centred "
                      f"kernel has smallest eigenvalue {lam:.6g} (largest |eigenvalue| "
                      f"{scale:.6g}), so the feature-space distances are not Euclidean and "
                      f"kernel k-means may not minimise its objective; --psd-repair lingoes "
                      f"(psd_repair='lingoes') repairs it and keeps the optimal clustering",
                      KKMeansWarning, stacklevel=4)
    if repair == "lingoes":
        if state.psd:
            return K, diag, state
        margin = (SIGMA_MARGIN if method == "eigvalsh" else LANCZOS_MARGIN) * scale
        state.sigma = -lam + margin
        K2 = np.array(K, dtype=K.dtype, order="C")
        K2 -= K2.dtype.type(state.sigma / n)
        K2[np.diag_indices(n)] += K2.dtype.type(state.sigma)
        return K2, diag + state.sigma * (1.0 - 1.0 / n), state
    if repair == "clip":
        with blas_threads(n_threads):
            Kc = _centred(K)
            state.col_means = np.asarray(K, dtype=np.float64).mean(axis=0)
            state.grand_mean = float(state.col_means.mean())
            w, V = np.linalg.eigh(Kc)
            keep = w > PSD_RTOL.get(np.dtype(K.dtype), 1e-8) * scale
            state.components = np.ascontiguousarray(V[:, keep])
            state.eigenvalues = w[keep].copy()
            K2 = (state.components * state.eigenvalues) @ state.components.T
        state.original_K = K
        K2 = 0.5 * (K2 + K2.T)
        return np.ascontiguousarray(K2, dtype=K.dtype), np.array(np.diagonal(K2)), state
    return K, diag, state


def transform_rows(Kb, diag, state, kernel_name, X_new=None, X_fit=None):
    """Kernel rows of new points changed as the training kernel was (see module docstring).

    ``Kb`` is K(new, train) (distance rows for ``precomputed-distance``), ``diag`` K(x, x) or
    None. For kernels of data, ``X_new`` and ``X_fit`` tell which new rows *are* training
    points (equal feature vectors); otherwise a zero distance (or kernel distance) does.
    Returns float64 Kb, diag.
    """
    if state is None:
        return Kb, diag
    Kb = np.asarray(Kb, dtype=np.float64)
    zero_dist = None
    if kernel_name == "precomputed-distance":
        check_distance_rows(Kb)
        zero_dist = Kb == 0
        Kb, diag = gower_rows(Kb, state.train_diag)
    if state.repair == "lingoes" and state.sigma > 0:
        n = Kb.shape[1]
        if zero_dist is not None:
            same = zero_dist
        elif X_new is not None and X_fit is not None:
            same = _same_rows(X_new, X_fit)
        else:
            same = _coincide(Kb, diag, state.train_diag)
        Kb = Kb - state.sigma / n
        rows = np.flatnonzero(same.any(axis=1))
        Kb[rows, np.argmax(same[rows], axis=1)] += state.sigma
        if diag is not None:
            diag = np.asarray(diag, dtype=np.float64) + state.sigma * (1.0 - 1.0 / n)
    elif state.repair == "clip":
        r = Kb.mean(axis=1)
        Kt = Kb - r[:, None] - state.col_means[None, :] + state.grand_mean
        coef = Kt @ state.components  # V₊ᵀ k̃ for each row
        Kb = coef @ state.components.T
        diag = np.einsum("ij,ij->i", coef, coef / state.eigenvalues)
    return Kb, diag


def _same_rows(X_new, X_fit):
    """same[i, j]: new row i equals training row j (the first such j only).

    The index of training rows is rebuilt on each call (O(n·d), small beside the kernel rows)
    rather than cached on ``state``: prediction writes nothing to the fitted model."""
    index = {}
    for j, row in enumerate(np.ascontiguousarray(X_fit, dtype=np.float64)):
        index.setdefault(row.tobytes(), j)
    same = np.zeros((X_new.shape[0], X_fit.shape[0]), dtype=bool)
    for i, row in enumerate(np.ascontiguousarray(X_new, dtype=np.float64)):
        j = index.get(row.tobytes())
        if j is not None:
            same[i, j] = True
    return same


def _coincide(Kb, diag, train_diag):
    """Where a new point coincides with a training point: zero feature-space distance
    K(x,x) + K_jj − 2K(x,j) (when K(x,x) is unknown: K(x, j) = K_jj), within rounding."""
    scale = np.abs(train_diag)[None, :]
    if diag is None:
        return np.abs(Kb - train_diag[None, :]) <= 1e-12 * np.maximum(scale, 1e-300)
    diag = np.asarray(diag, dtype=np.float64)[:, None]
    d2 = diag + train_diag[None, :] - 2.0 * Kb
    return np.abs(d2) <= 1e-9 * np.maximum(np.abs(diag) + scale, 1e-300)


# -- objectives ---------------------------------------------------------------------------
def trace_objective(K, diag, labels, weights, n_clusters):
    """Σ_i w_i K_ii − Σ_c g_c / W_c of ``labels`` on K (one pass; no clamping of negative
    distances, unlike the assignment step's inertia)."""
    F = np.empty((n_clusters, K.shape[0]))
    _lloyd.outer_sums_rows(np.ascontiguousarray(K), 0, labels.astype(np.int32), weights, F, 1)
    own = F[labels, np.arange(K.shape[0])]
    g = np.bincount(labels, weights=weights * own, minlength=n_clusters)
    W = np.bincount(labels, weights=weights, minlength=n_clusters)
    nz = W > 0
    return float(weights @ diag - np.sum(g[nz] / W[nz]))


def lingoes_shift(sigma, labels, weights, n_clusters):
    """Objective(K') − objective(K) for the Lingoes repair: σ(W − Σ_c Σ_{i∈c} w_i² / W_c);
    σ(n − k) for unit weights and k non-empty clusters."""
    W = np.bincount(labels, weights=weights, minlength=n_clusters)
    S2 = np.bincount(labels, weights=weights ** 2, minlength=n_clusters)
    nz = W > 0
    return float(sigma * (W.sum() - np.sum(S2[nz] / W[nz])))


# -- after the fit ---------------------------------------------------------------------------
def fit_stats(state, weights, labels, inner_sums, cluster_weights, n_clusters):
    """The ``fit_stats_`` entries of the PSD check and repair of a fit (``state``): the
    check's numbers, and the objective on the kernel used and on the original one. Drops
    the arrays kept only for this (``original_K``, ``fit_diag``)."""
    stats = state.stats()
    if state.checked or state.repair != "none":
        used = objective(state.fit_diag, weights, inner_sums, cluster_weights)
        stats["objective_used"] = used
        if state.repair == "lingoes":
            stats["objective_original"] = used - lingoes_shift(
                state.sigma, labels, weights, n_clusters)
        elif state.repair == "clip":
            stats["objective_original"] = trace_objective(
                state.original_K, state.train_diag, labels, weights, n_clusters)
    state.original_K = state.fit_diag = None
    return stats


# -- model files ------------------------------------------------------------------------------
def loaded_state(meta, arrays, n, fail):
    """The ``PSDState`` of a model file's entries, checked (``fail(problem)`` raises); None
    when the model has no PSD state and needs none."""
    repair = meta.get("psd_repair", "none")
    if repair not in PSD_REPAIRS:
        fail(f"unknown psd_repair {repair!r}")
    if meta.get("solver", "lloyd") not in ("lloyd", "embed"):
        fail(f"unknown solver {meta.get('solver')!r}")
    sigma = meta.get("psd_sigma", 0.0)
    if not isinstance(sigma, (int, float)) or isinstance(sigma, bool) \
            or not np.isfinite(sigma) or sigma < 0:
        fail("meta 'psd_sigma' must be a finite number >= 0")
    needs_diag = meta["kernel"] == "precomputed-distance" or (repair == "lingoes" and sigma > 0)
    if "psd_train_diag" not in arrays and not needs_diag and repair != "clip":
        return None if repair == "none" else PSDState(repair=repair)
    state = PSDState(repair=repair, sigma=float(sigma), checked=bool(meta.get("psd_checked")),
                     psd=bool(meta.get("psd", True)), lambda_min=meta.get("psd_lambda_min"))

    def get(key, shape):
        if key not in arrays:
            fail(f"the required array '{key}' is missing (psd_repair={repair!r}, "
                 f"kernel={meta['kernel']!r})")
        value = arrays[key]
        if value.dtype.kind not in "fiu" or value.ndim != len(shape) or any(
                s is not None and s != v for s, v in zip(shape, value.shape)):
            fail(f"'{key}' has shape {value.shape} and dtype {value.dtype}, expected floats "
                 f"of shape {tuple('r' if s is None else s for s in shape)}")
        if not np.all(np.isfinite(value)):
            fail(f"'{key}' holds NaN or infinite values")
        return np.ascontiguousarray(value, dtype=np.float64)

    if needs_diag or "psd_train_diag" in arrays:
        state.train_diag = get("psd_train_diag", (n,))
    if repair == "clip":
        state.components = get("psd_components", (n, None))
        state.eigenvalues = get("psd_eigenvalues", (state.components.shape[1],))
        if np.any(state.eigenvalues <= 0):
            fail("'psd_eigenvalues' must be positive")
        state.col_means = get("psd_col_means", (n,))
        grand = meta.get("psd_grand_mean", 0.0)
        if not isinstance(grand, (int, float)) or not np.isfinite(grand):
            fail("meta 'psd_grand_mean' must be a finite number")
        state.grand_mean = float(grand)
    return state
