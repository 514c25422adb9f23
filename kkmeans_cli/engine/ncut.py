"""The normalized-cut objective as weighted kernel k-means (Dhillon, Guan & Kulis, "Kernel
k-means, spectral clustering and normalized cuts", KDD 2004).

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
import numpy as np

from ..errors import OptionConflictError
from . import _lloyd
from .records import NcutState

ROW_BLOCK = 512


def degrees(K_rows, point_weights, n_threads=1):
    """d_r = Σ_j u_j K_rows[r, j] for a block of kernel rows (float64), summed in a fixed order
    (the engine's outer-sum pass), so a row gives the same degree in fit and in predict."""
    K_rows = np.ascontiguousarray(K_rows)
    out = np.empty((1, K_rows.shape[0]), dtype=np.float64)
    zeros = np.zeros(K_rows.shape[1], dtype=np.int32)
    _lloyd.outer_sums_rows(K_rows, 0, zeros, np.ascontiguousarray(point_weights, np.float64),
                           out, n_threads)
    return out[0]


#: The least degree whose 1/d² (the kernel K_ij/(d_i d_j) and its diagonal) stays finite
DEGREE_MIN = float(np.finfo(np.float64).max) ** -0.5


def check_degrees(d, what="training point"):
    """Degrees must be positive and finite for the normalized cut, and at least
    ``DEGREE_MIN``: K_ii/d_i² of a smaller one overflows."""
    bad = np.flatnonzero(~(d > 0) | ~np.isfinite(d))
    # Training degrees follow from the kernel chosen: a different option is the remedy.
    error = OptionConflictError if what == "training point" else ValueError
    if bad.size:
        raise error(f"objective='ncut' needs positive degrees Σ_j u_j K_ij, but {what} "
                         f"{bad[0]} has degree {d[bad[0]]:.6g}; use a non-negative kernel "
                         f"(rbf, laplacian, chi2) or objective='kmeans'")
    tiny = np.flatnonzero(d < DEGREE_MIN)
    if tiny.size:
        raise error(f"objective='ncut': {what} {tiny[0]} has degree Σ_j u_j K_ij = "
                    f"{d[tiny[0]]:.6g}, too small for floating point (1/d² overflows below "
                    f"{DEGREE_MIN:.3g}): it is all but unlinked to the others; drop it, or use "
                    f"objective='kmeans'")


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
