"""The parameters of :class:`~kkmeans_cli.model.estimator.KernelKMeans`: what each may be, which
combinations are refused, and how ``random_state`` becomes generators.

- :data:`PARAMETER_CONSTRAINTS` declares each parameter's allowed types and values with
  scikit-learn's own constraint objects; the choice lists come from :mod:`kkmeans_cli._options`,
  the table the command line's ``click.Choice`` lists are built from as well.
- :func:`check_param_combination` holds every rule that involves two parameters.
- :func:`validate_params` runs both and raises :class:`InvalidParameterError`, which is at
  once scikit-learn's ``InvalidParameterError`` (so ``except ValueError`` and scikit-learn's
  tooling work) and our :class:`~kkmeans_cli.errors.UsageError` (so the command line reports
  it with exit code 2 by its type alone).
"""
import math
from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import (Interval, Options, StrOptions,
                                             validate_parameter_constraints)
from sklearn.utils._param_validation import InvalidParameterError as _SklearnInvalidParameter

from .. import _options
from ..errors import UsageError
from ..kernels.functions import FLOAT_MAX
from ..kernels.graph import ANN_MISSING, ann_available
from ..memory import parse_size


class InvalidParameterError(UsageError, _SklearnInvalidParameter):
    """A parameter of ``KernelKMeans`` has a value or type it cannot take, or a combination
    of parameters is refused (exit code 2 on the command line)."""


def _positive_int():
    return Interval(Integral, 1, None, closed="left")


PARAMETER_CONSTRAINTS = {
    "n_clusters": [_positive_int()],
    "kernel": [StrOptions(set(_options.KERNELS))],
    # closed="neither" with no right end excludes +inf; NaN never satisfies an Interval.
    "gamma": [Interval(Real, 0, None, closed="neither"), StrOptions(set(_options.GAMMA_RULES))],
    "degree": [_positive_int()],
    "coef0": [Interval(Real, None, None, closed="neither")],
    "init": [StrOptions(set(_options.INITS)), "array-like"],
    "n_init": [_positive_int()],
    "max_iter": [_positive_int()],
    "tol": [Interval(Real, 0, None, closed="left")],
    "algorithm": [StrOptions(set(_options.ALGORITHMS))],
    # int, RandomState or None as everywhere in scikit-learn; a numpy Generator as well.
    "random_state": ["random_state", np.random.Generator],
    "dtype": [StrOptions(set(_options.DTYPES)),
              Options(type, {np.float64, np.float32}),
              Options(np.dtype, {np.dtype(name) for name in _options.DTYPES})],
    "n_threads": [_positive_int(), None],
    "approx": [StrOptions(set(_options.APPROXES))],
    "n_landmarks": [_positive_int(), None],
    "nystroem_rank": [_positive_int(), None],
    # Bytes, or a size string such as '8G' (parsed in check_param_combination).
    "memory_limit": [Interval(Real, 1, None, closed="left"), str, None],
    "objective": [StrOptions(set(_options.OBJECTIVES))],
    "refine": [StrOptions(set(_options.REFINES))],
    "psd_repair": [StrOptions(set(_options.PSD_REPAIRS))],
    "solver": [StrOptions(set(_options.SOLVERS))],
    "storage": [StrOptions(set(_options.STORAGES))],
    # A distributed.Client, 'local[:N]' or a scheduler address or file (checked when the
    # cluster is opened, distributed/cluster.py; Dask is not imported to validate).
    "cluster": "no_validation",
    # neighbours of each point (itself included) in the graph of kernel='knn'; None: the
    # engine's default rule (kernels.graph.default_neighbors)
    "n_neighbors": [_positive_int(), None],
    # the edge weights of that graph (kernels.graph.knn_graph)
    "weighting": [StrOptions(set(_options.WEIGHTINGS))],
    # the neighbour search of that graph above 15 dimensions (kernels.graph.search_route)
    "neighbor_search": [StrOptions(set(_options.NEIGHBOR_SEARCHES))],
    "whiten": ["boolean", StrOptions({"auto"})],
}


#: Parameters that take a number (or None, a string, a generator): never a bool.
NUMBER_PARAMS = ("n_clusters", "gamma", "degree", "coef0", "n_init", "max_iter", "tol",
                 "random_state", "n_threads", "n_landmarks", "nystroem_rank", "memory_limit", "n_neighbors")


def validate_params(estimator):
    """Check every parameter of ``estimator`` against :data:`PARAMETER_CONSTRAINTS`, then
    :func:`check_param_combination`.

    Raises
    ------
    InvalidParameterError
    """
    params = estimator.get_params(deep=False)
    for name in NUMBER_PARAMS:  # True is an int to Python, never a count or a size here
        if isinstance(params.get(name), (bool, np.bool_)):
            raise InvalidParameterError(
                f"The {name!r} parameter of {type(estimator).__name__} must be a number, not "
                f"a bool; got {params[name]!r}")
    try:
        validate_parameter_constraints(PARAMETER_CONSTRAINTS, params,
                                       caller_name=type(estimator).__name__)
    except _SklearnInvalidParameter as exc:
        raise InvalidParameterError(str(exc)) from None
    check_param_combination(params)


def check_param_combination(params):
    """The rules between parameters, each valid alone (``params``: name → value).

    - ``storage='blocked'`` recomputes kernel values from the data: no precomputed kernel, and
      none of the features that need the whole kernel matrix (``approx``, ``psd_repair``,
      ``solver='embed'``, ``objective='ncut'``);
    - ``approx='nystroem'`` works on explicit features of the data's rows: no precomputed
      kernel, no ``psd_repair``, no
      ``solver='embed'`` and no ``objective='ncut'`` (they need the exact kernel matrix);
    - ``objective='ncut'`` needs positive degrees: not the Gower kernel of a distance matrix;
    - ``kernel='poly'``: |coef0|^degree alone may not overflow floating point;
    - ``memory_limit`` given as a string must parse as a size;
    - ``kernel='knn'`` (:func:`check_graph_combination`) runs the normalized cut of a sparse
      graph in one process: none of the dense kernels' settings.

    Raises
    ------
    InvalidParameterError
    """
    check_graph_combination(params)
    if params["storage"] == "blocked":
        if params["kernel"] in _options.PRECOMPUTED_KERNELS:
            raise InvalidParameterError(
                "storage='blocked' recomputes kernel rows from the data; a precomputed kernel "
                "has no kernel function")
        if (params["approx"] != "none" or params["psd_repair"] != "none"
                or params["solver"] != "lloyd" or params["objective"] != "kmeans"):
            raise InvalidParameterError(
                "storage='blocked' runs exact kernel k-means on kernel rows recomputed in "
                "blocks; approx='nystroem', psd_repair, solver='embed' and objective='ncut' "
                "need other kernels")
    if params["approx"] != "none":
        if params["kernel"] in _options.PRECOMPUTED_KERNELS:
            raise InvalidParameterError(
                f"approx='nystroem' computes kernel values from the data's rows (features of "
                f"landmarks); kernel='{params['kernel']}' gives no rows, only the matrix: use "
                f"approx='none' with it, or give the points with their kernel")
        if params["psd_repair"] != "none" or params["solver"] != "lloyd":
            raise InvalidParameterError(
                "psd_repair and solver='embed' need the exact kernel matrix; they cannot be "
                "used with approx='nystroem'")
        if params["objective"] == "ncut":
            raise InvalidParameterError(
                "objective='ncut' needs the exact kernel matrix; it cannot be used with "
                "approx='nystroem'")
    if params["objective"] == "ncut" and params["kernel"] == "precomputed-distance":
        raise InvalidParameterError(
            "objective='ncut' needs positive degrees Σ_j K_ij, but the kernel of a distance "
            "matrix (kernel='precomputed-distance', Gower double centring) has every row sum "
            "0; use objective='kmeans', or give a similarity matrix with "
            "kernel='precomputed'")
    if params["objective"] == "ncut" and params["psd_repair"] == "clip":
        raise InvalidParameterError(
            "objective='ncut' needs positive degrees Σ_j K_ij, but psd_repair='clip' gives "
            "the kernel of centred features (the nearest positive semidefinite one after "
            "double centring), whose every row sums to 0; use psd_repair='lingoes', which "
            "keeps the degrees, or psd_repair='none' for a kernel that needs no repair (rbf, "
            "laplacian, chi2)")
    if params["kernel"] == "poly" and abs(params["coef0"]) > 1:
        if math.log(4.0) + params["degree"] * math.log(abs(params["coef0"])) > math.log(
                FLOAT_MAX):
            raise InvalidParameterError(
                f"coef0={params['coef0']:g} with degree={params['degree']}: "
                f"4·|coef0|^degree overflows floating point ({FLOAT_MAX:.3g}) whatever the "
                f"data; use a smaller |coef0| or degree")
    if isinstance(params["memory_limit"], str):
        try:
            parse_size(params["memory_limit"])
        except ValueError as exc:
            raise InvalidParameterError(f"memory_limit: {exc}") from None


#: The settings of the dense kernels that a graph kernel refuses: parameter → its default
#: (a graph kernel builds no kernel matrix, has no kernel parameter and chooses its own starts).
GRAPH_REFUSED = {"gamma": "median", "degree": 3, "coef0": 1.0, "storage": "auto",
                 "approx": "none", "psd_repair": "none", "solver": "lloyd"}
#: Every setting a graph fit does not read: those above, and dtype, refine and algorithm
#: (refused unless left at their defaults), tol (ignored) and objective (always the cut).
GRAPH_UNUSED = (*GRAPH_REFUSED, "dtype", "refine", "algorithm", "tol", "objective")
#: The graph's own settings with a default, refused with a dense kernel unless at it:
#: parameter → what it sets (``n_neighbors``, default None, is refused on its own;
#: ``whiten=False``, no refit, never is).
GRAPH_ONLY = {"weighting": "the edge weights", "neighbor_search": "the neighbour search",
              "whiten": "the whitened refit"}


def check_graph_combination(params):
    """The rules of ``kernel='knn'`` (the normalized cut of the k-nearest-neighbour graph,
    ``kernels/graph_fit.py``): the objective is the normalized cut ('kmeans', the default,
    and 'ncut' both name it for this kernel); it builds no kernel matrix and has no kernel
    parameter (no ``gamma``, ``degree``, ``coef0``, ``dtype`` but float64, ``storage``,
    ``approx``, ``psd_repair``, ``solver='embed'``); its iterations are Lloyd's and
    Hartigan's on the sparse graph (no ``algorithm='elkan'``, no ``refine='none'``); ``n_init``
    counts the starts of ``init='spectral'`` (the default starts are a fixed set,
    ``kernels/graph_fit.py``); its starts are its own (``init`` 'k-means++', the default, or
    'spectral'; no labels, no 'random'); it runs in one process (no ``cluster``).
    ``n_neighbors``, ``weighting``, ``neighbor_search`` and ``whiten`` (but their defaults,
    and ``whiten=False``) apply to it alone; ``neighbor_search='approximate'`` needs
    pynndescent (the extra kkmeans-cli[ann])."""
    kernel = params["kernel"]
    if kernel not in _options.GRAPH_KERNELS:
        if params.get("n_neighbors") is not None:
            raise InvalidParameterError(
                f"n_neighbors={params['n_neighbors']} sets the graph of kernel='knn'; the "
                f"{kernel} kernel has no neighbours (use kernel='knn', or drop n_neighbors)")
        for key, what in GRAPH_ONLY.items():
            value = params.get(key, _options.DEFAULTS[key])
            if value != _options.DEFAULTS[key] and not (key == "whiten" and not value):
                setting = f"{key}={value}" if isinstance(value, bool) else f"{key}='{value}'"
                raise InvalidParameterError(
                    f"{setting} sets {what} of the graph of kernel='knn'; the {kernel} "
                    f"kernel builds no neighbour graph (use kernel='knn', or drop "
                    f"{setting})")
        return
    if params.get("neighbor_search") == "approximate":
        if not ann_available():
            raise InvalidParameterError(ANN_MISSING)
    check_graph_settings(params, "kernel='knn'", "a sparse k-nearest-neighbour graph")


def check_graph_settings(params, name, graph):
    """The settings a graph fit refuses (:func:`check_graph_combination`), for the route
    ``name`` (``kernel='knn'``, or a sparse affinity with ``kernel='precomputed'``) on
    ``graph`` (what it clusters)."""
    why = f"{name} clusters the normalized cut of {graph}, with no kernel matrix"
    for key, default in GRAPH_REFUSED.items():
        if key == "gamma" and params["kernel"] not in _options.GRAPH_KERNELS:
            continue  # a precomputed kernel ignores gamma already
        if params[key] != default:
            raise InvalidParameterError(
                f"{key}={params[key]!r} is a setting of the dense kernels; {why} (leave "
                f"{key}={default!r}, or choose another kernel such as kernel='rbf')")
    if np.dtype(params["dtype"]) != np.float64:
        raise InvalidParameterError(
            f"dtype={np.dtype(params['dtype']).name!r} is the storage of a kernel matrix; "
            f"{why} (leave dtype='float64')")
    if params["refine"] == "none":
        raise InvalidParameterError(
            f"refine='none' cannot be used with {name}: its runs end with Hartigan's "
            f"single-point moves on the graph (use refine='auto')")
    if params["algorithm"] == "elkan":
        raise InvalidParameterError(
            f"algorithm='elkan' needs a kernel matrix's bounds; {why}: its iterations are "
            f"Lloyd's on the graph (use algorithm='auto')")
    init = params["init"]
    if not isinstance(init, str) or init == "random":
        raise InvalidParameterError(
            f"init={init!r} is not a start of {name}: it starts from the graph's "
            f"components, multilevel coarsening and a spectral embedding (init='k-means++', "
            f"the default, lets it choose; init='spectral' asks for spectral starts only)"
            if isinstance(init, str) else
            f"init labels are not a start of {name}: it starts from the graph's "
            f"components, multilevel coarsening and a spectral embedding (drop init)")
    if params.get("cluster") is not None:
        raise InvalidParameterError(
            f"cluster is set, but {why} in one process; a cluster runs "
            f"approx='nystroem' fits of the dense kernels (choose kernel='rbf' with "
            f"approx='nystroem', or drop cluster)")


def fit_rngs(random_state):
    """Independent generators for the gamma sample and for the starts.

    An int seeds them (the same int, the same fit); a numpy ``Generator`` lends its seed
    sequence; ``None`` and a ``RandomState`` are turned into a seed as scikit-learn's
    ``check_random_state`` would (``None``: numpy's global ``RandomState``), by drawing from
    it, so a ``RandomState`` passed to two fits gives two different fits, as in scikit-learn.
    """
    if isinstance(random_state, np.random.Generator):
        seq = random_state.bit_generator.seed_seq
    elif isinstance(random_state, Integral) and not isinstance(random_state, bool):
        seq = np.random.SeedSequence(int(random_state))
    else:
        state = check_random_state(random_state)
        seq = np.random.SeedSequence(
            state.randint(np.iinfo(np.uint32).max, size=4, dtype=np.uint32).tolist())
    gamma_seq, fit_seq = seq.spawn(2)
    return np.random.default_rng(gamma_seq), np.random.default_rng(fit_seq)
