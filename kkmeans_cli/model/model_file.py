"""Saving and loading fitted models as safe ``.npz`` archives (see ``spec/model-format.md``).

A model holds plain numeric arrays and one JSON string (``meta``); it loads with
``allow_pickle=False`` and is checked completely before use, so a file from an untrusted source
can at worst be refused with a :class:`~kkmeans_cli.errors.ModelFileError`.
"""
import json
import zipfile
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from .._version import __version__
from ..errors import ModelFileError
from ..io.scaling import SCALE_METHODS, Scaler

FORMAT = "kkmeans-model"
FORMAT_VERSION = 1
_KEYS_ALWAYS = ("meta", "labels", "weights", "cluster_sizes", "cluster_weights", "inner_sums",
                "inertia")
_META_REQUIRED = {"format": str, "format_version": int, "kernel": str, "n_clusters": int,
                  "n_features": int, "n_samples": int, "scale": str, "dtype": str}


@dataclass
class LoadedModel:
    """A model read from a file.

    Attributes
    ----------
    estimator : KernelKMeans
        Fitted: ``predict`` and ``transform`` work without the training kernel matrix.
    meta : dict
        The archive's metadata (see ``model-format.md``).
    scaler : Scaler
        The scaling the training data went through; apply it to new data.
    """

    estimator: object
    meta: dict
    scaler: Scaler


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
                      "best_restart": int(stats["best_restart"]) + 1,  # 1-based, as reported
                      "n_threads": int(stats["n_threads"])},
        "options": dict(options or {}),
    }
    from ..kernels.psd import model_meta as psd_meta

    meta.update(psd_meta(estimator))
    from ..engine.optima import model_meta as optima_meta

    meta.update(optima_meta(estimator))
    from ..kernels.nystroem import model_meta as nystroem_meta

    meta.update(nystroem_meta(estimator))
    meta.update(extra or {})
    return meta


def save_model(handle, estimator, scaler, meta):
    """Write a fitted estimator to an open binary file as an ``.npz`` archive.

    Parameters
    ----------
    handle : binary file object
        Typically from :class:`~kkmeans_cli.data_io.AtomicOutputs`, so the file appears whole
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
    from ..kernels.psd import model_arrays as psd_arrays

    arrays.update(psd_arrays(estimator))
    from ..engine.optima import model_arrays as optima_arrays

    arrays.update(optima_arrays(estimator))
    from ..kernels.nystroem import model_arrays as nystroem_arrays

    arrays.update(nystroem_arrays(estimator))
    if scaler.method != "none":
        arrays["scale_offset"] = np.asarray(scaler.offset, dtype=np.float64)
        arrays["scale_factor"] = np.asarray(scaler.factor, dtype=np.float64)
    np.savez(handle, **arrays)


def load_model(path):
    """Read and check a model file.

    Every check of ``model-format.md`` runs before anything is used: the archive opens without
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
    arrays = _read_archive(path)
    meta = _check_meta(path, arrays)
    n, d, k = meta["n_samples"], meta["n_features"], meta["n_clusters"]
    precomputed = meta["kernel"] in ("precomputed", "precomputed-distance")
    nystroem = meta.get("approx", "none") == "nystroem"  # landmarks replace X_fit
    required = list(_KEYS_ALWAYS) + ([] if precomputed or nystroem else ["X_fit"])
    if meta["scale"] != "none":
        required += ["scale_offset", "scale_factor"]
    for key in required:
        if key not in arrays:
            _fail(path, f"the required array '{key}' is missing")
    labels = _array(path, arrays, "labels", (n,), "i")
    if labels.min() < 0 or labels.max() >= k:
        _fail(path, f"'labels' must lie in 0..{k - 1}")
    weights = _array(path, arrays, "weights", (n,), "f")
    if np.any(weights < 0):
        _fail(path, "'weights' has negative values")
    sizes = _array(path, arrays, "cluster_sizes", (k,), "i")
    if not np.array_equal(sizes, np.bincount(labels, minlength=k)):
        _fail(path, "'cluster_sizes' does not match 'labels'")
    cluster_weights = _array(path, arrays, "cluster_weights", (k,), "f")
    inner_sums = _array(path, arrays, "inner_sums", (k,), "f")
    inertia = _array(path, arrays, "inertia", (), "f")
    X_fit = None if precomputed or nystroem else _array(path, arrays, "X_fit", (n, d), "f")
    scaler = Scaler("none")
    if meta["scale"] != "none":
        factor = _array(path, arrays, "scale_factor", (d,), "f")
        if np.any(factor <= 0):
            _fail(path, "'scale_factor' must be positive")
        scaler = Scaler(meta["scale"], _array(path, arrays, "scale_offset", (d,), "f"), factor)
    estimator = _estimator(path, meta)
    estimator.labels_ = labels.astype(np.intp)
    estimator.sample_weight_ = np.ascontiguousarray(weights, dtype=np.float64)
    estimator.cluster_sizes_ = sizes.astype(np.int64)
    estimator.cluster_weights_ = np.ascontiguousarray(cluster_weights, dtype=np.float64)
    estimator.inner_sums_ = np.ascontiguousarray(inner_sums, dtype=np.float64)
    estimator.inertia_ = float(inertia)
    estimator.X_fit_ = None if X_fit is None else np.ascontiguousarray(X_fit, dtype=np.float64)
    estimator.n_features_in_ = d
    estimator.n_iter_ = int(meta.get("n_iter", 0))
    estimator.converged_ = bool(meta.get("converged", True))
    estimator.fit_stats_ = dict(meta.get("fit_stats", {}))
    from ..kernels.psd import load_state

    estimator.psd_ = load_state(meta, arrays, n, lambda problem: _fail(path, problem))
    estimator.psd_repair = estimator.psd_.repair if estimator.psd_ is not None else "none"
    estimator.solver = meta.get("solver", "lloyd")
    from ..engine.optima import load_state as optima_state

    optima_state(estimator, meta, arrays, n, lambda problem: _fail(path, problem))
    from ..kernels.nystroem import load_state as nystroem_state

    nystroem_state(estimator, meta, arrays, lambda problem: _fail(path, problem))
    return LoadedModel(estimator=estimator, meta=meta, scaler=scaler)


def _fail(path, problem):
    raise ModelFileError(f"{path}: {problem}")


def _read_archive(path):
    """Every array of the archive, read without pickle."""
    try:
        # Opened here, not by np.load: np.load leaves its own file open when the archive
        # turns out not to be a zip file.
        stream = open(path, "rb")
    except FileNotFoundError:
        _fail(path, "no such file")
    except IsADirectoryError:
        _fail(path, "is a folder, not a model file")
    except OSError as exc:
        _fail(path, f"cannot be read ({exc.strerror or exc})")
    with stream:
        try:
            archive = np.load(stream, allow_pickle=False)
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            _fail(path, f"not a kkmeans model (cannot be read as an .npz archive: {exc})")
        if not isinstance(archive, np.lib.npyio.NpzFile):
            _fail(path, "is a single .npy array, not a kkmeans model archive")
        return _read_members(path, archive)


def _read_members(path, archive):
    arrays = {}
    with archive:
        for key in archive.files:
            try:
                value = archive[key]
            except ValueError as exc:
                if "allow_pickle" in str(exc) or "Object arrays" in str(exc):
                    _fail(path, f"array '{key}' holds pickled Python objects; refused (a model "
                                f"file holds plain numeric arrays only and is never unpickled)")
                _fail(path, f"array '{key}' is corrupt ({exc})")
            except (OSError, EOFError, zipfile.BadZipFile, KeyError) as exc:
                _fail(path, f"array '{key}' is corrupt or truncated ({exc})")
            if value.dtype.hasobject:
                _fail(path, f"array '{key}' holds Python objects; refused")
            arrays[key] = value
    return arrays


def _check_meta(path, arrays):
    if "meta" not in arrays:
        _fail(path, "not a kkmeans model (no 'meta' entry)")
    raw = arrays["meta"]
    if raw.shape != () or raw.dtype.kind != "U":
        _fail(path, "'meta' must be a 0-d string array holding JSON")
    try:
        meta = json.loads(str(raw))
    except json.JSONDecodeError as exc:
        _fail(path, f"'meta' is not valid JSON ({exc})")
    if not isinstance(meta, dict):
        _fail(path, "'meta' must be a JSON object")
    if meta.get("format") != FORMAT:
        _fail(path, f"not a kkmeans model (format is {meta.get('format')!r}, expected {FORMAT!r})")
    for key, kind in _META_REQUIRED.items():
        value = meta.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            _fail(path, f"meta '{key}' is missing or not a {kind.__name__}")
    version = meta["format_version"]
    if version > FORMAT_VERSION:
        _fail(path, f"format_version {version} is newer than this kkmeans ({__version__}) "
                    f"reads (format_version {FORMAT_VERSION}); upgrade kkmeans-cli")
    if version < 1:
        _fail(path, f"format_version {version} is not supported")
    from ..kernels.functions import GAMMA_KERNELS, KERNELS

    if meta["kernel"] not in KERNELS:
        _fail(path, f"unknown kernel {meta['kernel']!r}")
    if meta["scale"] not in SCALE_METHODS:
        _fail(path, f"unknown scale method {meta['scale']!r}")
    if meta["dtype"] not in ("float64", "float32"):
        _fail(path, f"unknown dtype {meta['dtype']!r}")
    for key in ("n_samples", "n_features", "n_clusters"):
        if meta[key] < 1:
            _fail(path, f"meta '{key}' must be at least 1")
    if meta["n_clusters"] > meta["n_samples"]:
        _fail(path, "meta 'n_clusters' is larger than 'n_samples'")
    if meta["kernel"] in ("precomputed", "precomputed-distance") \
            and meta["n_features"] != meta["n_samples"]:
        _fail(path, "a precomputed model needs n_features == n_samples")
    if meta["kernel"] in GAMMA_KERNELS:
        gamma = meta.get("gamma")
        if not isinstance(gamma, (int, float)) or isinstance(gamma, bool) or not gamma > 0 \
                or not np.isfinite(gamma):
            _fail(path, "meta 'gamma' must be a positive number for this kernel")
    if meta["kernel"] == "poly" and (not isinstance(meta.get("degree"), int)
                                     or meta["degree"] < 1):
        _fail(path, "meta 'degree' must be an integer >= 1")
    if meta["kernel"] in ("poly", "sigmoid") and (
            not isinstance(meta.get("coef0"), (int, float)) or not np.isfinite(meta["coef0"])):
        _fail(path, "meta 'coef0' must be a finite number")
    return meta


def _array(path, arrays, key, shape, kind):
    value = arrays[key]
    if value.shape != shape:
        _fail(path, f"'{key}' has shape {value.shape}, expected {shape}")
    kinds = "iu" if kind == "i" else "fiu"
    if value.dtype.kind not in kinds:
        _fail(path, f"'{key}' has dtype {value.dtype}, expected "
                    f"{'integers' if kind == 'i' else 'floats'}")
    if kind == "f" and not np.all(np.isfinite(value)):
        _fail(path, f"'{key}' holds NaN or infinite values")
    return value


def _estimator(path, meta):
    from .estimator import KernelKMeans
    from ..kernels.functions import Kernel

    kernel = meta["kernel"]
    gamma = float(meta["gamma"]) if "gamma" in meta and meta["gamma"] is not None else None
    degree = int(meta.get("degree", 3))
    coef0 = float(meta.get("coef0", 1.0))
    seed = meta.get("seed")
    estimator = KernelKMeans(
        meta["n_clusters"], kernel=kernel, gamma=gamma if gamma is not None else "median",
        degree=degree, coef0=coef0, n_init=max(1, int(meta.get("n_init", 1))),
        algorithm=meta.get("algorithm", "auto"),
        random_state=seed if isinstance(seed, int) else None,
        dtype=np.float32 if meta["dtype"] == "float32" else np.float64)
    estimator.kernel_ = Kernel(kernel, gamma, degree, coef0)
    estimator.gamma_ = gamma
    return estimator
