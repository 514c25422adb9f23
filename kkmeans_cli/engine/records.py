"""The records that go into and come out of the engine.

Engine code (``engine/``, and the kernel and Dask code that drives it) takes arrays, kernel
sources and one frozen :class:`FitSpec`, and returns records: the restarts' outcome
(``restarts.Restarts``) and, for a whole fit, a :class:`FitResult`. Nothing below ``model/``
sees the estimator; the estimator builds the :class:`FitSpec` once from its validated
parameters and the plan of the fit, and copies a :class:`FitResult` into its fitted
attributes in one place (``KernelKMeans._set_fitted``), whichever route made it (a kernel
matrix, a blocked or lazy kernel, Nyström features, a Dask cluster, a model file).
"""
from dataclasses import dataclass, field

from .. import _options

_D = _options.DEFAULTS


@dataclass(frozen=True)
class FitSpec:
    """What the iterations of one fit need to know, resolved once.

    Attributes
    ----------
    n_clusters : int
    init : str
        The start method: 'k-means++', 'spectral', 'random', or 'labels' when starting
        labels are given.
    n_init : int
        Restarts asked for (one run when labels are given).
    max_iter : int
    tol : float
    algorithm : {'auto', 'lloyd', 'elkan'}
        The iteration scheme asked for (``iterate.scheme`` resolves 'auto').
    objective : {'kmeans', 'ncut'}
    refine : {'auto', 'hartigan', 'none'}
    solver : {'lloyd', 'embed'}
    n_threads : int
        OpenMP threads of the engine (the plan's).
    n_features : int
        d, the data's dimension ('auto' chooses the scheme by it).
    screen : bool
        Restarts screened on a sample by the adaptive rule of ``storage='auto'``
        (``exact_restarts.adaptive_restarts``); False: the fixed rule of
        ``exact_restarts.applies``.
    """

    n_clusters: int = _D["n_clusters"]
    init: str = _D["init"]
    n_init: int = _D["n_init"]
    max_iter: int = _D["max_iter"]
    tol: float = _D["tol"]
    algorithm: str = _D["algorithm"]
    objective: str = _D["objective"]
    refine: str = _D["refine"]
    solver: str = _D["solver"]
    n_threads: int = 1
    n_features: int = 0
    screen: bool = False


@dataclass(frozen=True)
class NcutState:
    """The normalized cut's fitted state (``ncut.py``): the degrees d of the training
    points, the sample weights u they were made with, and the value of the cut."""

    degrees: object
    degree_weights: object
    value: object = None


@dataclass(frozen=True)
class NystroemState:
    """A fitted Nyström map and its centres (``kernels/nystroem.py``).

    ``landmarks`` (m×d), ``transform`` (m×m, or m×s: the explicit-feature engine's
    projection), ``n_landmarks``, ``rank``, ``dtype`` (the engine's feature type name, or
    None for float64 features of :class:`~kkmeans_cli.engine.feature_source.FeatureSpaceSource`),
    ``centers`` (k×m or k×s) and ``stats`` (what the explicit-feature engine reports, or None).
    """

    landmarks: object
    transform: object
    n_landmarks: int
    rank: int
    dtype: object = None
    centers: object = None
    stats: object = None


@dataclass(frozen=True)
class GraphState:
    """A graph kernel's fitted state (``kernels/graph_fit.py``): ``model`` (the
    ``GraphModel`` predictions of new points read; None for an affinity given as is, which
    has no coordinates), ``info`` (``kernels.graph.GraphInfo``: neighbours, nodes,
    components, nnz) and ``ncut``, the normalized cut of the labels."""

    model: object
    info: object
    ncut: float


@dataclass(frozen=True)
class FitResult:
    """Everything a fit found, for the estimator's fitted attributes.

    ``labels`` (intp), ``inertia``, ``inner_sums`` and ``cluster_weights`` of the centres the
    labels are assigned to, ``n_iter``, ``converged``, ``kernel`` (resolved), the weights the
    iterations used (``sample_weight``), the training rows kept for predict (``X_fit``; None
    for precomputed and Nyström models), ``n_features``, ``fit_stats``, and the parts of the
    state that only some fits have: ``psd`` (``kernels.psd.PSDState`` or None), ``ncut``
    (:class:`NcutState`), ``nystroem`` (:class:`NystroemState`), ``graph``
    (:class:`GraphState`, a graph kernel's fit). ``outer_sums``: F of the
    labels on exactly a kernel matrix that was given (a sweep's measures reuse it), or None.
    """

    labels: object
    inertia: float
    inner_sums: object
    cluster_weights: object
    n_iter: int
    converged: bool
    kernel: object
    sample_weight: object
    X_fit: object
    n_features: int
    fit_stats: dict = field(default_factory=dict)
    psd: object = None
    ncut: object = None
    nystroem: object = None
    outer_sums: object = None
    graph: object = None
