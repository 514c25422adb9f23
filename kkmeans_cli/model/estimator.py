"""``KernelKMeans``: weighted kernel k-means with a scikit-learn style API."""
import numpy as np
from scipy import sparse
from sklearn.base import (BaseEstimator, ClassNamePrefixFeaturesOutMixin, ClusterMixin,
                          TransformerMixin)
from sklearn.utils.validation import check_is_fitted

from .. import _options
from ..engine.records import GraphState, NcutState, NystroemState
from ..engine.threads import blas_threads, effective_n_threads
from ..errors import MemoryPlanError
from ..kernels.functions import check_range, data_offset, resolve_dtype
from ..kernels.nystroem import NystroemFeatures, shared_features
from ..kernels.psd import PRECOMPUTED
from ..measures import features as feature_measures
from ..measures import metrics as quality
from ..memory import check, plan
from .checks import (check_data, check_fit_values, check_graph_data, check_graph_weights,
                     check_init_labels, check_kernel_diag, check_weights)
from .fitting import (check_graph_neighbors, fit_arrays, fit_graph_arrays, nystroem_plan,
                      resolved_kernel)
from .params import PARAMETER_CONSTRAINTS, check_graph_settings, fit_rngs, validate_params
from .planning import check_graph_memory, fit_threads, plan_fit, route_of
from .predictor import nearest as predictor_nearest
from .predictor import no_graph_coordinates, predictor


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


#: The fitted attributes of the parts of a FitResult that only some fits have
#: (``engine/records.py``): attribute → field of the part's record.
_PART_ATTRIBUTES = {
    "ncut": (("degrees_", "degrees"), ("degree_weights_", "degree_weights"),
             ("ncut_", "value")),
    "nystroem": (("landmarks_", "landmarks"), ("nystroem_transform_", "transform"),
                 ("n_landmarks_", "n_landmarks"), ("nystroem_rank_", "rank"),
                 ("nystroem_dtype_", "dtype"), ("centers_", "centers"),
                 ("nystroem_stats_", "stats")),
    "graph": (("graph_model_", "model"), ("graph_info_", "info"), ("ncut_", "ncut")),
}


# The same checks for the graph kernel 'knn' (the default), with its reasons.
EXPECTED_FAILED_CHECKS_GRAPH = {
    "check_sample_weight_equivalence_on_dense_data": (
        "a graph fit weighs its points by their degrees: it takes no sample weights but "
        "equal ones (a ValueError says so), and repeated rows are one node of the graph"),
    "check_sample_weights_shape": EXPECTED_FAILED_CHECKS["check_sample_weights_shape"],
    "check_sample_weights_not_overwritten": (
        "its weights are not all equal, which a graph fit refuses (it weighs points by their "
        "degrees); fit does not modify sample_weight (tests/test_sklearn_api.py)"),
}


def expected_failed_checks(estimator):
    """:data:`EXPECTED_FAILED_CHECKS` (for the graph kernel
    :data:`EXPECTED_FAILED_CHECKS_GRAPH`): check name → why it cannot hold."""
    if getattr(estimator, "kernel", None) in _options.GRAPH_KERNELS:
        return dict(EXPECTED_FAILED_CHECKS_GRAPH)
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
    kernel : {'rbf', 'linear', 'poly', 'sigmoid', 'laplacian', 'chi2', 'cosine', 'knn', \
'precomputed', 'precomputed-distance'}
        Kernel function; 'precomputed' means X is the n×n kernel matrix.
        'knn': the normalized cut of the k-nearest-neighbour graph of X (``n_neighbors``,
        ``weighting``), minimised as weighted kernel k-means with weights w = D on
        K = σD⁻¹ + D⁻¹AD⁻¹ (Dhillon, Guan & Kulis, "Kernel k-means, spectral clustering and
        normalized cuts", KDD 2004; ``kernels/graph_fit.py``); ``objective`` is the
        normalized cut whatever it says, and the dense kernels' settings (gamma, storage,
        approx, psd_repair, solver='embed', algorithm='elkan', init labels or 'random',
        cluster) are refused. 'precomputed' with a SciPy sparse X: X is such an affinity
        graph (n×n, symmetric, non-negative, no empty row), clustered the same way; such a
        model cannot place new points (``predict`` raises).
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
        k-means on the leading eigenvectors of K (the factor VΛ^½ of K; see ``engine/spectral.py``).
        With 'k-means++' and several restarts (or ``objective='ncut'``) restart 0 is a
        spectral start and the others k-means++ (``fit_stats_['start_kinds']``).
    n_init : int, default 20
        Restarts (one when ``init`` is an array); the lowest inertia wins (with
        ``kernel='knn'`` and ``whiten='auto'``, the Gaussian step or mixture where kept
        instead: ``fit_stats_['best_start']``). The kernel matrix is computed once for all of
        them.
    max_iter : int, default 300
    tol : float, default 1e-4
        Stop when the relative change of the objective is at most tol (0: when labels stop
        changing).
    algorithm : {'auto', 'lloyd', 'elkan'}, default 'auto'
        The iteration scheme; both give the same labels, inertia and iterations from the same
        start. 'elkan' skips distances with bounds (``elkan.py``) and needs a positive
        semidefinite kernel. 'auto': Elkan on a blocked kernel and on Nyström features,
        Lloyd on a kernel matrix in memory (``engine.iterate.scheme``).
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
        (Dhillon, Guan & Kulis 2004; see ``engine/ncut.py``). ``ncut_`` holds its value.
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
    n_neighbors : int or None
        With ``kernel='knn'``: the neighbours of each point in its graph, itself included
        (1 ≤ n_neighbors < the distinct samples); None: the engine's default rule, 20 other
        points capped at ⌊n_distinct/k⌋ − 1 and n_distinct − 1
        (``kernels.graph.default_neighbors``).
        ``n_init`` counts the starts of ``init='spectral'`` only: the default starts of a
        graph are a fixed set (``kernels/graph_fit.py``).
    weighting : {'connectivity', 'self-tuning'}, default 'connectivity'
        With ``kernel='knn'``: the weights of its edges. 'connectivity': 1 on every edge;
        'self-tuning': exp(−‖x_i − x_j‖²/(σ_i σ_j)), σ_i the distance of x_i to its 7th
        nearest other point (Zelnik-Manor & Perona, "Self-tuning spectral clustering",
        NIPS 2004); the model keeps the σ_i and ``predict`` weighs a new point's edges the
        same way. Refused with any other kernel unless left at its default.
    neighbor_search : {'auto', 'exact', 'approximate'}, default 'auto'
        With ``kernel='knn'`` and more than 15 features: how the graph's neighbours are
        found. 'exact': an exact search (O(n²d)); 'approximate': pynndescent's
        nearest-neighbour descent (Dong, Charikar & Li, WWW 2011; the optional extra
        ``pip install 'kkmeans-cli[ann]'``), seeded from ``random_state``; 'auto':
        approximate from 100,000 points when pynndescent is installed, else exact. Up to 15
        features a k-d tree answers exactly whatever this says; ``predict`` always searches
        the training points exactly. The route taken is ``fit_stats_['graph']['search']``.
        Refused with any other kernel unless left at its default.
    whiten : bool or 'auto', default 'auto'
        With ``kernel='knn'``. True: fit, whiten the points by the pooled within-cluster
        covariance W of the labels found (X·W^{-½}, W + 10⁻³·tr(W)/d·I: the metric in which
        those clusters are round; De la Torre & Kanade, "Discriminative cluster analysis",
        ICML 2006), and fit the whitened points' graph again. 'auto': on data of 2 to 64
        features whose first fit's cut is not zero, that refit (above 500,000 distinct
        points made only where on a sample of 50,000 it moves more than a few), kept only
        where its labels lower the Gaussian classification criterion Σ_c (n_c/n) ln det S_c
        below the first fit's (Scott & Symons, Biometrics 1971; ``kernels.graph_fit``),
        differ from them (adjusted Rand index below 0.98), cut the whitened graph no
        higher than the first fit's labels do, the first graph at most 100 times as
        much as they do and the whitened graph at most 0.2 · (k − 1) (or 5 times the first
        fit's cut of the first graph), else the first fit; then the Gaussian step
        (``kernels.graph_fit.gaussian_step``): the classification EM of Gaussian clusters
        (Celeux & Govaert 1992) from the labels, refined on the graph, kept only where it
        lowers that criterion while its normalized cut stays within 1.5 times the fit's;
        then the Gaussian mixture (``kernels.graph_fit.mixture_step``): EM of a mixture with
        a covariance and a weight per component (Dempster, Laird & Rubin 1977) beside a
        uniform one that takes scattered outliers (Banfield & Raftery 1993) from those
        labels, and of the same with one covariance shared, the one Schwarz's BIC prefers
        taken, each point given its likeliest Gaussian, kept only where that normalized
        cut stays within 10 times the fit's and the uniform component takes at most a
        quarter of the points (``predict`` then labels new points by the
        mixture, and ``transform`` gives its components' costs); last, where these changed
        the first fit's labels (and the mixture was tried), the split test
        (``kernels.graph_fit.split_test``): where a mixture of 2k Gaussians, each cluster
        cut in two, raises the log-likelihood by more than Schwarz's BIC charges for it,
        the clusters are not Gaussian (touching moons) and the first fit is returned
        instead.
        Where the groups are overlapping ellipsoids (anisotropic blobs, iris, wine) or
        overlapping blobs, they are found far more often (docs/performance.md), at two to
        three times one fit's time where these run; ``predict`` applies the same W^{-½},
        kept in the model. ``fit_stats_['graph']['whitening']``, ``['gaussian']``,
        ``['mixture']`` and ``['split_test']`` hold what each compared and chose. False:
        one fit. True: the refit always kept, no Gaussian step or mixture; refused with any
        other kernel and with a given affinity, where 'auto' fits once.
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
                 storage=_D["storage"], nystroem_rank=None, cluster=None, n_neighbors=None,
                 weighting=_D["weighting"], neighbor_search=_D["neighbor_search"],
                 whiten=_D["whiten"]):
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
        self.n_neighbors = n_neighbors
        self.weighting = weighting
        self.neighbor_search = neighbor_search
        self.whiten = whiten

    # -- scikit-learn conventions ------------------------------------------------------------
    def _validate_params(self):
        """Every parameter against ``_parameter_constraints``, then the rules between them
        (:func:`kkmeans_cli.model.params.validate_params`; raises ``InvalidParameterError``)."""
        validate_params(self)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # A precomputed kernel takes the n×n kernel (or distance) matrix as X.
        tags.input_tags.pairwise = self.kernel in PRECOMPUTED
        tags.input_tags.positive_only = self.kernel == "chi2"
        tags.input_tags.allow_nan = False
        # A sparse X is an affinity graph for kernel='precomputed' (the graph route).
        tags.input_tags.sparse = self.kernel == "precomputed"
        # transform returns float64 distances whatever the input's type.
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags

    @property
    def _n_features_out(self):
        """Columns of :meth:`transform` (one distance per cluster of the fit), for
        get_feature_names_out."""
        fitted = getattr(self, "cluster_weights_", None)
        return self.n_clusters if fitted is None else len(fitted)

    # -- fitting -----------------------------------------------------------------------------
    def fit(self, X, y=None, sample_weight=None, *, kernel_matrix=None, progress=None):
        """Cluster X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The data, or the n×n kernel matrix for ``kernel='precomputed'``.
        y : ignored
        sample_weight : array-like of shape (n_samples,) or float, optional
            Non-negative weights (weighted kernel k-means); one number weighs every point
            alike; 1 for every point by default.
        kernel_matrix : ndarray of shape (n_samples, n_samples), optional
            K(X, X) for this estimator's kernel, already computed (by :meth:`kernel_matrix`),
            e.g. shared by the fits of a sweep over k. Not copied. Its diagonal is checked
            against K(x, x) (a ``ValueError`` if it differs).
        progress : callable, optional
            Told how far the long stages are: ``progress(done, total, what)``, or
            ``progress(done, total)`` for the Nyström feature rows only
            (``kkmeans_cli/progress.py``).

        Returns
        -------
        self
        """
        self._set_fitted(self._fit_result(X, sample_weight, kernel_matrix, progress))
        return self

    def _fit_result(self, X, sample_weight, kernel_matrix, progress=None):
        """Validate, plan and run a fit; return its :class:`FitResult` (nothing fitted is
        written here: :meth:`_set_fitted` does that, for every route). scikit-learn's
        ``validate_data`` records X's ``n_features_in_`` and ``feature_names_in_`` before the
        checks after it (finite values, the kernel's domain, distinct points, ...): a fit
        they refuse puts back what a fit before had recorded, so that its model still
        predicts."""
        recorded = {name: self.__dict__[name] for name in _RECORDED_BY_VALIDATION
                    if name in self.__dict__}
        try:
            return self._run_fit(X, sample_weight, kernel_matrix, progress)
        except BaseException:
            for name in _RECORDED_BY_VALIDATION:
                self.__dict__.pop(name, None)
            self.__dict__.update(recorded)
            raise

    def _run_fit(self, X, sample_weight, kernel_matrix, progress):
        """:meth:`_fit_result`'s work."""
        self._validate_params()
        params = self.get_params(deep=False)
        if _on_cluster(self, X):
            from ..distributed import api  # imports Dask: only when a cluster is used

            # no validate_data on this route: feature names a fit before recorded are not
            # these data's (put back if the fit fails, above)
            self.__dict__.pop("feature_names_in_", None)
            return api.fit(X, sample_weight, params, fit_rngs(self.random_state), progress)
        if self.kernel in _options.GRAPH_KERNELS or (self.kernel == "precomputed"
                                                     and sparse.issparse(X)):
            if kernel_matrix is not None:
                raise ValueError(f"kernel_matrix is for the dense kernels: "
                                 f"{graph_kind(self.kernel)} takes none")
            return self._graph_fit_result(X, sample_weight)
        X = check_data(X, self.kernel, estimator=self, reset=True)
        n = X.shape[0]
        if self.n_clusters > n:
            raise ValueError(f"n_clusters={self.n_clusters} is larger than the number of "
                             f"samples (n_samples={n})")
        weights = check_weights(sample_weight, n, self.n_clusters, self.objective)
        check_fit_values(X, self.kernel, weights, self.n_clusters, self.objective)
        init_labels = check_init_labels(self.init, n, self.n_clusters)
        # Resolved once, before anything large is allocated (like scikit-learn's self._n_threads).
        plan = plan_fit(params, n, X.shape[1], kernel_given=kernel_matrix is not None)
        return fit_arrays(X, weights, init_labels, kernel_matrix, params, plan,
                          fit_rngs(self.random_state), progress)

    def _graph_fit_result(self, X, sample_weight):
        """The fit of a graph kernel (``fitting.fit_graph_arrays``): the k-nearest-neighbour
        graph of X (kernel 'knn') or X itself, a sparse affinity (kernel 'precomputed').
        Sample weights: none, or all equal (they scale every degree alike and change no
        cut); the graph's own weights are its edges."""
        given = self.kernel == "precomputed"
        params = self.get_params(deep=False)
        if given:
            check_graph_settings(params, "kernel='precomputed' with a sparse X",
                                 "that affinity graph")
            if getattr(X, "ndim", 0) == 2 and X.shape[0] >= self.n_clusters:
                # planned before the checks of the affinity, which copy it
                check_graph_memory(X.shape[0], 0, [self.n_clusters], nnz=X.nnz,
                                   memory_limit=self.memory_limit, init=self.init)
        X, affinity = check_graph_data(X, given, estimator=self)
        n = (affinity if given else X).shape[0]
        if self.n_clusters > n:
            raise ValueError(f"n_clusters={self.n_clusters} is larger than the number of "
                             f"samples (n_samples={n})")
        weights = check_weights(sample_weight, n, self.n_clusters)
        check_graph_weights(weights, self.kernel)
        if not given:
            check_graph_neighbors(self.n_neighbors, n)
            check_fit_values(X, "knn", weights, self.n_clusters)
            plan = dict(n_neighbors=self.n_neighbors, memory_limit=self.memory_limit,
                        init=self.init, weighting=self.weighting,
                        neighbor_search=self.neighbor_search)
            try:
                params["neighbor_search"] = check_graph_memory(
                    n, X.shape[1], [self.n_clusters], whiten=self.whiten, **plan)
            except MemoryPlanError:
                if self.whiten != "auto":
                    raise
                # 'auto' within the limit: one fit, without the refit's second graph
                params["neighbor_search"] = check_graph_memory(
                    n, X.shape[1], [self.n_clusters], whiten=False, **plan)
                params["whiten"] = False
        # one thread below SMALL_N points, as the dense kernels (the labels do not depend on it)
        return fit_graph_arrays(X, affinity, params, fit_rngs(self.random_state),
                                fit_threads(self.n_threads, n))

    def _set_fitted(self, result):
        """Write the fitted attributes (``*_``) from a :class:`FitResult`: the one place that
        does, for every route (a kernel matrix, blocked or lazy kernel values, Nyström
        features, a Dask cluster, a model file)."""
        self.kernel_ = result.kernel
        self.gamma_ = result.kernel.gamma
        self.labels_ = np.asarray(result.labels).astype(np.intp)
        self.inertia_ = result.inertia
        self.inner_sums_ = result.inner_sums
        self.cluster_weights_ = result.cluster_weights
        self.cluster_sizes_ = np.bincount(self.labels_, minlength=self.n_clusters).astype(
            np.int64)
        self.n_iter_ = result.n_iter
        self.converged_ = result.converged
        self.sample_weight_ = result.sample_weight
        self.X_fit_ = result.X_fit
        self.n_features_in_ = result.n_features
        self.fit_stats_ = result.fit_stats
        self.psd_ = result.psd
        written = set()
        for part, attributes in _PART_ATTRIBUTES.items():
            state = getattr(result, part)
            if state is not None:
                for attribute, name in attributes:
                    setattr(self, attribute, getattr(state, name))
                    written.add(attribute)
        # No part's state outlives a refit of another kind (a graph, Nyström or ncut fit
        # after another), and predictions read the parameters of the fit, not any set since.
        for attribute, _ in (pair for pairs in _PART_ATTRIBUTES.values() for pair in pairs):
            if attribute not in written and hasattr(self, attribute):
                delattr(self, attribute)
        self._fit_params = self.get_params(deep=False)
        return self

    def starts_blocked(self, n_samples, n_features):
        """Whether :meth:`fit` of data of this shape (no ``kernel_matrix``) starts without the
        kernel matrix (route 'blocked' or 'lazy' of ``model/planning.py``), so that building K
        for other uses (a silhouette) would be work and memory the fit avoids."""
        return route_of(self.get_params(), n_samples, n_features)[0] in ("blocked", "lazy")

    def fit_predict(self, X, y=None, sample_weight=None, **fit_params):
        """Fit and return ``labels_``."""
        return self.fit(X, sample_weight=sample_weight, **fit_params).labels_

    def fit_transform(self, X, y=None, sample_weight=None, **fit_params):
        """Fit and return :meth:`transform` of X (for ``kernel='precomputed'`` with X the
        n×n kernel matrix, its diagonal is the ``kernel_diag`` of the training points)."""
        self.fit(X, sample_weight=sample_weight, **fit_params)
        diag = None
        if self.kernel == "precomputed" and not sparse.issparse(X):
            diag = np.diagonal(np.asarray(X)).copy()    # checked by transform with X
        return self.transform(X, kernel_diag=diag)

    def kernel_matrix(self, X, *, progress=None):
        """K(X, X) for this estimator's kernel (gamma and the offset resolved as ``fit``
        would: for the linear kernel the Gram matrix of X − mean(X)), to pass to :meth:`fit`
        as ``kernel_matrix`` for several fits of the same data; with ``approx='nystroem'``
        the Nyström features of X (``progress``: as in :meth:`fit`)."""
        self._validate_params()
        if self.kernel in _options.GRAPH_KERNELS:
            raise ValueError("kernel='knn' builds a sparse neighbour graph, no kernel matrix")
        X = check_data(X, self.kernel)
        check_range(self.kernel, X, X.shape[0],
                    offset=data_offset(self.kernel, X, self.objective, quiet=True))
        gamma_rng, _ = fit_rngs(self.random_state)
        n_threads = effective_n_threads(self.n_threads)
        with blas_threads(1):
            params = self.get_params(deep=False)
            kernel = resolved_kernel(params, X, gamma_rng)
            if self.kernel == "poly":
                check_range("poly", X, X.shape[0], kernel=kernel,
                            gamma_from=self.gamma if isinstance(self.gamma, str) else None)
            if self.approx == "nystroem":
                return shared_features(X, kernel, nystroem_plan(params, X.shape[0]),
                                       n_threads, progress)
            self._check_memory(X.shape[0], resolve_dtype(self.dtype))
            return kernel.matrix(X, dtype=resolve_dtype(self.dtype), n_threads=n_threads)

    def scores(self, metrics=("silhouette", "simplified_silhouette", "calinski_harabasz",
                              "davies_bouldin"), *, kernel_matrix=None, **options):
        """Quality measures of ``labels_`` in feature space (see ``kkmeans_cli.measures.metrics``).

        The training kernel matrix is rebuilt from ``X_fit_`` (as the fit stored it: the
        parameters of the fit, not any ``set_params`` since) unless ``kernel_matrix`` is given
        (required for ``kernel='precomputed'``). ``options`` go to ``metrics.scores``
        (``max_exact``, ``sample_size``, ``random_state``: the silhouette's sampling rule).

        Returns
        -------
        dict
            name → value; with 'silhouette' also ``silhouette_n_used``.
        """
        self._check_fitted()
        n_threads = effective_n_threads(self.n_threads)
        if getattr(self, "graph_info_", None) is not None:
            raise ValueError("a graph kernel's model is scored by the graph's silhouette "
                             "(kkmeans_cli.measures.graph_silhouette), not on a kernel matrix")
        params = self._fitted_params()
        if params["approx"] == "nystroem":
            if not isinstance(kernel_matrix, NystroemFeatures):
                raise ValueError("a Nyström model is scored on its features: pass "
                                 "kernel_matrix=estimator.kernel_matrix(X)")
            return feature_measures.scores(kernel_matrix.Phi, self.labels_,
                                           metrics=tuple(metrics),
                                           sample_weight=self.sample_weight_,
                                           n_threads=n_threads, **options)
        if kernel_matrix is None:
            if self.X_fit_ is None:
                raise ValueError("a precomputed model needs kernel_matrix to be scored")
            with blas_threads(1):
                kernel_matrix = self.kernel_.matrix(self.X_fit_,
                                                    dtype=resolve_dtype(params["dtype"]),
                                                    n_threads=n_threads)
        return quality.scores(kernel_matrix, self.labels_, metrics=tuple(metrics),
                              sample_weight=self.sample_weight_, n_threads=n_threads, **options)

    # -- prediction --------------------------------------------------------------------------
    def predict(self, X, *, kernel_diag=None):
        """Label of the nearest centre for each row of X (for a graph fit that kept its
        Gaussian mixture, its likeliest component; a training point its own label).

        Uses K(X, X_fit) in row blocks and the stored inner sums and cluster weights only,
        never the training kernel matrix. For ``kernel='precomputed'`` X holds the kernel rows
        K(new, train); ``kernel_diag`` (K(new, new): shape (n_samples,), or one number for
        every row; finite) is optional there as it does not change the labels, and refused
        for the other kernels. Reads the fitted model and the parameters of its fit (not any
        ``set_params`` since).
        """
        if _on_cluster(self, X, fitted=True):
            from ..distributed import api  # imports Dask: only when a cluster is used

            self._check_fitted()
            return api.predict(self.nystroem_model(), X, getattr(self, "cluster", None))
        labels, _ = self._nearest(X, kernel_diag, want_distances=False)
        return labels

    def transform(self, X, *, kernel_diag=None):
        """Squared feature-space distances d(x, c), shape (n_samples, k); for a graph fit
        that kept its Gaussian mixture (``whiten='auto'``), the mixture's cost of each
        component instead (−2 ln of its weight times its density, but for a constant), whose
        least is the label. For ``kernel='precomputed'`` X holds K(new, train) and
        ``kernel_diag`` K(new, new) is needed (as in :meth:`predict`)."""
        _, dist = self._nearest(X, kernel_diag, want_distances=True)
        return dist

    def nystroem_model(self):
        """What predicting with this fitted Nyström model needs, as one picklable record
        (``kernels.nystroem.NystroemModel``; the Dask route sends it to the workers)."""
        self._check_fitted()
        if self._fitted_params()["approx"] != "nystroem":
            raise ValueError("predict on a Dask cluster needs a Nyström model "
                             "(approx='nystroem')")
        return self._predictor()

    def _fitted_params(self):
        """The parameters of the fit (``get_params`` as they were when it ran: predictions
        do not follow a ``set_params`` made since)."""
        return getattr(self, "_fit_params", None) or self.get_params(deep=False)

    def _predictor(self):
        """This fitted model as the record predictions read (``model/predictor.py``)."""
        params = self._fitted_params()
        ncut = (NcutState(self.degrees_, self.degree_weights_) if params["objective"] == "ncut"
                and getattr(self, "graph_info_", None) is None else None)
        nys = (NystroemState(landmarks=self.landmarks_, transform=self.nystroem_transform_,
                             n_landmarks=self.n_landmarks_, rank=self.nystroem_rank_,
                             dtype=getattr(self, "nystroem_dtype_", None),
                             centers=self.centers_) if params["approx"] == "nystroem" else None)
        graph = (GraphState(self.graph_model_, self.graph_info_, self.ncut_)
                 if getattr(self, "graph_info_", None) is not None else None)
        return predictor(params, kernel=self.kernel_, labels=self.labels_,
                         sample_weight=self.sample_weight_, inner_sums=self.inner_sums_,
                         cluster_weights=self.cluster_weights_,
                         n_features=self.n_features_in_, X_fit=self.X_fit_,
                         psd=getattr(self, "psd_", None), ncut=ncut, nystroem=nys, graph=graph)

    def _nearest(self, X, kernel_diag, want_distances):
        self._check_fitted()
        model = self._predictor()
        kernel = self._fitted_params()["kernel"]
        if getattr(self, "graph_info_", None) is not None and kernel == "precomputed":
            raise ValueError(no_graph_coordinates())
        X = check_data(X, kernel, square=False, estimator=self, reset=False)
        if kernel_diag is not None:
            kernel_diag = check_kernel_diag(kernel_diag, X.shape[0], kernel)
        return predictor_nearest(model, X, kernel_diag, want_distances,
                                 effective_n_threads(self.n_threads))

    # -- helpers -----------------------------------------------------------------------------
    def _check_memory(self, n, dtype, kernel_given=False):
        """Refuse (``MemoryPlanError``) before allocating an exact fit past ``memory_limit``."""
        kernel_given = kernel_given or (self.kernel == "precomputed" and dtype == np.float64)
        check(plan(n, self.n_clusters, np.dtype(dtype).name, kernel_given=kernel_given),
              self.memory_limit, k=self.n_clusters, dtype=np.dtype(dtype).name)

    def _check_fitted(self):
        check_is_fitted(self, "labels_")


def graph_kind(kernel):
    """How a graph fit's kernel is named in a message."""
    return ("kernel='knn' builds a sparse neighbour graph and" if kernel == "knn"
            else "a sparse affinity graph given as X")


#: What scikit-learn's ``validate_data(reset=True)`` writes on the estimator
_RECORDED_BY_VALIDATION = ("n_features_in_", "feature_names_in_")


def fitted_estimator(params, result):
    """A ``KernelKMeans`` of ``params`` fitted with ``result`` (a ``FitResult``, e.g. a model
    file's), without fitting again."""
    return KernelKMeans(**params)._set_fitted(result)


def fit_with_sums(estimator, X, sample_weight=None, *, kernel_matrix=None, progress=None):
    """Fit ``estimator`` as :meth:`KernelKMeans.fit` does and return the outer sums F (k×n)
    of its labels on exactly ``kernel_matrix``, from the fit's final full pass (a sweep's
    measures reuse them instead of another pass over K); None when the fit did not run on
    that matrix itself (no matrix given, a transformed kernel, Nyström features). The
    estimator does not keep them."""
    result = estimator._fit_result(X, sample_weight, kernel_matrix, progress)
    estimator._set_fitted(result)
    return result.outer_sums


def _on_cluster(estimator, X, fitted=False):
    """Whether to run on a Dask cluster (``distributed/api.py``): ``cluster`` is set or X is
    a Dask array (checked without importing Dask). A fitted model predicts in-memory arrays
    in this process."""
    dask_array = type(X).__module__.split(".")[0] == "dask" and hasattr(X, "to_delayed")
    if fitted:
        return dask_array or isinstance(X, str) and getattr(estimator, "cluster", None)
    return dask_array or getattr(estimator, "cluster", None) is not None
