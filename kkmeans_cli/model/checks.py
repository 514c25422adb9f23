"""The checks of what ``KernelKMeans`` is given: the data (scikit-learn's ``validate_data``
and the kernel's own conditions), the sample weights, the starting labels, and the data's
kernel sums. The command line runs the same checks on what it read and rewords their errors
with the file, row and option (``cli/options.py``)."""
import numpy as np
from sklearn.utils.validation import check_array, validate_data

from ..errors import TooFewDistinctPointsError, WeightsError
from ..kernels.functions import (FLOAT_MAX, check_domain, check_range, count_distinct,
                                 data_offset)
from ..kernels.graph import check_affinity
from ..kernels.psd import PRECOMPUTED, check_square

FLOAT_TINY = float(np.finfo(np.float64).tiny)


def check_data(X, kernel, square=True, estimator=None, reset=False):
    """X as a C-contiguous float64 array, checked: scikit-learn's ``validate_data`` when an
    ``estimator`` is given (``reset=True`` in fit records ``n_features_in_`` and feature names,
    ``reset=False`` in predict checks them), else ``check_array``; then finite values (the
    first bad entry named), non-negative data for chi2, and a square matrix for a precomputed
    kernel in fit."""
    options = dict(dtype=np.float64, order="C", ensure_all_finite=False)
    if estimator is not None:
        X = validate_data(estimator, X, reset=reset, **options)
    else:
        X = check_array(X, **options)
    if not np.all(np.isfinite(X)):
        bad = np.argwhere(~np.isfinite(X))[0]
        raise ValueError(f"X contains NaN or infinity (first at row {bad[0]}, column {bad[1]})")
    check_domain(kernel, X)  # chi2: non-negative data (the rule of every route)
    if kernel in PRECOMPUTED and square:
        X = check_square(X, kernel)
    if not X.flags.writeable:  # a read-only buffer (memory map): the engine's views need write
        X = X.copy()
    return np.ascontiguousarray(X)


def check_kernel_diag(kernel_diag, n, kernel):
    """``kernel_diag`` of ``predict``/``transform`` (K(x, x) of n new rows of a precomputed
    kernel, or one number for all of them) as a C-contiguous float64 array of shape (n,)
    with finite values; a ``ValueError`` otherwise, and for a kernel that computes K(x, x)
    itself."""
    if kernel not in PRECOMPUTED:
        raise ValueError(f"kernel_diag is for a precomputed kernel; kernel={kernel!r} "
                         f"computes K(x, x) itself")
    try:
        diag = np.asarray(kernel_diag, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("kernel_diag must hold numbers, K(x, x) of each row of X") from None
    if diag.ndim == 0:      # one value for every row (a kernel with K(x, x) = 1, say)
        diag = np.full(n, float(diag))
    if diag.shape != (n,):
        raise ValueError(f"kernel_diag must hold K(x, x) of each of the {n} rows of X: "
                         f"shape ({n},), got {diag.shape}")
    bad = np.flatnonzero(~np.isfinite(diag))
    if bad.size:
        raise ValueError(f"kernel_diag contains NaN or infinity (first at row {bad[0]})")
    return np.ascontiguousarray(diag)


def check_graph_data(X, given, estimator=None):
    """(X, affinity) of a graph fit: for kernel 'knn' the points X checked as
    :func:`check_data` does (affinity None); for a sparse affinity given as X (kernel
    'precomputed') X None and the affinity checked by ``kernels.graph.check_affinity``
    (square, finite, non-negative, symmetric, no empty row; a ``DataError``, a
    ``ValueError``, naming the first bad row and column)."""
    if not given:
        return check_data(X, "knn", estimator=estimator, reset=True), None
    if estimator is not None:
        X = validate_data(estimator, X, reset=True, accept_sparse="csr", dtype=np.float64,
                          ensure_all_finite=False)
    return None, check_affinity(X)


def check_fit_values(X, kernel, weights, n_clusters, objective="kmeans"):
    """Refuse data whose kernel sums overflow (``functions.check_range``) and data with fewer
    distinct points of positive weight than clusters (:class:`TooFewDistinctPointsError`:
    clusters would have to share a point; Lloyd would cycle between coinciding centres)."""
    check_range(kernel, X, float(weights.sum()),
                offset=data_offset(kernel, X, objective, quiet=True))
    distinct = count_distinct(X, n_clusters, weights, kernel)
    if distinct < n_clusters:
        raise TooFewDistinctPointsError(distinct, n_clusters)


def check_weights(sample_weight, n, n_clusters, objective="kmeans"):
    """The sample weights of a fit as a C-contiguous float64 array (ones when None, a
    number for every point): shape (n,), then :func:`check_weight_values` (a :class:`WeightsError`)."""
    if sample_weight is None:
        return np.ones(n)
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.ndim == 0:         # one weight for every point, as scikit-learn takes it
        w = np.full(n, float(w))
    if w.shape != (n,):
        raise ValueError(f"sample_weight must have shape ({n},), got {w.shape}")
    check_weight_values(w, n_clusters, objective)
    return np.ascontiguousarray(w)


def check_weight_values(w, n_clusters=None, objective="kmeans"):
    """Refuse sample weights that cannot be used, with a :class:`WeightsError` saying which
    problem (and where): a weight not finite or negative, fewer positive weights than
    ``n_clusters`` (or none at all when k is not known yet), a sum too large or too small for
    floating point (:func:`weights_too_large`). The estimator's message is the error's text;
    the command line rewords the same error with the file and row."""
    bad = np.flatnonzero(~np.isfinite(w) | (w < 0))
    if bad.size:
        raise WeightsError("negative", "sample_weight must be finite and non-negative",
                           index=int(bad[0]), value=float(w[bad[0]]))
    count = int(np.count_nonzero(w))
    if n_clusters is not None and count < n_clusters:
        raise WeightsError("too few", f"sample_weight has fewer non-zero entries ({count}) "
                                      f"than n_clusters={n_clusters}")
    if count == 0:
        raise WeightsError("all zero", "sample_weight is 0 everywhere")
    problem = weights_too_large(w, objective)
    if problem:
        raise WeightsError("scale", f"sample_weight {problem}", detail=problem)


def check_graph_weights(w, kernel):
    """Sample weights of a graph fit: none or all equal (they scale every degree alike and
    change no cut), else a :class:`WeightsError` ('unequal') naming the kernel."""
    if np.any(w != w[0]):
        detail = (f"must be the same for every point with kernel={kernel!r} (a graph fit "
                  f"weighs points by their degrees); give equal weights or none")
        raise WeightsError("unequal", f"sample_weight {detail}", detail=detail)


def weights_too_large(w, objective="kmeans"):
    """Why sample weights are too large (or too small) for floating point, or None: kernel
    k-means forms sums of up to (Σ w)² weighted kernel values (the inner sums), so 4·(Σ w)²
    must stay below 1.8e308, and (Σ w)² above the smallest normal number 2.2e-308 (below it
    the weight products underflow: k-means++ draws from 0/0). The normalized cut weighs
    point i by u_i·d_i, its degree d_i = Σ_j u_j K_ij up to Σu for the kernels bounded by 1,
    so its sums reach (Σu)⁴ (``engine/ncut.py``). Only the ratios of the weights matter:
    dividing them all by one number keeps the clustering."""
    with np.errstate(over="ignore", invalid="ignore"):
        total = float(np.sum(w, dtype=np.float64))
    power, sums, why = (4, "(Σw)⁴", "the normalized cut weighs a point by its weight times "
                        "its degree, up to Σw, and sums up to (Σw)² of those") \
        if objective == "ncut" else (2, "(Σw)²", "kernel k-means sums up to (Σw)² weighted "
                                                 "kernel values")
    if 0.0 < total < FLOAT_TINY ** (1.0 / power):
        return (f"sums to {total:.6g}: {sums} must stay above {FLOAT_TINY:.3g} (below it the "
                f"products of weights underflow floating point); multiply the weights by a "
                f"common factor (only their ratios matter)")
    if total < (FLOAT_MAX / 4.0) ** (1.0 / power):
        return None
    return (f"sums to {total:.6g}: 4·{sums} must stay below {FLOAT_MAX:.3g} ({why}); divide "
            f"the weights by a common factor (only their ratios matter)")


def check_init_labels(init, n, n_clusters):
    """Starting labels given as ``init`` (int32 of shape (n,) in 0..k−1), or None when
    ``init`` names a method."""
    if isinstance(init, str):
        return None
    labels = np.asarray(init)
    if labels.shape != (n,):
        raise ValueError(f"init labels must have shape ({n},), got {labels.shape}")
    if not np.issubdtype(labels.dtype, np.integer):
        if not np.all(np.isfinite(labels)) or np.any(labels != np.round(labels)):
            raise ValueError("init labels must be integers")
    if labels.min() < 0 or labels.max() >= n_clusters:
        raise ValueError(f"init labels must lie in 0..{n_clusters - 1}")
    return labels.astype(np.int32)
