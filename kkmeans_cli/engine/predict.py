"""Labels and squared feature-space distances of new points from a fitted model's arrays.

One implementation for ``KernelKMeans.predict``/``transform`` and for ``kkmeans predict`` on a
model file (which never builds the estimator, so it imports no scikit-learn): both pass a
:class:`Fitted` record of the fitted attributes (the training points or the Nyström map, the
labels and weights, the inner sums g_c and cluster weights W_c, the resolved kernel, the PSD
and objective state) and get arrays back. The distance of x to cluster c is
K(x, x) − 2 F_c(x) / W_c + g_c / W_c², F_c(x) = Σ_{i in c} w_i K(x, x_i), computed in row
blocks of K(X, X_fit) (or fused for rbf) without the training kernel matrix.
"""
import types

import numpy as np

from ..kernels.functions import check_range
from ..kernels.psd import PRECOMPUTED
from .threads import blas_threads, effective_n_threads


class Fitted(types.SimpleNamespace):
    """The attributes of a fitted model by the estimator's names (``kernel``, ``n_clusters``,
    ``n_threads``, ``kernel_``, ``labels_``, ``sample_weight_``, ``inner_sums_``,
    ``cluster_weights_``, ``X_fit_``, ``psd_``, ``objective``, ``approx`` and the Nyström and
    ncut state), as plain values: what the prediction reads, and nothing it could write back
    to an estimator."""


def nearest(fitted, X, kernel_diag=None, want_distances=False):
    """Labels of the nearest cluster (and the k squared distances) of the rows of ``X``.

    Parameters
    ----------
    fitted : Fitted
    X : ndarray of float64, shape (n, d), C-contiguous and finite
        New points (for a precomputed kernel: the kernel or distance rows to the training
        points).
    kernel_diag : ndarray of shape (n,), optional
        K(x, x) of a precomputed kernel's new points (the distances need it, the labels not).
    want_distances : bool

    Returns
    -------
    labels : ndarray of intp, shape (n,)
    dist : ndarray of float64, shape (n, k), or None
    """
    if fitted.approx == "nystroem":
        from ..kernels.nystroem import nearest as nystroem_nearest

        return nystroem_nearest(fitted, X, want_distances)
    from . import _lloyd

    n_threads = effective_n_threads(fitted.n_threads)
    dtype = np.float32 if str(np.dtype(fitted.dtype)) == "float32" else np.float64
    n_fit = fitted.labels_.shape[0]
    expected = n_fit if fitted.kernel in PRECOMPUTED else fitted.n_features_in_
    if X.shape[1] != expected:
        what = {"precomputed": "kernel columns", "precomputed-distance": "distance columns"
                }.get(fitted.kernel, "features")
        raise ValueError(f"X has {X.shape[1]} {what}, the model expects {expected}")
    # Kernel values of new rows against the training points, summed over them.
    check_range(fitted.kernel, X, max(n_fit, float(np.sum(fitted.sample_weight_))),
                kernel=fitted.kernel_, offset=fitted.kernel_.offset)
    labels_fit = fitted.labels_.astype(np.int32)
    k = fitted.n_clusters
    g, W = fitted.inner_sums_, fitted.cluster_weights_
    labels = np.empty(X.shape[0], dtype=np.int32)
    dist = np.empty((X.shape[0], k)) if want_distances else None
    row_dist = np.empty(X.shape[0])
    with blas_threads(1):
        F = _fused_outer_sums(fitted, X, labels_fit, dtype, n_threads)
        if F is not None:   # the kernel values never stored (rbf; Kernel.fused_outer_sums)
            diag = fitted.kernel_.diag(X)
            _lloyd.assign(F, g, W, diag, labels, row_dist, n_threads)
            if want_distances:
                _lloyd.distances(F, g, W, diag, dist, n_threads)
            return labels.astype(np.intp), dist
        for i0, i1, Kb, diag in _kernel_row_blocks(fitted, X, kernel_diag, dtype, n_threads):
            F = np.empty((k, i1 - i0))
            _lloyd.outer_sums_rows(Kb, 0, labels_fit, fitted.sample_weight_, F, n_threads)
            if diag is None:
                # K(x, x) unknown: the labels do not need it, the distances would.
                lin = np.where(W > 0, -2.0 / W, 0)
                shift = np.where(W > 0, g / W ** 2, np.inf)
                rel = lin[:, None] * F + shift[:, None]
                labels[i0:i1] = np.argmin(rel, axis=0)
                if want_distances:
                    raise ValueError("distances of a precomputed model need kernel_diag, "
                                     "K(x, x) of the new points")
                continue
            _lloyd.assign(F, g, W, diag, labels[i0:i1], row_dist[i0:i1], n_threads)
            if want_distances:
                _lloyd.distances(F, g, W, diag, dist[i0:i1], n_threads)
    return labels.astype(np.intp), dist


def _fused_outer_sums(fitted, X, labels_fit, dtype, n_threads):
    """F (k×m) of new points from fused kernel values and sums, where the training kernel
    is the kernel function itself (no PSD repair, objective 'kmeans') and the storage
    float64 (a float32 model rounds its kernel values first); None otherwise."""
    psd = getattr(fitted, "psd_", None)
    if (fitted.kernel in PRECOMPUTED or fitted.objective != "kmeans" or dtype != np.float64
            or (psd is not None and psd.repair != "none")):
        return None
    return fitted.kernel_.fused_outer_sums(X, fitted.X_fit_, labels_fit, fitted.sample_weight_,
                                           fitted.n_clusters, n_threads)


def _kernel_row_blocks(fitted, X, kernel_diag, dtype, n_threads):
    """Yield (i0, i1, K(X[i0:i1], X_fit), K(x, x) or None) in row blocks, transformed as
    the training kernel was (:func:`transform_rows`)."""
    if fitted.kernel in PRECOMPUTED:
        diag = None if kernel_diag is None else np.ascontiguousarray(kernel_diag,
                                                                    dtype=np.float64)
        blocks = [(0, X.shape[0], np.ascontiguousarray(X, dtype=dtype), diag)]
    else:
        blocks = ((i0, i1, Kb, fitted.kernel_.diag(X[i0:i1])) for i0, i1, Kb in
                  fitted.kernel_.cross_blocks(X, fitted.X_fit_, dtype=dtype, n_threads=n_threads))
    for i0, i1, Kb, diag in blocks:
        # X[i0:i1]: which points the rows belong to (a Lingoes shift needs to know when a
        # new point is a training point, psd.py).
        Kb, diag = transform_rows(fitted, Kb, diag, X[i0:i1])
        yield i0, i1, np.ascontiguousarray(Kb, dtype=dtype), diag


def transform_rows(fitted, Kb, diag, X_rows):
    """The changes made to the training kernel matrix (distance rows to kernel rows by
    Gower's centring, the PSD repair, the normalized cut's scaling) applied to kernel rows
    K(new, train) and to K(new, new) (``diag``, None when unknown) of the points ``X_rows``
    (rows of the kernel matrix itself for a precomputed kernel). Returns Kb, diag; writes
    nothing, so predictions may run in several threads at once."""
    from ..kernels.psd import transform_rows as psd_rows

    Kb, diag = psd_rows(Kb, diag, getattr(fitted, "psd_", None), fitted.kernel,
                        X_new=X_rows if fitted.X_fit_ is not None else None,
                        X_fit=fitted.X_fit_)
    if fitted.objective == "ncut":
        from .optima import ncut_rows

        Kb, diag = ncut_rows(fitted, Kb, diag)
    return Kb, diag
