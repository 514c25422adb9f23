"""The allowed values and defaults of every choice parameter, in one table.

Read by the command line (``click.Choice`` lists, option defaults) and by
:class:`~kkmeans_cli.model.estimator.KernelKMeans` (its ``_parameter_constraints`` and ``__init__``
defaults), so the two cannot drift apart. This module imports nothing, so ``kkmeans --help``
stays free of NumPy and scikit-learn.

Each tuple lists the allowed values in the order the help text shows them; the first entry
is not necessarily the default (see ``DEFAULTS``).
"""

KERNELS = ("rbf", "linear", "poly", "sigmoid", "laplacian", "chi2", "cosine", "knn",
           "precomputed", "precomputed-distance")
# Kernels whose DATA is an n×n matrix (kernel values, or dissimilarities turned into a kernel
# by Gower's double centring) rather than points.
PRECOMPUTED_KERNELS = ("precomputed", "precomputed-distance")
# Kernels of a sparse affinity graph, clustered by its normalized cut (``kernels/graph.py``,
# ``kernels/graph_fit.py``): 'knn' builds the k-nearest-neighbour graph of the points.
GRAPH_KERNELS = ("knn",)
# The edge weights of the graph of kernel 'knn' (``kernels.graph.WEIGHTINGS``): 'connectivity'
# (1 on every edge) or 'self-tuning' (exp(−d²/(σ_i σ_j)), σ_i the distance of x_i to its 7th
# nearest other point; Zelnik-Manor & Perona, "Self-tuning spectral clustering", NIPS 2004).
WEIGHTINGS = ("connectivity", "self-tuning")
# The neighbour search of that graph above 15 dimensions (``kernels.graph.search_route``):
# 'exact' (quadratic), 'approximate' (pynndescent's nearest-neighbour descent, the optional
# extra kkmeans-cli[ann]) or 'auto' (approximate from 100,000 points when installed).
NEIGHBOR_SEARCHES = ("auto", "exact", "approximate")
GAMMA_RULES = ("median", "scale")
INITS = ("k-means++", "spectral", "random")
ALGORITHMS = ("auto", "lloyd", "elkan")
STORAGES = ("auto", "matrix", "blocked")
DTYPES = ("float64", "float32")
APPROXES = ("none", "nystroem")
OBJECTIVES = ("kmeans", "ncut")
#: The measures a sweep chooses k by (``model.sweep``): over a kernel matrix, and on a graph;
#: a sweep's model file names one of them (``model.archive`` checks it).
SWEEP_METRICS = ("silhouette", "simplified_silhouette", "calinski_harabasz", "davies_bouldin",
                 "inertia")
GRAPH_SWEEP_METRICS = ("cut_ratio", "silhouette", "eigengap")
REFINES = ("auto", "hartigan", "none")
PSD_REPAIRS = ("none", "lingoes", "clip")
SOLVERS = ("lloyd", "embed")
SCALES = ("none", "standard", "minmax")
MISSING = ("error", "drop")

#: whiten='auto' tries the whitened refit of a graph fit on data of 2 up to this many columns
#: (the widest measured, the 8×8 digits; docs/performance.md): W is d×d, the whitened copy n×d.
WHITEN_AUTO_MAX_DIM = 64
#: The tests of whiten='auto''s refit in the order ``kernels.graph_fit.fit_graph`` makes them,
#: as the fit's report words the first one a refit failed (its record's ``turned_down_by``
#: is the index here; docs/engine.md).
REFIT_TESTS = ("its clusters were not the likelier Gaussians", "it moved few points",
               "it cut its own graph above the first labels",
               "it cut the first graph far more than the first fit",
               "its own graph held no clear clusters")
#: Rows taken at a time by the graph fit's per-cluster scatters and Gaussian classification
#: (``kernels.graph_fit``), and counted by its memory plan.
SCATTER_BLOCK_ROWS = 1 << 16
#: The graph fit's Gaussian mixtures sum their EM passes in C (``engine._mixture``) in up to
#: this many coordinates, by NumPy's products above (``kernels.graph_fit``, where it is
#: measured); the memory plan counts either's arrays.
MIXTURE_COMPILED_MAX_DIM = 8

# Defaults shared by ``KernelKMeans.__init__`` and the command line's options.
DEFAULTS = {
    "n_clusters": 8,   # the estimator's default; the command line requires -k
    # the normalized cut of the k-nearest-neighbour graph (docs/engine.md, "Graph kernels"):
    # on rings, moons and the real sets measured it beats rbf with only k given
    "kernel": "knn",
    "weighting": "connectivity",
    "neighbor_search": "auto",
    # the whitened refit and the Gaussian step, each kept where it lowers the Gaussian
    # criterion under its guards (kernels/graph_fit.py): measured on the gallery's shapes,
    # blobs with random centres and the real sets (docs/performance.md)
    "whiten": "auto",
    "gamma": "median",
    "degree": 3,
    "coef0": 1.0,
    "init": "k-means++",
    "n_init": 20,
    "max_iter": 300,
    "tol": 1e-4,
    "algorithm": "auto",
    "dtype": "float64",
    "approx": "none",
    "objective": "kmeans",
    "refine": "auto",
    "psd_repair": "none",
    "solver": "lloyd",
    "storage": "auto",
    "scale": "none",
    "missing": "error",
}
