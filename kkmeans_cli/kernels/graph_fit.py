"""A whole normalized-cut fit on a graph, and the prediction of new points: arrays in, records out.

``fit_graph`` builds the graph (``graph.py``; ``n_neighbors=None``: 20 other points, capped
for tiny data, ``graph.default_neighbors``) or checks a given affinity. With start 'auto':
exactly k connected components are the answer; more, on a connectivity graph of points, are
joined by bridges (``graph.join_components``) and merged by least ncut as one more start;
otherwise the default starts of ``engine/graph_starts.py`` (one NJW start and four
over-segment-and-merge starts, on the multilevel coarsening above ``SPECTRAL_DIRECT_MAX``
nodes) — on a connectivity graph of points of up to 15 columns tried on the graph's choice
graph (``graph.choice_graph``: mutual neighbours and a backbone), the one that cuts it least
kept. Each start is refined by the graph kernel k-means (``engine/graph.py``: Lloyd with the
PSD shift and Hartigan moves, alternating) and the lowest objective wins (the first on ties;
for a fixed k the objective and ncut differ by a constant).
With ``whiten='auto'`` (the default) on points of 2 to 64 columns whose cut is not zero, the
fit is then checked against two others, each kept only where its clusters are likelier
Gaussians (``classification_criterion``): the fit of the points whitened by the clusters'
pooled covariance (above ``REFIT_SAMPLE_ABOVE`` distinct points made only where it moves more
than a few points on a sample: ``sample_whitening``), and the Gaussian step
(``gaussian_step``; where the sample decided against the refit, not made when the sample's
own step cut ``SAMPLE_STEP_RATIO`` times its fit's or more); last, after the Gaussian step,
the labels of a Gaussian mixture fitted by EM from the labels it left (beside a uniform
component that takes scattered outliers), kept where they cut
the graph at most ``MIXTURE_NCUT_RATIO`` times as much (``mixture_step``), the mixture then
labelling new points; and where these changed the first fit's labels, all of them are undone
where a mixture of 2k Gaussians fits the points better than Schwarz's criterion allows
(``split_test``: the clusters are not Gaussian).

Out-of-sample extension (predict)
    A new point x gets an affinity row a over the training nodes from its n_neighbors − 1
    nearest nodes j, with the training weighting (connectivity: 1; self-tuning:
    exp(−‖x − x_j‖²/(σ_x σ_j)) with the training σ_j and σ_x its distance to its 7th nearest
    node), times the node's copies u_j, and a self-loop a_xx = 1 as every training point has
    (it links x to no training node). Its degree is d_x = a_xx + Σ_j a_j and its kernel values
    K(x, j) = a_j/(d_x d_j), K_xx = σ/d_x + a_xx/d_x², so with p_c = Σ_{j∈c} a_j/d_x

        d(x, c) = K_xx − 2 Σ_{j∈c} w_j K(x, j)/W_c + g_c/W_c² = K_xx − 2p_c/vol(c) + (σ vol(c) + links(c, c))/vol(c)²,

    and x goes to the nearest centre (ties: the lowest cluster). A point equal to a training
    node J *is* that node: predict returns J's label (``predict(X_fit) == labels``), and its
    distances (``transform``) take K(x, j) = σδ_jJ/d_x + a_j/(d_x d_j) with J's own list in
    the fit's graph as its row, B_J (its self-loop and its n_neighbors − 1 nearest nodes) —
    not the symmetrized A_J = (B_J + B_Jᵀ)/2, whose reverse lists the model does not keep, so
    they approximate J's fit distances (Σ_i w_i d(i, labels_i) within 0.4 % of the
    objective on the sets measured with connectivity weights, 2 % with self-tuned ones) and
    equal them where B_J = A_J and no node has copies; their least was J's label on every
    set measured.
    A fit that kept its Gaussian mixture (``mixture_step``) gives a new point the mixture's
    likeliest component instead, and a point equal to a node, as ever, the node's label.
"""
import warnings
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, replace

import numpy as np

from .. import _options
from ..engine import _mixture as _em
from ..engine import graph_starts
from ..engine.graph import GraphKernel, GraphSums, cluster_sums, refine
from ..engine.threads import blas_threads, effective_n_threads
from ..errors import DataError, KKMeansWarning, ValueRangeError
from . import graph as kgraph
from .functions import FLOAT_MAX, check_range, log_squared_norms

STARTS = ("auto", "multilevel", "spectral")
VOL_RTOL = 1e-9        # a model file's cluster volumes against the sums of their degrees


@dataclass(frozen=True)
class GraphModel:
    """What predicting new points needs (the model file's part for a graph fit).

    nodes (m×d), counts u (m,), scales σ_j (m,) or None, node_labels (m,), degrees d (m,),
    vol and links (k,), sigma, n_neighbors, weighting; transform (d×d) or None; mixture: the
    ``Mixture`` whose labels the fit kept (``mixture_step``), which then labels new points,
    or None.
    """

    nodes: np.ndarray
    counts: np.ndarray
    scales: np.ndarray
    node_labels: np.ndarray
    degrees: np.ndarray
    vol: np.ndarray
    links: np.ndarray
    sigma: float
    n_neighbors: int
    weighting: str
    transform: np.ndarray = None
    mixture: "Mixture" = None

    #: the arrays of a ``Mixture`` in the model file
    MIXTURE_ARRAYS = ("graph_mixture_scale", "graph_mixture_columns",
                      "graph_mixture_projection", "graph_mixture_means", "graph_mixture_maps",
                      "graph_mixture_consts")

    @property
    def inner_sums(self):
        """g_c = σ vol(c) + links(c, c)."""
        return self.sigma * self.vol + self.links

    def meta(self):
        """The model file's meta entries of the graph (JSON values)."""
        return {"n_neighbors": int(self.n_neighbors), "weighting": self.weighting,
                "sigma": float(self.sigma)}

    def arrays(self):
        """The model file's arrays (plain dtypes: loadable with ``allow_pickle=False``)."""
        out = {"graph_nodes": self.nodes, "graph_counts": self.counts,
               "graph_node_labels": np.asarray(self.node_labels, dtype=np.int32),
               "graph_degrees": self.degrees, "graph_vol": self.vol,
               "graph_links": self.links}
        if self.scales is not None:
            out["graph_scales"] = self.scales
        if self.transform is not None:
            out["graph_transform"] = self.transform
        if self.mixture is not None:
            out.update(self.mixture.arrays())
        return out

    @classmethod
    def from_file(cls, meta, arrays, fail):
        """The model from ``meta()`` and ``arrays()`` read back; ``fail(problem)`` raises on
        any entry that is missing, of the wrong shape or kind, or out of range."""
        weighting, n_neighbors, sigma = (meta.get(key) for key in
                                         ("weighting", "n_neighbors", "sigma"))
        if weighting not in kgraph.WEIGHTINGS:
            fail(f"unknown graph weighting {weighting!r}")
        if not isinstance(n_neighbors, int) or n_neighbors < 1:
            fail("'n_neighbors' must be a positive integer")
        # σ = max(0, max_i (1 − 2A_ii/d_i)) < 1 (engine.graph.shift_bound)
        if not isinstance(sigma, (int, float)) or isinstance(sigma, bool) or \
                not 0 <= sigma <= 1:
            fail("'sigma' must be a number from 0 to 1")
        names = ["graph_nodes", "graph_counts", "graph_node_labels", "graph_degrees",
                 "graph_vol", "graph_links"] + (["graph_scales"]
                                                if weighting == "self-tuning" else [])
        for name in names:
            if name not in arrays:
                fail(f"the array '{name}' (needed by a graph kernel) is missing")
            if arrays[name].dtype.kind not in "fiu" or not np.all(np.isfinite(arrays[name])):
                fail(f"'{name}' must hold finite numbers")
        nodes = arrays["graph_nodes"]
        m, k = (nodes.shape[0] if nodes.ndim == 2 else -1), arrays["graph_vol"].shape[0]
        for name, shape in [("graph_counts", (m,)), ("graph_node_labels", (m,)),
                            ("graph_degrees", (m,)), ("graph_vol", (k,)),
                            ("graph_links", (k,)), ("graph_scales", (m,))]:
            if name in names and arrays[name].shape != shape:
                fail(f"'{name}' must have shape {shape}")
        labels = arrays["graph_node_labels"]
        if m < 1 or np.any(labels < 0) or np.any(labels >= k):
            fail(f"'graph_node_labels' must lie in 0 … {k - 1}")
        if np.any(arrays["graph_degrees"] <= 0) or np.any(arrays["graph_counts"] <= 0):
            fail("'graph_degrees' and 'graph_counts' must be positive")
        if "graph_scales" in names and np.any(arrays["graph_scales"] <= 0):
            fail("'graph_scales' must be positive (each node's local scale σ_j)")
        n_points = float(np.sum(arrays["graph_counts"]))
        # the default rule asks at least 2 (itself and one other; one row has only itself:
        # the graph caps the setting by its nodes, the model keeps the setting)
        if n_neighbors > max(n_points, kgraph.default_neighbors(1, 1)):
            fail(f"'n_neighbors' ({n_neighbors}) must not exceed the {n_points:g} training "
                 f"points")
        # each cluster's volume is the sum of its nodes' degrees, its links at most that
        vol, links = arrays["graph_vol"], arrays["graph_links"]
        sums = np.bincount(labels.astype(np.intp), weights=arrays["graph_degrees"],
                           minlength=k)
        if np.any(vol <= 0) or not np.allclose(vol, sums, rtol=VOL_RTOL, atol=0.0):
            fail("'graph_vol' must be the sums of the degrees of each cluster's nodes "
                 "(every cluster non-empty)")
        if np.any(links < 0) or np.any(links > vol * (1.0 + VOL_RTOL)):
            fail("'graph_links' must lie between 0 and each cluster's volume")
        transform = arrays.get("graph_transform")
        if transform is not None:
            d = nodes.shape[1]
            if transform.shape != (d, d) or transform.dtype.kind not in "fiu" or \
                    not np.all(np.isfinite(transform)):
                fail(f"'graph_transform' must be a {d}×{d} array of finite numbers")
        mixture = Mixture.from_file(arrays, nodes.shape[1], k, fail)
        f64 = (lambda name: np.ascontiguousarray(arrays[name], dtype=np.float64))
        return cls(f64("graph_nodes"), f64("graph_counts"),
                   f64("graph_scales") if "graph_scales" in names else None,
                   np.ascontiguousarray(labels, dtype=np.int32), f64("graph_degrees"),
                   f64("graph_vol"), f64("graph_links"), float(sigma), int(n_neighbors),
                   weighting, None if transform is None else f64("graph_transform"), mixture)


@dataclass(frozen=True)
class GraphFitResult:
    """The outcome of ``fit_graph``.

    labels (n,) per point; ncut; objective J (module docstring of ``engine/graph.py``);
    n_iter (Lloyd passes of the winning run); converged; hartigan_moves; start ('components',
    'multilevel', 'spectral', or 'gaussian': ``gaussian_step``); start_ncuts (final ncut of
    every start run); graph (``kernels.graph.Graph``); kernel (``GraphKernel``: σ,
    degrees); sums (links, vol); node_labels (m,); transform (d×d): the whitening the
    graph's points went through, or None;
    whitening: with whiten='auto' when the refit was tried, both fits' classification
    criteria, their labels' agreement (``adjusted_rand``), the refit's cut of its own graph
    and the first labels' cut of it, and whether the refit was kept (or ``merged_points``:
    whitening merged points), else None; gaussian: with whiten='auto' when
    ``gaussian_step`` ran, both labellings' criteria, the ratio of their normalized cuts and
    whether the Gaussian step was kept (or ``skipped``: a cluster of d' points or fewer),
    else None; chosen: the index in ``start_kinds`` of the run returned where a kept
    Gaussian step chose it, else None (the lowest cut); mixture: with whiten='auto' when
    ``mixture_step`` ran, the ratio of its labels' normalized cut to the fit's, its passes,
    mean log-likelihood, agreement with the fit's labels, smallest cluster (``min_points``)
    and least variance, and whether it was kept (or ``skipped``, or ``discrete_columns``:
    not made), else None; mixture_model: the ``Mixture`` whose labels these are, or None
    (the labels then are the graph fit's); split_test: where ``split_test`` was made, the
    ratio of 2k Gaussians' gain in log-likelihood to its charge and whether the steps'
    labels were kept (else the fit of the points as given, the steps' records ``undone``),
    else None.
    """

    labels: np.ndarray
    node_labels: np.ndarray
    ncut: float
    objective: float
    n_iter: int
    converged: bool
    hartigan_moves: int
    start: str
    start_ncuts: tuple
    graph: object
    kernel: object
    sums: GraphSums
    start_kinds: tuple = ()
    levels: int = 0
    transform: np.ndarray = None
    whitening: dict = None
    gaussian: dict = None
    chosen: int = None
    mixture: dict = None
    mixture_model: "Mixture" = None
    split_test: dict = None

    @property
    def chosen_start(self):
        """The index in ``start_kinds`` of the run whose labels these are: the lowest cut
        (the first on ties), or the Gaussian step's where it was kept (``chosen``)."""
        return int(np.argmin(self.start_ncuts)) if self.chosen is None else self.chosen

    @property
    def inner_sums(self):
        return self.kernel.sigma * self.sums.vol + self.sums.links

    def fitted_attributes(self):
        """What an estimator writes after this fit, by its attribute names: labels_,
        inertia_ (J), inner_sums_ (g = σ vol + links), cluster_weights_ (vol), n_iter_,
        converged_, ncut_ and fit_stats entries."""
        return {"labels_": self.labels.astype(np.intp), "inertia_": self.objective,
                "inner_sums_": self.inner_sums, "cluster_weights_": self.sums.vol.copy(),
                "n_iter_": self.n_iter, "converged_": self.converged, "ncut_": self.ncut,
                "fit_stats_": {"graph": dict(vars(self.graph.info)), "start": self.start,
                               "start_ncuts": list(self.start_ncuts),
                               "start_kinds": list(self.start_kinds), "levels": self.levels,
                               "refine_moves": self.hartigan_moves,
                               "sigma": self.kernel.sigma,
                               **{key: dict(value) for key, value in (
                                   ("whitening", self.whitening),
                                   ("gaussian", self.gaussian),
                                   ("mixture", self.mixture),
                                   ("split_test", self.split_test)) if value is not None}}}

    def model(self):
        """The GraphModel of this fit (None for a given affinity: no coordinates)."""
        g = self.graph
        if g.nodes is None:
            return None
        return GraphModel(g.nodes, g.counts, g.scales, self.node_labels, self.kernel.degrees,
                          self.sums.vol, self.sums.links, self.kernel.sigma,
                          g.info.n_neighbors, g.info.weighting, self.transform,
                          self.mixture_model)


def fit_graph(X=None, n_clusters=2, *, affinity=None, n_neighbors=None,
              weighting="connectivity", start="auto", n_init=3, max_iter=300,
              random_state=None, n_threads=None, neighbor_search="auto",
              whiten=_options.DEFAULTS["whiten"]):
    """Minimise the normalized cut of the k-nearest-neighbour graph of X (or of ``affinity``).

    Parameters
    ----------
    X : array (n, d) or None when ``affinity`` is given
    n_clusters : int, 1 ≤ k ≤ number of nodes
    affinity : sparse or dense (n, n), checked by ``kernels.graph.check_affinity``
    n_neighbors : int ≥ 1 counting the point itself, or None: 20 other points, capped for
        tiny data (``kernels.graph.default_neighbors``)
    weighting : the graph's weights (``kernels.graph.knn_graph``)
    start : 'auto' (module docstring), 'multilevel' or 'spectral' (``n_init`` of them)
    n_init : starts tried by 'multilevel' and 'spectral' ('auto' runs its fixed set)
    max_iter : Lloyd passes per run
    random_state : None, int or numpy Generator (embedding k-means, coarsening orders)
    n_threads : threads of the neighbour search and the passes (None: every core)
    neighbor_search : 'auto', 'exact' or 'approximate' (``kernels.graph.search_route``); the
        approximate search is seeded from ``random_state`` without drawing from it
    whiten : False, True or 'auto'. True: fit, then whiten X by the pooled within-cluster
        covariance of the labels found (``within_whitening``) and fit the whitened points'
        graph again (X only). 'auto': where ``whiten_applies``, the first fit's cut is not
        zero (k connected components) and its nodes are not each linked to every node, that
        refit (above ``REFIT_SAMPLE_ABOVE`` nodes made only where, on a sample, it moved
        more than a few points: ``sample_whitening``; else the record ``whitening`` holds the
        sample's, its keys prefixed ``sample_``, and ``sample``, the sample's size), kept
        only when its labels lower ``classification_criterion`` below the first
        fit's, differ from them (``adjusted_rand`` below ``AGREEMENT_MAX``), cut the
        whitened graph no higher than the first fit's labels do and the first graph at most
        ``REFIT_FIRST_CUT_MAX`` times as much as they do, and cut the whitened graph at most
        ``REFIT_NCUT_SHARE_MAX`` · (k − 1) or ``REFIT_NCUT_RATIO_MAX`` times the first
        fit's cut of the first graph, else the first fit; then
        ``gaussian_step`` and ``mixture_step`` on the fit chosen (``gaussian_steps``; not
        made where the sample decided against the refit and its own step cut
        ``SAMPLE_STEP_RATIO`` times its fit's or more: the record ``gaussian`` then holds
        ``sample`` and ``sample_ncut_ratio``), and ``split_test`` of their labels against
        the first fit's, which it returns where k Gaussians do not describe the points.

    Returns
    -------
    GraphFitResult
    """
    if start not in STARTS:
        raise ValueError(f"start must be one of {STARTS}, got {start!r}")
    n_threads = effective_n_threads(n_threads)
    rng = random_state if isinstance(random_state, np.random.Generator) \
        else np.random.default_rng(random_state)
    auto = isinstance(whiten, str)
    if auto and whiten != "auto":
        raise ValueError(f"whiten must be False, True or 'auto', got {whiten!r}")
    if not auto and whiten and affinity is not None:
        raise ValueError("whiten needs the points X: a given affinity has no coordinates")
    graph = build_graph(X, n_clusters, affinity, n_neighbors, weighting, n_threads,
                        neighbor_search, search_seed(rng), start)
    if neighbor_search != "exact" and graph.info.search != "approximate":
        neighbor_search = "exact"   # later graphs search as the first (its warning said why:
        # 'approximate' that cannot apply, or 'auto' whose pynndescent failed to import)
    fit = fit_on_graph(graph, n_clusters, start=start, n_init=n_init, max_iter=max_iter,
                       rng=rng, n_threads=n_threads)
    if not whiten or affinity is not None:
        return fit
    if auto and (cuts_nothing(fit) or graph.info.n_neighbors >= graph.info.n_nodes
                 or not whiten_applies(X, n_clusters)):
        return fit      # a cut of zero (k connected components) is the graph's exact answer;
        # a node linked to every node has the same graph whitened
    if auto and graph.info.n_nodes > REFIT_SAMPLE_ABOVE:
        trial = sample_whitening(X, n_clusters, rng, graph.info.n_neighbors,
                                 weighting=weighting, start=start, n_init=n_init,
                                 max_iter=max_iter, n_threads=n_threads,
                                 neighbor_search=neighbor_search)
        if trial is not None and trial.get("agreement", 0.0) >= AGREEMENT_MAX:
            record = {"kept": False, "sample": REFIT_SAMPLE,
                      **{f"sample_{key}": value for key, value in trial.items()}}
            fit = replace(fit, whitening=record)
            ratio = trial.get("step_ncut_ratio", 0.0)
            if ratio >= SAMPLE_STEP_RATIO:      # the sample's step cut through its shapes
                return replace(fit, gaussian={"kept": False, "sample": REFIT_SAMPLE,
                                              "sample_ncut_ratio": ratio})
            return gaussian_steps(X, fit, n_clusters, max_iter, n_threads=n_threads,
                                  seed=search_seed(rng))
    T = within_whitening(X, fit.labels, n_clusters)
    first = fit if auto else None                   # 'auto' may keep it
    nodes = graph.info.n_nodes
    del graph, fit                                  # True: the first graph, before the second
    graph = build_graph(whiten_points(X, T), n_clusters, None, n_neighbors, weighting,
                        n_threads, neighbor_search, search_seed(rng), start)
    if graph.info.n_nodes < nodes:      # rounding merged points: scales too far apart
        if auto:
            return gaussian_steps(X, replace(first, whitening={
                "kept": False, "merged_points": nodes - graph.info.n_nodes}), n_clusters,
                max_iter, n_threads=n_threads, seed=search_seed(rng))
        merged = (f"whiten=True merged the {nodes} distinct points into "
                  f"{graph.info.n_nodes} (X·W^{{-½}} rounds away what tells them apart: the "
                  f"columns' scales are too far apart)")
        if graph.info.n_nodes < n_clusters:
            raise DataError(f"{merged}, fewer than n_clusters={n_clusters}; fit without "
                            f"whiten=True")
        warnings.warn(f"{merged}; the fit without whiten=True keeps them apart",
                      KKMeansWarning, stacklevel=2)
    fit = fit_on_graph(graph, n_clusters, start=start, n_init=n_init, max_iter=max_iter,
                       rng=rng, n_threads=n_threads, say=not auto)   # said if kept (below)
    if not auto:
        return replace(fit, transform=T)
    del graph
    before = classification_criterion(X, first.labels, n_clusters)
    after = classification_criterion(X, fit.labels, n_clusters)
    agree = adjusted_rand(first.labels, fit.labels, n_clusters)
    # the first fit's labels as a cut of the refit's own graph: where it is lower, the refit
    # fell short of a labelling it was handed (a W near c·I gives the same graph again, and
    # the second fit is only another draw of the optimiser)
    held = cluster_sums(fit.kernel, node_labels(fit.graph, first.labels), n_clusters).ncut()
    # and the refit's labels as a cut of the first graph: whitening can blow a few
    # low-variance columns of noise up to the clusters' scale, and the refit then finds
    # groups of that noise, which cut the first graph about as random labels would
    # (rings with 14 such columns: 2,900 times the first fit's cut; a refit kept on blobs
    # or the real sets: at most 15 times)
    across = cluster_sums(first.kernel, node_labels(first.graph, fit.labels),
                          n_clusters).ncut()
    tried = {"criterion": before, "refit_criterion": after, "agreement": agree,
             "first_ncut": first.ncut, "refit_ncut": fit.ncut,
             "first_ncut_on_refit_graph": held, "refit_ncut_on_first_graph": across}
    passed = (lower(after, before), agree < AGREEMENT_MAX,       # _options.REFIT_TESTS
              fit.ncut <= held * (1.0 + CRITERION_RTOL),
              across <= REFIT_FIRST_CUT_MAX * first.ncut,
              fit.ncut <= max(REFIT_NCUT_SHARE_MAX * (n_clusters - 1),
                              REFIT_NCUT_RATIO_MAX * first.ncut))
    kept = all(passed)
    if kept:
        if grouped(fit, n_clusters):
            _warn_grouped(fit.graph, stacklevel=3)
        fit = replace(fit, transform=T, whitening=dict(tried, kept=True))
    else:
        fit = replace(first, whitening=dict(tried, kept=False,
                                            turned_down_by=passed.index(False)))
    return gaussian_steps(X, fit, n_clusters, max_iter, criterion=after if kept else before,
                          n_threads=n_threads, first=first, seed=search_seed(rng))


#: Above this many distinct points ``whiten='auto'`` first tries the refit on a sample of
#: ``REFIT_SAMPLE`` of them (``sample_whitening``) and makes it on all of them only where it
#: moved more than a few points there. At 10⁶ moons (.1) the refit takes 8.4 s of 19.8 and is
#: turned down; at 250,000 points the sample (about 1 s) costs as much as it saves on average
#: (docs/performance.md).
REFIT_SAMPLE_ABOVE = 500_000
REFIT_SAMPLE = 50_000
#: Where the refit is not made because of the sample, the Gaussian step is not made either
#: when the sample's own step was turned down at a cut this many times its fit's or more
#: (twice ``GAUSSIAN_NCUT_RATIO``: at 250,000 points the sample's step, where the step on
#: all the points was kept, cut at most 1.61 times; moons (.1) 4.5–6.9, the steps on all
#: the points 2.97–3.79, all turned down; docs/performance.md). At 10⁶ moons the step takes
#: about 2 s and is turned down.
SAMPLE_STEP_RATIO = 3.0


def sample_whitening(X, n_clusters, rng, n_neighbors, **params):
    """The ``whitening`` record of the default fit (``fit_graph`` with ``whiten='auto'``,
    ``n_neighbors`` (the whole graph's) and ``params``) of ``REFIT_SAMPLE`` of the points
    drawn uniformly without replacement by a generator seeded from ``rng`` without drawing
    from it (``search_seed``: the fit's own stream stays as it was), or None where that fit
    made no refit, where fewer than n_clusters · n_neighbors distinct points were drawn (the
    sample's graph would not be the whole graph's kind, or its clusters trivially the same
    twice) or where the fit refuses the sample (``DataError``, ``ValueError``). Where the
    sample's refit agreed with its first fit to ``AGREEMENT_MAX`` or more (it moved a few
    points only), the refit of all the points is not made. The sample's fit needs less
    memory than the refit's graph it comes before (the whole graph has over 10 times its
    nodes); its warnings are of the sample, not of the data, and are not passed on. The
    record has ``step_ncut_ratio`` too where the sample's Gaussian step was made and turned
    down (its ``ncut_ratio``)."""
    draw = np.random.default_rng(search_seed(rng))
    rows = np.sort(draw.choice(X.shape[0], REFIT_SAMPLE, replace=False))
    sample = X[rows]
    if np.unique(sample, axis=0).shape[0] < n_clusters * n_neighbors:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KKMeansWarning)
        try:
            trial = fit_graph(sample, n_clusters, n_neighbors=n_neighbors, random_state=draw,
                              whiten="auto", **params)
        except (DataError, ValueError):
            return None
    if trial.whitening is None:
        return None
    record = dict(trial.whitening)
    step = trial.gaussian or {}
    if step.get("kept") is False and not step.get("undone") and "ncut_ratio" in step:
        record["step_ncut_ratio"] = step["ncut_ratio"]
    return record


def node_labels(graph, labels):
    """int32 labels of the graph's nodes from labels of its points (repeated points share a
    node and, in every labelling here, a label)."""
    labels = np.asarray(labels)
    if graph.node_of is None:
        return labels.astype(np.int32)
    nodes = np.zeros(graph.info.n_nodes, dtype=np.int32)
    nodes[graph.node_of] = labels
    return nodes


def lower(after, before):
    """Whether a criterion value is lower than another by more than ``CRITERION_RTOL``
    (relative): the same partition numbered otherwise sums in another order."""
    return after < before - CRITERION_RTOL * (1.0 + abs(before))


NCUT_ROUNDING = 1e-9        # an ncut below this is checked for a cut of exactly nothing


def cuts_nothing(fit):
    """Whether no edge of the fit's graph joins two of its clusters (k connected
    components, or groups of more): its ncut, k − Σ links/vol with links and volumes summed
    in other orders, is then 0 only to rounding (4.4e-16 where the same graph at another
    scale gave 0), and a self-tuning graph's true cut can be as small; so an ncut below
    ``NCUT_ROUNDING`` is checked edge by edge (O(nnz), in blocks of rows)."""
    if fit.ncut <= 0.0:
        return True
    if fit.ncut > NCUT_ROUNDING:
        return False
    kernel, labels = fit.kernel, np.asarray(fit.node_labels)
    indptr, step = kernel.indptr, 1 << 20
    start = 0
    while start < kernel.n:
        stop = int(min(kernel.n, np.searchsorted(indptr, indptr[start] + step) + 1))
        stop = max(stop, start + 1)
        lo, hi = indptr[start], indptr[stop]
        rows = np.repeat(labels[start:stop], np.diff(indptr[start:stop + 1]))
        if np.any((rows != labels[kernel.indices[lo:hi]]) & (kernel.data[lo:hi] != 0.0)):
            return False
        start = stop
    return True


def gaussian_step(X, fit, k, max_iter=300, criterion=None, n_threads=1):
    """``fit``, or the graph's own fit started from the labels of
    ``gaussian_classification`` started from ``fit``'s: kept when its labels lower
    ``classification_criterion`` while its normalized cut stays within
    ``GAUSSIAN_NCUT_RATIO`` times ``fit``'s. Where the graph tells clusters apart poorly
    (overlapping blobs: many cuts nearly as low) the Gaussian model decides between them;
    where it tells them apart well (rings, moons) the Gaussian labels cut through them at
    many times the cut, and ``fit`` stays. The record ``gaussian`` says what was tried
    (``skipped``: a cluster of d' points or fewer). A kept step is one more run of the fit:
    its start 'gaussian' is appended to the starts and is the one ``chosen``. Not tried on a
    cut of zero (k connected components: the graph's exact answer). ``criterion``: that of
    ``fit``'s labels when the caller has it."""
    if cuts_nothing(fit):
        return fit
    with blas_threads(1):           # the same labels whatever the threads
        labels = gaussian_classification(X, fit.labels, k, n_threads=n_threads)
    if labels is None:
        return replace(fit, gaussian={"kept": False, "skipped": True})
    graph, kernel = fit.graph, fit.kernel
    with blas_threads(1):
        run = refine(kernel, node_labels(graph, labels), k, max_iter)
    moved = graph.point_labels(run.labels)
    before = classification_criterion(X, fit.labels, k) if criterion is None else criterion
    after = classification_criterion(X, moved, k)
    ncut = run.sums.ncut()
    tried = {"criterion": before, "gaussian_criterion": after, "ncut_ratio": ncut / fit.ncut}
    if not (lower(after, before) and ncut <= GAUSSIAN_NCUT_RATIO * fit.ncut):
        return replace(fit, gaussian=dict(tried, kept=False))
    return replace(fit, labels=moved, node_labels=run.labels, ncut=ncut,
                   objective=run.sums.objective(kernel), n_iter=run.n_iter,
                   converged=run.converged, hartigan_moves=run.hartigan_moves,
                   sums=run.sums, start="gaussian",
                   start_kinds=fit.start_kinds + ("gaussian",),
                   start_ncuts=fit.start_ncuts + (ncut,), chosen=len(fit.start_ncuts),
                   gaussian=dict(tried, kept=True))


def gaussian_steps(X, fit, k, max_iter=300, criterion=None, n_threads=1, first=None,
                   seed=0):
    """``mixture_step`` of ``gaussian_step``'s fit, then ``split_test`` against ``first``
    (the fit of the points as given; None: ``fit`` itself; ``seed`` draws its sample): the
    default's last steps."""
    stepped = gaussian_step(X, fit, k, max_iter, criterion, n_threads)
    return split_test(X, mixture_step(X, stepped, k, n_threads), stepped.labels,
                      fit if first is None else first, k, n_threads, seed)


def split_test(X, fit, start, first, k, n_threads=1, seed=0):
    """``fit``, or ``first`` where the Gaussian model that the steps after it rest on (the
    whitened refit, ``gaussian_step``, ``mixture_step``) fits the points worse than a model
    of twice as many Gaussians. Made only where ``fit``'s labels differ from ``first``'s
    and ``mixture_step`` was tried (not on discrete columns; its EM, made or skipped, or its
    labels, kept or not, do not matter: the test asks of ``start``, the labels it was given,
    whether their clusters are Gaussian), on the points
    or, above ``split_sample(k)`` of them, on that many drawn without replacement by a
    generator seeded with ``seed``: there EM of k components from ``start`` and of 2k from
    ``split_labels`` of ``start`` (``gaussian_mixture``, each to its tolerance) reach mean
    log-likelihoods L_k and L_2k, a gain of m (L_2k − L_k) over m points; Schwarz's criterion
    (BIC, "Estimating the dimension of a model", Annals of Statistics 1978) charges the k
    extra components ½ k p ln m, p = 1 + d' + d'(d' + 1)/2 parameters each (a weight, a
    mean, a covariance in d' coordinates), and the steps are undone where the gain exceeds
    ``SPLIT_RATIO_MAX`` times that charge: the clusters are not Gaussian (each moon is a
    bent pair of Gaussians, each ring a chain of them), and the Gaussian steps' labels
    there cut through the shapes that the graph held apart (moons at noise .15: 0.62
    against the first fit's 0.91). Splitting each cluster in two and comparing by BIC is
    the test of X-means (Pelleg & Moore, "X-means: extending K-means with efficient
    estimation of the number of clusters", ICML 2000), here of the whole mixture at once.
    The record ``split_test`` holds ``ratio`` (the gain over the charge), both mean
    log-likelihoods, the 2k EM's passes, the points it read (``sample``) and whether the
    steps were kept (``skipped``: a cluster, a split half or a component of d' points or
    fewer, or a component of 2k collapsed as ``mixture_step`` turns one down, its variance
    ``MIXTURE_MIN_VARIANCE`` or less: its density, unbounded but for the ridge, would
    inflate L_2k); where they were not, the records of the steps kept say ``undone``."""
    if fit.mixture is None or "discrete_columns" in fit.mixture or \
            np.array_equal(graph_starts.canonical_labels(fit.labels),
                           graph_starts.canonical_labels(first.labels)):
        return fit
    X = np.asarray(X, dtype=np.float64)
    start = np.asarray(start, dtype=np.int64).reshape(-1)
    sample = split_sample(k)
    if X.shape[0] > sample:
        rows = np.sort(np.random.default_rng(seed).choice(X.shape[0], sample, replace=False))
        X, start = X[rows], start[rows]
    one = two = None
    with blas_threads(1):           # the same labels whatever the threads
        if np.bincount(start, minlength=k).min() > 0:
            one = gaussian_mixture(X, start, k, n_threads=n_threads)
        split = None if one is None else split_labels(X, start, k)
        if split is not None:
            two = gaussian_mixture(X, split, 2 * k, n_threads=n_threads)
    if two is None or two[1]["min_variance"] <= MIXTURE_MIN_VARIANCE:
        return replace(fit, split_test={"kept": True, "skipped": True})
    (_, em_k), (model, em) = one, two
    m, dd = X.shape[0], model.means.shape[1]
    charge = 0.5 * k * (1 + dd + dd * (dd + 1) / 2) * np.log(m)
    ratio = m * (em["log_likelihood"] - em_k["log_likelihood"]) / charge
    record = {"ratio": float(ratio), "log_likelihood": em_k["log_likelihood"],
              "split_log_likelihood": em["log_likelihood"], "n_iter": em["n_iter"],
              "sample": int(m)}
    if ratio <= SPLIT_RATIO_MAX:
        return replace(fit, split_test=dict(record, kept=True))
    undone = {}
    for name in ("whitening", "gaussian", "mixture"):
        step = getattr(fit, name)
        undone[name] = dict(step, kept=False, undone=True) if step and step.get("kept") \
            else step
    return replace(first, split_test=dict(record, kept=False), **undone)


#: ``split_test`` undoes the Gaussian steps where 2k components raise the log-likelihood by
#: more than this many times Schwarz's charge for them (1: where BIC prefers 2k). Measured
#: at n = 1500 (docs/performance.md): the blob families 0.02–0.71, the real sets
#: 0.34–1.0025 (breast cancer standardized, 30 columns, the one above 1: undone), moons at
#: noise .05–.2 4.2–22.7, circles (.05–.12) 2.4–6.1, three rings (.03, .05) 2.5–5.1.
SPLIT_RATIO_MAX = 1.0
#: ``split_test`` reads at most this many points, drawn at random, the size its limit was
#: measured at: the statistic grows as m / ln m wherever the clusters are not exactly
#: Gaussian, and on all of 20,000 points clusters with slightly heavy tails (Student's t with
#: 10 degrees of freedom, Laplace) passed it on 21 of 24 and 22 of 27 sets and lost the
#: steps' gains (ARI up to −0.32). A sample of as many points per parameter as this one has
#: in 2-D (80) kept some of those losses in 5–8 columns; this one loses power as d' grows (moons beside
#: 20 columns of noise, d' = 22: 0.24–0.29 on 1,500 of 20,000 points, 3.2 on all of them;
#: docs/performance.md).
SPLIT_SAMPLE = 1500
#: … and at least this many a cluster (``split_sample``): a cluster's gain from its split
#: grows with its points, its charge only as ln m, so the ratio holds as k grows only where
#: each cluster keeps its points. 1,500 points left 37 a cluster at k = 40, and the test kept
#: Gaussian steps that cut stacked moons in half (ARI 0.66–0.71; undone 0.94–0.98,
#: docs/performance.md). 100 is what the 15-cluster sets it was measured on had: up to
#: k = 15 the sample is 1,500 as before.
SPLIT_SAMPLE_PER_CLUSTER = 100


def split_sample(k):
    """The most points ``split_test`` reads at k clusters: ``SPLIT_SAMPLE``, or
    ``SPLIT_SAMPLE_PER_CLUSTER`` a cluster where that is more."""
    return max(SPLIT_SAMPLE, SPLIT_SAMPLE_PER_CLUSTER * int(k))


def split_labels(X, labels, k):
    """Labels 0 … 2k − 1: cluster c of ``labels`` cut in two, 2c and 2c + 1, at its mean
    across its direction of most variance in the coordinates of ``classification_criterion``
    (the two children X-means starts from; 2c + 1 the side it points to, as a direction of
    the columns its largest entry positive); None where the points do not vary. In blocks of
    ``SCATTER_BLOCK_ROWS`` rows."""
    X = np.asarray(X, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64).reshape(-1)
    columns, scale, P, counts, means, scatters = criterion_frame(X, labels, k)
    if P is None:
        return None
    W = np.empty((k, scale.size))
    for c in range(k):
        W[c] = P @ np.linalg.eigh(P.T @ scatters[c] @ P)[1][:, -1]
        W[c] *= np.sign(W[c][np.argmax(np.abs(W[c]))])      # a sign of its own
    out = 2 * labels
    for lo in range(0, labels.size, SCATTER_BLOCK_ROWS):
        block = labels[lo:lo + SCATTER_BLOCK_ROWS]
        U = X[lo:lo + SCATTER_BLOCK_ROWS]
        U = (U if columns is None else U[:, columns]) / scale - means[block]
        out[lo:lo + block.size] += np.einsum("ij,ij->i", U, W[block]) > 0
    return out


def mixture_step(X, fit, k, n_threads=1):
    """``fit``, or the labels of the Gaussian mixture fitted by EM from its labels
    (``gaussian_mixture``, beside a uniform component of starting weight ``MIXTURE_NOISE``:
    points scattered between the clusters go to it rather than widen a Gaussian, each point
    then labelled by its likeliest Gaussian; fitted twice, with a covariance per component
    and with one shared, and the one Schwarz's criterion prefers taken,
    ``covariance_choice``: clusters of one shape estimate one covariance from all their
    points): kept where their normalized cut of ``fit``'s
    graph is at most
    ``MIXTURE_NCUT_RATIO`` times ``fit``'s. Where clusters overlap the graph's cut follows
    the sparse seam between them, and the mixture gives each point to the component of
    highest posterior instead (the classification EM of ``gaussian_step`` keeps the
    hard labels' bias: its clusters come out better separated than they are, Celeux &
    Govaert 1992); where the graph holds shapes apart (rings, moons) the mixture's
    ellipsoids cut through them at several times the cut, and ``fit`` stays. The labels
    kept are no fixed point of the graph's passes: the fit's ``mixture_model`` labels new
    points (``predict_graph``), and the mixture is appended to the fit's starts as
    'mixture', the one ``chosen`` (its passes the fit's ``n_iter``, ``converged`` whether
    EM stopped at its tolerance). Kept only where, besides, its labels differ from
    ``fit``'s, every cluster of them holds ``MIXTURE_MIN_POINTS`` points or more (a
    covariance from fewer is mostly noise), no component's variance in any direction is
    ``MIXTURE_MIN_VARIANCE`` or less (a component collapsed onto one value of a column: its
    density unbounded but for the ridge) and the uniform component's weight ends at most
    ``MIXTURE_NOISE_MAX`` (the record's ``noise_weight``; more: the Gaussians do not
    describe the clusters); the record says which covariance (``tied``) and the ratio of
    the choice (``covariance_ratio``, where both were fitted). Not made where a column the
    mixture would read takes 3 to ``MIXTURE_DISCRETE_MAX`` distinct values (counts,
    ratings, codes: no mixture of Gaussians models them; the record then holds
    ``discrete_columns``, how many). The
    record ``mixture`` says what was tried (``skipped``: a cluster fell to d' points or
    fewer). Not tried on a cut of zero (k connected components: the graph's exact
    answer)."""
    if cuts_nothing(fit):
        return fit
    counts = distinct_values(X, MIXTURE_DISCRETE_MAX)
    discrete = int(np.count_nonzero((counts >= 3) & (counts <= MIXTURE_DISCRETE_MAX)))
    if discrete:
        return replace(fit, mixture={"kept": False, "discrete_columns": discrete})
    with blas_threads(1):           # the same labels whatever the threads
        got = {tied: gaussian_mixture(X, fit.labels, k, n_threads=n_threads,
                                      noise=MIXTURE_NOISE, tied=tied) for tied in (False, True)}
    if got[False] is None and got[True] is None:
        return replace(fit, mixture={"kept": False, "skipped": True})
    tied, ratio = covariance_choice(got[False], got[True], X.shape[0], k)
    model, em = got[tied]
    with blas_threads(1):
        labels, _ = model.labels(X)
    nodes = node_labels(fit.graph, labels)
    labels = fit.graph.point_labels(nodes)      # a repeated point: its node's label
    smallest = int(np.bincount(labels, minlength=k).min())
    if smallest <= model.means.shape[1]:
        return replace(fit, mixture={"kept": False, "skipped": True})
    sums = cluster_sums(fit.kernel, nodes, k)
    ncut = sums.ncut()
    tried = {"tied": bool(tied), **({"covariance_ratio": ratio} if np.isfinite(ratio) else {}),
             "ncut_ratio": ncut / fit.ncut, "n_iter": em["n_iter"],
             "log_likelihood": em["log_likelihood"],
             "agreement": adjusted_rand(fit.labels, labels, k), "min_points": smallest,
             "min_variance": em["min_variance"], "noise_weight": em["noise_weight"]}
    if not (ncut <= MIXTURE_NCUT_RATIO * fit.ncut and smallest >= MIXTURE_MIN_POINTS
            and em["min_variance"] > MIXTURE_MIN_VARIANCE
            and em["noise_weight"] <= MIXTURE_NOISE_MAX
            and np.any(nodes != fit.node_labels)):
        return replace(fit, mixture=dict(tried, kept=False))
    return replace(fit, labels=labels, node_labels=nodes, ncut=ncut,
                   objective=sums.objective(fit.kernel), n_iter=em["n_iter"],
                   converged=em["converged"], hartigan_moves=0, sums=sums, start="mixture",
                   start_kinds=fit.start_kinds + ("mixture",),
                   start_ncuts=fit.start_ncuts + (ncut,), chosen=len(fit.start_ncuts),
                   mixture_model=model, mixture=dict(tried, kept=True))


def covariance_choice(full, tied, n, k):
    """(tied, ratio): which of two ``gaussian_mixture`` results of the same points and
    labels, a covariance per component (``full``) or one shared (``tied``), Schwarz's
    criterion prefers (BIC, "Estimating the dimension of a model", Annals of Statistics 1978;
    the choice among covariance models of mclust, Fraley & Raftery, "Model-based clustering,
    discriminant analysis, and density estimation", JASA 2002), and ratio, the full
    mixture's gain in log-likelihood, 2n(ℓ_full − ℓ_tied), over what BIC charges for its
    (k − 1) d'(d' + 1)/2 more parameters, (k − 1) d'(d' + 1)/2 · ln n: the tied one is taken
    where ratio is at most 1 (NaN where one of them is None or its log-likelihood is not
    finite: the other is taken; k < 2: the tied one, the same model). Both are in the same
    coordinates, so their log-likelihoods compare without the map's Jacobian. Each is its
    EM's last E-step's, under the parameters before the last M-step (EM stops where a pass
    gains less than ``MIXTURE_TOL`` a point), so the ratio may be off by about
    2n·``MIXTURE_TOL`` over the charge: 0.0007 at n = 1500, k = 3, d' = 2; 0.24 at 10⁶."""
    usable = [got is not None and bool(np.isfinite(got[1]["log_likelihood"]))
              for got in (full, tied)]
    if k < 2:
        return usable[1], float("nan")
    if not all(usable):
        return not usable[0], float("nan")
    dd = full[0].means.shape[1]
    charge = (k - 1) * dd * (dd + 1) / 2 * np.log(n)
    ratio = 2.0 * n * (full[1]["log_likelihood"] - tied[1]["log_likelihood"]) / charge
    return not ratio > 1.0, float(ratio)


#: ``mixture_step`` keeps the mixture's labels only where their normalized cut is at most
#: this many times the fit's (measured at n = 1500: on the 90 blob sets of 396 where the
#: mixture raised the ARI by more than 0.01, 1.1–4.7, 80 % at most 2 (aniso 52, let through
#: by the limit of 10: 8.1); over 36 seeds, moons
#: (.1) 3.7 and more, three rings (.05) 7.0 and more, and circles (.1) 2.0–2.4 only on the
#: two sets where the fit had already lost the rings). 2 until the split test: that test
#: undoes the mixtures of moons that cut less than 5 times (moons (.1) seed 9: 3.75, its
#: split ratio 14.6), and 5 then leaves 3 of the 396 blob sets below their bar where 2 left
#: 6 (8: 4), every shape and real set as before. 10 lifts anisotropic seed 52 above its bar
#: (0.644 → 0.751); without the uniform component (``MIXTURE_NOISE``) it lost 0.14 on blobs
#: among 7 % uniform outliers (2 of 48 sets), whose Gaussians widened to take them in; with
#: it no such set falls by more than 0.05 (docs/performance.md).
MIXTURE_NCUT_RATIO = 10.0
#: The starting weight of ``mixture_step``'s uniform component (0: none; Banfield & Raftery
#: 1993, mclust's "noise component"). EM moves it toward the share of points no Gaussian
#: explains: on four blobs among 3 / 7 / 12 % uniform outliers a median of 0.022 / 0.048 /
#: 0.076, on the 396 clean blob sets at most 0.019 (median 0.001); on rings and moons, which
#: a few Gaussians do not explain, 0.1–0.74, where ``MIXTURE_NOISE_MAX``, the cut limit or
#: the split test turns such mixtures down (docs/performance.md).
MIXTURE_NOISE = 0.01
#: ... and the mixture is kept only where that weight ends at most this: a uniform component
#: that takes more than a quarter of the points says that the k Gaussians do not describe the
#: clusters (three rings of 400–600 points: 0.36–0.74, where those mixtures lost up to 0.48
#: ARI; moons of 300–400 points at noise .15–.25 0.1–0.27), where blobs among 12 % uniform
#: outliers reach 0.10 (docs/performance.md).
MIXTURE_NOISE_MAX = 0.25
#: Added to each component's covariance in the criterion's coordinates (total covariance I;
#: scikit-learn's ``GaussianMixture`` adds 1e-6 as ``reg_covar``).
MIXTURE_RIDGE = 1e-6
#: EM stops when the mean log-likelihood of a point rises by less than this in a pass, or
#: after ``MIXTURE_MAX_ITER`` passes (median 7 passes over the blob families).
MIXTURE_TOL = 1e-5
MIXTURE_MAX_ITER = 200
#: The mixture's labels are kept only where each cluster holds this many points or more
#: (2-D blobs of 20–100 points: the mixture of clusters of 5–30 points lost 0.02–0.05 ARI on
#: average, up to 0.42; k = 20–30 clusters of 16–30 points in 2-D lost 0.01–0.04; wine's
#: clusters of 48 points in 13 columns gained 0.19; docs/performance.md).
MIXTURE_MIN_POINTS = 30
#: ... and only where no component's covariance has a variance this small in any direction
#: (in the criterion's coordinates, where the points' total covariance is I): ten times the
#: ridge, which alone bounds the density of a component collapsed onto one value of a
#: column (rounded ratings: 1e-6, where the blob families' least was 2.4e-3).
MIXTURE_MIN_VARIANCE = 10 * MIXTURE_RIDGE
#: The mixture is not made where a column it would read takes 3 to this many distinct
#: values: rounded ratings 1–5 lost 0.05 ARI on average to it (up to 0.23; a component
#: takes the points of one value, or the clipped ends skew the components), 8-bit-like
#: codes such as digits' 17 pixel values gain nothing (0.005) and collapse.
MIXTURE_DISCRETE_MAX = 20


@dataclass(frozen=True)
class Mixture:
    """A Gaussian mixture with a covariance (all equal where they are tied,
    ``gaussian_mixture``) and a weight per component, in the coordinates
    of ``classification_criterion``: a point x has z = (x[columns] / scale) · projection,
    and the cost of component c, ‖(z − means_c) · maps_c‖² + consts_c, is −2 ln of its
    weight times its density at z (maps_c = L_c^{−T}, S_c = L_c L_cᵀ its covariance;
    consts_c = ln det S_c − 2 ln w_c + d' ln 2π). A point's label is its component of least
    cost (ties: the lowest). Arrays: scale (d''), columns (d'', int, increasing), projection
    (d''×d'), means (k×d'), maps (k×d'×d'), consts (k)."""

    scale: np.ndarray
    columns: np.ndarray
    projection: np.ndarray
    means: np.ndarray
    maps: np.ndarray
    consts: np.ndarray

    #: the model file's array names, in the order of the fields
    ARRAYS = GraphModel.MIXTURE_ARRAYS

    def coordinates(self, X):
        """z of the rows of X (module docstring of the class)."""
        return (X[:, self.columns] / self.scale) @ self.projection

    def costs(self, Z):
        """(b×k): each component's cost of the rows of Z."""
        return gaussian_costs(Z, self.means, self.maps, self.consts)

    def labels(self, X, want_costs=False):
        """int64 labels of the rows of X and, when ``want_costs``, their costs (n×k; else
        None), in blocks of ``SCATTER_BLOCK_ROWS`` rows. ``ValueRangeError`` (the row, its
        largest column) where a cost is not finite: a row some 10¹⁵⁰ times farther from the
        training points than their spread, or a damaged model file's mixture."""
        X = np.asarray(X, dtype=np.float64)
        out = np.empty(X.shape[0], dtype=np.int64)
        costs = np.empty((X.shape[0], self.consts.size)) if want_costs else None
        for lo in range(0, X.shape[0], SCATTER_BLOCK_ROWS):
            block = X[lo:lo + SCATTER_BLOCK_ROWS]
            with np.errstate(all="ignore"):
                cost = self.costs(self.coordinates(block))
            if not np.all(np.isfinite(cost)):
                bad = lo + int(np.flatnonzero(~np.all(np.isfinite(cost), axis=1))[0])
                raise ValueRangeError(bad, int(self.columns[np.argmax(np.abs(
                                          X[bad, self.columns]))]),
                                      "the model's Gaussian mixture gives the point no "
                                      "finite cost (a point too far from the training points "
                                      "for float64, or a damaged model)")
            out[lo:lo + block.shape[0]] = np.argmin(cost, axis=1)
            if want_costs:
                costs[lo:lo + block.shape[0]] = cost
        return out, costs

    def arrays(self):
        return dict(zip(self.ARRAYS, (self.scale, self.columns, self.projection, self.means,
                                      self.maps, self.consts)))

    @classmethod
    def from_file(cls, arrays, d, k, fail):
        """The mixture of a model file's arrays (``arrays()``), or None where it has none;
        ``fail(problem)`` on a part missing, of the wrong shape or not finite."""
        present = [name for name in cls.ARRAYS if name in arrays]
        if not present:
            return None
        if len(present) < len(cls.ARRAYS):
            fail(f"the arrays {', '.join(repr(name) for name in cls.ARRAYS)} (a Gaussian "
                 f"mixture) must come together")
        got = [arrays[name] for name in cls.ARRAYS]
        for name, value in zip(cls.ARRAYS, got):
            if value.dtype.kind not in "fiu" or not np.all(np.isfinite(value)):
                fail(f"'{name}' must hold finite numbers")
        scale, columns, projection, means, maps, consts = got
        dd = projection.shape[1] if projection.ndim == 2 else 0
        cols = columns.shape[0] if columns.ndim == 1 else 0
        if not 1 <= dd <= cols <= d or scale.shape != (cols,) or \
                projection.shape != (cols, dd) or means.shape != (k, dd) or \
                maps.shape != (k, dd, dd) or consts.shape != (k,):
            fail(f"the Gaussian mixture's arrays must have shapes (d''), (d''), (d''×d'), "
                 f"({k}×d'), ({k}×d'×d') and ({k}) with 1 ≤ d' ≤ d'' ≤ {d}")
        if columns.dtype.kind not in "iu" or np.any(np.diff(columns) <= 0) or \
                columns[0] < 0 or columns[-1] >= d:
            fail(f"'graph_mixture_columns' must be increasing column numbers from 0 to "
                 f"{d - 1}")
        if np.any(scale < np.finfo(np.float64).tiny):
            fail("'graph_mixture_scale' must be positive (and not subnormal)")
        f64 = (lambda a: np.ascontiguousarray(a, dtype=np.float64))
        return cls(f64(scale), np.ascontiguousarray(columns, dtype=np.int64), f64(projection),
                   f64(means), f64(maps), f64(consts))


def criterion_frame(X, labels, k):
    """(columns, scale, P, counts, means, scatters) of ``classification_criterion``: the
    columns it reads (two-valued ones left out unless no other varies; None: all), their
    ``column_scale``, P of ``criterion_coordinates`` (None: the points do not vary) and the
    clusters' ``cluster_scatter`` of those columns scaled."""
    scale = column_scale(X)
    counts, means, scatters = cluster_scatter(X, labels, k, scale)
    two = two_valued_columns(X)
    if two.any() and not two.all():
        kept = means[:, ~two], scatters[:, ~two][:, :, ~two]
        P = criterion_coordinates(counts, *kept)
        if P is not None:
            return np.flatnonzero(~two), scale[~two], P, counts, *kept
    return None, scale, criterion_coordinates(counts, means, scatters), counts, means, \
        scatters


def gaussian_mixture(X, labels, k, max_iter=MIXTURE_MAX_ITER, tol=MIXTURE_TOL,
                     ridge=MIXTURE_RIDGE, n_threads=1, noise=0.0, tied=False):
    """(Mixture, info) of the EM of a Gaussian mixture with a
    covariance and a weight per component (Dempster, Laird & Rubin, "Maximum likelihood from
    incomplete data via the EM algorithm", JRSS B 1977; the model of scikit-learn's
    ``GaussianMixture(covariance_type='full')``), started from the clusters of ``labels``
    (their shares, means and covariances plus ``ridge``·I) in the coordinates of
    ``classification_criterion``; None where a cluster has, or a component's weight falls
    to, d' points or fewer, or the points do not vary. Each pass takes every point's
    posteriors under the current parameters and sums their weights, first and second
    moments (about the current means: no cancellation) in pieces of
    ``SCATTER_BLOCK_ROWS`` / ``GAUSSIAN_PIECES`` rows on up to ``GAUSSIAN_PIECES`` of
    ``n_threads`` threads, the pieces' sums added in their order (the same parameters
    whatever the threads); it stops when the mean log-likelihood rises by less than ``tol``
    (``converged``; a fall, which the fixed ridge allows, stops it too) or after ``max_iter``
    passes. With ``noise`` in (0, 1) the mixture has one more component, uniform over the
    box that the points' coordinates span (axes those of the points' correlation matrix:
    labels invariant to shifts, scales and orders of the columns, not to every linear map),
    of starting weight ``noise`` (the other weights shrunk by 1 − ``noise``): scattered
    points that no cluster explains go to it rather than widen
    the Gaussians (Banfield & Raftery, "Model-based Gaussian and non-Gaussian clustering",
    Biometrics 1993). The mixture returned is the last M-step's Gaussians (a point's label is
    its likeliest Gaussian, as without the uniform component); ``info`` holds ``n_iter``
    (passes), ``converged``, ``log_likelihood`` (of the last E-step, under the parameters
    before that M-step, as scikit-learn's ``lower_bound_``), ``min_variance``, the
    least eigenvalue of its components' covariances (ridge included) and ``noise_weight``
    (the uniform component's last weight; 0 without it). With ``tied`` the components share
    one covariance (``GaussianMixture(covariance_type='tied')``; mclust's EEE, Celeux &
    Govaert, "Gaussian parsimonious clustering models", Pattern Recognition 1995): the
    clusters' pooled covariance to start, then each M-step's posterior-weighted scatter of
    every Gaussian about its own mean over their total weight."""
    X = np.asarray(X, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64).reshape(-1)
    n = labels.size
    columns, scale, P, counts, means, scatters = criterion_frame(X, labels, k)
    if P is None or counts.min() <= P.shape[1]:
        return None
    columns = np.arange(X.shape[1]) if columns is None else columns
    dd = P.shape[1]
    mu = means @ P
    if tied:
        S = np.repeat(criterion_covariance(P, scatters.sum(axis=0), n, ridge)[None], k, axis=0)
    else:
        S = np.stack([criterion_covariance(P, scatters[c], counts[c], ridge)
                      for c in range(k)])
    weights = counts / n
    if not 0.0 <= noise < 1.0:
        raise ValueError(f"noise must be in [0, 1), got {noise!r}")
    log_volume = coordinate_box(X, scale, columns, P) if noise > 0 else np.inf
    noise = float(noise) if np.isfinite(log_volume) else 0.0
    weights = weights * (1.0 - noise)
    piece = max(1, SCATTER_BLOCK_ROWS // GAUSSIAN_PIECES)
    workers = min(max(1, int(n_threads)), GAUSSIAN_PIECES, -(-n // piece))
    compiled = dd <= MIXTURE_COMPILED_MAX_DIM
    previous, passes, model, converged = -np.inf, 0, None, False
    with ThreadPoolExecutor(workers) if workers > 1 and not compiled else nullcontext() as pool:
        for passes in range(1, max_iter + 1):
            model = _mixture(scale, columns, P, mu, S, weights)
            log_noise = np.log(noise) - log_volume if noise > 0 else -np.inf
            mass, first, second, log_likelihood, noise = (
                _compiled_sums(model, X, log_noise, piece, workers) if compiled else
                _pieces_sums(model, X, log_noise, piece, pool))
            log_likelihood /= n
            noise /= n
            if mass.min() <= dd:
                return None
            shift = first / mass[:, None]
            mu = mu + shift
            S = second / mass[:, None, None] - shift[:, :, None] * shift[:, None, :]
            if tied:
                S = np.repeat(np.tensordot(mass, S, axes=1)[None] / mass.sum(), k, axis=0)
            S += ridge * np.eye(dd)
            weights = mass / n
            if log_likelihood - previous < tol:
                converged = True
                break
            previous = log_likelihood
    info = {"n_iter": passes, "converged": converged, "log_likelihood": float(log_likelihood),
            "min_variance": float(min(np.linalg.eigvalsh(S[c])[0] for c in range(k))),
            "noise_weight": float(noise)}
    return _mixture(scale, columns, P, mu, S, weights), info


#: ``gaussian_mixture`` sums a pass by ``engine._mixture`` (``_compiled_sums``) in up to this
#: many coordinates, and by NumPy (``_pieces_sums``: k products by BLAS a piece of rows)
#: above: C's one pass over the points was, against NumPy's (20,000 points, k = 10 and 40,
#: one thread), 1.8–2.1× as quick in 4 coordinates, 1.0–1.4× in 8, 0.96–1.2× in 12 and
#: 0.75–0.8× in 16–32 (the second moments, d² a point and component, where BLAS's products
#: are quicker); a grid of 100 blobs' 200 components in 2: 3.6×, 200,000 moons 2.2×.
MIXTURE_COMPILED_MAX_DIM = _options.MIXTURE_COMPILED_MAX_DIM


def _mixture(scale, columns, P, mu, S, weights):
    """The ``Mixture`` of these parameters."""
    L = np.linalg.cholesky(S)
    dd = mu.shape[1]
    maps = np.ascontiguousarray(_em.triangular_inverses(L).transpose(0, 2, 1))
    consts = (2.0 * np.log(np.diagonal(L, axis1=1, axis2=2)).sum(axis=1)
              - 2.0 * np.log(weights) + dd * np.log(2.0 * np.pi))
    return Mixture(scale, columns, P, mu, maps, consts)


def _compiled_sums(model, X, log_noise, piece, n_threads):
    """``_mixture_sums`` of all the rows of X by ``engine._mixture.mixture_sums``: the
    coordinates of ``SCATTER_BLOCK_ROWS`` rows at a time, each block's pieces of ``piece``
    rows summed on ``n_threads`` threads and the pieces' sums added in their order (the
    same sums whatever the threads)."""
    k, dd = model.means.shape
    inverses = np.ascontiguousarray(model.maps.transpose(0, 2, 1))
    total = [np.zeros(k), np.zeros((k, dd)), np.zeros((k, dd, dd)), 0.0, 0.0]
    for lo in range(0, X.shape[0], SCATTER_BLOCK_ROWS):
        Z = np.ascontiguousarray(model.coordinates(X[lo:lo + SCATTER_BLOCK_ROWS]))
        parts = _em.mixture_sums(Z, model.means, inverses, model.consts, float(log_noise),
                                 int(piece), int(n_threads))
        for j in range(parts[0].shape[0]):
            total = [a + b[j] for a, b in zip(total, parts)]
    return total[0], total[1], total[2], float(total[3]), float(total[4])


def _pieces_sums(model, X, log_noise, piece, pool=None):
    """``_mixture_sums`` of all the rows of X in pieces of ``piece`` rows, on ``pool``'s
    threads (None: this one), the pieces' sums added in their order."""
    total = None
    for part in (pool.map if pool is not None else map)(
            lambda lo: _mixture_sums(model, X[lo:lo + piece], log_noise),
            range(0, X.shape[0], piece)):
        total = part if total is None else [a + b for a, b in zip(total, part)]
    return total


def _mixture_sums(model, X, log_noise=-np.inf):
    """(Σ r, Σ r (z − μ), Σ r (z − μ)(z − μ)ᵀ per Gaussian, Σ ln p(z), Σ r₀) of the rows
    of X, r their posteriors under ``model`` (μ its means) beside a uniform component of log
    density ``log_noise`` (weight included; −∞: none), r₀ the uniform one's, p the whole
    mixture's density."""
    Z = model.coordinates(X)
    logp = -0.5 * model.costs(Z)
    if log_noise > -np.inf:
        logp = np.c_[logp, np.full(Z.shape[0], log_noise)]
    top = logp.max(axis=1, keepdims=True)
    r = np.exp(logp - top)
    total = r.sum(axis=1, keepdims=True)
    r /= total
    k, dd = model.means.shape
    noise_mass = float(r[:, k].sum()) if r.shape[1] > k else 0.0
    first, second = np.empty((k, dd)), np.empty((k, dd, dd))
    for c in range(k):
        D = Z - model.means[c]
        first[c] = r[:, c] @ D
        second[c] = (D * r[:, c:c + 1]).T @ D
    return r[:, :k].sum(axis=0), first, second, \
        float((np.log(total[:, 0]) + top[:, 0]).sum()), noise_mass


def coordinate_box(X, scale, columns, P):
    """ln of the volume of the box that the rows of X span in the coordinates
    z = (x[columns] / scale) · P (−∞ where it is flat), in blocks of ``SCATTER_BLOCK_ROWS``
    rows."""
    low = high = None
    for lo in range(0, X.shape[0], SCATTER_BLOCK_ROWS):
        Z = (X[lo:lo + SCATTER_BLOCK_ROWS, columns] / scale) @ P
        low = Z.min(axis=0) if low is None else np.minimum(low, Z.min(axis=0))
        high = Z.max(axis=0) if high is None else np.maximum(high, Z.max(axis=0))
    side = high - low
    return float(np.log(side).sum()) if np.all(side > 0) else -np.inf


WHITEN_AUTO_MAX_DIM = _options.WHITEN_AUTO_MAX_DIM
#: A refit is kept when its criterion is lower than the first fit's by more than this
#: (relative): the same partition numbered otherwise sums in another order, and keeps the
#: first fit.
CRITERION_RTOL = 1e-9
#: A refit is kept only where its labels cut the first fit's graph at most this many times
#: the first fit's labels do (docs/performance.md: 15.3 at most where a refit was kept on the
#: blob families and the real sets; 1,100–2,900 on rings and moons with 14 columns of
#: low-variance noise, which the whitening blows up).
REFIT_FIRST_CUT_MAX = 100.0
#: A refit is kept only where its labels cut its own graph at most this share of k − 1 (what
#: random labels cut: each cluster keeps about 1/k of its links) or at most
#: ``REFIT_NCUT_RATIO_MAX`` times the first fit's cut of the first graph: with dozens of
#: low-variance noise columns the whitened points are mostly noise, whose best cut is a
#: large share of random labels' (rings or moons beside 30–62 such columns: 0.26–0.65, at
#: 8.4 to over 1,000 times the first fit's cut), where the refits kept on the blob families,
#: the real sets and upsampled digits cut at most 0.165 (wine raw), and those that help on
#: overlapping elongated clusters or wine's column subsets cut up to 0.54 of k − 1 at most
#: 3.5 times the first fit's cut (docs/performance.md).
REFIT_NCUT_SHARE_MAX = 0.2
REFIT_NCUT_RATIO_MAX = 5.0
#: Added to each cluster's covariance in the criterion's coordinates (total covariance I).
CRITERION_RIDGE = 1e-3
#: A refit whose labels agree with the first fit's to this adjusted Rand index or more moves a
#: few points only, within the optimiser's own spread: the first fit (no transform) is kept.
AGREEMENT_MAX = 0.98


def adjusted_rand(a, b, k):
    """The adjusted Rand index of two labellings into 0..k−1 (Hubert & Arabie, "Comparing
    partitions", Journal of Classification 1985): 1 for the same partition, about 0 for
    independent ones; 1 when both put every point in one cluster."""
    a = np.asarray(a, dtype=np.int64).reshape(-1)
    b = np.asarray(b, dtype=np.int64).reshape(-1)
    n = a.size
    table = np.bincount(a * k + b, minlength=k * k).reshape(k, k).astype(np.float64)

    def pairs(counts):
        return float((counts * (counts - 1.0)).sum() / 2.0)

    rows, cols = pairs(table.sum(axis=1)), pairs(table.sum(axis=0))
    expected = rows * cols / (n * (n - 1.0) / 2.0) if n > 1 else 0.0
    top = (rows + cols) / 2.0
    if top == expected:
        return 1.0
    return (pairs(table) - expected) / (top - expected)


def whiten_applies(X, k):
    """Whether whiten='auto' tries the refit: X of 2 to ``WHITEN_AUTO_MAX_DIM`` columns
    (one column whitens to the same graph) and k ≥ 2."""
    return 2 <= X.shape[1] <= WHITEN_AUTO_MAX_DIM and k >= 2


def classification_criterion(X, labels, k, ridge=CRITERION_RIDGE):
    """Σ_c (n_c/n) ln det S_c / d' (lower is better): the classification likelihood criterion
    of Gaussian clusters with a covariance each (Scott & Symons, "Clustering methods based on
    likelihood ratio criteria", Biometrics 1971; Banfield & Raftery, "Model-based Gaussian and
    non-Gaussian clustering", Biometrics 1993), S_c the covariance of cluster c in the
    coordinates whitened by the total covariance (``criterion_coordinates``) plus
    ``ridge``·I. Affine invariant; clusters of one point are skipped. From
    ``cluster_scatter`` of X / ``column_scale`` (no n × d copy; no overflow). Columns of
    two values (``two_valued_columns``: indicators, a binary code) are left out unless
    no other column varies: clusters can be constant in such a column, where only the
    ridge bounds the Gaussian likelihood, and labels that split the points by it would win
    whatever they do elsewhere (blobs beside a 0/1 column: the whitened refit split them by
    it, and the criterion fell from −1.05 to −2.75)."""
    _, _, P, counts, means, scatters = criterion_frame(X, labels, k)
    if P is None:
        return 0.0
    n, dd = counts.sum(), P.shape[1]
    total = 0.0
    for c in np.flatnonzero(counts >= 2):
        S = criterion_covariance(P, scatters[c], counts[c], ridge)
        total += counts[c] / n * np.linalg.slogdet(S)[1] / dd
    return float(total)


#: ``two_valued_columns`` looks for a third value in this many first rows before it reads
#: the columns left whole.
TWO_VALUED_PREFIX = 1024


def two_valued_columns(X):
    """A boolean per column of X: whether it takes exactly two values (``distinct_values``:
    a column with three among its first ``TWO_VALUED_PREFIX`` rows is not, and continuous
    columns stop there)."""
    return distinct_values(X, 2) == 2


def distinct_values(X, most):
    """Per column of X, how many distinct values it takes, or ``most`` + 1 where it takes
    more: its first ``TWO_VALUED_PREFIX`` rows settle most columns of measurements; the
    others are read on in blocks of ``SCATTER_BLOCK_ROWS`` rows while they have ``most`` or
    fewer, each block's values compared with the few seen (a new one is rare)."""
    X = np.asarray(X, dtype=np.float64)
    head = np.sort(X[:TWO_VALUED_PREFIX], axis=0)
    counts = np.minimum(1 + np.count_nonzero(np.diff(head, axis=0), axis=0), most + 1)
    seen = {j: np.unique(head[:, j]) for j in np.flatnonzero(counts <= most)}
    for start in range(TWO_VALUED_PREFIX, X.shape[0], SCATTER_BLOCK_ROWS):
        if not seen:
            break
        B = X[start:start + SCATTER_BLOCK_ROWS]
        for j in list(seen):
            values = B[:, j]
            unseen = values[~np.isin(values, seen[j])]
            if unseen.size == 0:
                continue
            seen[j] = np.union1d(seen[j], unseen)
            if seen[j].size > most:
                del seen[j]
                counts[j] = most + 1
    for j, values in seen.items():
        counts[j] = values.size
    return counts


def criterion_covariance(P, scatter, count, ridge):
    """Pᵀ (scatter/count) P + ridge·I: a cluster's covariance in the criterion's coordinates
    (``criterion_coordinates``), as the criterion and the classification take it."""
    return P.T @ (scatter / count) @ P + ridge * np.eye(P.shape[1])


#: The standard deviation, in units of a column's largest |value|, at or below which
#: ``criterion_coordinates`` takes the column for constant (64 units in the last place).
CONSTANT_SPREAD = 64 * np.finfo(np.float64).eps


def criterion_coordinates(counts, means, scatters):
    """P (d×d'): x·P are the coordinates whitened by the total covariance of the points
    whose clusters ``cluster_scatter`` gave (points in [−1, 1], X / ``column_scale``), in the
    d' directions of their correlation matrix (the covariance of the columns scaled to unit
    variance: the same directions whatever the columns' units; a column whose spread is
    ``CONSTANT_SPREAD`` or less is constant) whose variance is above 10⁻⁹ of the largest;
    None when the points do not vary (every column constant)."""
    n = counts.sum()
    mean = counts @ means / n
    between = (means - mean) * np.sqrt(counts / n)[:, None]
    total = scatters.sum(axis=0) / n + between.T @ between
    sd = np.sqrt(np.diag(total))
    if not np.any(sd > CONSTANT_SPREAD):
        return None             # every column constant but for rounding
    # a column constant but for rounding (its spread a few units in the last place of its
    # largest |value|, 1 here) is left unscaled: its variance, ~ε², is then dropped below
    sd[~(sd > CONSTANT_SPREAD)] = 1.0
    lam, V = np.linalg.eigh(total / np.outer(sd, sd))
    keep = lam > 1e-9 * lam[-1] if lam[-1] > 0 else np.zeros(lam.size, dtype=bool)
    if not keep.any():
        return None
    return V[:, keep] / np.sqrt(lam[keep]) / sd[:, None]


#: Passes of ``gaussian_classification`` at most: its labels only start the graph's own fit.
GAUSSIAN_MAX_ITER = 50
#: ``gaussian_step`` keeps its labels only while their normalized cut is at most this many
#: times the fit's (measured: blob sets where it was kept, up to 1.37; moons and rings of
#: 1,500 points where it would cut through a shape, 3.9 and more, 10⁶ moons 3.28;
#: docs/performance.md).
GAUSSIAN_NCUT_RATIO = 1.5
#: ``gaussian_classification`` stops after a pass that moves at most this share of the
#: points (10⁶ moons: 46 of 10⁶ moved in the 7th pass, then a tail of 1 to 12 a pass to the
#: 24th), as k-means stops at a tolerance: its labels only start the graph's own passes.
GAUSSIAN_MOVED_TOL = 1e-4
#: The pieces a block of ``SCATTER_BLOCK_ROWS`` rows is cut into for the threads of
#: ``gaussian_classification``: as many threads at most, so that one block's rows are held.
GAUSSIAN_PIECES = 4


def gaussian_classification(X, labels, k, max_iter=GAUSSIAN_MAX_ITER, ridge=CRITERION_RIDGE,
                            n_threads=1):
    """Labels of the classification EM of Gaussian clusters with a covariance and a share
    each (Celeux & Govaert, "A classification EM algorithm for clustering and two stochastic
    versions", Computational Statistics & Data Analysis 1992) started from ``labels``: each
    pass takes every cluster's mean μ_c, covariance S_c (in the coordinates of
    ``classification_criterion``, but of every column: the two-valued ones the criterion
    leaves out are kept, so its labels may follow them and the criterion then judges them
    without; plus ``ridge``·I) and share p_c from the labels, then moves
    every point to the cluster of least (x − μ_c)ᵀ S_c⁻¹ (x − μ_c) + ln det S_c − 2 ln p_c
    (ties: the lowest cluster), until at most ``GAUSSIAN_MOVED_TOL`` · n points move (their
    moves taken; none below 10⁴ points) or ``max_iter`` passes. The moves are found in pieces
    of ``SCATTER_BLOCK_ROWS`` / ``GAUSSIAN_PIECES`` rows, each column divided by
    ``column_scale``, on up to ``GAUSSIAN_PIECES`` of ``n_threads`` threads at a time (one
    block's rows in all; every row's cost the same whatever the threads). None when a
    cluster has d' points or fewer (its covariance is not estimated) or the points do not
    vary."""
    X = np.asarray(X, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64).reshape(-1).copy()
    n = labels.size
    scale = column_scale(X)
    piece = max(1, SCATTER_BLOCK_ROWS // GAUSSIAN_PIECES)
    starts = range(0, n, piece)
    workers = min(max(1, int(n_threads)), GAUSSIAN_PIECES, len(starts))
    with ThreadPoolExecutor(workers) if workers > 1 else nullcontext() as pool:
        return _classify(X, labels, k, max_iter, ridge, scale, piece, starts, pool)


def _classify(X, labels, k, max_iter, ridge, scale, piece, starts, pool):
    """``gaussian_classification``'s passes, its pieces' moves found on ``pool`` (None: in
    this thread)."""
    n = labels.size
    P = None
    for _ in range(max_iter):
        counts, means, scatters = cluster_scatter(X, labels, k, scale)
        if P is None:
            P = criterion_coordinates(counts, means, scatters)
            if P is None:
                return None
        dd = P.shape[1]
        if counts.min() <= dd:
            return None
        maps, consts = [], np.empty(k)
        for c in range(k):
            L = np.linalg.cholesky(criterion_covariance(P, scatters[c], counts[c], ridge))
            maps.append(np.linalg.solve(L, P.T).T)          # ‖(x − μ_c) M_c‖² = Mahalanobis
            consts[c] = 2.0 * np.log(np.diag(L)).sum() - 2.0 * np.log(counts[c] / n)
        moved = np.empty_like(labels)

        def assign(lo, means=means, maps=maps, consts=consts, moved=moved):
            moved[lo:lo + piece] = np.argmin(
                gaussian_costs(X[lo:lo + piece] / scale, means, maps, consts), axis=1)

        if pool is None:
            for lo in starts:
                assign(lo)
        else:
            list(pool.map(assign, starts))
        changed = np.count_nonzero(moved != labels)
        labels = moved
        if changed <= GAUSSIAN_MOVED_TOL * n:
            break
    return labels if np.bincount(labels, minlength=k).min() > P.shape[1] else None


def gaussian_costs(Z, means, maps, consts):
    """(b×k): ‖(z − means_c) · maps_c‖² + consts_c of each row z of Z and each cluster c,
    one product of the rows held at a time."""
    cost = np.empty((Z.shape[0], len(consts)))
    for c in range(len(consts)):
        U = (Z - means[c]) @ maps[c]
        cost[:, c] = np.einsum("ij,ij->i", U, U) + consts[c]
        del U
    return cost


SCATTER_BLOCK_ROWS = _options.SCATTER_BLOCK_ROWS    # rows copied at a time


def column_scale(X):
    """The largest absolute value of each column of X (1 for a column of zeros; at least
    2⁻¹⁰²², the least normal float, for a column of subnormal values, which a model file's
    mixture could not store as its ``scale``), in blocks of ``SCATTER_BLOCK_ROWS`` rows: X
    divided by it lies in [−1, 1], whose squares and their sums cannot overflow."""
    X = np.asarray(X, dtype=np.float64)
    scale = np.zeros(X.shape[1])
    for lo in range(0, X.shape[0], SCATTER_BLOCK_ROWS):
        np.maximum(scale, np.abs(X[lo:lo + SCATTER_BLOCK_ROWS]).max(axis=0), out=scale)
    scale[~(scale > 0)] = 1.0
    return np.maximum(scale, np.finfo(np.float64).tiny)


def cluster_scatter(X, labels, k, scale=None):
    """(counts (k,), means (k×d), scatters (k×d×d)): each cluster's size, mean and
    Σ_{i∈c} (x_i − μ_c)(x_i − μ_c)ᵀ, in two passes over the points of each cluster in
    blocks of ``SCATTER_BLOCK_ROWS`` rows (means first, then the centred products: no
    cancellation), so that beside X only a block and the order of the rows are held; of
    X / ``scale`` (each column divided by its entry) when given."""
    X = np.asarray(X, dtype=np.float64)
    block = (lambda b: X[b]) if scale is None else (lambda b: X[b] / scale)
    labels = np.asarray(labels, dtype=np.int64).reshape(-1)
    d = X.shape[1]
    counts = np.bincount(labels, minlength=k).astype(np.float64)
    order = np.argsort(labels, kind="stable")
    ends = np.cumsum(np.bincount(labels, minlength=k))
    means = np.zeros((k, d))
    scatters = np.zeros((k, d, d))
    for c in np.flatnonzero(counts):
        rows = order[ends[c] - int(counts[c]):ends[c]]
        blocks = [rows[i:i + SCATTER_BLOCK_ROWS]
                  for i in range(0, rows.size, SCATTER_BLOCK_ROWS)]
        means[c] = sum(block(b).sum(axis=0) for b in blocks) / counts[c]
        for b in blocks:
            R = block(b) - means[c]
            scatters[c] += R.T @ R
    return counts, means, scatters


WHITEN_RIDGE = 1e-3     # of tr(W)/d, added to W's diagonal: W^{-½} exists for any labels
WHITENED_MAX = 2.0 ** 500   # whitened points stay below: their squared distances cannot overflow


def within_whitening(X, labels, k, ridge=WHITEN_RIDGE):
    """T = W^{-½} (d×d, symmetric), W = Σ_c Σ_{i∈c} (x_i − μ_c)(x_i − μ_c)ᵀ/n + ridge·tr(W)/d·I,
    the pooled within-cluster covariance of ``labels``: in X·T the clusters found are round,
    and a neighbour graph sees the between-cluster directions stretched (the metric of
    discriminant analysis; De la Torre & Kanade, "Discriminative cluster analysis", ICML 2006;
    Ding & Li, "Adaptive dimension reduction using discriminant analysis and K-means
    clustering", ICML 2007). A W of zero (every cluster one point) gives the identity. W is
    summed for X / c, c the largest |x_ij|, and T is (W/c²)^{-½} / c: the same T, without
    squares that overflow. Where that T itself overflows (data near 10⁻³⁰⁸, whose W^{-½}
    is near 10³⁰⁸), or the whitened points could pass 2⁵⁰⁰ (X·T is at most d·max|T_ij|·c:
    columns of scales 10¹⁵³ apart, whose squared distances overflow), T is W^{-½} times a
    power of two that brings them to at most 2⁵⁰⁰ and keeps T below 2¹⁰²²: a positive
    factor changes no neighbour, no tie and no self-tuned weight of the whitened graph,
    and ``predict`` whitens new points by the same T."""
    c = float(column_scale(X).max())
    counts, _, scatters = cluster_scatter(X, labels, k, c)
    d = scatters.shape[1]
    W = scatters.sum(axis=0) / counts.sum()
    scale = np.trace(W) / d
    if not scale > 0:
        return np.eye(d)
    W += ridge * scale * np.eye(d)
    lam, V = np.linalg.eigh(W)
    M = (V / np.sqrt(lam)) @ V.T                    # (W/c²)^{-½}: X·T = (X/c)·M
    top = float(np.abs(M).max())
    with np.errstate(over="ignore"):
        T = M / c
    if np.isfinite(T).all() and d * top <= WHITENED_MAX:
        return T

    def exponent(v):
        return int(np.frexp(v)[1])      # v in [2^(e−1), 2^e)

    # |X·T| ≤ d·top·c·2^e < 2^(E(d·top) + E(c) + e) ≤ WHITENED_MAX; max|T| < 2^1022
    return np.ldexp(M, min(exponent(WHITENED_MAX) - 1 - exponent(d * top) - exponent(c),
                           1022 - exponent(top)))


def whiten_points(X, T):
    """X·T, each row's sums taken in the same order whatever rows come with it (one row of
    T at a time, not a BLAS product, whose blocking may depend on the rows): ``predict`` of
    the training points meets the fit's own nodes exactly."""
    X = np.asarray(X, dtype=np.float64)
    out = X[:, :1] * T[0]
    for j in range(1, X.shape[1]):
        out += X[:, j:j + 1] * T[j]
    return out


def build_graph(X, n_clusters, affinity=None, n_neighbors=None, weighting="connectivity",
                n_threads=1, neighbor_search="auto", random_state=0, start="auto",
                largest=None):
    """The ``kernels.graph.Graph`` of a fit: the checked ``affinity``, or the neighbour graph
    of X (``n_neighbors`` None: the default rule for ``n_clusters``; ``neighbor_search`` and
    the int ``random_state`` of its search, ``kernels.graph.knn_graph``), with the graph the
    default starts are chosen on where ``start`` is 'auto' (``Graph.choice``, for fits of up
    to ``largest`` clusters; None: ``n_clusters``)."""
    if affinity is not None:
        return kgraph.given_graph(affinity, n_clusters)
    largest = n_clusters if largest is None else largest
    return kgraph.knn_graph(X, n_neighbors, weighting, n_threads, n_clusters=int(n_clusters),
                            neighbor_search=neighbor_search, random_state=random_state,
                            choice_k=int(largest) if start == "auto" else 0)


def search_seed(rng):
    """The int that seeds the approximate neighbour search, from the fit's generator without
    drawing from it (a fit through the exact search keeps its random stream): the first word
    of its seed sequence's state."""
    seq = getattr(rng.bit_generator, "seed_seq", None)
    if not hasattr(seq, "generate_state"):
        return 0
    return int(seq.generate_state(1, np.uint32)[0] >> 1)


def fit_on_graph(graph, n_clusters, *, start="auto", n_init=3, max_iter=300, rng=None,
                 n_threads=1, kernel=None, say=True):
    """The normalized-cut fit of ``fit_graph`` on a built graph (``sweep_graph`` builds one
    graph for every k). ``say``: warn where the components are grouped by volume
    (``grouped``; the whitened refit's fit says it only when kept)."""
    k = int(n_clusters)
    if not 1 <= k <= graph.info.n_nodes:
        raise ValueError(f"n_clusters must be between 1 and the {graph.info.n_nodes} "
                         f"distinct points, got {k}")
    rng = np.random.default_rng() if rng is None else rng
    if joins(graph, k, start):
        graph, kernel = kgraph.join_components(graph, n_threads), None
    kernel = GraphKernel(graph.affinity, n_threads=n_threads) if kernel is None else kernel
    with blas_threads(1):
        runs, levels = _runs(graph, kernel, k, start, n_init, max_iter, rng, n_threads)
    objectives = [run.sums.objective(kernel) for _, run in runs]
    best_kind, best = runs[int(np.argmin(objectives))]
    if graph.choice is not None:        # the starts are chosen: the result need not hold it
        graph = replace(graph, choice=None)
    fit = GraphFitResult(
        labels=graph.point_labels(best.labels), node_labels=best.labels,
        ncut=best.sums.ncut(), objective=min(objectives), n_iter=best.n_iter,
        converged=best.converged, hartigan_moves=best.hartigan_moves, start=best_kind,
        start_ncuts=tuple(run.sums.ncut() for _, run in runs), graph=graph, kernel=kernel,
        sums=best.sums, start_kinds=tuple(kind for kind, _ in runs), levels=levels)
    if say and grouped(fit, k):
        _warn_grouped(graph)
    return fit


def joins(graph, k, start="auto"):
    """Whether a fit of k clusters with ``start`` joins ``graph``'s components by bridges
    (the default starts, more components than k, ``kgraph.can_join``)."""
    return start == "auto" and graph.info.n_components > k and kgraph.can_join(graph)


def grouped(fit, k):
    """Whether ``fit`` grouped its graph's components by volume (more of them than k > 1
    clusters, not joined by bridges: the components start alone)."""
    return (fit.start_kinds == ("components",) and not fit.graph.info.bridges
            and fit.graph.info.n_components > k > 1)


def _warn_grouped(graph, stacklevel=3):
    """The warning of components grouped by volume (more of them than clusters, not joined):
    every grouping cuts nothing, so the graph does not say which belong together."""
    info = graph.info
    if graph.nodes is None:
        why = "a given graph has no points to join them by"
    elif info.weighting != "connectivity":
        why = "only a connectivity graph's components are joined by bridges"
    elif info.n_nodes > kgraph.JOIN_MAX_NODES:
        why = (f"bridges join the components of at most {kgraph.JOIN_MAX_NODES:,} nodes; "
               f"more neighbours (n_neighbors) join them")
    else:
        why = (f"too many to join by bridges: {info.n_components} × {info.n_nodes:,} nodes "
               f"> {kgraph.JOIN_MAX_WORK:,}; more neighbours (n_neighbors) join them")
    warnings.warn(f"the graph has {info.n_components} connected components, more than the "
                  f"clusters asked for: any grouping of them cuts nothing, and they are "
                  f"grouped by volume ({why})", KKMeansWarning, stacklevel=stacklevel)


def start_kinds(start, n_init, n_nodes):
    """The start of each run of 'multilevel' or 'spectral': ``n_init`` of that kind."""
    return [start] * max(1, int(n_init))


def _runs(graph, kernel, k, start, n_init, max_iter, rng, n_threads):
    """([(start kind, GraphRun)] of every start tried, coarsening levels of the default)."""
    if start == "auto":
        labels = None if graph.info.bridges else graph_starts.component_start(
            graph.components, graph.info.n_components, kernel.degrees, k)
        if labels is not None:
            return [("components", refine(kernel, labels, k, max_iter))], 0
        starts, levels = graph_starts.best_default_start(
            graph.affinity, k, rng, max_iter, n_threads,
            choice=None if graph.info.bridges else graph.choice)
        if graph.info.bridges:
            merged, _ = graph_starts.merge_to_k(kernel, graph.components, k)
            starts = [("components", merged)] + starts
        if starts:
            return [(kind, refine(kernel, labels, k, max_iter)) for kind, labels in starts], \
                levels
        start, n_init = "multilevel", 1     # no start with k clusters, or Lanczos failed
    runs, embedding = [], None
    for kind in start_kinds(start, n_init, kernel.n):
        if kind == "multilevel":
            labels, _levels = graph_starts.multilevel_start(graph.affinity, k, rng, max_iter,
                                                            n_threads)
        else:
            if embedding is None:
                embedding = graph_starts.spectral_embedding(kernel, k, rng)
            labels = graph_starts.spectral_start(kernel, k, rng, embedding)
        runs.append((kind, refine(kernel, labels, k, max_iter)))
    return runs, 0


# -- prediction ------------------------------------------------------------------------------
def new_points(model, X):
    """(X, Xn): new points checked (finite, the model's columns, in the fit's range) as
    float64, and as the graph's nodes are (whitened where the fit kept its whitening)."""
    X = np.ascontiguousarray(X, dtype=np.float64) + 0.0
    kgraph.check_points(X)
    if X.shape[1] != model.nodes.shape[1]:
        raise DataError(f"X has {X.shape[1]} columns, the model was fitted on "
                        f"{model.nodes.shape[1]}")
    # the rule the fit applied to its points: distances to the nodes must not overflow
    check_range("knn", X, float(model.counts.sum()))
    if model.transform is None:
        return X, X
    T = model.transform
    with np.errstate(over="ignore", invalid="ignore"):
        Xn = whiten_points(X, T)                    # the nodes are the whitened points
    # ... and to the whitened nodes: a point far out in a direction T stretches (by up to
    # 10³⁰⁰ for data near 10⁻³⁰⁰) can overflow there (the search then found no neighbour)
    far = whitened_overflow(Xn)
    if far.any():
        row = int(np.flatnonzero(far)[0])
        with np.errstate(over="ignore"):
            col = int(np.argmax(np.abs(X[row]) * np.abs(T).max(axis=1)))  # stretched most
        raise ValueRangeError(row, col, f"the value {X[row, col]:.6g} is too far from the "
                                        f"training points for floating point once whitened "
                                        f"by the model's T ('graph_transform', the fit's "
                                        f"whitened refit): 4·‖x·T‖² must stay below "
                                        f"{FLOAT_MAX:.3g}")
    return X, Xn


def whitened_overflow(Xn):
    """Rows of whitened points that are not finite or whose 4·‖x‖² overflows (the rule
    ``check_range`` applies to the fit's points)."""
    return ~np.isfinite(Xn).all(axis=1) | (log_squared_norms(Xn) + np.log(4.0)
                                           > np.log(FLOAT_MAX))


def node_matches(model, Xn, nearest):
    """Per new point (as the nodes are, ``new_points``), the training node it equals (its
    nearest node ``nearest``, when equal), or −1."""
    return np.where(np.all(model.nodes[nearest] == Xn, axis=1), nearest, -1)


def new_point_rows(model, X, n_threads=1, node_rows=False):
    """(rows, match): the affinity rows a of new points over the training nodes (CSR, q×m)
    and, per point, the node it equals (−1 for none). A point that is no node lists its
    n_neighbors − 1 nearest nodes, its self-loop a_xx = 1 being added by
    ``new_point_distances``; a point equal to node J lists J first (its self-loop, weight u_J)
    and takes σ_J as its scale, then n_neighbors − 2 other nodes, or with ``node_rows`` (for
    its distances: its label is J's either way) n_neighbors − 1 others, J's own list B_J, as
    the fit's graph was built from."""
    from scipy import sparse

    X = new_points(model, X)[1]
    m = model.nodes.shape[0]
    kq = int(max(1, min(model.n_neighbors - 1, m)))
    own = int(min(model.n_neighbors, m))        # a node's list in the fit, itself included
    dist, idx = _nearest_nodes(model, X, kq, n_threads)
    match = node_matches(model, X, idx[:, 0])
    hit = np.flatnonzero(match >= 0) if node_rows and own > kq else np.empty(0, dtype=np.intp)
    lengths = np.full(X.shape[0], kq, dtype=np.int64)
    lengths[hit] = own
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    data, indices = np.empty(indptr[-1]), np.empty(indptr[-1], dtype=np.int64)
    blocks = [(np.arange(X.shape[0]), dist, idx)]
    if hit.size:        # the others' rows as searched; the matched points' searched again
        rest = np.flatnonzero(lengths == kq)
        blocks = [(rest, dist[rest], idx[rest]),
                  (hit, *_nearest_nodes(model, X[hit], own, n_threads))]
    for which, d, i in blocks:
        at = indptr[which][:, None] + np.arange(i.shape[1])
        data[at] = _row_weights(model, d, i, match[which], kq)
        indices[at] = i
    return sparse.csr_matrix((data, indices, indptr), shape=(X.shape[0], m)), match


def _nearest_nodes(model, X, k, n_threads):
    """(dist, idx) of the k nearest nodes of each point (as the nodes are), distances that
    underflow recomputed for self-tuned weights (``graph.exact_tiny_distances``)."""
    dist, idx = kgraph.nearest(model.nodes, X, k, n_threads)
    if model.weighting != "connectivity":
        dist, idx = kgraph.exact_tiny_distances(model.nodes, X, dist, idx)
    return dist, idx


def _row_weights(model, dist, idx, match, kq):
    """The weights of the rows listing nodes ``idx`` at ``dist``: 1 (connectivity) or the
    self-tuned exp(−d²/(σ_x σ_j)), σ_x the distance to the 7th listed node of the first
    ``kq`` (σ_J for a point equal to node J), times the nodes' copies u_j."""
    if model.weighting == "connectivity":
        B = np.ones(dist.shape)
    else:
        sx = dist[:, min(kgraph.SCALE_NEIGHBOR - 1, kq - 1)]
        sx = np.where(match >= 0, model.scales[np.maximum(match, 0)], sx)
        sx = np.where(sx > 0, sx, 1.0)
        B = kgraph.edge_weights(dist, idx, "self-tuning", sx, model.scales)
    return B * model.counts[idx]


def new_point_distances(model, rows, match):
    """d(x, c) (q×k) of the module docstring. For a point that is no training node
    (match −1) the self-loop a_xx = 1 is added to its degree; a point equal to node J has
    its self-loop in its row (entry J) and K(x, J) gains σ/d_x in J's cluster."""
    from scipy import sparse

    k = model.vol.size
    q, m = rows.shape
    hit = np.flatnonzero(match >= 0)
    J = match[hit]
    Z = sparse.csr_matrix((np.ones(m), (np.arange(m), model.node_labels)), shape=(m, k))
    loops = np.ones(q)
    loops[hit] = np.asarray(rows[hit, J]).reshape(-1)
    dx = np.asarray(rows.sum(axis=1)).reshape(-1)
    dx[match < 0] += 1.0
    F = np.asarray((rows @ Z).todense()) / dx[:, None]
    F[hit, model.node_labels[J]] += model.sigma * model.degrees[J] / dx[hit]
    diag = model.sigma / dx + loops / dx ** 2
    ok = model.vol > 0
    Ws = np.where(ok, model.vol, 1.0)
    D = diag[:, None] - 2.0 * F / Ws + model.inner_sums / Ws ** 2
    D[:, ~ok] = np.inf
    return D


def predict_graph(model, X, n_threads=1):
    """Labels of new points (module docstring): the node's label for a point equal to a
    training node; otherwise the nearest centre of its affinity row, or, where the fit kept
    the labels of a Gaussian mixture (``mixture_step``), its component of least cost."""
    return labels_and_distances(model, X, n_threads)[0]


def labels_and_distances(model, X, n_threads=1, want_distances=False):
    """(labels, distances) of new points: ``predict_graph``'s labels and, with
    ``want_distances`` (else None), the distances of ``new_point_distances`` or, for a
    mixture kept, its costs (``Mixture.costs``): either's least is the label of a point
    off the graph."""
    if model.mixture is not None:     # the nodes only for the points equal to one
        X, Xn = new_points(model, X)
        match = node_matches(model, Xn, kgraph.nearest(model.nodes, Xn, 1, n_threads)[1][:, 0])
        with blas_threads(1):
            labels, D = model.mixture.labels(X, want_costs=want_distances)
    else:
        rows, match = new_point_rows(model, X, n_threads, node_rows=want_distances)
        D = new_point_distances(model, rows, match)
        labels = np.argmin(D, axis=1)
        if want_distances:      # squared distances, ≥ 0: a training point's row B_J
            # approximates its fit's symmetrized row, which on a few points can take its
            # cluster's below 0 (a new point's are argmin'd as they are: labels above)
            D[match >= 0] = np.maximum(D[match >= 0], 0.0)
        else:
            D = None
    labels = labels.astype(np.int32)
    hit = match >= 0
    labels[hit] = model.node_labels[match[hit]]
    return labels, D
