"""Planning a fit: from the validated parameters and the data's shape to a :class:`FitPlan`.

Pure functions of the parameters (a dict, as ``KernelKMeans.get_params()`` gives) and of n, d:
nothing here reads or writes an estimator, so tests can call :func:`plan_fit` directly and the
command line can ask where a fit will run before it runs (``route_of``).

The routes, in the order they are considered (docs/engine.md has the algorithms):

- ``'nystroem'``: ``approx='nystroem'``, explicit features (``kernels/nystroem.py``);
- ``'blocked'``: kernel values recomputed in blocks, never held, when asked for
  (``storage='blocked'``), when ``storage='auto'`` finds that the kernel matrix does not fit
  the memory plan and the blocked route does (``memory.choose_storage``), or when the cost
  model (:func:`route_costs`, :func:`choose_route`) predicts that restarts screened on a
  sample of kernel values in blocks beat the kernel matrix with full restarts (``screen``:
  the engine's adaptive screening, ``engine/exact_restarts.adaptive_restarts``);
- ``'lazy'``: ``storage='auto'`` for one start of at least ``LAZY_MIN_N`` points on a kernel
  that is positive semidefinite by construction: Elkan on blocked kernel values, the matrix
  built only if the iterations need most of it (``kernels.sources.LazyKernel``);
- ``'matrix'``: the kernel matrix, computed once and shared by every restart.
"""
from dataclasses import dataclass

import numpy as np

from ..engine.iterate import elkan_pays_blocked
from ..engine.threads import effective_n_threads
from ..kernels.functions import Kernel, resolve_dtype
from ..kernels.graph import default_neighbors, search_route
from ..kernels.nystroem import feature_engine_applies
from ..kernels.psd import PRECOMPUTED, needs_psd_check
from ..engine.exact_restarts import sample_size as screen_sample_size
from ..measures.graph_sweep import EIGENGAP_MAX_NODES
from ..memory import RESTARTS_COMPLETED, check, choose_storage, format_bytes, \
    given_graph_plan, graph_plan, named, plan, resolve_limit

# storage='auto' (route 'lazy'): a fit with one start of at least LAZY_MIN_N points starts
# without the kernel matrix and builds it once the blocked iterations have computed
# LAZY_BUDGET·n² kernel values (building K computes n²/2 and writes n²).
LAZY_MIN_N = 4096
LAZY_BUDGET = 0.5
# Below this many points a parallel region costs more than its work (and waits on a busy
# core); results do not depend on the thread count, so small fits run on one thread.
SMALL_N = 2000


def fit_threads(n_threads, n):
    """The OpenMP threads of a fit of n points: ``effective_n_threads(n_threads)``, one below
    ``SMALL_N`` points."""
    return effective_n_threads(n_threads) if n >= SMALL_N else 1

# The cost model of storage='auto' (route_costs): seconds per unit on one thread (divided by
# the fit's threads), measured with benchmarks/bench_route.py --parts constants --threads 1 on
# a shared 2-core VM under a load average of 8, where one thread gets about a quarter of a
# core: the measured values divided by 4 (docs/performance.md). The choice depends only on
# their ratios; the seconds are what the report's route row predicts.
#: One rbf kernel value computed in a block (fused with its sum): a + b·d seconds.
VALUE_SECONDS = 2.9e-8 / 4
VALUE_FEATURE_SECONDS = 0.45e-9 / 4
#: Building K: each byte of a fresh n×n array written (first touch), besides the n²/2 values.
TOUCH_SECONDS_PER_BYTE = 1.1e-9 / 4
#: One full pass of the iterations over K in memory, per byte of K.
PASS_SECONDS_PER_BYTE = 0.27e-9 / 4
#: Full passes of one restart (Lloyd and Hartigan's refinement) on K in memory, on data with
#: clusters: the restart's time over one pass's, a count that does not depend on the
#: machine's load. 2.9 on blobs (i.i.d. normal data: 16.9) since Hartigan keeps its
#: candidates' sums; 8.4 (46) when it recomputed them every round.
PASSES_PER_RESTART = 3.0
#: Kernel values of one candidate completed on kernel values in blocks, in units of n²/k
#: (own sums at the start and the end, the bounds' refreshes; blobs: 7.4).
COMPLETION_VALUES = 7.0
#: The candidates of screened restarts: restarts on the sample's kernel matrix.
SAMPLE_PASSES_PER_CANDIDATE = PASSES_PER_RESTART

LAZY_REASON = ("one start: Elkan on kernel values computed in blocks, the kernel matrix "
               "built only if the iterations need most of it")


@dataclass(frozen=True)
class RouteCosts:
    """The predicted seconds of the exact routes of one fit (:func:`route_costs`).

    ``matrix``: the kernel matrix built (n²/2 values, n² entries written) and every restart
    iterated on it; ``screened``: every restart a candidate on a sample of s points (the
    sample's s×s matrix), the best completed on kernel values in blocks of all n points;
    ``matrix_bytes``: the kernel matrix's size; ``sample``: s.
    """

    matrix: float
    screened: float
    matrix_bytes: int
    sample: int


def route_costs(n, n_features, n_clusters, n_init, itemsize=8, n_threads=1):
    """Predicted seconds of the kernel matrix with full restarts and of restarts screened on
    a sample with kernel values in blocks (:class:`RouteCosts`), from the constants measured
    by ``benchmarks/bench_route.py``. A pure function of numbers.

    The unit costs: a kernel value computed, a + b·d seconds; an entry of a fresh n×n array
    written, ``TOUCH_SECONDS_PER_BYTE`` per byte; a full pass over K in memory,
    ``PASS_SECONDS_PER_BYTE`` per byte. Then

    - matrix: n²/2 values + n²·itemsize written + n_init·P·n²·itemsize read
      (P = ``PASSES_PER_RESTART``);
    - screened: the sample's matrix (s²/2 values, s²·itemsize written) + n_init candidates of
      ``SAMPLE_PASSES_PER_CANDIDATE`` passes over it + the completion of the best (distinct
      solutions on clustered data are few: one, the usual case, is predicted): n·min(s, 4000)
      values for its start and ``COMPLETION_VALUES``·n²/k for its iterations;

    each divided by ``n_threads`` (the work is spread over whole rows).
    """
    n, k, s = float(n), float(n_clusters), float(screen_sample_size(n, n_clusters))
    value = VALUE_SECONDS + VALUE_FEATURE_SECONDS * n_features

    def build(m):
        return m * m / 2 * value + m * m * itemsize * TOUCH_SECONDS_PER_BYTE

    def passes(m, count):
        return count * m * m * itemsize * PASS_SECONDS_PER_BYTE

    matrix = build(n) + passes(n, n_init * PASSES_PER_RESTART)
    screened = (build(s) + passes(s, n_init * SAMPLE_PASSES_PER_CANDIDATE)
                + (n * min(s, 4000.0) + COMPLETION_VALUES * n * n / k) * value)
    return RouteCosts(matrix=matrix / n_threads, screened=screened / n_threads,
                      matrix_bytes=int(n * n * itemsize), sample=int(s))


def _seconds(value):
    """Two significant digits, no exponent: 0.42, 3.1, 19, 150."""
    return f"{value:.2g}" if value < 10 else f"{value:.0f}"


def choose_route(costs, matrix_fits, blocked_fits):
    """``(route, screen, reason)`` of ``storage='auto'`` from the :class:`RouteCosts` of a fit
    whose restarts can be screened, and whether the kernel matrix and the blocked route fit
    the memory limit. A pure function.

    The faster prediction wins among the routes that fit. When the sample's solutions do not
    separate, screened restarts run the full restarts on kernel values in blocks
    (``exact_restarts.adaptive_restarts``): the route keeps the blocked route's memory, at
    most about 1.3× the time of the full restarts on the matrix (i.i.d. normal data,
    ``benchmarks/bench_route.py``). None when neither fits (the caller's memory check
    refuses).
    """
    if not blocked_fits:
        return ("matrix", False, None) if matrix_fits else None
    size, sample = format_bytes(costs.matrix_bytes), f"{costs.sample:,}"
    screened = (f"{_seconds(costs.screened)} s with restarts screened on a sample of {sample} "
                f"points")
    matrix = f"{_seconds(costs.matrix)} s with the kernel matrix ({size}) and full restarts"
    if not matrix_fits:
        return "blocked", True, (f"the kernel matrix ({size}) does not fit the memory limit; "
                                 f"restarts screened on a sample of {sample} points")
    if costs.screened < costs.matrix:
        return "blocked", True, (f"predicted {screened} against {matrix}; the matrix is "
                                 f"never built: the full restarts run in blocks if the sample's solutions do "
                                 f"not separate")
    return "matrix", False, f"predicted {matrix} against {screened}"


@dataclass(frozen=True)
class FitPlan:
    """Where and how a fit runs.

    Attributes
    ----------
    route : {'matrix', 'blocked', 'lazy', 'nystroem'}
    reason : str or None
        Why this route (``fit_stats_['storage_reason']``), None when there is nothing to say.
    n_threads : int
        OpenMP threads of the engine (1 below ``SMALL_N`` points).
    dtype : numpy type
        Storage type of the kernel matrix or of the blocked kernel values.
    n_features : int
        d, the data's dimension (the iteration scheme depends on it).
    lazy_budget : float
        Kernel values the lazy route may compute before it builds the matrix.
    screen : bool
        The cost model chose restarts screened on a sample (route 'blocked'): the engine's
        adaptive screening (``exact_restarts.adaptive_restarts``).
    matrix_fits : bool
        The kernel matrix fits the memory limit (the adaptive screening then runs its
        candidates on the sample's kernel matrix).
    costs : RouteCosts or None
        The cost model's predictions when it chose the route (``storage='auto'``).
    """

    route: str
    reason: object
    n_threads: int
    dtype: type
    n_features: int
    lazy_budget: float = 0.0
    screen: bool = False
    matrix_fits: bool = False
    costs: object = None


def _psd_by_construction(params):
    """A kernel function that is positive semidefinite for every data set (no check needed).
    ``needs_psd_check`` reads the kernel's name and coef0 only, so no gamma is needed."""
    return params["kernel"] not in PRECOMPUTED and not needs_psd_check(
        Kernel(params["kernel"], None, int(params["degree"]), float(params["coef0"])))


def blocked_possible(params):
    """Whether exact k-means can run on kernel values recomputed in blocks: a kernel function
    positive semidefinite by construction (Elkan's bounds need a Euclidean feature space; a
    PSD check or repair needs K), the objective 'kmeans', the Lloyd solver, no approximation."""
    return (_psd_by_construction(params) and params["objective"] == "kmeans"
            and params["solver"] == "lloyd" and params["psd_repair"] == "none"
            and params["approx"] == "none")


def starts_lazy(params, n, n_features, kernel_given=False):
    """Whether ``storage='auto'`` starts without the kernel matrix (route 'lazy').

    Only where that cannot change the result (up to exact ties) and can only save: one start
    (nothing to share K with; spectral starts need K), n ≥ ``LAZY_MIN_N`` (below, K is cheap),
    a kernel positive semidefinite by construction, the objective 'kmeans' and the Lloyd
    solver, and Elkan chosen for a blocked kernel. Measured (``benchmarks/bench_fit.py``,
    n = 10,000, d = 10, k = 8, one restart): blobs 0.12 s instead of 0.7–2.0 s with the
    matrix; structureless data builds the matrix after the budget and loses ~0.1–0.3 s.
    """
    if params["storage"] != "auto" or kernel_given or n < LAZY_MIN_N:
        return False
    init = params["init"]
    single = not isinstance(init, str) or (
        params["n_init"] == 1 and init in ("k-means++", "random"))
    if not (single and blocked_possible(params)) or params["algorithm"] == "lloyd":
        return False
    return (params["algorithm"] == "elkan"
            or elkan_pays_blocked(params["n_clusters"], n_features))


def _kernel_given(params, dtype, kernel_matrix_given):
    """K exists already: given to fit, or DATA is the kernel matrix (kept as float64)."""
    return kernel_matrix_given or (params["kernel"] == "precomputed" and dtype == np.float64)


def screens(params, n):
    """Whether the restarts of a fit of n points can be screened on a sample: several
    starts of its own, more points than twice the sample (``exact_restarts.applies``)."""
    return (isinstance(params["init"], str) and int(params["n_init"]) >= 2
            and n > 2 * screen_sample_size(n, params["n_clusters"]))


def cost_choice(params, n, n_features, kernel_given=False):
    """``(route, screen, reason, matrix_fits, costs)`` of the cost model for ``storage='auto'``
    (:func:`route_costs`, :func:`choose_route`), or None where it does not choose: another
    storage, a kernel matrix given, no blocked route possible, restarts that cannot be
    screened."""
    dtype = resolve_dtype(params["dtype"])
    if (params["storage"] != "auto" or params["approx"] != "none" or not blocked_possible(params)
            or _kernel_given(params, dtype, kernel_given) or not screens(params, n)):
        return None
    k = params["n_clusters"]
    limit = resolve_limit(params["memory_limit"])
    planned = dict(k=k, dtype=np.dtype(dtype).name,
                   feature_engine=feature_engine_applies(params["objective"], params["refine"]))
    matrix_fits = limit is None or plan(n, **planned).total <= limit
    blocked_fits = limit is None or plan(n, k, storage="blocked").total <= limit
    costs = route_costs(n, n_features, k, int(params["n_init"]),
                        itemsize=np.dtype(dtype).itemsize,
                        n_threads=fit_threads(params["n_threads"], n))
    chosen = choose_route(costs, matrix_fits, blocked_fits)
    if chosen is None:
        return None
    if not matrix_fits:  # the memory plan's own words: the need, the limit and its source
        _, why = choose_storage(n, k, planned["dtype"], limit=params["memory_limit"],
                                feature_engine=planned["feature_engine"])
        chosen = (chosen[0], chosen[1],
                  f"{why}; restarts screened on a sample of {costs.sample:,} points")
    return (*chosen, matrix_fits, costs)


def route_of(params, n, n_features, kernel_given=False):
    """The route of :func:`plan_fit` and why, without the memory checks."""
    dtype = resolve_dtype(params["dtype"])
    if params["approx"] == "nystroem":
        return "nystroem", None
    if params["storage"] == "blocked":
        return "blocked", f"asked for ({named('--storage blocked')})"
    chosen = cost_choice(params, n, n_features, kernel_given)
    if chosen is not None:
        return chosen[0], chosen[2]
    storage, why = choose_storage(n, params["n_clusters"], np.dtype(dtype).name,
                                  limit=params["memory_limit"], storage=params["storage"],
                                  blocked_ok=blocked_possible(params),
                                  kernel_given=_kernel_given(params, dtype, kernel_given),
                                  feature_engine=feature_engine_applies(params["objective"],
                                                                         params["refine"]))
    if storage == "blocked":
        return "blocked", why
    if starts_lazy(params, n, n_features, kernel_given):
        return "lazy", LAZY_REASON
    return "matrix", why


def plan_fit(params, n, n_features, *, kernel_given=False):
    """The :class:`FitPlan` of a fit of n points of dimension d.

    Parameters
    ----------
    params : dict
        The estimator's parameters (``get_params()``), already validated.
    n, n_features : int
    kernel_given : bool
        A kernel matrix is given to ``fit`` (``kernel_matrix=``).

    Raises
    ------
    MemoryPlanError
        The route's memory plan exceeds ``memory_limit`` (nothing has been allocated).
    ValueError
        ``storage='blocked'`` with a given kernel matrix.
    """
    dtype = resolve_dtype(params["dtype"])
    k = params["n_clusters"]
    n_threads = fit_threads(params["n_threads"], n)
    route, reason = route_of(params, n, n_features, kernel_given)
    chosen = cost_choice(params, n, n_features, kernel_given)
    screen = chosen is not None and chosen[1]
    matrix_fits = chosen is not None and chosen[3]
    if route == "blocked" and params["storage"] == "blocked":
        if kernel_given:
            raise ValueError("storage='blocked' recomputes kernel rows from the data; it "
                             "cannot use a given kernel_matrix")
        check(plan(n, k, storage="blocked"), params["memory_limit"], k=k, storage="blocked")
    elif route == "blocked" and screen and not matrix_fits:
        check(plan(n, k, storage="blocked"), params["memory_limit"], k=k, storage="blocked")
    elif route in ("matrix", "lazy"):
        kernel_matrix = _kernel_given(params, dtype, kernel_given)
        planned = dict(k=k, dtype=np.dtype(dtype).name, feature_engine=feature_engine_applies(
            params["objective"], params["refine"]))
        check(plan(n, kernel_given=kernel_matrix, **planned), params["memory_limit"],
              **planned)
    return FitPlan(route=route, reason=reason, n_threads=n_threads, dtype=dtype,
                   n_features=n_features,
                   lazy_budget=LAZY_BUDGET * float(n) * n if route == "lazy" else 0.0,
                   screen=screen, matrix_fits=matrix_fits,
                   costs=None if chosen is None else chosen[4])


def check_command_memory(params, n, ks, silhouette=None, blocked_silhouette=False,
                         sweep=False):
    """Refuse (``MemoryPlanError``) before any large allocation when a command's fits of n
    points (the largest of ``ks``), with the silhouette when asked, would need more than
    ``params['memory_limit']`` (``memory.py``).

    ``silhouette``: None, 'exact' or 'from-kernel' (``memory.plan``); ``blocked_silhouette``:
    the silhouette runs after the fit on kernel rows recomputed in blocks (the fit does not
    share its kernel matrix with it), so the plan is the larger of the two; ``sweep``: the
    fits of a sweep (shared features, no blocked route to offer). With ``storage='auto'`` the
    exact route is chosen as :func:`plan_fit` chooses it (blocked when the kernel matrix does
    not fit); a refusal when no exact route fits.
    """
    engine = not sweep and feature_engine_applies(params["objective"], params["refine"])
    kw = dict(k=max(ks), dtype=params["dtype"], approx=params["approx"],
              n_landmarks=params["n_landmarks"], silhouette=silhouette,
              storage=params["storage"], offer_blocked=not sweep,
              silhouette_after=blocked_silhouette, rank=params["nystroem_rank"],
              feature_engine=engine,
              n_threads=fit_threads(params["n_threads"], n))
    if params["kernel"] == "precomputed":  # DATA is K (a distance matrix becomes a new K)
        kw["kernel_given"] = params["dtype"] == "float64"
    if params["storage"] == "auto" and params["approx"] == "none" and not sweep:
        rest = {key: value for key, value in kw.items()
                if key not in ("k", "dtype", "storage", "approx", "n_landmarks")}
        kw["storage"], _ = choose_storage(n, kw["k"], kw["dtype"], limit=params["memory_limit"],
                                          blocked_ok=blocked_possible(params), **rest)
    check(plan(n, **kw), params["memory_limit"], **kw)


def check_graph_memory(n, n_features, ks, *, n_neighbors=None, memory_limit=None,
                       init="k-means++", weighting="connectivity", sweep=False, refit=False,
                       eigengap=False, neighbor_search="auto", nnz=None, whiten=False):
    """Refuse (``MemoryPlanError``) before the k-nearest-neighbour graph of n points is built
    when building it and fitting the largest of ``ks`` on it would need more than
    ``memory_limit`` (None: 80% of the available RAM, as for the dense kernels): the plan of
    ``memory.graph_plan``; for an affinity of ``nnz`` entries given as DATA (``nnz`` not None),
    that of ``memory.given_graph_plan``. ``n_neighbors`` None is the default rule at the
    largest k (a sweep's: at the smallest), for n distinct points (an upper bound: copies only
    lower it). The ways out named: the exact search when the approximate one is planned and
    the exact one fits, the most neighbours that fit (``--n-neighbors``), a sweep's largest k
    that fits (the upper end of ``--k``), and a smaller sample.

    ``sweep``: the fits and measures of a sweep over ``ks`` (one graph for every k), with
    ``refit`` the best k fitted again, and ``eigengap`` its mode ('auto': computed up to
    ``measures.graph_sweep.EIGENGAP_MAX_NODES`` nodes; True; False). ``neighbor_search``
    chooses the search planned (``kernels.graph.search_route``); ``whiten`` adds the whitened
    points (``memory.graph_plan``).

    Returns the ``neighbor_search`` to run: as given, or 'exact' for 'auto' when the
    approximate search it would take does not fit and the exact one does. When neither fits,
    'auto' is refused with the exact search's plan when it is the smaller (what 'auto' runs
    once the limit allows it).
    """
    ks = sorted(int(k) for k in ks)
    nn = min(int(n_neighbors) if n_neighbors is not None else
             default_neighbors(n, ks[0] if sweep else ks[-1]), n)
    start = "spectral" if isinstance(init, str) and init == "spectral" else "auto"
    eigen = eigengap is True or (eigengap == "auto" and n <= EIGENGAP_MAX_NODES)
    route = None if nnz is not None else search_route(neighbor_search, n, n_features, nn)

    searched = [route]      # the search the refusal plans: 'auto' under a limit takes 'exact'

    def planned(m, search=None, top=ks[-1]):
        search = searched[0] if search is None else search
        swept = [k for k in ks if k <= top]
        k = top + (1 if sweep else 0)       # a sweep fits k + 1 for its ratio
        if nnz is not None:
            return given_graph_plan(n, nnz, k, start=start, eigengap=eigen,
                                    sweep_ks=len(swept) if sweep else 0, refit=refit)
        return graph_plan(n, m, n_features, k, weighting=weighting, start=start,
                          eigengap=eigen, sweep_ks=len(swept) if sweep else 0, refit=refit,
                          search=search, whiten=whiten)

    def fits(memory_plan):
        return memory_plan.total <= limit

    memory_plan = planned(nn)
    limit = resolve_limit(memory_limit)
    if limit is None or fits(memory_plan):
        return neighbor_search
    exact = planned(nn, "exact") if route == "approximate" else None
    if exact is not None and fits(exact):
        if neighbor_search == "auto":
            return "exact"
        memory_plan.alternatives["--neighbor-search exact"] = exact.total
    elif exact is not None and neighbor_search == "auto" and exact.total < memory_plan.total:
        memory_plan, searched[0] = exact, "exact"   # what 'auto' runs once the limit allows
    lo, hi = 1, nn          # the most neighbours that fit: planned(lo) fits, planned(hi) not
    if nnz is None and fits(planned(2)):
        lo = 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(planned(mid)) else (lo, mid)
        memory_plan.alternatives[f"--n-neighbors {lo}"] = planned(lo).total
    if sweep and len(ks) > 1 and fits(planned(nn, top=ks[0])):
        lo, hi = 0, len(ks) - 1  # the largest k that fits: ks[lo] does, ks[hi] not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(planned(nn, top=ks[mid])) else (lo, mid)
        top = ks[lo]
        swept = ks[:lo + 1]
        name = (f"--k {ks[0]}..{top}" if swept == list(range(ks[0], top + 1))
                else f"ks up to {top} in --k")
        memory_plan.alternatives[name] = planned(nn, top=top).total
    check(memory_plan, memory_limit)
    return neighbor_search

