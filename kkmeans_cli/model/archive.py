"""A model file's archive: read safely and checked against the format before anything in it
is used (``docs/model-format.md``).

The ``.npz`` archive is opened without pickle; every member's ``.npy`` header is read first
and checked against one table (:data:`MEMBER_KINDS`: the kind of each array; shapes from the
meta's n, d, k and m) and against the memory available, and only then is anything
decompressed. The meta JSON is checked against the required and optional keys, their types
and ranges. :func:`corrupt` and :func:`not_a_model` raise the one-line
:class:`~kkmeans_cli.errors.ModelFileError` every refusal uses.
"""
import json
import math
import zipfile

import numpy as np

from .. import _options, memory
from .._version import __version__
from ..errors import ModelFileError, UsageError
from ..io.graphs import ZIP_MAGIC
from ..io.readers import read_npy_header
from ..io.scaling import SCALE_METHODS
from ..kernels.functions import GAMMA_KERNELS, KERNELS


FORMAT = "kkmeans-model"


FORMAT_VERSION = 3


_META_REQUIRED = {"format": str, "format_version": int, "kernel": str, "n_clusters": int,
                  "n_features": int, "n_samples": int, "scale": str, "dtype": str}


def corrupt(path, problem):
    raise ModelFileError(f"{path}: corrupt model: {problem}")


def not_a_model(path, why):
    raise ModelFileError(f"{path}: not a kkmeans model file ({why})")


# Every array a model may hold: 'U' a string, 'i' integers, 'f' numbers read as float64.
MEMBER_KINDS = {"meta": "U", "labels": "i", "weights": "f", "cluster_sizes": "i",
                 "cluster_weights": "f", "inner_sums": "f", "inertia": "f", "X_fit": "f",
                 "scale_offset": "f", "scale_factor": "f", "psd_train_diag": "f",
                 "psd_components": "f", "psd_eigenvalues": "f", "psd_col_means": "f",
                 "degrees": "f", "degree_weights": "f", "landmarks": "f",
                 "nystroem_transform": "f", "centers": "f", "kernel_offset": "f",
                 "graph_nodes": "f", "graph_counts": "f", "graph_node_labels": "i",
                 "graph_degrees": "f", "graph_vol": "f", "graph_links": "f",
                 "graph_scales": "f", "graph_transform": "f", "graph_mixture_scale": "f",
                 "graph_mixture_columns": "i", "graph_mixture_projection": "f",
                 "graph_mixture_means": "f", "graph_mixture_maps": "f",
                 "graph_mixture_consts": "f"}


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
            "nystroem_transform": (m, None), "centers": (k, None), "kernel_offset": (d,),
            # a graph kernel's m ≤ n nodes (model/parts.py, GraphPart)
            "graph_nodes": (None, d), "graph_counts": (None,), "graph_node_labels": (None,),
            "graph_degrees": (None,), "graph_vol": (k,), "graph_links": (k,),
            "graph_scales": (None,), "graph_transform": (d, d),
            # the Gaussian mixture kept by the default: d'' ≤ d columns and d' ≤ d'' of its
            # coordinates (kernels/graph_fit.py, Mixture.from_file)
            "graph_mixture_scale": (None,), "graph_mixture_columns": (None,),
            "graph_mixture_projection": (None, None), "graph_mixture_means": (k, None),
            "graph_mixture_maps": (k, None, None), "graph_mixture_consts": (k,)}


def read_archive(path):
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
        fail_plain(path, "no such file")
    if os.path.isdir(path):
        fail_plain(path, "is a folder, not a model file")
    try:
        with open(path, "rb") as stream:
            magic = stream.read(6)
    except OSError as exc:
        fail_plain(path, f"cannot read ({exc.strerror or exc})")
    if magic == b"\x93NUMPY":
        not_a_model(path, "it is a single .npy array, not a kkmeans model archive")
    if not magic.startswith(ZIP_MAGIC):
        not_a_model(path, "a model is the .npz archive 'kkmeans fit' writes; this file is "
                           "not a zip archive")
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile, ValueError, EOFError) as exc:
        not_a_model(path, f"cannot be read as an .npz archive: {exc}")
    with archive:
        infos = archive.infolist()
        names = {info.filename for info in infos}
        if "meta.npy" not in names:
            not_a_model(path, "no 'meta' entry")
        if len(names) != len(infos):
            seen = set()
            twice = next(info.filename for info in infos
                         if info.filename in seen or seen.add(info.filename))
            corrupt(path, f"member {twice!r} appears more than once")
        for info in infos:
            key = info.filename[:-4] if info.filename.endswith(".npy") else None
            if key not in MEMBER_KINDS:
                corrupt(path, f"unknown member {info.filename!r} (refused unread; a model holds "
                            f"only the arrays of its format)")
            if info.flag_bits & 0x1:
                corrupt(path, f"member {info.filename!r} is encrypted")
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                corrupt(path, f"member {info.filename!r} uses an unsupported compression")
        headers = {info.filename[:-4]: (info, _member_header(path, archive, info))
                   for info in infos}
        info, (shape, dtype, offset) = headers["meta"]
        if shape != () or dtype.kind != "U":
            corrupt(path, "'meta' must be a 0-d string array holding JSON")
        if info.file_size > _META_MAX_BYTES:
            corrupt(path, f"'meta' declares {info.file_size} bytes, more than a model's "
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
                shown = "(" + ", ".join("r" if w is None else str(w) for w in want) + \
                    ("," if len(want) == 1 else "") + ")"
                free = f", r any size from 1 to {n}" if None in want else ""
                corrupt(path, f"'{key}' has shape {tuple(shape)}, expected {shown} from meta "
                            f"(n = {n}, d = {meta['n_features']}, k = {meta['n_clusters']}"
                            f"{free})")
            kind = MEMBER_KINDS[key]
            if dtype.kind not in ("iu" if kind == "i" else "fiu") or dtype.itemsize > 8:
                corrupt(path, f"'{key}' has dtype {dtype}, expected "
                            f"{'integers' if kind == 'i' else 'floats'}")
            sizes[key] = offset + int(np.prod(shape, dtype=object)) * dtype.itemsize
            if info.file_size != sizes[key]:
                corrupt(path, f"member {info.filename!r} declares {info.file_size} bytes, but "
                            f"its dtype and shape make {sizes[key]}")
        total, limit = sum(sizes.values()), memory.default_limit()
        if limit is not None and total > limit:
            fail_plain(path, f"the model's arrays need {memory.format_bytes(total)}, more "
                              f"than the memory available ({memory.format_bytes(limit)})")
        # Only now is anything decompressed: every size above is checked.
        arrays = {key: _member_array(path, archive, headers[key][0], size)
                  for key, size in sizes.items()}
    arrays["meta"] = raw
    return meta, arrays


def fail_plain(path, problem):
    raise ModelFileError(f"{path}: {problem}")


def _member_header(path, archive, info):
    """(shape, dtype, header bytes) of a member, reading only its ``.npy`` header."""
    key = info.filename[:-4]
    try:
        with archive.open(info) as stream:
            shape, fortran, dtype, offset = read_npy_header(stream)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, RuntimeError) as exc:
        if "allow_pickle" in str(exc) or "Object arrays" in str(exc):
            corrupt(path, f"array '{key}' holds pickled Python objects; refused (a model file "
                        f"holds plain numeric arrays only and is never unpickled)")
        corrupt(path, f"array '{key}' is corrupt or truncated ({exc})")
    if dtype.hasobject:
        corrupt(path, f"array '{key}' holds pickled Python objects; refused (a model file "
                    f"holds plain numeric arrays only and is never unpickled)")
    if dtype.names is not None or dtype.subdtype is not None:
        corrupt(path, f"array '{key}' has the structured dtype {dtype}; refused")
    return tuple(shape), dtype, offset


def _member_array(path, archive, info, size):
    """A member read in full, after its zip header was checked to declare ``size`` bytes
    (zipfile never decompresses more than the declared size)."""
    key = info.filename[:-4]
    if info.file_size != size:
        corrupt(path, f"member {info.filename!r} declares {info.file_size} bytes, but its "
                    f"dtype and shape make {size}")
    try:
        with archive.open(info) as stream:
            return np.lib.format.read_array(stream, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, RuntimeError) as exc:
        corrupt(path, f"array '{key}' is corrupt or truncated ({exc})")


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
        corrupt(path, f"'meta' is not valid JSON ({exc})")
    if not isinstance(meta, dict):
        corrupt(path, "'meta' must be a JSON object")
    if meta.get("format") != FORMAT:
        not_a_model(path, f"format is {meta.get('format')!r}, expected {FORMAT!r}")
    for key, kind in _META_REQUIRED.items():
        value = meta.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            kind_name = {"int": "an integer", "str": "a string", "dict": "an object",
                         "list": "a list"}.get(kind.__name__, f"a {kind.__name__}")
            corrupt(path, f"meta '{key}' is missing or not {kind_name}")
    version = meta["format_version"]
    if version > FORMAT_VERSION:
        fail_plain(path, f"format_version {version} is newer than this kkmeans ({__version__}) "
                    f"reads (format_version {FORMAT_VERSION}); upgrade kkmeans-cli")
    if version < 1:
        corrupt(path, f"format_version {version} is not supported")
    if meta["kernel"] not in KERNELS:
        corrupt(path, f"unknown kernel {meta['kernel']!r}")
    if meta["scale"] not in SCALE_METHODS:
        corrupt(path, f"unknown scale method {meta['scale']!r}")
    if meta["dtype"] not in ("float64", "float32"):
        corrupt(path, f"unknown dtype {meta['dtype']!r}")
    for key in ("n_samples", "n_features", "n_clusters"):
        if not 1 <= meta[key] < 2 ** 63:
            corrupt(path, f"meta '{key}' must be an integer from 1 to 2**63 - 1; got "
                        f"{meta[key]}")
    for key, (check, what) in _META_OPTIONAL.items():
        if key in meta and not check(meta[key]):
            shown = json.dumps(meta[key])
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            corrupt(path, f"meta '{key}' must be {what}; got {shown}")
        if key in meta and what == "a finite number" and meta[key] is not None:
            meta[key] = float(meta[key])  # a huge JSON integer would reach NumPy as an object
    columns = meta.get("columns")
    if columns is not None:
        if len(columns) != meta["n_features"]:
            corrupt(path, f"meta 'columns' names {len(columns)} columns, the model has "
                          f"{meta['n_features']} features")
    if meta.get("psd_checked") and meta.get("psd_lambda_min") is None:
        corrupt(path, "meta 'psd_lambda_min' must be a finite number when 'psd_checked' is true")
    for key, (check, what) in _FIT_STATS.items():
        if key in meta.get("fit_stats", {}) and not check(meta["fit_stats"][key]):
            corrupt(path, f"meta 'fit_stats.{key}' must be {what}")
    sweep = meta.get("sweep", {})
    if not (_optional(_list_of(_count(1)))(sweep.get("ks")) and _optional(_STR)(
            sweep.get("metric")) and _optional(_count(1))(sweep.get("best_k"))):
        corrupt(path, "meta 'sweep' must hold ks (integers), metric (a string) and best_k")
    if "sweep" in meta:
        # as a sweep writes it: the k chosen is the model's and one of the ks, by a measure
        metrics = _options.GRAPH_SWEEP_METRICS if "graph" in meta else _options.SWEEP_METRICS
        ks = sweep.get("ks")
        if not ks or sweep.get("best_k") != meta["n_clusters"] or meta["n_clusters"] not in ks:
            corrupt(path, f"meta 'sweep' must hold ks that include best_k, the model's "
                          f"k = {meta['n_clusters']}")
        if sweep.get("metric") not in metrics:
            corrupt(path, f"meta 'sweep.metric' must be one of {', '.join(metrics)}")
        if sweep.get("eigengap_k") is not None and sweep["eigengap_k"] not in ks:
            corrupt(path, "meta 'sweep.eigengap_k' must be one of its ks, or null")
    silhouette = meta.get("silhouette")
    if silhouette is not None and not -1 - 1e-9 <= silhouette <= 1 + 1e-9:
        corrupt(path, "meta 'silhouette' must lie between −1 and 1")
    if meta["n_clusters"] > meta["n_samples"]:
        corrupt(path, "meta 'n_clusters' is larger than 'n_samples'")
    if meta["kernel"] in ("precomputed", "precomputed-distance") \
            and meta["n_features"] != meta["n_samples"]:
        corrupt(path, "a precomputed model needs n_features == n_samples")
    if meta["kernel"] in GAMMA_KERNELS:
        gamma = meta.get("gamma")
        if not isinstance(gamma, (int, float)) or isinstance(gamma, bool) or not gamma > 0 \
                or not _real(gamma):
            corrupt(path, "meta 'gamma' must be a positive number for this kernel")
    if meta["kernel"] == "poly" and (not isinstance(meta.get("degree"), int)
                                     or meta["degree"] < 1):
        corrupt(path, "meta 'degree' must be an integer >= 1")
    if meta["kernel"] in ("poly", "sigmoid") and (
            not _real(meta.get("coef0"))):
        corrupt(path, "meta 'coef0' must be a finite number")
    return meta


def checked_array(path, arrays, key, shape, kind):
    value = arrays[key]
    if value.shape != shape:
        corrupt(path, f"'{key}' has shape {value.shape}, expected {shape}")
    kinds = "iu" if kind == "i" else "fiu"
    if value.dtype.kind not in kinds:
        corrupt(path, f"'{key}' has dtype {value.dtype}, expected "
                    f"{'integers' if kind == 'i' else 'floats'}")
    if kind == "f" and not np.all(np.isfinite(value)):
        corrupt(path, f"'{key}' holds NaN or infinite values")
    return value
