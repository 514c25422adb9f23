"""The parts of a fitted model kept beside the labels and sums, as the model file stores them
(``docs/model-format.md``): the PSD check and repair, the objective and its optima (the
normalized cut's degrees), the Nyström map, a graph kernel's graph.

Each part owns its meta entries, its arrays and their checks:

- ``model_meta(estimator) -> dict`` and ``model_arrays(estimator) -> dict`` read a fitted
  estimator's public attributes for :func:`~kkmeans_cli.model.model_file.save_model`;
- ``load(meta, arrays, n, fail) -> (params, state)`` checks the part's entries of a file
  (``fail(problem)`` raises the model file error) and returns the estimator parameters they
  set and the part's record for the :class:`~kkmeans_cli.engine.records.FitResult` the
  loaded estimator is made from (``psd``, ``ncut`` or ``nystroem``). Nothing here writes
  to an estimator.

A new kind of fitted state adds a part to :data:`PARTS` and its arrays to
``archive.MEMBER_KINDS``.
"""
import numpy as np

from .. import _options
from ..engine.records import GraphState, NcutState, NystroemState
from ..errors import ValueRangeError
from ..kernels.functions import check_range
from ..kernels.graph_fit import NCUT_ROUNDING, GraphModel
from ..kernels.psd import loaded_state

OBJECTIVES = _options.OBJECTIVES
REFINES = _options.REFINES


class PSDPart:
    """The PSD check and repair (``kernels/psd.py``) and the solver."""

    @staticmethod
    def model_meta(estimator):
        """Meta entries of a fitted estimator's PSD state."""
        state = getattr(estimator, "psd_", None)
        out = {"solver": getattr(estimator, "solver", "lloyd")}
        if state is None:
            return out
        out.update({"psd_repair": state.repair, "psd_sigma": float(state.sigma),
                    "psd_checked": bool(state.checked), "psd": bool(state.psd),
                    "psd_lambda_min": state.lambda_min,
                    "psd_grand_mean": float(state.grand_mean)})
        stats = getattr(estimator, "fit_stats_", {})
        for key, name in (("objective_used", "psd_objective"),
                          ("objective_original", "psd_objective_original")):
            if key in stats:
                out[name] = float(stats[key])
        return out

    @staticmethod
    def model_arrays(estimator):
        """``psd_train_diag`` (n), and for clip ``psd_components`` (n×r),
        ``psd_eigenvalues`` (r), ``psd_col_means`` (n)."""
        state = getattr(estimator, "psd_", None)
        arrays = {}
        if state is None:
            return arrays
        if state.train_diag is not None:
            arrays["psd_train_diag"] = np.asarray(state.train_diag, dtype=np.float64)
        if state.repair == "clip" and state.components is not None:
            arrays["psd_components"] = np.asarray(state.components, dtype=np.float64)
            arrays["psd_eigenvalues"] = np.asarray(state.eigenvalues, dtype=np.float64)
            arrays["psd_col_means"] = np.asarray(state.col_means, dtype=np.float64)
        return arrays

    @staticmethod
    def load(meta, arrays, n, fail):
        """``psd_repair`` and the ``PSDState`` (None when the model has none and needs none)."""
        state = loaded_state(meta, arrays, n, fail)
        return ({"psd_repair": state.repair if state is not None else "none"},
                {"psd": state})


class ObjectivePart:
    """The objective, the refinement and how the winner was found (``engine/optima.py``);
    the normalized cut's degrees (``engine/ncut.py``)."""

    #: fit_stats_ entries stored as meta ``optima``
    STAT_KEYS = ("start_kinds", "best_start", "start_objective", "lloyd_objective",
                 "refined_objective", "refine_moves")

    @classmethod
    def model_meta(cls, estimator):
        """``objective``, ``refine``, ``optima`` and, for ncut, ``ncut``."""
        stats = getattr(estimator, "fit_stats_", {})
        graph = getattr(estimator, "graph_info_", None) is not None
        meta = {"objective": "ncut" if graph else estimator.objective,
                "refine": estimator.refine,
                "optima": {key: stats[key] for key in cls.STAT_KEYS if key in stats}}
        if estimator.objective == "ncut" or graph:
            meta["ncut"] = float(estimator.ncut_)
        return meta

    @staticmethod
    def model_arrays(estimator):
        """For ncut: ``degrees`` (d) and ``degree_weights`` (u), n float64 each (a graph
        kernel's state is the graph part's)."""
        if estimator.objective != "ncut" or getattr(estimator, "graph_info_", None) is not None:
            return {}
        return {"degrees": np.asarray(estimator.degrees_, dtype=np.float64),
                "degree_weights": np.asarray(estimator.degree_weights_, dtype=np.float64)}

    @staticmethod
    def load(meta, arrays, n, fail):
        """``objective`` and ``refine``; for ncut the :class:`NcutState`."""
        objective = meta.get("objective", "kmeans")
        if objective not in OBJECTIVES:
            fail(f"unknown objective {objective!r}")
        refine = meta.get("refine", "auto")
        params = {"objective": objective, "refine": refine if refine in REFINES else "auto"}
        optima = meta.get("optima") or {}       # shown by info
        kinds, best = optima.get("start_kinds"), optima.get("best_start")
        if kinds is not None and not (isinstance(kinds, list)
                                      and all(isinstance(kind, str) for kind in kinds)):
            fail("meta 'optima.start_kinds' must be a list of strings")
        if best is not None and not isinstance(best, str):
            fail("meta 'optima.best_start' must be a string")
        if objective != "ncut" or "graph" in meta or \
                meta.get("kernel") in _options.GRAPH_KERNELS:  # a graph's cut: GraphPart
            return params, {}
        for key in ("degrees", "degree_weights"):
            if key not in arrays:
                fail(f"the array '{key}' (needed by objective 'ncut') is missing")
            value = arrays[key]
            if value.shape != (n,) or value.dtype.kind not in "fiu":
                fail(f"'{key}' must be {n} numbers")
            if not np.all(np.isfinite(value)):
                fail(f"'{key}' holds NaN or infinite values")
        if np.any(arrays["degrees"] <= 0) or np.any(arrays["degree_weights"] < 0):
            fail("'degrees' must be positive and 'degree_weights' non-negative")
        ncut = meta.get("ncut")
        state = NcutState(
            degrees=np.ascontiguousarray(arrays["degrees"], dtype=np.float64),
            degree_weights=np.ascontiguousarray(arrays["degree_weights"], dtype=np.float64),
            value=float(ncut) if isinstance(ncut, (int, float)) else None)
        return params, {"ncut": state}


class NystroemPart:
    """The Nyström map and centres (``kernels/nystroem.py``)."""

    @staticmethod
    def model_meta(estimator):
        """``approx`` and, for Nyström, ``n_landmarks``, the rank and the engine's feature
        type."""
        if getattr(estimator, "approx", "none") != "nystroem":
            return {"approx": "none"}
        meta = {"approx": "nystroem", "n_landmarks": int(estimator.n_landmarks_),
                "nystroem_rank": int(estimator.nystroem_rank_)}
        if getattr(estimator, "nystroem_dtype_", None):
            # the explicit-feature engine: features K(x, L) P (P m×s) stored in this dtype
            meta["nystroem_features"] = estimator.nystroem_dtype_
        return meta

    @staticmethod
    def model_arrays(estimator):
        """``landmarks`` (m×d), ``nystroem_transform`` (m×m or m×s), ``centers``."""
        if getattr(estimator, "approx", "none") != "nystroem":
            return {}
        return {"landmarks": np.asarray(estimator.landmarks_, dtype=np.float64),
                "nystroem_transform": np.asarray(estimator.nystroem_transform_,
                                                 dtype=np.float64),
                "centers": np.asarray(estimator.centers_, dtype=np.float64)}

    @staticmethod
    def load(meta, arrays, n, fail):
        """``approx`` (and ``n_landmarks``); for Nyström the :class:`NystroemState`."""
        approx = meta.get("approx", "none")
        if approx not in ("none", "nystroem"):
            fail(f"unknown approx {approx!r}")
        if approx != "nystroem":
            return {"approx": approx}, {}
        if meta["kernel"] in _options.PRECOMPUTED_KERNELS:
            fail("a Nyström model cannot have a precomputed kernel")
        d, k = meta["n_features"], meta["n_clusters"]
        for key in ("landmarks", "nystroem_transform", "centers"):
            if key not in arrays:
                fail(f"the required array '{key}' is missing (approx is 'nystroem')")
        L, T, C = arrays["landmarks"], arrays["nystroem_transform"], arrays["centers"]
        if L.ndim != 2 or L.shape[1] != d or L.shape[0] < 1:
            fail(f"'landmarks' has shape {L.shape}, expected (m, {d})")
        m = L.shape[0]
        engine = meta.get("nystroem_features")
        if engine is not None and engine not in ("float32", "float64"):
            fail(f"meta 'nystroem_features' is {engine!r}, expected 'float32' or 'float64'")
        # the engine's projection P is m×s (rank s ≤ m); the full transform K_LL^{-1/2} is m×m
        s = T.shape[1] if engine is not None and T.ndim == 2 and 1 <= T.shape[1] <= m else m
        for key, value, shape in (("landmarks", L, (m, d)), ("nystroem_transform", T, (m, s)),
                                  ("centers", C, (k, s))):
            if value.shape != shape:
                fail(f"'{key}' has shape {value.shape}, expected {shape}")
            if value.dtype.kind not in "fiu":
                fail(f"'{key}' has dtype {value.dtype}, expected floats")
            if not np.all(np.isfinite(value)):
                fail(f"'{key}' holds NaN or infinite values")
        if meta.get("n_landmarks", m) != m:
            fail(f"meta 'n_landmarks' is {meta.get('n_landmarks')}, the landmarks are {m}")
        state = NystroemState(landmarks=np.ascontiguousarray(L, dtype=np.float64),
                              transform=np.ascontiguousarray(T, dtype=np.float64),
                              n_landmarks=int(m), rank=int(meta.get("nystroem_rank", m)),
                              dtype=engine, centers=np.ascontiguousarray(C, dtype=np.float64))
        return {"approx": "nystroem", "n_landmarks": int(m)}, {"nystroem": state}


class GraphPart:
    """A graph kernel's graph (``kernels/graph.py``, ``kernels/graph_fit.py``): meta
    ``graph`` (neighbours, weighting, σ, points, nodes, components, nnz) and, for kernel
    'knn', the ``GraphModel`` arrays that place new points (``graph_*``). A model fitted on
    an affinity given as is (kernel 'precomputed') keeps only the meta: it predicts nothing."""

    #: entries of ``GraphInfo`` (``kernels/graph.py``) kept in meta ``graph`` (``search`` is
    #: absent from models written before it was recorded), and the records of the default's
    #: whitened refit, Gaussian step, Gaussian mixture and split test
    #: (``kernels/graph_fit.py``; informational: the mixture kept is the arrays
    #: ``graph_mixture_*``)
    INFO_KEYS = ("n_points", "n_nodes", "n_neighbors", "weighting", "nnz", "n_components",
                 "n_duplicates", "bridges", "search", "whitened", "whitening", "gaussian",
                 "mixture", "split_test")
    #: the values of the graph meta's ``search``: the neighbour search that built the graph
    SEARCHES = ("kd-tree", "exact", "approximate", "none")

    @classmethod
    def model_meta(cls, estimator):
        """``graph``: the graph's description, and the GraphModel's own entries."""
        info = getattr(estimator, "graph_info_", None)
        if info is None:
            return {}
        graph = {key: info[key] for key in cls.INFO_KEYS if key in info}
        model = estimator.graph_model_
        if model is not None:
            graph.update(model.meta())
        return {"graph": graph}

    @staticmethod
    def model_arrays(estimator):
        """The GraphModel's arrays (``GraphModel.arrays``: nodes, counts, node labels,
        degrees, volumes, links and, self-tuning only, scales)."""
        model = getattr(estimator, "graph_model_", None)
        if getattr(estimator, "graph_info_", None) is None or model is None:
            return {}
        return model.arrays()

    @classmethod
    def load(cls, meta, arrays, n, fail):
        """``n_neighbors``, ``weighting`` and the :class:`GraphState` (its GraphModel checked by
        ``GraphModel.from_file``), or nothing for a model without a graph."""
        graph, kernel = meta.get("graph"), meta["kernel"]
        if graph is None and "graph" in meta:
            fail("meta 'graph' must be an object")
        if graph is None:
            if kernel in _options.GRAPH_KERNELS:
                fail(f"meta 'graph' (needed by kernel {kernel!r}) is missing")
            return {}, {}
        if not isinstance(graph, dict):
            fail("meta 'graph' must be an object")
        if kernel not in _options.GRAPH_KERNELS + ("precomputed",):
            fail(f"meta 'graph' is not used by the {kernel} kernel")
        for key in ("n_nodes", "n_components", "nnz"):
            value = graph.get(key)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= \
                    (n if key != "nnz" else n * n):
                fail(f"meta 'graph.{key}' must be an integer from 1 to "
                     f"{'n²' if key == 'nnz' else 'n'}")
        for key in ("n_duplicates", "bridges"):     # shown by info
            value = graph.get(key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                      or not 0 <= value <= n):
                fail(f"meta 'graph.{key}' must be an integer from 0 to n")
        if graph.get("n_points", n) != n or isinstance(graph.get("n_points"), bool):
            fail(f"meta 'graph.n_points' must be n = {n}, the training points")
        if kernel == "precomputed":
            if graph.get("weighting", "precomputed") != "precomputed":
                fail("meta 'graph.weighting' of an affinity given as DATA must be "
                     "'precomputed'")
            graph.setdefault("weighting", "precomputed")    # read with its default, as shown
        if "search" in graph and graph["search"] not in cls.SEARCHES:
            fail(f"meta 'graph.search' must be one of {', '.join(cls.SEARCHES)}")
        for key in ("whitening", "gaussian", "mixture", "split_test"):  # shown by info
            record = graph.get(key)
            if record is not None and not (
                    isinstance(record, dict) and isinstance(record.get("kept"), bool)
                    and all(isinstance(value, (bool, int, float)) for value in record.values())):
                fail(f"meta 'graph.{key}' must be an object of numbers with a true or false "
                     f"'kept'")
        test = (graph.get("whitening") or {}).get("turned_down_by")
        if test is not None and (not isinstance(test, int) or isinstance(test, bool)
                                 or not 0 <= test < len(_options.REFIT_TESTS)):
            fail(f"meta 'graph.whitening.turned_down_by' must be an integer from 0 to "
                 f"{len(_options.REFIT_TESTS) - 1}")
        kept = (graph.get("mixture") or {}).get("kept", False)
        if kept != any(name in arrays for name in GraphModel.MIXTURE_ARRAYS):
            fail("meta 'graph.mixture.kept' and the arrays 'graph_mixture_*' (the Gaussian "
                 "mixture kept) must come together")
        if kept and meta["format_version"] < 3:
            fail("the arrays 'graph_mixture_*' need format_version 3")
        whitened = graph.get("whitened", False)
        if not isinstance(whitened, bool) or whitened != ("graph_transform" in arrays):
            fail("meta 'graph.whitened' (true or false) and the array 'graph_transform' "
                 "must come together")
        ncut = meta.get("ncut")
        # files written before ncut was kept at least 0 may hold a cut of nothing rounded
        # to −4·10⁻¹⁶: read as 0
        if not isinstance(ncut, (int, float)) or isinstance(ncut, bool) or not \
                -NCUT_ROUNDING <= ncut <= meta["n_clusters"]:
            fail("meta 'ncut' must be a number from 0 to k")
        ncut = max(0.0, float(ncut))
        if kernel == "precomputed":
            return {}, {"graph": GraphState(None, dict(graph), float(ncut))}
        model = GraphModel.from_file(graph, arrays, fail)
        m, d, k = model.nodes.shape[0], meta["n_features"], meta["n_clusters"]
        if model.nodes.shape[1] != d or m != graph["n_nodes"]:
            fail(f"'graph_nodes' has shape {model.nodes.shape}, expected "
                 f"({graph['n_nodes']}, {d})")
        try:  # the rule fit applies to the points: distances to new points must not overflow
            check_range("knn", model.nodes, float(model.counts.sum()), what="'graph_nodes'")
        except ValueRangeError as exc:
            fail(str(exc).removesuffix("; rescale the data"))
        if model.vol.shape != (k,):
            fail(f"'graph_vol' must have shape ({k},)")
        inner = arrays.get("inner_sums")
        if inner is not None and inner.shape == (k,) and inner.dtype.kind in "fiu" and \
                not np.allclose(np.asarray(inner, dtype=np.float64), model.inner_sums,
                                rtol=1e-8, atol=0.0):
            fail("'inner_sums' must be σ·vol(c) + links(c, c): meta 'graph.sigma' times "
                 "'graph_vol' plus 'graph_links'")
        inertia = arrays.get("inertia")
        # the objective, a sum of squared distances (files written before it was kept at
        # least 0 may hold −4·10⁻¹⁶ for a cluster a node)
        if inertia is not None and inertia.dtype.kind in "fiu" and inertia.size == 1 and \
                not float(inertia) >= -NCUT_ROUNDING:
            fail("'inertia' of a graph fit (its objective, a sum of squared distances) must "
                 "be ≥ 0")
        if abs(float(model.counts.sum()) - n) > 1e-9 * n:
            fail(f"'graph_counts' must sum to the {n} training points")
        return ({"n_neighbors": int(model.n_neighbors), "weighting": model.weighting},
                {"graph": GraphState(model, dict(graph), float(ncut))})


#: The parts, in the order they are written and read.
PARTS = (PSDPart, ObjectivePart, NystroemPart, GraphPart)
