"""Saving and loading fitted models as safe ``.npz`` archives (see ``docs/model-format.md``).

A model holds plain numeric arrays and one JSON string (``meta``); it loads with
``allow_pickle=False`` and is checked completely before use, so a file from an untrusted source
can at worst be refused with a :class:`~kkmeans_cli.errors.ModelFileError`.

Format versions
    1  the original keys.
    2  adds ``kernel_offset`` (d float64, optional): the point the kernel subtracts from every
       row before it is evaluated (``Kernel.offset``, the mean of the training rows for rbf
       and the linear k-means objective; see ``kernels/functions.py``). ``inner_sums`` and
       the Nyström arrays were computed with it, and ``predict`` applies it to new rows and
       ``X_fit`` alike. A version-1 file has none: it loads and predicts with the uncentred
       kernel its sums were made with. A reader of version 1 refuses version-2 files (it
       would predict a linear model with the wrong kernel).

The archive is read and checked against the format in ``archive.py``; each part of the fitted
state owns its entries (``parts.py``); the invariants between the arrays that ``predict``
relies on are checked here, and the loaded estimator is made from a ``FitResult`` like a fit.
"""
import json
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from .._options import GRAPH_KERNELS
from .._version import __version__
from ..engine.records import FitResult
from ..io.scaling import Scaler
from ..kernels.functions import CENTRED_KERNELS, Kernel, with_offset
from .archive import FORMAT, FORMAT_VERSION, checked_array, corrupt, read_archive
from .parts import PARTS
from .predictor import predictor_of

_KEYS_ALWAYS = ("meta", "labels", "weights", "cluster_sizes", "cluster_weights", "inner_sums",
                "inertia")


@dataclass
class LoadedModel:
    """A model read from a file.

    Attributes
    ----------
    result : FitResult
        The fitted state, checked (``engine/records.py``).
    params : dict
        The estimator's parameters the file sets (the others keep their defaults).
    meta : dict
        The archive's metadata (see ``docs/model-format.md``).
    scaler : Scaler
        The scaling the training data went through; apply it to new data.
    predictor : ExactModel or NystroemModel
        What predictions read (``model/predictor.py``): ``kkmeans predict`` labels new points
        from it without building the estimator (nor importing scikit-learn).
    estimator : KernelKMeans
        Fitted, built from ``params`` and ``result`` when first asked for: ``predict`` and
        ``transform`` work without the training kernel matrix.
    """

    result: object
    params: dict
    meta: dict
    scaler: Scaler

    @property
    def predictor(self):
        return predictor_of(self.result, self.params)

    @property
    def estimator(self):
        if getattr(self, "_estimator", None) is None:
            # scikit-learn is imported only here: predict and info of a model file need it not
            from .estimator import fitted_estimator

            self._estimator = fitted_estimator(self.params, self.result)
        return self._estimator


def state_parts():
    """The parts of a fitted estimator's state kept beside the labels and sums, in the order
    they are written and read (``model/parts.py``: the PSD check and repair, the objective
    and its optima, the Nyström map). Each has ``model_meta(estimator)``,
    ``model_arrays(estimator)`` and ``load(meta, arrays, n, fail) -> (params, state)``."""
    return PARTS


def model_meta(estimator, scaler, options=None, extra=None):
    """The ``meta`` dictionary of a fitted estimator.

    Parameters
    ----------
    estimator : KernelKMeans
        Fitted.
    scaler : Scaler
    options : dict, optional
        The effective command-line options of the fit, stored as ``options``.
    extra : dict, optional
        More entries (e.g. the data source).

    Returns
    -------
    dict
    """
    params = estimator.kernel_.params()
    stats = estimator.fit_stats_
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "kkmeans_version": __version__,
        **params,
        "n_clusters": int(estimator.n_clusters),
        "n_features": int(estimator.n_features_in_),
        "n_samples": int(estimator.labels_.shape[0]),
        "scale": scaler.method,
        "dtype": np.dtype(estimator.dtype).name,
        "algorithm": estimator.algorithm,
        "seed": estimator.random_state if isinstance(estimator.random_state, int) else None,
        "n_init": int(estimator.n_init),
        "n_iter": int(estimator.n_iter_),
        "converged": bool(estimator.converged_),
        "inertia": float(estimator.inertia_),
        "approx": "none",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "fit_stats": {"kernel_seconds": float(stats["kernel_seconds"]),
                      "iteration_seconds": float(stats["iteration_seconds"]),
                      "restart_inertias": [float(v) for v in stats["restart_inertias"]],
                      # 1-based in the file, as the report's "best: #1" (docs/model-format.md)
                      "best_restart": int(stats["best_restart"]) + 1,
                      "n_threads": int(stats["n_threads"])},
        "options": dict(options or {}),
    }
    for part in state_parts():
        meta.update(part.model_meta(estimator))
    meta.update(extra or {})
    return meta


def save_model(handle, estimator, scaler, meta):
    """Write a fitted estimator to an open binary file as an ``.npz`` archive.

    Parameters
    ----------
    handle : binary file object
        Typically from :class:`~kkmeans_cli.io.outputs.AtomicOutputs`, so the file appears whole
        or not at all.
    estimator : KernelKMeans
        Fitted.
    scaler : Scaler
    meta : dict
        From :func:`model_meta`.
    """
    arrays = {
        "meta": np.array(json.dumps(meta, allow_nan=False)),
        "labels": np.asarray(estimator.labels_, dtype=np.int64),
        "weights": np.asarray(estimator.sample_weight_, dtype=np.float64),
        "cluster_sizes": np.asarray(estimator.cluster_sizes_, dtype=np.int64),
        "cluster_weights": np.asarray(estimator.cluster_weights_, dtype=np.float64),
        "inner_sums": np.asarray(estimator.inner_sums_, dtype=np.float64),
        "inertia": np.array(float(estimator.inertia_)),
    }
    if estimator.X_fit_ is not None:
        arrays["X_fit"] = np.asarray(estimator.X_fit_, dtype=np.float64)
    if getattr(estimator.kernel_, "offset", None) is not None:
        arrays["kernel_offset"] = np.asarray(estimator.kernel_.offset, dtype=np.float64)
    for part in state_parts():
        arrays.update(part.model_arrays(estimator))
    if scaler.method != "none":
        arrays["scale_offset"] = np.asarray(scaler.offset, dtype=np.float64)
        arrays["scale_factor"] = np.asarray(scaler.factor, dtype=np.float64)
    np.savez(handle, **arrays)


def load_model(path):
    """Read and check a model file.

    Every check of ``docs/model-format.md`` runs before anything is used: the archive opens without
    pickle, ``format`` and ``format_version`` are known, each required key is there with the
    documented shape and dtype, n, d and k agree, and the values are finite.

    Parameters
    ----------
    path : str

    Returns
    -------
    LoadedModel

    Raises
    ------
    ModelFileError
        One line naming the file and the problem.
    """
    meta, arrays = read_archive(path)
    n, d, k = meta["n_samples"], meta["n_features"], meta["n_clusters"]
    precomputed = meta["kernel"] in ("precomputed", "precomputed-distance")
    nystroem = meta.get("approx", "none") == "nystroem"  # landmarks replace X_fit
    graph = meta["kernel"] in GRAPH_KERNELS  # the graph's nodes replace X_fit
    required = list(_KEYS_ALWAYS) + ([] if precomputed or nystroem or graph else ["X_fit"])
    if meta["scale"] != "none":
        required += ["scale_offset", "scale_factor"]
    for key in required:
        if key not in arrays:
            corrupt(path, f"the required array '{key}' is missing")
    labels = checked_array(path, arrays, "labels", (n,), "i")
    if labels.min() < 0 or labels.max() >= k:
        corrupt(path, f"'labels' must lie in 0..{k - 1}")
    weights = checked_array(path, arrays, "weights", (n,), "f")
    if np.any(weights < 0):
        corrupt(path, "'weights' has negative values")
    sizes = checked_array(path, arrays, "cluster_sizes", (k,), "i")
    if not np.array_equal(sizes, np.bincount(labels, minlength=k)):
        corrupt(path, "'cluster_sizes' does not match 'labels'")
    cluster_weights = checked_array(path, arrays, "cluster_weights", (k,), "f")
    inner_sums = checked_array(path, arrays, "inner_sums", (k,), "f")
    inertia = checked_array(path, arrays, "inertia", (), "f")
    X_fit = (None if precomputed or nystroem or graph
             else checked_array(path, arrays, "X_fit", (n, d), "f"))
    scaler = Scaler("none")
    if meta["scale"] != "none":
        factor = checked_array(path, arrays, "scale_factor", (d,), "f")
        if np.any(factor <= 0):
            corrupt(path, "'scale_factor' must be positive")
        offset = checked_array(path, arrays, "scale_offset", (d,), "f")
        scaler = Scaler(meta["scale"], offset, factor)
    params, states = {"solver": meta.get("solver", "lloyd")}, {}
    for part in state_parts():
        part_params, state = part.load(meta, arrays, n, lambda problem: corrupt(path, problem))
        params.update(part_params)
        states.update(state)
    params, kernel = _params(meta, params, _kernel_offset(path, arrays, meta, d))
    fit_stats = dict(meta.get("fit_stats", {}))
    if "best_restart" in fit_stats:  # 0-based in the Python API
        fit_stats["best_restart"] -= 1
    result = FitResult(
        labels=labels.astype(np.intp), inertia=float(inertia),
        inner_sums=np.ascontiguousarray(inner_sums, dtype=np.float64),
        cluster_weights=np.ascontiguousarray(cluster_weights, dtype=np.float64),
        n_iter=int(meta.get("n_iter", 0)), converged=bool(meta.get("converged", True)),
        kernel=kernel, sample_weight=np.ascontiguousarray(weights, dtype=np.float64),
        X_fit=None if X_fit is None else np.ascontiguousarray(X_fit, dtype=np.float64),
        n_features=d, fit_stats=fit_stats, psd=states.get("psd"), ncut=states.get("ncut"),
        nystroem=states.get("nystroem"), graph=states.get("graph"))
    _check_consistency(path, meta, result, params)
    return LoadedModel(result=result, params=params, meta=meta, scaler=scaler)


def _check_nystroem(path, result, slack, unit, psd):
    """Nystroem features phi(x) = K(x, L) T satisfy |phi(x)|^2 <= K(x, x) for a positive
    semidefinite kernel (``psd``: the Nystroem kernel is the original one minus a positive
    semidefinite Schur complement; Williams and Seeger, "Using the Nystroem method to speed
    up kernel machines"): checked on the landmarks. A kernel that is not (sigmoid, poly with
    coef0 < 0) keeps the positive part of K(L, L), whose features can be longer. The centres
    are means of features, so |mu_c|^2 <= 1 for kernels bounded by 1.
    """
    # the Nyström map only for a Nyström model: an exact model's predict loads no SciPy
    from ..kernels.nystroem import features

    nys = result.nystroem
    L, T = nys.landmarks, nys.transform
    with np.errstate(all="ignore"):
        Phi = features(L, L, T, result.kernel)
        norms = np.einsum("ij,ij->i", Phi, Phi)
        diag = result.kernel.diag(L)
    if not (np.all(np.isfinite(norms)) and np.all(np.isfinite(diag))):
        corrupt(path, "the Nystroem features of the landmarks are not finite numbers")
    scale = max(1.0, float(np.max(np.abs(diag))))
    if psd and np.any(norms > diag * (1 + slack) + slack * scale):
        corrupt(path, "'nystroem_transform' does not fit 'landmarks' (its features are longer "
                    "than the kernel allows)")
    if unit and np.any(np.einsum("ij,ij->i", nys.centers, nys.centers) > 1 + slack):
        corrupt(path, "'centers' lie outside the feature space of the kernel")


# Kernels positive semidefinite for every parameter the loader accepts (poly needs coef0 >= 0).
_PSD_KERNELS = ("rbf", "laplacian", "chi2", "cosine", "linear")


def _check_consistency(path, meta, result, params):
    """The invariants ``predict`` and ``transform`` rely on, between the arrays.

    Each cluster's weight W_c is positive and is the sum of its members' weights (so every
    cluster has members). The inner sums g_c = sum_{i,j in c} w_i w_j K_ij are finite and, for
    a positive semidefinite kernel (or a repaired one), non-negative and at most
    (sum_{i in c} w_i sqrt(K_ii))^2 (Cauchy-Schwarz) when the diagonal K_ii is known; a
    kernel bounded by 1 in absolute value (sigmoid) has |g_c| <= W_c^2. For a Nystroem model
    g_c = W_c^2 |mu_c|^2 of its stored centre.
    """
    labels, weights, k = result.labels, result.sample_weight, params["n_clusters"]
    W, g = result.cluster_weights, result.inner_sums
    if not np.all(W > 0):
        c = int(np.flatnonzero(~(W > 0))[0])
        corrupt(path, f"'cluster_weights' must be positive; cluster {c} has {W[c]:g}")
    summed = np.bincount(labels, weights=weights, minlength=k)
    if not np.allclose(summed, W, rtol=1e-8, atol=0):
        c = int(np.argmax(np.abs(summed - W) / W))
        corrupt(path, f"'cluster_weights' does not match 'weights' and 'labels' (cluster {c}: "
                    f"{W[c]:.17g}, its members' weights sum to {summed[c]:.17g})")
    slack = 1e-4  # float32 kernels, summation order
    kernel = meta["kernel"]
    unit = kernel in ("rbf", "laplacian", "chi2", "cosine")  # |K(x, y)| <= 1
    psd_kernel = kernel in _PSD_KERNELS or (kernel == "poly" and meta.get("coef0", 1.0) >= 0)
    ncut = result.ncut
    if params.get("objective", "kmeans") == "ncut" and ncut is not None:
        # The fit's weights are the degree weights times the degrees (Dhillon, Guan and
        # Kulis, "Kernel k-means, spectral clustering and normalized cuts").
        if not np.allclose(weights, ncut.degree_weights * ncut.degrees, rtol=1e-8, atol=0):
            corrupt(path, "'weights' does not match 'degree_weights' times 'degrees'")
        if unit and np.any(ncut.degrees > ncut.degree_weights.sum() * (1 + slack)):
            corrupt(path, f"'degrees' exceed the sum of 'degree_weights' (the {kernel} kernel "
                        f"is at most 1)")
    if params.get("approx", "none") == "nystroem":
        _check_nystroem(path, result, slack, unit, psd_kernel)
        centers = result.nystroem.centers
        expected = W ** 2 * np.einsum("ij,ij->i", centers, centers)
        if not np.allclose(g, expected, rtol=slack, atol=slack * W ** 2 * 1e-12):
            corrupt(path, "'inner_sums' does not match 'centers' and 'cluster_weights'")
        return
    state = result.psd
    repair = state.repair if state is not None else "none"
    if repair == "clip":
        # Eigenvectors of the centred kernel: orthonormal columns; the grand mean is the mean
        # of the column means.
        V = state.components
        if not np.allclose(V.T @ V, np.eye(V.shape[1]), rtol=0, atol=1e-6):
            corrupt(path, "'psd_components' are not orthonormal eigenvectors")
        means = state.col_means
        if abs(state.grand_mean - means.mean()) > 1e-8 * (1 + np.max(np.abs(means))):
            corrupt(path, "meta 'psd_grand_mean' is not the mean of 'psd_col_means'")
        if kernel == "sigmoid" and np.any(np.abs(means) > 1 + slack):
            corrupt(path, "'psd_col_means' exceed 1, the bound of the sigmoid kernel")
    # Lingoes' repair makes the centred kernel positive semidefinite, not K' itself (K' =
    # K − σ/n·11ᵀ + σI): a cluster's inner sum can be below 0 (the distances are not)
    psd = (psd_kernel or repair == "clip"
           or (bool(meta.get("psd_checked")) and meta.get("psd") is True))
    diag = None
    if repair != "clip":
        if result.X_fit is not None and kernel not in ("precomputed", "precomputed-distance"):
            with np.errstate(all="ignore"):
                diag = result.kernel.diag(result.X_fit)
            if not np.all(np.isfinite(diag)):
                i = int(np.flatnonzero(~np.isfinite(diag))[0])
                corrupt(path, f"the {kernel} kernel of 'X_fit' row {i + 1} with itself is not "
                            f"a finite number (overflow)")
        elif state is not None and state.train_diag is not None:
            diag = state.train_diag
        if diag is not None and ncut is not None:
            diag = diag / ncut.degrees ** 2
        if diag is not None and repair == "lingoes":
            diag = diag + state.sigma * (1.0 - 1.0 / labels.shape[0])
    if psd:
        if diag is not None and np.all(np.isfinite(diag)):
            bound = np.bincount(labels, weights=weights * np.sqrt(np.maximum(diag, 0)),
                                minlength=k) ** 2
        else:
            bound = None
        scale = bound if bound is not None else np.abs(g)
        low = g < -slack * scale - 1e-300
        if np.any(low):
            c = int(np.flatnonzero(low)[0])
            corrupt(path, f"'inner_sums' must be >= 0 for the {kernel} kernel; cluster {c} has "
                        f"{g[c]:g}")
        if bound is not None:
            high = g > bound * (1 + slack) + 1e-300
            if np.any(high):
                c = int(np.flatnonzero(high)[0])
                corrupt(path, f"'inner_sums' is too large for the {kernel} kernel: cluster {c} "
                            f"has {g[c]:g}, at most {bound[c]:g} for its points and weights")
    elif kernel == "sigmoid":
        # |K| ≤ 1; Lingoes' K' = K − σ/n·11ᵀ + σI adds at most σ/n off and σ on the diagonal
        sigma = state.sigma if repair == "lingoes" and state is not None else 0.0
        most = W ** 2 * (1 + sigma / labels.shape[0]) + sigma * np.bincount(
            labels, weights=weights ** 2, minlength=k)
        high = np.abs(g) > most * (1 + slack)
        if np.any(high):
            c = int(np.flatnonzero(high)[0])
            corrupt(path, f"'inner_sums' is too large for the sigmoid kernel: cluster {c} has "
                        f"{g[c]:g}, at most {most[c]:g} in absolute value")


def _kernel_offset(path, arrays, meta, d):
    """``kernel_offset`` (format version 2), checked, or None."""
    if "kernel_offset" not in arrays:
        return None
    if meta["format_version"] < 2:
        corrupt(path, "'kernel_offset' needs format_version 2")
    if meta["kernel"] not in CENTRED_KERNELS:
        corrupt(path, f"'kernel_offset' is not used by the {meta['kernel']} kernel")
    return checked_array(path, arrays, "kernel_offset", (d,), "f")


def _params(meta, params, offset=None):
    """The estimator's parameters of a model file (those of its meta, and ``params``: those
    of its state parts) and its resolved kernel."""
    kernel = meta["kernel"]
    gamma = float(meta["gamma"]) if "gamma" in meta and meta["gamma"] is not None else None
    degree = int(meta.get("degree", 3))
    coef0 = float(meta.get("coef0", 1.0))
    seed = meta.get("seed")
    params = dict(
        n_clusters=meta["n_clusters"], kernel=kernel,
        gamma=gamma if gamma is not None else "median", degree=degree, coef0=coef0,
        n_init=max(1, int(meta.get("n_init", 1))), algorithm=meta.get("algorithm", "auto"),
        random_state=seed if isinstance(seed, int) else None,
        dtype=np.float32 if meta["dtype"] == "float32" else np.float64, **params)
    return params, with_offset(Kernel(kernel, gamma, degree, coef0), offset)
