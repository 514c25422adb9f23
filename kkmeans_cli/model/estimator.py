"""``KernelKMeans``: weighted kernel k-means with a scikit-learn style API."""
import time

import numpy as np
from sklearn.base import (BaseEstimator, ClassNamePrefixFeaturesOutMixin, ClusterMixin,
                          TransformerMixin)
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from .. import _options
from ..errors import DataError, OptionConflictError, TooFewDistinctPointsError
from ..engine.lloyd import LloydResult, lloyd
from ..engine.starts import kmeans_plusplus, random_centres
from ..engine.threads import blas_threads, effective_n_threads
FLOAT_TINY = float(np.finfo(np.float64).tiny)
from ..kernels.functions import (FLOAT_MAX, Kernel, check_range, count_distinct, data_offset,
                                 resolve_gamma)
from ..kernels.psd import PRECOMPUTED
from ..kernels.sources import BlockedKernel, InMemoryKernel, LazyKernel
from .params import PARAMETER_CONSTRAINTS, fit_rngs, resolve_dtype, validate_params
from .planning import ELKAN_MAX_FEATURES, elkan_pays_blocked, plan_fit, route_of

# The planning thresholds (LAZY_MIN_N, LAZY_BUDGET, ELKAN_MAX_FEATURES, ELKAN_MIN_CLUSTERS,
# SMALL_N) live with the rules that use them, in model/planning.py.
_D = _options.DEFAULTS

# Checks of scikit-learn's ``check_estimator`` that cannot hold for kernel k-means, with the
# reason (pass to ``check_estimator``/``parametrize_with_checks`` as ``expected_failed_checks``;
# scikit-learn ≥ 1.6 keeps this list outside the tags).
EXPECTED_FAILED_CHECKS = {
    "check_sample_weight_equivalence_on_dense_data": (
        "an integer weight and repeated rows give the same objective (tests/test_sklearn_api.py "
        "checks it from the same start), but the random choices are drawn over the rows: "
        "k-means++ and the median-gamma sample of pairs see n rows in one case and the "
        "repeated rows in the other, so the starts, gamma and hence the local optimum reached "
        "differ"),
    # These two fit the default k = 8 on 16 rows holding 4 distinct points before testing
    # what they are about (the shape of sample_weight, and that it is not modified).
    "check_sample_weights_shape": (
        "its fit asks for 8 clusters of 4 distinct points, which kernel k-means refuses "
        "(TooFewDistinctPointsError) rather than return empty clusters; the shape check itself "
        "holds (tests/test_sklearn_api.py)"),
    "check_sample_weights_not_overwritten": (
        "its fit asks for 8 clusters of 4 distinct points, which kernel k-means refuses "
        "(TooFewDistinctPointsError); fit does not modify sample_weight "
        "(tests/test_sklearn_api.py)"),
}


def expected_failed_checks(estimator):
    """:data:`EXPECTED_FAILED_CHECKS`: check name → why it cannot hold."""
    return dict(EXPECTED_FAILED_CHECKS)


class KernelKMeans(ClassNamePrefixFeaturesOutMixin, TransformerMixin, ClusterMixin,
                   BaseEstimator):
    """Kernel k-means clustering (weighted, exact, Lloyd iterations on the kernel matrix).

    A scikit-learn estimator: parameters are checked against ``_parameter_constraints``
    (``params.py``) and their combinations by ``params.check_param_combination`` when ``fit``
    starts (``InvalidParameterError``); it works with ``clone``, ``Pipeline``,
    ``GridSearchCV`` and pickle; ``predict`` and ``transform`` do not modify the estimator.

    Minimises Σ_i w_i ‖φ(x_i) − μ_{c(i)}‖² in the feature space of a kernel, with the squared
    distance d(i, c) = K_ii − 2 F[c, i]/W_c + g_c/W_c² computed from the outer sums
    F[c, i] = Σ_{j∈c} w_j K_ij and inner sums g_c = Σ_{i,j∈c} w_i w_j K_ij.

    Parameters
    ----------
    n_clusters : int, default 8
        Number of clusters k, 1 ≤ k ≤ n_samples.
    kernel : {'rbf', 'linear', 'poly', 'sigmoid', 'laplacian', 'chi2', 'cosine', 'precomputed'}
        Kernel function; 'precomputed' means X is the n×n kernel matrix.
    gamma : float, 'median' or 'scale', default 'median'
        Width of rbf/laplacian/chi2, scale of poly/sigmoid. 'median': γ·median pair distance
        = ½ (for rbf γ = 1/(2·median ‖x−y‖²)) on a seeded sample of pairs; 'scale':
        1/(n_features·Var(X)). The resolved value is ``gamma_``.
    degree : int, default 3
        Degree of the poly kernel.
    coef0 : float, default 1.0
        Offset of the poly and sigmoid kernels.
    init : 'k-means++', 'spectral', 'random' or array of shape (n_samples,), default 'k-means++'
        Starting centres chosen in feature space, or starting labels in 0..k−1. 'spectral':
        k-means on the leading eigenvectors of K (the factor VΛ^½ of K; see ``optima.py``).
        With 'k-means++' and several restarts (or ``objective='ncut'``) restart 0 is a
        spectral start and the others k-means++ (``fit_stats_['start_kinds']``).
    n_init : int, default 20
        Restarts (one when ``init`` is an array); the lowest inertia wins. The kernel matrix is
        computed once for all of them.
    max_iter : int, default 300
    tol : float, default 1e-4
        Stop when the relative change of the objective is at most tol (0: when labels stop
        changing).
    algorithm : {'auto', 'lloyd', 'elkan'}, default 'auto'
        The iteration scheme; both give the same labels, inertia and iterations from the same
        start. 'elkan' skips distances with bounds (``elkan.py``) and needs a positive
        semidefinite kernel. 'auto': Elkan on a blocked kernel and on Nyström features,
        Lloyd on a kernel matrix in memory (see :meth:`_scheme`).
    random_state : int, RandomState instance, numpy Generator or None
        Seeds every random choice (gamma sample, starts). Same int → same result, whatever
        ``n_threads``. A ``RandomState`` (or None: numpy's global one) is drawn from, as in
        scikit-learn; a ``Generator`` lends its seed sequence.
    dtype : {'float64', 'float32'} or the numpy type, default 'float64'
        Storage of the kernel matrix; sums are always float64.
    n_threads : int or None
        OpenMP and BLAS threads (None: every core).
    approx : {'none', 'nystroem'}, default 'none'
        'nystroem': k-means on the explicit features φ(x) = K(x, L) K_LL^{-½} of m landmarks L
        (seeded, uniform), O(n·m) memory instead of the n×n matrix (see ``nystroem.py``).
    n_landmarks : int or None
        m for Nyström; None: min(n, max(300, 20·k), 1000) (``memory.default_landmarks``).
    nystroem_rank : int or None
        s for Nyström: the features are projected on the top s eigenvectors of the landmarks'
        kernel matrix (rank-restricted Nyström, ``engine/features.py``); None: min(m, ⌈k/0.2⌉)
        (``features.default_rank``); m: the full Nyström kernel.
    storage : {'auto', 'matrix', 'blocked'}, default 'auto'
        'matrix': the kernel matrix is computed once and held (shared by every restart).
        'blocked': it is never held; kernel values are recomputed in blocks when the
        iterations need them (exact, O(n·k) memory besides the data, slower per pass;
        Hartigan's refinement moves the same points from kernel rows of the points near a
        boundary; above 2 × the sample size the restarts are screened on a sample and the
        promising ones completed, ``engine/exact_restarts.py``). 'auto': 'blocked' when the
        kernel matrix does not fit ``memory_limit`` (``memory.choose_storage``; a refusal
        only when no exact route fits), else 'matrix', except for a fit with a single start
        (``n_init=1`` or ``init`` labels) of ≥ 4096 points on a kernel that is positive
        semidefinite by construction: that one starts blocked with Elkan and builds the
        matrix only if the iterations turn out to need most of it (``fit_stats_['storage']``
        and ``['storage_reason']`` say which route ran and why). Results equal 'matrix'
        from the same start, up to exact ties (blocked kernel values round differently).
    memory_limit : int, str or None
        Bytes (or a size such as '8G') the fit may allocate; None: 80% of the available RAM.
        A fit that would need more raises ``MemoryPlanError`` before allocating
        (see ``memory.py``).
    objective : {'kmeans', 'ncut'}, default 'kmeans'
        'ncut': the normalized cut, as weighted kernel k-means with weights u_i·d_i
        (degrees d_i = Σ_j u_j K_ij, u the sample weights) on the kernel K_ij/(d_i d_j)
        (Dhillon, Guan & Kulis 2004; see ``optima.py``). ``ncut_`` holds its value.
    refine : {'auto', 'hartigan', 'none'}, default 'auto'
        'hartigan': after Lloyd converges, move single points while a move lowers the exact
        objective, alternating with Lloyd until both are stable. 'auto': 'hartigan' for the
        estimator's own starts, 'none' when ``init`` is an array of labels (then the result
        is Lloyd's from exactly that start).
    psd_repair : {'none', 'lingoes', 'clip'}, default 'none'
        Kernels that are not PSD by construction (sigmoid, precomputed, precomputed-distance,
        poly with coef0 < 0) are checked (λ_min of the double-centred K; a ``KKMeansWarning``
        when negative). 'lingoes': K + σ(I − 11ᵀ/n), σ = −λ_min, which keeps the optimal
        clustering (the objective grows by σ(n − k) for unit weights); 'clip': negative
        eigenvalues set to zero (changes the clustering; n ≤ 5000). See ``psd.py``.
    solver : {'lloyd', 'embed'}, default 'lloyd'
        'embed': k-means on V Λ^½ of K = V Λ Vᵀ (all eigenvectors for n ≤ 2000, else the
        leading ones), scored on K; a cross-check of Lloyd (see ``embed.py``).
    cluster : distributed.Client, str or None
        Run the Nyström fit on a Dask cluster (``distributed/``): a ``Client``, ``'local:N'``
        (N worker processes on 127.0.0.1 for the call) or a scheduler address or file. X may
        then be a Dask array or a file path read by the workers. A Dask array as X with
        ``cluster=None`` uses the current default client.

    Attributes
    ----------
    labels_ : ndarray of intp, shape (n_samples,)
    inertia_ : float
        Σ_i w_i d(i, labels_i).
    inner_sums_ : ndarray, shape (k,)
        g_c of the centres ``labels_`` are assigned to (those of ``labels_`` once converged).
    cluster_weights_ : ndarray, shape (k,)
        W_c of those centres.
    cluster_sizes_ : ndarray of int64, shape (k,)
        Members of each cluster in ``labels_``.
    n_iter_ : int
    gamma_ : float or None
        The resolved gamma.
    kernel_ : Kernel
        The kernel with resolved parameters. For rbf and the linear kernel (objective
        'kmeans') ``kernel_.offset`` is the mean of the training rows, subtracted from every
        row before the kernel is evaluated (fit, predict, measures), so that data far from
        the origin lose no precision (``kernels.functions.data_offset``). ``inertia_`` is
        Σ w_i ‖φ(x_i) − μ_c‖², which no common shift changes: for the linear kernel it is
        the k-means inertia of X itself.
    fit_stats_ : dict
        Seconds spent on the kernel matrix and iterations, the inertia of each restart, the
        start method of each restart (``start_kinds``) and of the winner (``best_start``),
        and for the winner the objective of its start, after Lloyd and after refinement
        (``start_objective``, ``lloyd_objective``, ``refined_objective``, ``refine_moves``).
    ncut_ : float
        With ``objective='ncut'``: Σ_c cut(c)/vol(c) = k − Σ_c links(c, c)/vol(c).
    degrees_, degree_weights_ : ndarray, shape (n_samples,)
        With ``objective='ncut'``: the degrees d and the sample weights u they were made with.
    """

    _parameter_constraints = PARAMETER_CONSTRAINTS

    def __init__(self, n_clusters=_D["n_clusters"], *, kernel=_D["kernel"], gamma=_D["gamma"],
                 degree=_D["degree"], coef0=_D["coef0"], init=_D["init"], n_init=_D["n_init"],
                 max_iter=_D["max_iter"], tol=_D["tol"], algorithm=_D["algorithm"],
                 random_state=None, dtype=_D["dtype"], n_threads=None, approx=_D["approx"],
                 n_landmarks=None, memory_limit=None, objective=_D["objective"],
                 refine=_D["refine"], psd_repair=_D["psd_repair"], solver=_D["solver"],
                 storage=_D["storage"], nystroem_rank=None, cluster=None):
        self.n_clusters = n_clusters
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.algorithm = algorithm
        self.random_state = random_state
        self.dtype = dtype
        self.n_threads = n_threads
        self.psd_repair = psd_repair
        self.solver = solver
        self.approx = approx
        self.n_landmarks = n_landmarks
        self.memory_limit = memory_limit
        self.objective = objective
        self.refine = refine
        self.storage = storage
        self.nystroem_rank = nystroem_rank
        self.cluster = cluster

    # -- scikit-learn conventions ------------------------------------------------------------
    def _validate_params(self):
        """Every parameter against ``_parameter_constraints``, then the rules between them
        (:func:`kkmeans_cli.params.validate_params`; raises ``InvalidParameterError``)."""
        validate_params(self)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # A precomputed kernel takes the n×n kernel (or distance) matrix as X.
        tags.input_tags.pairwise = self.kernel in PRECOMPUTED
        tags.input_tags.positive_only = self.kernel == "chi2"
        tags.input_tags.allow_nan = False
        tags.input_tags.sparse = False
        # transform returns float64 distances whatever the input's type.
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags

    @property
    def _n_features_out(self):
        """Columns of :meth:`transform` (one distance per cluster), for get_feature_names_out."""
        return self.n_clusters

    # -- fitting -----------------------------------------------------------------------------
    def fit(self, X, y=None, sample_weight=None, *, kernel_matrix=None):
        """Cluster X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The data, or the n×n kernel matrix for ``kernel='precomputed'``.
        y : ignored
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative weights (weighted kernel k-means); 1 for every point by default.
        kernel_matrix : ndarray of shape (n_samples, n_samples), optional
            K(X, X) for this estimator's kernel, already computed (by :meth:`kernel_matrix`),
            e.g. shared by the fits of a sweep over k. Not copied. Its diagonal is checked
            against K(x, x) (a ``ValueError`` if it differs).

        Returns
        -------
        self
        """
        self._validate_params()
        if _on_cluster(self, X):
            from ..distributed import api

            return api.fit(self, X, sample_weight, fit_rngs(self.random_state))
        X = _check_data(X, self.kernel, estimator=self, reset=True)
        n = X.shape[0]
        if self.n_clusters > n:
            raise ValueError(f"n_clusters={self.n_clusters} is larger than the number of "
                             f"samples (n_samples={n})")
        weights = _check_weights(sample_weight, n, self.n_clusters)
        _check_fit_values(X, self.kernel, weights, self.n_clusters, self.objective)
        init_labels = self._check_init_labels(n)
        # Resolved once, before anything large is allocated (like scikit-learn's self._n_threads).
        self._plan = plan = plan_fit(self.get_params(), n, X.shape[1],
                                     kernel_given=kernel_matrix is not None)
        gamma_rng, fit_rng = fit_rngs(self.random_state)
        n_threads = plan.n_threads
        with blas_threads(1):  # OpenMP does the parallel work; see kernels.py for GEMMs
            self.kernel_ = self._resolved_kernel(X, gamma_rng)
            if self.kernel == "poly":
                check_range("poly", X, weights.sum(), kernel=self.kernel_)
            t0 = time.perf_counter()
            source, weights = self._kernel_source(X, weights, kernel_matrix, plan)
            t1 = time.perf_counter()
            restarts = self._run_restarts(source, weights, init_labels, fit_rng, n_threads)
            best, inertias = restarts.best, restarts.inertias
            t2 = time.perf_counter()
        _check_finite_result(best)
        self.gamma_ = self.kernel_.gamma
        self.labels_ = best.labels.astype(np.intp)
        self.inertia_ = best.inertia
        self.inner_sums_ = best.inner_sums
        self.cluster_weights_ = best.cluster_weights
        self.cluster_sizes_ = np.bincount(self.labels_, minlength=self.n_clusters).astype(np.int64)
        self.n_iter_ = best.n_iter
        self.converged_ = best.converged
        self.sample_weight_ = weights
        self.X_fit_ = X if self.kernel not in PRECOMPUTED else None
        if self.approx == "nystroem":
            from ..kernels.nystroem import finish_fit

            finish_fit(self, source, best, weights)
        self.n_features_in_ = X.shape[1]
        # F of labels_ on exactly the kernel_matrix given (not transformed), from Lloyd's
        # final full pass: a sweep computes its measures with it (sweep.py).
        self._fit_outer_sums = (getattr(best, "outer_sums", None) if kernel_matrix is not None
                                and source.holds_matrix and source.K is kernel_matrix else None)
        built = getattr(source, "build_seconds", 0.0)  # a LazyKernel that built K
        self.fit_stats_ = {"kernel_seconds": t1 - t0 + built,
                           "iteration_seconds": t2 - t1 - built,
                           "restart_inertias": inertias,
                           "best_restart": int(np.argmin(inertias)),
                           "n_threads": n_threads, "storage": _storage_used(source)}
        if plan.reason is not None:
            self.fit_stats_["storage_reason"] = plan.reason
        if not isinstance(source, InMemoryKernel) and hasattr(source, "kernel_evaluations"):
            self.fit_stats_["kernel_evaluations"] = int(source.kernel_evaluations)
        self._psd_finish(weights)
        self._finish_optima(best, inertias)
        self.fit_stats_.update(restarts.stats)
        return self

    def _kernel_source(self, X, weights, kernel_matrix, plan):
        """Stage 1 of fit: where the iterations read kernel values from (``plan.route``).

        Returns the kernel source and the weights the iterations use.
        """
        dtype, n_threads = plan.dtype, plan.n_threads
        if plan.route == "nystroem":
            from ..kernels.nystroem import fit_source

            return fit_source(self, X, kernel_matrix, n_threads), weights
        if plan.route in ("blocked", "lazy"):
            self.psd_, self._psd_pending = None, False
            blocked = BlockedKernel(self.kernel_, X, dtype=dtype, n_threads=n_threads)
            if plan.route == "blocked":
                return blocked, weights

            def build():
                K = self.kernel_.matrix(X, dtype=dtype, n_threads=n_threads)
                return InMemoryKernel(K, n_threads=n_threads, diag=blocked.diag)

            return LazyKernel(blocked, build, plan.lazy_budget), weights
        n = X.shape[0]
        if kernel_matrix is None:
            K = self.kernel_.matrix(X, dtype=dtype, n_threads=n_threads)
        else:
            K = _check_kernel_matrix(kernel_matrix, n, dtype)
        diag = np.array(np.diagonal(K), dtype=np.float64) if self.kernel in PRECOMPUTED \
            else self.kernel_.diag(X)
        if kernel_matrix is not None and self.kernel not in PRECOMPUTED:
            _check_given_diagonal(K, diag, self.kernel_)
        K, diag, weights = self._transform_fit_kernel(K, diag, weights, n_threads)
        return InMemoryKernel(K, n_threads=n_threads, diag=diag), weights

    def starts_blocked(self, n_samples, n_features):
        """Whether :meth:`fit` of data of this shape (no ``kernel_matrix``) starts without the
        kernel matrix (route 'blocked' or 'lazy' of ``model/planning.py``), so that building K
        for other uses (a silhouette) would be work and memory the fit avoids."""
        return route_of(self.get_params(), n_samples, n_features)[0] in ("blocked", "lazy")

    def _transform_fit_kernel(self, K, diag, weights, n_threads):
        """Changes made to the training kernel matrix before clustering (none yet).

        Whatever is changed here must be recorded on ``self`` so that
        :meth:`_transform_rows` can change kernel rows of new points the same way.
        Returns K, diag (K_ii, float64) and the weights the iterations use.
        """
        K, diag = self._psd_transform(K, diag, n_threads)
        K, diag, weights = self._ncut_transform(K, diag, weights, n_threads)
        return K, diag, weights

    def _transform_rows(self, Kb, diag, X_rows):
        """The changes of :meth:`_transform_fit_kernel` applied to kernel rows K(new, train)
        and to K(new, new) (``diag``, None when unknown) of the points ``X_rows`` (rows of
        the kernel matrix itself for a precomputed kernel). Returns Kb, diag; writes nothing
        to ``self``, so predictions may run in several threads at once."""
        Kb, diag = self._psd_transform_rows(Kb, diag, X_rows)
        Kb, diag = self._ncut_rows(Kb, diag)
        return Kb, diag

    def _run_restarts(self, source, weights, init_labels, rng, n_threads):
        """Stage 2 of fit: every start, iterated; the lowest inertia wins (first on ties).
        Returns the :class:`~kkmeans_cli.engine.restarts.Restarts`."""
        from ..engine import exact_restarts
        from ..engine.restarts import Restarts

        if self.solver == "embed":
            return Restarts(*self._embed_restarts(source, weights, init_labels, rng,
                                                  n_threads))
        if source.runs_restarts:  # Nyström's explicit-feature engine
            return source.run_restarts(self, weights, init_labels, rng, n_threads)
        best, inertias = None, []
        n_init = 1 if init_labels is not None else self.n_init
        self._reset_optima(n_init, init_labels is not None, n_threads)
        if exact_restarts.applies(self, source, init_labels, n_init):
            # no kernel matrix to share: candidates on a sample, the best completed
            return exact_restarts.screened_restarts(self, source, weights, rng, n_threads,
                                                    n_init)
        for restart in range(n_init):
            start = (init_labels if init_labels is not None
                     else self._start(source, weights, rng, restart))
            result = self._iterate(source, weights, start, n_threads)
            result = self._refine(source, weights, result, n_threads, start)
            inertias.append(result.inertia)
            if best is None or result.inertia < best.inertia:
                best = result
        return Restarts(best, inertias)

    def _iterate(self, source, weights, start, n_threads, iterations_done=0):
        """Iterations from one start (the scheme chosen by ``algorithm``)."""
        if isinstance(source, LazyKernel):
            return self._iterate_lazy(source, weights, start, n_threads)
        if self._scheme(source) == "elkan":
            from ..engine.elkan import elkan

            return elkan(source, weights, start, self.n_clusters, max_iter=self.max_iter,
                         tol=self.tol, n_threads=n_threads, iterations_done=iterations_done)
        return lloyd(source, weights, start, self.n_clusters, max_iter=self.max_iter,
                     tol=self.tol, n_threads=n_threads, iterations_done=iterations_done)

    def _scheme(self, source, plan=None):
        """'lloyd' or 'elkan' for this source (``plan``: this fit's :class:`FitPlan`).

        Rule for 'auto', measured with benchmarks/bench_elkan.py (n = 20,000, blobs, rbf,
        k ∈ {5, 20, 50, 200}, d ∈ {2, 10, 20, 50}; Lloyd time / Elkan time):

        - kernel matrix in memory: Lloyd (Elkan 0.25–0.63× at d = 2, 1.2–2.3× only at d = 50
          with k ≥ 50): one streaming pass over K is cheaper than Elkan's bookkeeping and
          scattered reads of K;
        - blocked kernel: Elkan (2.8–31×: it computes 2–100× fewer kernel values), except in
          many dimensions with few clusters (d = 50, k = 5: 0.75×), where the bounds prune
          little — Lloyd when d ≥ ``ELKAN_MAX_FEATURES`` and k < ``ELKAN_MIN_CLUSTERS``;
        - Nyström features: Elkan for data of d < ``ELKAN_MAX_FEATURES`` (1.25–3.2× at
          d ≤ 20), Lloyd above (0.41–0.66× at d = 50: one BLAS product per iteration wins).

        Elkan's bounds need the triangle inequality, so a kernel that is not positive
        semidefinite (and not repaired) always runs Lloyd; asking for Elkan there is an error.
        """
        euclidean, why = self._euclidean(source)
        if self.algorithm == "elkan" and not euclidean:
            raise OptionConflictError(
                f"algorithm='elkan' needs a positive semidefinite kernel (its bounds use the "
                f"triangle inequality in feature space); {why}. Use algorithm='lloyd' or "
                f"psd_repair='lingoes'")
        if self.algorithm != "auto":
            return self.algorithm
        plan = plan or self.__dict__.get("_plan")
        d = plan.n_features if plan is not None else 0
        if not euclidean:
            return "lloyd"
        if source.explicit_features:  # explicit Nyström features
            return "elkan" if d < ELKAN_MAX_FEATURES else "lloyd"
        if isinstance(source, BlockedKernel):
            return "elkan" if elkan_pays_blocked(self.n_clusters, d) else "lloyd"
        return "lloyd"

    def _iterate_lazy(self, source, weights, start, n_threads):
        """Elkan on kernel values computed in blocks, within the source's budget; past it, the
        kernel matrix is built and the iterations go on from where Elkan stopped (Elkan's
        labels after t updates are Lloyd's, so the result is the same)."""
        from ..engine.elkan import elkan

        if source.matrix is not None:
            return self._iterate(source.matrix, weights, start, n_threads)
        first = elkan(source.blocked, weights, start, self.n_clusters, max_iter=self.max_iter,
                      tol=self.tol, n_threads=n_threads, kernel_budget=source.budget)
        if not first.interrupted:
            return first
        rest = self._iterate(source.materialize(), weights, first.labels, n_threads,
                             iterations_done=first.n_iter)
        return LloydResult(labels=rest.labels, distances=rest.distances,
                           inner_sums=rest.inner_sums, cluster_weights=rest.cluster_weights,
                           inertia=rest.inertia, n_iter=rest.n_iter,
                           converged=rest.converged,
                           n_relocated=first.n_relocated + rest.n_relocated,
                           objective_trace=first.objective_trace + rest.objective_trace[1:],
                           n_distances=first.n_distances + rest.n_distances,
                           outer_sums=rest.outer_sums)

    def _euclidean(self, source):
        """Whether the feature-space distances of ``source`` are Euclidean, and why not."""
        if source.explicit_features:
            return True, ""  # explicit features
        psd = getattr(self, "psd_", None)
        if psd is not None and psd.checked and not psd.psd and psd.repair == "none":
            return False, f"this kernel matrix has smallest eigenvalue {psd.lambda_min:.6g}"
        if isinstance(source, BlockedKernel) and self.kernel == "sigmoid":
            return False, "the sigmoid kernel is not positive semidefinite in general"
        return True, ""

    def fit_predict(self, X, y=None, sample_weight=None, **fit_params):
        """Fit and return ``labels_``."""
        return self.fit(X, sample_weight=sample_weight, **fit_params).labels_

    def kernel_matrix(self, X):
        """K(X, X) for this estimator's kernel (gamma and the offset resolved as ``fit``
        would: for the linear kernel the Gram matrix of X − mean(X)), to pass to :meth:`fit`
        as ``kernel_matrix`` for several fits of the same data."""
        self._validate_params()
        X = _check_data(X, self.kernel)
        check_range(self.kernel, X, X.shape[0],
                    offset=data_offset(self.kernel, X, self.objective, quiet=True))
        gamma_rng, _ = fit_rngs(self.random_state)
        n_threads = effective_n_threads(self.n_threads)
        with blas_threads(1):
            kernel = self._resolved_kernel(X, gamma_rng)
            if self.kernel == "poly":
                check_range("poly", X, X.shape[0], kernel=kernel)
            if self.approx == "nystroem":
                from ..kernels.nystroem import shared_features

                return shared_features(self, X, kernel, n_threads)
            self._check_memory(X.shape[0], resolve_dtype(self.dtype))
            return kernel.matrix(X, dtype=resolve_dtype(self.dtype), n_threads=n_threads)

    def scores(self, metrics=("silhouette", "simplified_silhouette", "calinski_harabasz",
                              "davies_bouldin"), *, kernel_matrix=None, **options):
        """Quality measures of ``labels_`` in feature space (see ``kkmeans_cli.metrics``).

        The training kernel matrix is rebuilt from ``X_fit_`` unless ``kernel_matrix`` is given
        (required for ``kernel='precomputed'``). ``options`` go to ``metrics.scores``
        (``max_exact``, ``sample_size``, ``random_state``: the silhouette's sampling rule).

        Returns
        -------
        dict
            name → value; with 'silhouette' also ``silhouette_n_used``.
        """
        from ..measures import metrics as quality

        self._check_fitted()
        n_threads = effective_n_threads(self.n_threads)
        if self.approx == "nystroem":
            if not hasattr(kernel_matrix, "scores"):
                raise ValueError("a Nyström model is scored on its features: pass "
                                 "kernel_matrix=estimator.kernel_matrix(X)")
            return kernel_matrix.scores(self.labels_, self.sample_weight_, n_threads,
                                        metrics=tuple(metrics), **options)
        if kernel_matrix is None:
            if self.X_fit_ is None:
                raise ValueError("a precomputed model needs kernel_matrix to be scored")
            with blas_threads(1):
                kernel_matrix = self.kernel_.matrix(self.X_fit_, dtype=resolve_dtype(self.dtype),
                                                    n_threads=n_threads)
        return quality.scores(kernel_matrix, self.labels_, metrics=tuple(metrics),
                              sample_weight=self.sample_weight_, n_threads=n_threads, **options)

    # -- prediction --------------------------------------------------------------------------
    def predict(self, X, *, kernel_diag=None):
        """Label of the nearest centre for each row of X.

        Uses K(X, X_fit) in row blocks and the stored inner sums and cluster weights only,
        never the training kernel matrix. For ``kernel='precomputed'`` X holds the kernel rows
        K(new, train); ``kernel_diag`` (K(new, new)) is optional there as it does not change
        the labels.
        """
        if _on_cluster(self, X, fitted=True):
            from ..distributed import api

            self._check_fitted()
            return api.predict(self, X)
        labels, _ = self._nearest(X, kernel_diag, want_distances=False)
        return labels

    def transform(self, X, *, kernel_diag=None):
        """Squared feature-space distances d(x, c), shape (n_samples, k)."""
        _, dist = self._nearest(X, kernel_diag, want_distances=True)
        return dist

    def _nearest(self, X, kernel_diag, want_distances):
        from ..engine import _lloyd

        self._check_fitted()
        X = _check_data(X, self.kernel, square=False, estimator=self, reset=False)
        if self.approx == "nystroem":
            from ..kernels.nystroem import nearest

            return nearest(self, X, want_distances)
        n_threads = effective_n_threads(self.n_threads)
        dtype = resolve_dtype(self.dtype)
        n_fit = self.labels_.shape[0]
        expected = n_fit if self.kernel in PRECOMPUTED else self.n_features_in_
        if X.shape[1] != expected:
            what = {"precomputed": "kernel columns", "precomputed-distance": "distance columns"
                    }.get(self.kernel, "features")
            raise ValueError(f"X has {X.shape[1]} {what}, the model expects {expected}")
        # Kernel values of new rows against the training points, summed over them.
        check_range(self.kernel, X, max(n_fit,
                                        float(np.sum(self.sample_weight_))),
                    kernel=self.kernel_, offset=self.kernel_.offset)
        labels_fit = self.labels_.astype(np.int32)
        k = self.n_clusters
        labels = np.empty(X.shape[0], dtype=np.int32)
        dist = np.empty((X.shape[0], k)) if want_distances else None
        row_dist = np.empty(X.shape[0])
        with blas_threads(1):
            F = self._fused_outer_sums(X, labels_fit, n_threads)
            if F is not None:   # the kernel values never stored (rbf; Kernel.fused_outer_sums)
                diag = self.kernel_.diag(X)
                _lloyd.assign(F, self.inner_sums_, self.cluster_weights_, diag, labels,
                              row_dist, n_threads)
                if want_distances:
                    _lloyd.distances(F, self.inner_sums_, self.cluster_weights_, diag, dist,
                                     n_threads)
                return labels.astype(np.intp), dist
            for i0, i1, Kb, diag in self._kernel_row_blocks(X, kernel_diag, dtype, n_threads):
                F = np.empty((k, i1 - i0))
                _lloyd.outer_sums_rows(Kb, 0, labels_fit, self.sample_weight_, F, n_threads)
                if diag is None:
                    # K(x, x) unknown: the labels do not need it, the distances would.
                    lin = np.where(self.cluster_weights_ > 0, -2.0 / self.cluster_weights_, 0)
                    shift = np.where(self.cluster_weights_ > 0,
                                     self.inner_sums_ / self.cluster_weights_ ** 2, np.inf)
                    rel = lin[:, None] * F + shift[:, None]
                    labels[i0:i1] = np.argmin(rel, axis=0)
                    if want_distances:
                        raise ValueError("distances of a precomputed model need kernel_diag, "
                                         "K(x, x) of the new points")
                    continue
                _lloyd.assign(F, self.inner_sums_, self.cluster_weights_, diag,
                              labels[i0:i1], row_dist[i0:i1], n_threads)
                if want_distances:
                    _lloyd.distances(F, self.inner_sums_, self.cluster_weights_, diag,
                                     dist[i0:i1], n_threads)
        return labels.astype(np.intp), dist

    def _fused_outer_sums(self, X, labels_fit, n_threads):
        """F (k×m) of new points from fused kernel values and sums, where the training kernel
        is the kernel function itself (no PSD repair, objective 'kmeans') and the storage
        float64 (a float32 model rounds its kernel values first); None otherwise."""
        psd = getattr(self, "psd_", None)
        if (self.kernel in PRECOMPUTED or self.objective != "kmeans"
                or resolve_dtype(self.dtype) != np.float64
                or (psd is not None and psd.repair != "none")):
            return None
        return self.kernel_.fused_outer_sums(X, self.X_fit_, labels_fit, self.sample_weight_,
                                             self.n_clusters, n_threads)

    def _kernel_row_blocks(self, X, kernel_diag, dtype, n_threads):
        """Yield (i0, i1, K(X[i0:i1], X_fit), K(x, x) or None) in row blocks, transformed as
        the training kernel was (:meth:`_transform_rows`)."""
        if self.kernel in PRECOMPUTED:
            diag = None if kernel_diag is None else np.ascontiguousarray(kernel_diag,
                                                                    dtype=np.float64)
            blocks = [(0, X.shape[0], np.ascontiguousarray(X, dtype=dtype), diag)]
        else:
            blocks = ((i0, i1, Kb, self.kernel_.diag(X[i0:i1])) for i0, i1, Kb in
                      self.kernel_.cross_blocks(X, self.X_fit_, dtype=dtype, n_threads=n_threads))
        for i0, i1, Kb, diag in blocks:
            # X[i0:i1]: which points the rows belong to (a Lingoes shift needs to know when a
            # new point is a training point, psd.py).
            Kb, diag = self._transform_rows(Kb, diag, X[i0:i1])
            yield i0, i1, np.ascontiguousarray(Kb, dtype=dtype), diag

    # -- PSD check and repair, embedding solver (see psd.py, embed.py) --------------------------
    def _psd_transform(self, K, diag, n_threads):
        """The PSD check and ``psd_repair`` of the training kernel; sets ``psd_``."""
        from ..kernels.psd import check_and_repair

        K, diag, self.psd_ = check_and_repair(K, diag, self.kernel_, self.psd_repair, n_threads)
        self.psd_.fit_diag = diag
        self._psd_pending = True
        return K, diag

    def _psd_transform_rows(self, Kb, diag, X_rows):
        """Distance rows to kernel rows (Gower) and the repair, for new points."""
        from ..kernels.psd import transform_rows

        return transform_rows(Kb, diag, getattr(self, "psd_", None), self.kernel,
                              X_new=X_rows if self.X_fit_ is not None else None,
                              X_fit=self.X_fit_)

    def _psd_finish(self, weights):
        """Objectives on the kernel used and on the original one, into ``fit_stats_``."""
        from ..engine.lloyd import objective
        from ..kernels.psd import lingoes_shift, trace_objective

        if not getattr(self, "_psd_pending", False):
            self.psd_ = None
            return
        self._psd_pending = False
        state = self.psd_
        stats = state.stats()
        if state.checked or state.repair != "none":
            used = objective(state.fit_diag, weights, self.inner_sums_, self.cluster_weights_)
            stats["objective_used"] = used
            if state.repair == "lingoes":
                stats["objective_original"] = used - lingoes_shift(
                    state.sigma, self.labels_, weights, self.n_clusters)
            elif state.repair == "clip":
                stats["objective_original"] = trace_objective(
                    state.original_K, state.train_diag, self.labels_, weights, self.n_clusters)
        state.original_K = state.fit_diag = None
        self.fit_stats_.update(stats)
        self.fit_stats_["solver"] = self.solver

    def _embed_restarts(self, source, weights, init_labels, rng, n_threads):
        """``solver='embed'``: k-means on the eigen-embedding of K (``embed.solve``)."""
        from ..engine.embed import solve

        return solve(source, weights, self.n_clusters, rng, self.n_init, self.max_iter,
                     init_labels=init_labels, n_threads=n_threads)

    # -- helpers -----------------------------------------------------------------------------
    def _check_memory(self, n, dtype, kernel_given=False):
        """Refuse (``MemoryPlanError``) before allocating an exact fit past ``memory_limit``."""
        from ..memory import check, plan

        kernel_given = kernel_given or (self.kernel == "precomputed" and dtype == np.float64)
        check(plan(n, self.n_clusters, np.dtype(dtype).name, kernel_given=kernel_given),
              self.memory_limit, k=self.n_clusters, dtype=np.dtype(dtype).name)

    def _start(self, source, weights, rng, restart=0):
        state = getattr(self, "_optima", None)
        if state is not None:   # spectral starts (optima.py); None for the other kinds
            labels = state.spectral_start(source, weights, self.n_clusters, rng, restart)
            if labels is not None:
                return labels
        kind = state.kinds[restart] if state is not None else self.init
        if kind == "random":
            labels, _ = random_centres(source, weights, self.n_clusters, rng)
        else:
            labels, _ = kmeans_plusplus(source, weights, self.n_clusters, rng)
        return labels

    # -- better optima (optima.py): start mix, Hartigan refinement, normalized cut ----------
    def _reset_optima(self, n_init, given_labels, n_threads):
        from ..engine.optima import OptimaState

        self._optima = OptimaState(self, n_init, given_labels, n_threads)

    def _refine(self, source, weights, result, n_threads, start):
        return self._optima.refine(self, source, weights, result, n_threads, start)

    def _finish_optima(self, best, inertias):
        state = self.__dict__.pop("_optima", None)
        if state is not None:
            state.finish(self, best, inertias)

    def _ncut_transform(self, K, diag, weights, n_threads):
        if self.objective != "ncut":
            return K, diag, weights
        from ..engine.optima import ncut_fit_kernel

        return ncut_fit_kernel(self, K, diag, weights, n_threads)

    def _ncut_rows(self, Kb, diag):
        if self.objective != "ncut":
            return Kb, diag
        from ..engine.optima import ncut_rows

        return ncut_rows(self, Kb, diag)

    def _resolved_kernel(self, X, gamma_rng):
        """The kernel with resolved parameters and, for rbf and the linear k-means objective,
        the data's mean as ``offset`` (``kernels.data_offset``: results do not depend on a
        common shift of the data, even at 10⁸)."""
        gamma = resolve_gamma(self.kernel, self.gamma, X, gamma_rng)
        offset = None if self.kernel in PRECOMPUTED else data_offset(self.kernel, X,
                                                                      self.objective)
        return Kernel(self.kernel, gamma, int(self.degree), float(self.coef0), offset)

    def _check_init_labels(self, n):
        if isinstance(self.init, str):
            return None
        labels = np.asarray(self.init)
        if labels.shape != (n,):
            raise ValueError(f"init labels must have shape ({n},), got {labels.shape}")
        if not np.issubdtype(labels.dtype, np.integer):
            if not np.all(np.isfinite(labels)) or np.any(labels != np.round(labels)):
                raise ValueError("init labels must be integers")
        if labels.min() < 0 or labels.max() >= self.n_clusters:
            raise ValueError(f"init labels must lie in 0..{self.n_clusters - 1}")
        return labels.astype(np.int32)

    def _check_fitted(self):
        check_is_fitted(self, "labels_")


def _on_cluster(estimator, X, fitted=False):
    """Whether to run on a Dask cluster (``distributed/api.py``): ``cluster`` is set or X is
    a Dask array (checked without importing Dask). A fitted model predicts in-memory arrays
    in this process."""
    dask_array = type(X).__module__.split(".")[0] == "dask" and hasattr(X, "to_delayed")
    if fitted:
        return dask_array or isinstance(X, str) and getattr(estimator, "cluster", None)
    return dask_array or getattr(estimator, "cluster", None) is not None


def _storage_used(source):
    """How the fit held the kernel: 'matrix', 'blocked', 'blocked, then matrix' (a
    :class:`LazyKernel` that built K), or 'features' (Nyström)."""
    if isinstance(source, LazyKernel):
        return "blocked" if source.matrix is None else "blocked, then matrix"
    if isinstance(source, BlockedKernel):
        return "blocked"
    if isinstance(source, InMemoryKernel):
        return "matrix"
    return "features"


def _check_data(X, kernel, square=True, estimator=None, reset=False):
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
    if kernel == "chi2" and np.any(X < 0):
        raise ValueError("the chi2 kernel needs non-negative data")
    if kernel in PRECOMPUTED and square:
        from ..kernels.psd import check_square

        X = check_square(X, kernel)
    if not X.flags.writeable:  # a read-only buffer (memory map): the engine's views need write
        X = X.copy()
    return np.ascontiguousarray(X)


def _check_fit_values(X, kernel, weights, n_clusters, objective="kmeans"):
    """Refuse data whose kernel sums overflow (``kernels.check_range``) and data with fewer
    distinct points of positive weight than clusters (:class:`TooFewDistinctPointsError`:
    clusters would have to share a point; Lloyd would cycle between coinciding centres)."""
    check_range(kernel, X, float(weights.sum()),
                offset=data_offset(kernel, X, objective, quiet=True))
    distinct = count_distinct(X, n_clusters, weights, kernel)
    if distinct < n_clusters:
        raise TooFewDistinctPointsError(distinct, n_clusters)


def _check_finite_result(best):
    """Nothing non-finite leaves a fit (a model file, a table, labels): a last guard behind
    ``kernels.check_range``."""
    values = [np.asarray(best.inertia), best.inner_sums, best.cluster_weights]
    if not all(np.all(np.isfinite(v)) for v in values):
        raise DataError("the kernel sums of this fit are not finite (the data's kernel "
                        "values overflow floating point); rescale the data")


def _check_weights(sample_weight, n, n_clusters):
    if sample_weight is None:
        return np.ones(n)
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.shape != (n,):
        raise ValueError(f"sample_weight must have shape ({n},), got {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("sample_weight must be finite and non-negative")
    if np.count_nonzero(w) < n_clusters:
        raise ValueError(f"sample_weight has fewer non-zero entries ({np.count_nonzero(w)}) "
                         f"than n_clusters={n_clusters}")
    problem = weights_too_large(w)
    if problem:
        raise DataError(f"sample_weight {problem}")
    return np.ascontiguousarray(w)


def weights_too_large(w):
    """Why sample weights are too large (or too small) for floating point, or None: kernel
    k-means forms sums of up to (Σ w)² weighted kernel values (the inner sums), so 4·(Σ w)²
    must stay below 1.8e308, and (Σ w)² above the smallest normal number 2.2e-308 (below it
    the weight products underflow: k-means++ draws from 0/0). Only the ratios of the weights matter: dividing them all by one number keeps the
    clustering."""
    with np.errstate(over="ignore", invalid="ignore"):
        total = float(np.sum(w, dtype=np.float64))
    if 0.0 < total < FLOAT_TINY ** 0.5:
        return (f"sums to {total:.6g}: (Σw)² must stay above {FLOAT_TINY:.3g} (below it the "
                f"products of weights underflow floating point); multiply the weights by a "
                f"common factor (only their ratios matter)")
    if 4.0 * total * total < FLOAT_MAX:
        return None
    return (f"sums to {total:.6g}: 4·(Σw)² must stay below {FLOAT_MAX:.3g} (kernel k-means "
            f"sums up to (Σw)² weighted kernel values); divide the weights by a common "
            f"factor (only their ratios matter)")


def _check_given_diagonal(K, diag, kernel):
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


def _check_kernel_matrix(K, n, dtype):
    if not isinstance(K, np.ndarray) or K.shape != (n, n):
        raise ValueError(f"kernel_matrix must be an ({n}, {n}) array")
    if K.dtype != dtype or not K.flags.c_contiguous:
        K = np.ascontiguousarray(K, dtype=dtype)
    return K
