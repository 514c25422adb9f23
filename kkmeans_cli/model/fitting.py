"""A fit of checked arrays: the kernel source (stage 1), the restarts on it (stage 2,
``engine/run.py``), and the :class:`~kkmeans_cli.engine.records.FitResult` the estimator
copies into its fitted attributes.

Everything here takes arrays that ``KernelKMeans.fit`` has checked, the estimator's
validated parameters (a dict, ``get_params()``) and the :class:`~kkmeans_cli.model.planning.FitPlan`
of the fit, and returns records; nothing reads or writes an estimator.
"""
import time
import warnings

import numpy as np

from ..engine.features import default_rank
from ..engine.ncut import ncut_fit_kernel, ncut_value
from ..engine.records import FitResult, FitSpec, GraphState, NcutState
from ..engine.run import run_restarts
from ..engine.threads import blas_threads
from ..errors import DataError, KKMeansWarning
from ..kernels import nystroem
from ..kernels.functions import Kernel, check_range, data_offset, resolve_gamma
from ..kernels.graph_fit import fit_graph
from ..kernels.psd import PRECOMPUTED, check_and_repair
from ..kernels.psd import fit_stats as psd_fit_stats
from ..kernels.sources import BlockedKernel, InMemoryKernel, LazyKernel


def fit_spec(params, plan, init_labels=None):
    """The frozen :class:`FitSpec` of a fit from the validated ``params`` and the ``plan``."""
    init = params["init"] if init_labels is None else "labels"
    return FitSpec(n_clusters=int(params["n_clusters"]), init=init, n_init=int(params["n_init"]),
                   max_iter=int(params["max_iter"]), tol=float(params["tol"]),
                   algorithm=params["algorithm"], objective=params["objective"],
                   refine=params["refine"], solver=params["solver"], n_threads=plan.n_threads,
                   n_features=plan.n_features, screen=plan.screen and init_labels is None)


def nystroem_plan(params, n):
    """The :class:`~kkmeans_cli.kernels.nystroem.NystroemPlan` of a Nyström fit of n points."""
    k = int(params["n_clusters"])
    m = nystroem.resolve_landmarks(params["n_landmarks"], n, k)
    rank = params["nystroem_rank"]
    return nystroem.NystroemPlan(
        n_clusters=k, n_landmarks=m,
        rank=default_rank(k, m) if rank is None else min(int(rank), m),
        random_state=params["random_state"], memory_limit=params["memory_limit"],
        feature_engine=nystroem.feature_engine_applies(params["objective"], params["refine"]))


def resolved_kernel(params, X, gamma_rng):
    """The kernel with resolved parameters and, for rbf and the linear k-means objective,
    the data's mean as ``offset`` (``functions.data_offset``: results do not depend on a
    common shift of the data, even at 10⁸)."""
    name = params["kernel"]
    gamma = resolve_gamma(name, params["gamma"], X, gamma_rng)
    offset = None if name in PRECOMPUTED else data_offset(name, X, params["objective"])
    return Kernel(name, gamma, int(params["degree"]), float(params["coef0"]), offset)


def fit_arrays(X, weights, init_labels, kernel_matrix, params, plan, rngs, progress=None):
    """Fit checked arrays: X (n×d float64, or the n×n matrix of a precomputed kernel), the
    sample weights, the starting labels (int32, or None), a kernel matrix given (or None),
    the validated ``params``, the ``plan`` and the (gamma, fit) generators.

    Returns
    -------
    FitResult
    """
    gamma_rng, fit_rng = rngs
    n_threads = plan.n_threads
    with blas_threads(1):  # OpenMP does the parallel work; see kernels/functions.py for GEMMs
        kernel = resolved_kernel(params, X, gamma_rng)
        if params["kernel"] == "poly":
            gamma = params["gamma"]
            check_range("poly", X, weights.sum(), kernel=kernel,
                        gamma_from=gamma if isinstance(gamma, str) else None)
        t0 = time.perf_counter()
        stage = kernel_stage(X, weights, kernel_matrix, kernel, params, plan, progress)
        source, weights, psd, ncut, nys = stage
        warn_unchecked_psd(source)
        t1 = time.perf_counter()
        spec = fit_spec(params, plan, init_labels)
        restarts = run_restarts(source, weights, init_labels, fit_rng, spec, progress)
        best, inertias = restarts.best, restarts.inertias
        t2 = time.perf_counter()
    check_finite_result(best)
    labels = best.labels.astype(np.intp)
    k = spec.n_clusters
    if nys is not None:
        nys = nystroem.fitted_state(source, nys, best, weights, k)
    built = getattr(source, "build_seconds", 0.0)  # a LazyKernel that built K
    stats = {"kernel_seconds": t1 - t0 + built, "iteration_seconds": t2 - t1 - built,
             "restart_inertias": inertias, "best_restart": restarts.winner,
             "n_threads": n_threads, "storage": storage_used(source)}
    if plan.reason is not None:
        stats["storage_reason"] = plan.reason
    if plan.costs is not None:  # the route chosen by the cost model (model/planning.py)
        stats["route_predicted_seconds"] = {"matrix": plan.costs.matrix,
                                            "screened": plan.costs.screened}
    if not source.holds_matrix and hasattr(source, "kernel_evaluations"):
        stats["kernel_evaluations"] = int(source.kernel_evaluations)
    if psd is not None:
        stats.update(psd_fit_stats(psd, weights, labels, best.inner_sums,
                                   best.cluster_weights, k))
        stats["solver"] = params["solver"]
    stats.update(restarts.stats)
    if ncut is not None:
        ncut = NcutState(ncut.degrees, ncut.degree_weights,
                         ncut_value(best.inner_sums, best.cluster_weights))
    # F of the labels on exactly the kernel_matrix given (not transformed), from Lloyd's
    # final full pass: a sweep computes its measures with it (model/sweep.py).
    outer_sums = (getattr(best, "outer_sums", None) if kernel_matrix is not None
                  and source.holds_matrix and source.K is kernel_matrix else None)
    return FitResult(labels=labels, inertia=best.inertia, inner_sums=best.inner_sums,
                     cluster_weights=best.cluster_weights, n_iter=best.n_iter,
                     converged=best.converged, kernel=kernel, sample_weight=weights,
                     X_fit=X if params["kernel"] not in PRECOMPUTED and nys is None else None,
                     n_features=X.shape[1], fit_stats=stats, psd=psd, ncut=ncut,
                     nystroem=nys, outer_sums=outer_sums)


def warn_unchecked_psd(source):
    """Kernel values computed in blocks leave no matrix for the eigenvalue check of the matrix
    route (``kernels.psd``): a kernel that is not positive semidefinite in general (sigmoid)
    gets the same warning, said as a possibility."""
    why = source.not_euclidean if source.computes_rows and not source.lazy else None
    if why is not None:
        warnings.warn(f"{why}, and a blocked fit holds no kernel matrix to check it: the "
                      f"feature-space distances may not be Euclidean and kernel k-means may not "
                      f"minimise its objective; storage='matrix' checks the kernel matrix and "
                      f"with psd_repair='lingoes' repairs it", KKMeansWarning, stacklevel=3)


def kernel_stage(X, weights, kernel_matrix, kernel, params, plan, progress=None):
    """Stage 1 of a fit: where the iterations read kernel values from (``plan.route``).

    Returns the kernel source, the weights the iterations use, and the fitted state the
    kernel was made with: the ``PSDState`` of the check and repair (None off the matrix
    route), the :class:`~kkmeans_cli.engine.records.NcutState` (objective 'ncut') and the
    :class:`~kkmeans_cli.engine.records.NystroemState` (Nyström), each None when it does not
    apply.
    """
    dtype, n_threads = plan.dtype, plan.n_threads
    if plan.route == "nystroem":
        source, state = nystroem.fit_source(X, kernel, kernel_matrix, nystroem_plan(params,
                                                                                 X.shape[0]),
                                            n_threads, progress)
        return source, weights, None, None, state
    if plan.route in ("blocked", "lazy"):
        blocked = BlockedKernel(kernel, X, dtype=dtype, n_threads=n_threads)
        if plan.route == "blocked" and not (plan.screen and plan.matrix_fits):
            return blocked, weights, None, None, None

        def build():
            K = kernel.matrix(X, dtype=dtype, n_threads=n_threads)
            return InMemoryKernel(K, n_threads=n_threads, diag=blocked.diag)

        # route 'lazy', or screened restarts whose candidates run on the sample's kernel
        # matrix (exact_restarts.adaptive_restarts)
        return LazyKernel(blocked, build, plan.lazy_budget), weights, None, None, None
    n = X.shape[0]
    if kernel_matrix is None:
        K = kernel.matrix(X, dtype=dtype, n_threads=n_threads)
    else:
        K = check_kernel_matrix(kernel_matrix, n, dtype)
    diag = np.array(np.diagonal(K), dtype=np.float64) if kernel.name in PRECOMPUTED \
        else kernel.diag(X)
    if kernel_matrix is not None and kernel.name not in PRECOMPUTED:
        check_given_diagonal(K, diag, kernel)
    # The changes made to the training kernel matrix before clustering; kernel rows of new
    # points are changed the same way (kernels/predict.py, transform_new_rows).
    K, diag, psd = check_and_repair(K, diag, kernel, params["psd_repair"], n_threads)
    psd.fit_diag = diag
    ncut = None
    if params["objective"] == "ncut":
        K, diag, weights, ncut = ncut_fit_kernel(K, diag, weights, n_threads)
    not_euclidean = None
    if psd.checked and not psd.psd and psd.repair == "none":
        not_euclidean = f"this kernel matrix has smallest eigenvalue {psd.lambda_min:.6g}"
    source = InMemoryKernel(K, n_threads=n_threads, diag=diag, not_euclidean=not_euclidean)
    return source, weights, psd, ncut, None


def storage_used(source):
    """How the fit held the kernel: 'matrix', 'blocked', 'blocked, then matrix' (a lazy
    source that built K), or 'features' (Nyström)."""
    if source.lazy:
        return "blocked" if source.matrix is None else "blocked, then matrix"
    if source.computes_rows:
        return "blocked"
    if source.holds_matrix:
        return "matrix"
    return "features"


def check_finite_result(best):
    """Nothing non-finite leaves a fit (a model file, a table, labels): a last guard behind
    ``functions.check_range``."""
    values = [np.asarray(best.inertia), best.inner_sums, best.cluster_weights]
    if not all(np.all(np.isfinite(v)) for v in values):
        raise DataError("the kernel sums of this fit are not finite (the data's kernel "
                        "values overflow floating point); rescale the data")


def check_given_diagonal(K, diag, kernel):
    """A given kernel_matrix must be this estimator's K(X, X): its diagonal is compared with
    K(x, x) (O(n); catches e.g. X Xᵀ of uncentred data for the linear kernel, whose matrix
    is the Gram matrix of X − ``kernel.offset``)."""
    scale = max(float(np.max(np.abs(diag))), np.finfo(np.float64).tiny)
    rtol = 1e-5 if K.dtype == np.float32 else 1e-9
    if np.max(np.abs(np.diagonal(K) - diag)) > rtol * scale:
        centred = (" (for the linear kernel: the Gram matrix of the centred data X − mean(X))"
                   if kernel.offset is not None and kernel.name == "linear" else "")
        raise ValueError(f"kernel_matrix is not this estimator's kernel matrix of X: its "
                         f"diagonal differs from K(x, x); compute it with "
                         f"kernel_matrix(X){centred}")


def check_kernel_matrix(K, n, dtype):
    """A given kernel matrix as a C-contiguous (n, n) array of the storage dtype."""
    if not isinstance(K, np.ndarray) or K.shape != (n, n):
        raise ValueError(f"kernel_matrix must be an ({n}, {n}) array")
    if K.dtype != dtype or not K.flags.c_contiguous:
        K = np.ascontiguousarray(K, dtype=dtype)
    return K



# -- the graph kernels -----------------------------------------------------------------------
def check_graph_neighbors(n_neighbors, n):
    """An ``n_neighbors`` given for n points must be below n (``ValueError``): n neighbours
    and more link every point to every other, a graph with no structure to cut."""
    if n_neighbors is not None and n > 1 and int(n_neighbors) >= n:
        raise ValueError(f"n_neighbors={int(n_neighbors)} must be less than the number of "
                         f"points ({n}): each point's neighbours count itself, and {n} would "
                         f"link every point to every other")


def fit_graph_arrays(X, affinity, params, rngs, n_threads):
    """A graph kernel's fit (``kernels/graph_fit.py``): the normalized cut of the
    k-nearest-neighbour graph of the checked points X (kernel 'knn'; ``n_neighbors`` None:
    the engine's default rule, ``kernels.graph.default_neighbors``; its edges weighted by
    ``weighting``), or of a given sparse ``affinity`` (kernel 'precomputed'; X None), as
    weighted kernel k-means with weights w = D on K = σD⁻¹ + D⁻¹AD⁻¹ (Dhillon, Guan & Kulis,
    "Kernel k-means, spectral clustering and normalized cuts", KDD 2004; docs/engine.md).

    The weights of the points are their degrees (a point with u copies carries 1/u of its
    node's degree), so that ``cluster_weights`` (the volumes) are their sums per cluster as
    for every other fit; J − ncut is the same for every labelling with k clusters
    (J = σ(n − k) + ncut, docs/engine.md), so the objective of each start is the winner's J
    shifted by the difference of their cuts.

    Returns
    -------
    FitResult
    """
    _, fit_rng = rngs
    k = int(params["n_clusters"])
    start = "spectral" if params["init"] == "spectral" else "auto"
    t0 = time.perf_counter()
    fit = fit_graph(X, k, affinity=affinity, n_neighbors=params["n_neighbors"],
                    weighting=params["weighting"], start=start, n_init=int(params["n_init"]),
                    max_iter=int(params["max_iter"]), random_state=fit_rng,
                    n_threads=n_threads,
                    neighbor_search=params.get("neighbor_search", "auto"),
                    whiten=params.get("whiten", False))
    t1 = time.perf_counter()
    fitted = fit.fitted_attributes()
    graph, kernel = fit.graph, fit.kernel
    per_node = kernel.degrees / graph.counts
    weights = np.ascontiguousarray(graph.point_labels(per_node), dtype=np.float64)
    ncuts = [float(c) for c in fit.start_ncuts]
    kinds = list(fit.start_kinds)
    info = {key: (list(value) if isinstance(value, tuple) else value)
            for key, value in vars(graph.info).items()}
    if fit.transform is not None:
        info["whitened"] = True         # the graph is that of the whitened points
    if fit.whitening is not None:       # whiten='auto' tried the refit (or on a sample)
        info["whitening"] = dict(fit.whitening)
    if fit.gaussian is not None:        # whiten='auto' tried the Gaussian step
        info["gaussian"] = dict(fit.gaussian)
    if fit.mixture is not None:         # and the Gaussian mixture
        info["mixture"] = dict(fit.mixture)
    if fit.split_test is not None:      # and tested the three against 2k Gaussians
        info["split_test"] = dict(fit.split_test)
    stats = {"kernel_seconds": 0.0, "iteration_seconds": t1 - t0,
             "restart_inertias": [fit.objective - fit.ncut + c for c in ncuts],
             "best_restart": fit.chosen_start, "n_threads": int(n_threads),
             "storage": "graph", "graph": info, "start_kinds": kinds,
             "best_start": fit.start, "start_ncuts": ncuts,
             "refine_moves": int(fit.hartigan_moves), "sigma": float(kernel.sigma),
             "ncut": float(fit.ncut)}
    name = "knn" if X is not None else "precomputed"
    return FitResult(labels=fitted["labels_"], inertia=float(fit.objective),
                     inner_sums=np.asarray(fitted["inner_sums_"], dtype=np.float64),
                     cluster_weights=np.asarray(fitted["cluster_weights_"], dtype=np.float64),
                     n_iter=int(fit.n_iter), converged=bool(fit.converged),
                     kernel=Kernel(name), sample_weight=weights, X_fit=None,
                     n_features=(X if X is not None else affinity).shape[1], fit_stats=stats,
                     graph=GraphState(fit.model(), info, float(fit.ncut)))
