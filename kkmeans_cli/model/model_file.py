"""Saving and loading fitted models as safe ``.npz`` archives (see ``docs/model-format.md``).

A model holds plain numeric arrays and one JSON string (``meta``); it loads with
``allow_pickle=False`` and is checked completely before use, so a file from an untrusted source
can at worst be refused with a :class:`~kkmeans_cli.errors.ModelFileError`.

Format versions
    1  the original keys.
    2  adds ``kernel_offset`` (d float64, optional): the point the kernel subtracts from every
       row before it is evaluated (``Kernel.offset``, the mean of the training rows for rbf
       and the linear k-means objective; see ``kernels/functions.py``). ``inner_sums`` and
       the Nyström arrays were computed with it, and ``predict`` applies it to new rows and
       ``X_fit`` alike. A version-1 file has none: it loads and predicts with the uncentred
       kernel its sums were made with. A reader of version 1 refuses version-2 files (it
       would predict a linear model with the wrong kernel).
"""
import json
import math
import zipfile
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from .._version import __version__
from ..errors import ModelFileError, UsageError
from ..engine.records import FitResult
from ..io.data import read_npy_header
from ..io.scaling import SCALE_METHODS, Scaler
from ..kernels.functions import CENTRED_KERNELS, GAMMA_KERNELS, KERNELS, Kernel, with_offset
from ..kernels.nystroem import features
from .. import memory
from .estimator import KernelKMeans
from .parts import PARTS

FORMAT = "kkmeans-model"
FORMAT_VERSION = 2
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
        The archive's metadata (see ``docs/model-format.md``).
    scaler : Scaler
        The scaling the training data went through; apply it to new data.
    """

    estimator: object
    meta: dict
    scaler: Scaler


def state_parts():
    """The parts of a fitted estimator's state kept beside the labels and sums, in the order
    they are written and read (``model/parts.py``: the PSD check and repair, the objective
    and its optima, the Nyström map). Each has ``model_meta(estimator)``,
    ``model_arrays(estimator)`` and ``load(meta, arrays, n, fail) -> (params, state)``."""
    return PARTS


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
                      # 1-based in the file, as the report's "best: #1" (docs/model-format.md)
                      "best_restart": int(stats["best_restart"]) + 1,
                      "n_threads": int(stats["n_threads"])},
        "options": dict(options or {}),
    }
    for part in state_parts():
        meta.update(part.model_meta(estimator))
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
    if getattr(estimator.kernel_, "offset", None) is not None:
        arrays["kernel_offset"] = np.asarray(estimator.kernel_.offset, dtype=np.float64)
    for part in state_parts():
        arrays.update(part.model_arrays(estimator))
    if scaler.method != "none":
        arrays["scale_offset"] = np.asarray(scaler.offset, dtype=np.float64)
        arrays["scale_factor"] = np.asarray(scaler.factor, dtype=np.float64)
    np.savez(handle, **arrays)


def load_model(path):
    """Read and check a model file.

    Every check of ``docs/model-format.md`` runs before anything is used: the archive opens without
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
    meta, arrays = _read_archive(path)
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
    params, states = {"solver": meta.get("solver", "lloyd")}, {}
    for part in state_parts():
        part_params, state = part.load(meta, arrays, n, lambda problem: _fail(path, problem))
        params.update(part_params)
        states.update(state)
    estimator, kernel = _estimator(meta, params, _kernel_offset(path, arrays, meta, d))
    fit_stats = dict(meta.get("fit_stats", {}))
    if "best_restart" in fit_stats:  # 0-based in the Python API
        fit_stats["best_restart"] -= 1
    estimator._set_fitted(FitResult(
        labels=labels.astype(np.intp), inertia=float(inertia),
        inner_sums=np.ascontiguousarray(inner_sums, dtype=np.float64),
        cluster_weights=np.ascontiguousarray(cluster_weights, dtype=np.float64),
        n_iter=int(meta.get("n_iter", 0)), converged=bool(meta.get("converged", True)),
        kernel=kernel, sample_weight=np.ascontiguousarray(weights, dtype=np.float64),
        X_fit=None if X_fit is None else np.ascontiguousarray(X_fit, dtype=np.float64),
        n_features=d, fit_stats=fit_stats, psd=states.get("psd"), ncut=states.get("ncut"),
        nystroem=states.get("nystroem")))
    _check_consistency(path, meta, estimator)
    return LoadedModel(estimator=estimator, meta=meta, scaler=scaler)


def _check_nystroem(path, est, slack, unit):
    """Nystroem features phi(x) = K(x, L) T satisfy |phi(x)|^2 <= K(x, x) (the Nystroem
    kernel is the original one minus a positive semidefinite Schur complement; Williams and
    Seeger, "Using the Nystroem method to speed up kernel machines"): checked on the
    landmarks. The centres are means of features, so |mu_c|^2 <= 1 for kernels bounded by 1.
    """
    L, T = est.landmarks_, est.nystroem_transform_
    with np.errstate(all="ignore"):
        Phi = features(L, L, T, est.kernel_)
        norms = np.einsum("ij,ij->i", Phi, Phi)
        diag = est.kernel_.diag(L)
    if not (np.all(np.isfinite(norms)) and np.all(np.isfinite(diag))):
        _fail(path, "the Nystroem features of the landmarks are not finite numbers")
    scale = max(1.0, float(np.max(np.abs(diag))))
    if np.any(norms > diag * (1 + slack) + slack * scale):
        _fail(path, "'nystroem_transform' does not fit 'landmarks' (its features are longer "
                    "than the kernel allows)")
    if unit and np.any(np.einsum("ij,ij->i", est.centers_, est.centers_) > 1 + slack):
        _fail(path, "'centers' lie outside the feature space of the kernel")


# Kernels positive semidefinite for every parameter the loader accepts (poly needs coef0 >= 0).
_PSD_KERNELS = ("rbf", "laplacian", "chi2", "cosine", "linear")


def _check_consistency(path, meta, est):
    """The invariants ``predict`` and ``transform`` rely on, between the arrays.

    Each cluster's weight W_c is positive and is the sum of its members' weights (so every
    cluster has members). The inner sums g_c = sum_{i,j in c} w_i w_j K_ij are finite and, for
    a positive semidefinite kernel (or a repaired one), non-negative and at most
    (sum_{i in c} w_i sqrt(K_ii))^2 (Cauchy-Schwarz) when the diagonal K_ii is known; a
    kernel bounded by 1 in absolute value (sigmoid) has |g_c| <= W_c^2. For a Nystroem model
    g_c = W_c^2 |mu_c|^2 of its stored centre.
    """
    labels, weights, k = est.labels_, est.sample_weight_, est.n_clusters
    W, g = est.cluster_weights_, est.inner_sums_
    if not np.all(W > 0):
        c = int(np.flatnonzero(~(W > 0))[0])
        _fail(path, f"'cluster_weights' must be positive; cluster {c} has {W[c]:g}")
    summed = np.bincount(labels, weights=weights, minlength=k)
    if not np.allclose(summed, W, rtol=1e-8, atol=0):
        c = int(np.argmax(np.abs(summed - W) / W))
        _fail(path, f"'cluster_weights' does not match 'weights' and 'labels' (cluster {c}: "
                    f"{W[c]:.17g}, its members' weights sum to {summed[c]:.17g})")
    slack = 1e-4  # float32 kernels, summation order
    kernel = meta["kernel"]
    unit = kernel in ("rbf", "laplacian", "chi2", "cosine")  # |K(x, y)| <= 1
    if getattr(est, "objective", "kmeans") == "ncut":
        # The fit's weights are the degree weights times the degrees (Dhillon, Guan and
        # Kulis, "Kernel k-means, spectral clustering and normalized cuts").
        if not np.allclose(weights, est.degree_weights_ * est.degrees_, rtol=1e-8, atol=0):
            _fail(path, "'weights' does not match 'degree_weights' times 'degrees'")
        if unit and np.any(est.degrees_ > est.degree_weights_.sum() * (1 + slack)):
            _fail(path, f"'degrees' exceed the sum of 'degree_weights' (the {kernel} kernel "
                        f"is at most 1)")
    if getattr(est, "approx", "none") == "nystroem":
        _check_nystroem(path, est, slack, unit)
        expected = W ** 2 * np.einsum("ij,ij->i", est.centers_, est.centers_)
        if not np.allclose(g, expected, rtol=slack, atol=slack * W ** 2 * 1e-12):
            _fail(path, "'inner_sums' does not match 'centers' and 'cluster_weights'")
        return
    state = getattr(est, "psd_", None)
    repair = state.repair if state is not None else "none"
    if repair == "clip":
        # Eigenvectors of the centred kernel: orthonormal columns; the grand mean is the mean
        # of the column means.
        V = state.components
        if not np.allclose(V.T @ V, np.eye(V.shape[1]), rtol=0, atol=1e-6):
            _fail(path, "'psd_components' are not orthonormal eigenvectors")
        means = state.col_means
        if abs(state.grand_mean - means.mean()) > 1e-8 * (1 + np.max(np.abs(means))):
            _fail(path, "meta 'psd_grand_mean' is not the mean of 'psd_col_means'")
        if kernel == "sigmoid" and np.any(np.abs(means) > 1 + slack):
            _fail(path, "'psd_col_means' exceed 1, the bound of the sigmoid kernel")
    psd = (kernel in _PSD_KERNELS or (kernel == "poly" and meta.get("coef0", 1.0) >= 0)
           or repair in ("lingoes", "clip")
           or (bool(meta.get("psd_checked")) and meta.get("psd") is True))
    diag = None
    if repair != "clip":
        if est.X_fit_ is not None and kernel not in ("precomputed", "precomputed-distance"):
            with np.errstate(all="ignore"):
                diag = est.kernel_.diag(est.X_fit_)
            if not np.all(np.isfinite(diag)):
                i = int(np.flatnonzero(~np.isfinite(diag))[0])
                _fail(path, f"the {kernel} kernel of 'X_fit' row {i + 1} with itself is not "
                            f"a finite number (overflow)")
        elif state is not None and state.train_diag is not None:
            diag = state.train_diag
        if diag is not None and getattr(est, "objective", "kmeans") == "ncut":
            diag = diag / est.degrees_ ** 2
        if diag is not None and repair == "lingoes":
            diag = diag + state.sigma * (1.0 - 1.0 / labels.shape[0])
    if psd:
        if diag is not None and np.all(np.isfinite(diag)):
            bound = np.bincount(labels, weights=weights * np.sqrt(np.maximum(diag, 0)),
                                minlength=k) ** 2
        else:
            bound = None
        scale = bound if bound is not None else np.abs(g)
        low = g < -slack * scale - 1e-300
        if np.any(low):
            c = int(np.flatnonzero(low)[0])
            _fail(path, f"'inner_sums' must be >= 0 for the {kernel} kernel; cluster {c} has "
                        f"{g[c]:g}")
        if bound is not None:
            high = g > bound * (1 + slack) + 1e-300
            if np.any(high):
                c = int(np.flatnonzero(high)[0])
                _fail(path, f"'inner_sums' is too large for the {kernel} kernel: cluster {c} "
                            f"has {g[c]:g}, at most {bound[c]:g} for its points and weights")
    elif kernel == "sigmoid":
        high = np.abs(g) > W ** 2 * (1 + slack)
        if np.any(high):
            c = int(np.flatnonzero(high)[0])
            _fail(path, f"'inner_sums' is too large for the sigmoid kernel: cluster {c} has "
                        f"{g[c]:g}, at most {W[c] ** 2:g} in absolute value")


def _fail(path, problem):
    raise ModelFileError(f"{path}: corrupt model: {problem}")


def _not_a_model(path, why):
    raise ModelFileError(f"{path}: not a kkmeans model file ({why})")


# Every array a model may hold: 'U' a string, 'i' integers, 'f' numbers read as float64.
_MEMBER_KINDS = {"meta": "U", "labels": "i", "weights": "f", "cluster_sizes": "i",
                 "cluster_weights": "f", "inner_sums": "f", "inertia": "f", "X_fit": "f",
                 "scale_offset": "f", "scale_factor": "f", "psd_train_diag": "f",
                 "psd_components": "f", "psd_eigenvalues": "f", "psd_col_means": "f",
                 "degrees": "f", "degree_weights": "f", "landmarks": "f",
                 "nystroem_transform": "f", "centers": "f", "kernel_offset": "f"}
_META_MAX_BYTES = 64 * 2 ** 20


def _expected_shapes(meta):
    """The shape of every array from the meta's n, d, k (and m landmarks); None is a size
    only bounded (by n), checked in full where the array is used."""
    n, d, k = meta["n_samples"], meta["n_features"], meta["n_clusters"]
    m = meta.get("n_landmarks")
    if not isinstance(m, int) or isinstance(m, bool) or not 1 <= m <= n:
        m = None
    return {"labels": (n,), "weights": (n,), "cluster_sizes": (k,), "cluster_weights": (k,),
            "inner_sums": (k,), "inertia": (), "X_fit": (n, d), "scale_offset": (d,),
            "scale_factor": (d,), "psd_train_diag": (n,), "psd_components": (n, None),
            "psd_eigenvalues": (None,), "psd_col_means": (n,), "degrees": (n,),
            "degree_weights": (n,), "landmarks": (m, d),
            # m×m (the full transform) or m×s (the rank-restricted projection, s ≤ m):
            # checked against the rank in model/parts.py (NystroemPart.load)
            "nystroem_transform": (m, None), "centers": (k, None), "kernel_offset": (d,)}


def _read_archive(path):
    """The metadata and every array of the archive, checked before they are read.

    The zip directory is read first: every member must be a known array (an unknown member is
    refused unread); each member's ``.npy`` header (a few hundred bytes) gives its dtype and
    shape, which must be plain numbers (never objects, which would need pickle) and agree
    with what ``meta`` declares; and the member's size in the zip header must be exactly that
    shape's bytes. Only then is anything decompressed, so a file cannot make the loader read
    more than the model it claims to be.
    """
    import os

    if not os.path.exists(path):
        if path == "-":  # standard input is for DATA; a model is an archive read by seeking
            raise UsageError("MODEL '-': a model is read from its .npz file, not from "
                             "standard input; give the file's path")
        _fail_plain(path, "no such file")
    if os.path.isdir(path):
        _fail_plain(path, "is a folder, not a model file")
    try:
        with open(path, "rb") as stream:
            magic = stream.read(6)
    except OSError as exc:
        _fail_plain(path, f"cannot read ({exc.strerror or exc})")
    if magic == b"\x93NUMPY":
        _not_a_model(path, "it is a single .npy array, not a kkmeans model archive")
    if not magic.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        _not_a_model(path, "a model is the .npz archive 'kkmeans fit' writes; this file is "
                           "not a zip archive")
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile, ValueError, EOFError) as exc:
        _not_a_model(path, f"cannot be read as an .npz archive: {exc}")
    with archive:
        infos = archive.infolist()
        names = {info.filename for info in infos}
        if "meta.npy" not in names:
            _not_a_model(path, "no 'meta' entry")
        if len(names) != len(infos):
            seen = set()
            twice = next(info.filename for info in infos
                         if info.filename in seen or seen.add(info.filename))
            _fail(path, f"member {twice!r} appears more than once")
        for info in infos:
            key = info.filename[:-4] if info.filename.endswith(".npy") else None
            if key not in _MEMBER_KINDS:
                _fail(path, f"unknown member {info.filename!r} (refused unread; a model holds "
                            f"only the arrays of its format)")
            if info.flag_bits & 0x1:
                _fail(path, f"member {info.filename!r} is encrypted")
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                _fail(path, f"member {info.filename!r} uses an unsupported compression")
        headers = {info.filename[:-4]: (info, _member_header(path, archive, info))
                   for info in infos}
        info, (shape, dtype, offset) = headers["meta"]
        if shape != () or dtype.kind != "U":
            _fail(path, "'meta' must be a 0-d string array holding JSON")
        if info.file_size > _META_MAX_BYTES:
            _fail(path, f"'meta' declares {info.file_size} bytes, more than a model's "
                        f"metadata ({_META_MAX_BYTES} bytes at most)")
        raw = _member_array(path, archive, info, offset + dtype.itemsize)
        meta = _check_meta(path, raw)
        expected = _expected_shapes(meta)
        n = meta["n_samples"]
        sizes = {}
        for key, (info, (shape, dtype, offset)) in headers.items():
            if key == "meta":
                continue
            want = expected[key]
            if len(shape) != len(want) or any(
                    (w is not None and s != w) or (w is None and not 1 <= s <= n)
                    for s, w in zip(shape, want)):
                shown = tuple("r" if w is None else w for w in want)
                _fail(path, f"'{key}' has shape {tuple(shape)}, expected {shown} from meta "
                            f"(n = {n}, d = {meta['n_features']}, k = {meta['n_clusters']})")
            kind = _MEMBER_KINDS[key]
            if dtype.kind not in ("iu" if kind == "i" else "fiu") or dtype.itemsize > 8:
                _fail(path, f"'{key}' has dtype {dtype}, expected "
                            f"{'integers' if kind == 'i' else 'floats'}")
            sizes[key] = offset + int(np.prod(shape, dtype=object)) * dtype.itemsize
            if info.file_size != sizes[key]:
                _fail(path, f"member {info.filename!r} declares {info.file_size} bytes, but "
                            f"its dtype and shape make {sizes[key]}")
        total, limit = sum(sizes.values()), memory.default_limit()
        if limit is not None and total > limit:
            _fail_plain(path, f"the model's arrays need {memory.format_bytes(total)}, more "
                              f"than the memory available ({memory.format_bytes(limit)})")
        # Only now is anything decompressed: every size above is checked.
        arrays = {key: _member_array(path, archive, headers[key][0], size)
                  for key, size in sizes.items()}
    arrays["meta"] = raw
    return meta, arrays


def _fail_plain(path, problem):
    raise ModelFileError(f"{path}: {problem}")


def _member_header(path, archive, info):
    """(shape, dtype, header bytes) of a member, reading only its ``.npy`` header."""
    key = info.filename[:-4]
    try:
        with archive.open(info) as stream:
            shape, fortran, dtype, offset = read_npy_header(stream)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, RuntimeError) as exc:
        if "allow_pickle" in str(exc) or "Object arrays" in str(exc):
            _fail(path, f"array '{key}' holds pickled Python objects; refused (a model file "
                        f"holds plain numeric arrays only and is never unpickled)")
        _fail(path, f"array '{key}' is corrupt or truncated ({exc})")
    if dtype.hasobject:
        _fail(path, f"array '{key}' holds pickled Python objects; refused (a model file "
                    f"holds plain numeric arrays only and is never unpickled)")
    if dtype.names is not None or dtype.subdtype is not None:
        _fail(path, f"array '{key}' has the structured dtype {dtype}; refused")
    return tuple(shape), dtype, offset


def _member_array(path, archive, info, size):
    """A member read in full, after its zip header was checked to declare ``size`` bytes
    (zipfile never decompresses more than the declared size)."""
    key = info.filename[:-4]
    if info.file_size != size:
        _fail(path, f"member {info.filename!r} declares {info.file_size} bytes, but its "
                    f"dtype and shape make {size}")
    try:
        with archive.open(info) as stream:
            return np.lib.format.read_array(stream, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, RuntimeError) as exc:
        _fail(path, f"array '{key}' is corrupt or truncated ({exc})")


def _real(value):
    """A finite JSON number (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _count(low):
    return lambda v: (isinstance(v, int) and not isinstance(v, bool)
                      and low <= v < 2 ** 63)


def _optional(check):
    return lambda v: v is None or check(v)


def _list_of(check):
    return lambda v: isinstance(v, list) and all(check(x) for x in v)


_STR = lambda v: isinstance(v, str)  # noqa: E731
_BOOL = lambda v: isinstance(v, bool)  # noqa: E731
_DICT = lambda v: isinstance(v, dict)  # noqa: E731
# The optional meta entries the loader, ``info`` and ``predict`` read: name -> (check, what).
_META_OPTIONAL = {
    "kkmeans_version": (_STR, "a string"), "created": (_STR, "a string"),
    "degree": (_count(1), "an integer >= 1"), "coef0": (_real, "a finite number"),
    "gamma": (_optional(_real), "a finite number"),
    "algorithm": (_STR, "a string"), "seed": (_optional(_count(-2 ** 63)), "an integer"),
    "n_init": (_count(1), "an integer >= 1"), "n_iter": (_count(0), "an integer >= 0"),
    "converged": (_BOOL, "true or false"), "inertia": (_real, "a finite number"),
    "approx": (_STR, "a string"), "solver": (_STR, "a string"),
    "psd_repair": (_STR, "a string"), "objective": (_STR, "a string"),
    "refine": (_STR, "a string"), "psd_sigma": (_real, "a finite number"),
    "psd_grand_mean": (_real, "a finite number"), "psd_objective": (_real, "a finite number"),
    "psd_objective_original": (_real, "a finite number"), "ncut": (_real, "a finite number"),
    "psd_lambda_min": (_optional(_real), "a finite number"),
    "psd_checked": (_BOOL, "true or false"), "psd": (_BOOL, "true or false"),
    "n_landmarks": (_count(1), "an integer >= 1"), "nystroem_rank": (_count(0), "an integer"),
    "nystroem_features": (_STR, "a string"),
    "source": (_STR, "a string"), "columns": (_optional(_list_of(_STR)), "a list of names"),
    "silhouette": (_optional(_real), "a finite number"),
    "silhouette_n_used": (_optional(_count(1)), "an integer >= 1"),
    "silhouette_exact": (_optional(_BOOL), "true or false"),
    "fit_stats": (_DICT, "an object"), "options": (_DICT, "an object"),
    "optima": (_DICT, "an object"), "sweep": (_DICT, "an object"),
}


_FIT_STATS = {"kernel_seconds": (_real, "a finite number"),
              "iteration_seconds": (_real, "a finite number"),
              "restart_inertias": (_list_of(_real), "a list of finite numbers"),
              "best_restart": (_count(1), "an integer >= 1"),
              "n_threads": (_count(1), "an integer >= 1")}


def _no_constant(name):
    raise ValueError(f"{name} is not a JSON number")


def _check_meta(path, raw):
    try:
        meta = json.loads(str(raw), parse_constant=_no_constant)
    except (json.JSONDecodeError, ValueError, RecursionError) as exc:
        _fail(path, f"'meta' is not valid JSON ({exc})")
    if not isinstance(meta, dict):
        _fail(path, "'meta' must be a JSON object")
    if meta.get("format") != FORMAT:
        _not_a_model(path, f"format is {meta.get('format')!r}, expected {FORMAT!r}")
    for key, kind in _META_REQUIRED.items():
        value = meta.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            kind_name = {"int": "an integer", "str": "a string", "dict": "an object",
                         "list": "a list"}.get(kind.__name__, f"a {kind.__name__}")
            _fail(path, f"meta '{key}' is missing or not {kind_name}")
    version = meta["format_version"]
    if version > FORMAT_VERSION:
        _fail_plain(path, f"format_version {version} is newer than this kkmeans ({__version__}) "
                    f"reads (format_version {FORMAT_VERSION}); upgrade kkmeans-cli")
    if version < 1:
        _fail(path, f"format_version {version} is not supported")
    if meta["kernel"] not in KERNELS:
        _fail(path, f"unknown kernel {meta['kernel']!r}")
    if meta["scale"] not in SCALE_METHODS:
        _fail(path, f"unknown scale method {meta['scale']!r}")
    if meta["dtype"] not in ("float64", "float32"):
        _fail(path, f"unknown dtype {meta['dtype']!r}")
    for key in ("n_samples", "n_features", "n_clusters"):
        if not 1 <= meta[key] < 2 ** 63:
            _fail(path, f"meta '{key}' must be an integer from 1 to 2**63 - 1; got "
                        f"{meta[key]}")
    for key, (check, what) in _META_OPTIONAL.items():
        if key in meta and not check(meta[key]):
            shown = json.dumps(meta[key])
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            _fail(path, f"meta '{key}' must be {what}; got {shown}")
        if key in meta and what == "a finite number" and meta[key] is not None:
            meta[key] = float(meta[key])  # a huge JSON integer would reach NumPy as an object
    if meta.get("psd_checked") and meta.get("psd_lambda_min") is None:
        _fail(path, "meta 'psd_lambda_min' must be a finite number when 'psd_checked' is true")
    for key, (check, what) in _FIT_STATS.items():
        if key in meta.get("fit_stats", {}) and not check(meta["fit_stats"][key]):
            _fail(path, f"meta 'fit_stats.{key}' must be {what}")
    sweep = meta.get("sweep", {})
    if not (_optional(_list_of(_count(1)))(sweep.get("ks")) and _optional(_STR)(
            sweep.get("metric")) and _optional(_count(1))(sweep.get("best_k"))):
        _fail(path, "meta 'sweep' must hold ks (integers), metric (a string) and best_k")
    if meta["n_clusters"] > meta["n_samples"]:
        _fail(path, "meta 'n_clusters' is larger than 'n_samples'")
    if meta["kernel"] in ("precomputed", "precomputed-distance") \
            and meta["n_features"] != meta["n_samples"]:
        _fail(path, "a precomputed model needs n_features == n_samples")
    if meta["kernel"] in GAMMA_KERNELS:
        gamma = meta.get("gamma")
        if not isinstance(gamma, (int, float)) or isinstance(gamma, bool) or not gamma > 0 \
                or not _real(gamma):
            _fail(path, "meta 'gamma' must be a positive number for this kernel")
    if meta["kernel"] == "poly" and (not isinstance(meta.get("degree"), int)
                                     or meta["degree"] < 1):
        _fail(path, "meta 'degree' must be an integer >= 1")
    if meta["kernel"] in ("poly", "sigmoid") and (
            not _real(meta.get("coef0"))):
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


def _kernel_offset(path, arrays, meta, d):
    """``kernel_offset`` (format version 2), checked, or None."""
    if "kernel_offset" not in arrays:
        return None
    if meta["format_version"] < 2:
        _fail(path, "'kernel_offset' needs format_version 2")
    if meta["kernel"] not in CENTRED_KERNELS:
        _fail(path, f"'kernel_offset' is not used by the {meta['kernel']} kernel")
    return _array(path, arrays, "kernel_offset", (d,), "f")


def _estimator(meta, params, offset=None):
    """The estimator of a model file (not fitted yet) with the parameters of its meta and of
    its state parts (``params``), and its resolved kernel."""
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
        dtype=np.float32 if meta["dtype"] == "float32" else np.float64, **params)
    return estimator, with_offset(Kernel(kernel, gamma, degree, coef0), offset)
