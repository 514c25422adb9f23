"""Model files from untrusted sources: every invariant predict relies on is checked on load
("corrupt model: ..." with exit code 1), unknown archive members are refused unread, and a
member's declared size is checked against the shape the metadata declares before anything is
decompressed (a small file cannot make ``info`` decompress gigabytes)."""
import io
import json
import os
import struct
import time
import tracemalloc
import zipfile
import zlib

import numpy as np
import pytest

from helpers import OLD, blobs, run, run_process, write_csv
from kkmeans_cli.errors import ModelFileError
from kkmeans_cli.model.model_file import load_model

QUICK = ["--threads", "1", "--n-init", "2", "--quiet"]
VARIANTS = {
    "rbf": [],
    "weights": ["--weights", "w.txt"],
    "linear": ["--kernel", "linear"],
    "poly": ["--kernel", "poly", "--gamma", "0.5"],
    "sigmoid": ["--kernel", "sigmoid", "--gamma", "0.01"],
    "lingoes": ["--kernel", "sigmoid", "--gamma", "0.01", "--psd-repair", "lingoes"],
    "clip": ["--kernel", "sigmoid", "--gamma", "0.01", "--psd-repair", "clip"],
    "precomputed": ["--kernel", "precomputed"],
    "distance": ["--kernel", "precomputed-distance"],
    "ncut": ["--objective", "ncut", "--weights", "w.txt"],
    "nystroem": ["--approx", "nystroem", "--landmarks", "20", "--weights", "w.txt"],
    "scaled32": ["--scale", "standard", "--dtype", "float32"],
    "embed": ["--solver", "embed"],
    "laplacian": ["--kernel", "laplacian"],
    "cosine": ["--kernel", "cosine"],
}


def _data_for(variant):
    return {"precomputed": "K.csv", "distance": "D.csv"}.get(variant, "X.csv")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """One fitted model per variant, in a shared folder (read only by the tests)."""
    folder = tmp_path_factory.mktemp("models")
    X, _ = blobs(n=40, d=3, k=3, seed=1)
    write_csv(folder / "X.csv", X, header=False)
    rng = np.random.default_rng(0)
    np.savetxt(folder / "w.txt", rng.uniform(0.5, 2.0, X.shape[0]))
    sq = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    np.savetxt(folder / "K.csv", np.exp(-0.05 * sq), delimiter=",")
    np.savetxt(folder / "D.csv", np.sqrt(sq), delimiter=",")
    old = os.getcwd()
    os.chdir(folder)
    try:
        for name, options in VARIANTS.items():
            result = run(["fit", "--kernel", "rbf", _data_for(name), "-k", "3", "-o", f"{name}.npz",
                          "--labels", f"{name}.labels", *QUICK, *options])
            assert result.exit_code == 0, (name, result.stderr)
    finally:
        os.chdir(old)
    return folder


def _arrays(path):
    with np.load(path) as archive:
        return {key: archive[key] for key in archive.files}


def _write(path, arrays, meta=None):
    arrays = dict(arrays)
    if meta is not None:
        arrays["meta"] = np.array(meta if isinstance(meta, str) else json.dumps(meta))
    np.savez(path, **arrays)
    return path


def _predict_fails(models, tmp_path, model, variant, message):
    """predict with ``model`` fails with exactly one line naming the model and the problem,
    exit code 1, and writes nothing."""
    labels = tmp_path / "labels.txt"
    labels.write_bytes(OLD)
    before = sorted(os.listdir(tmp_path))
    result = run(["predict", model, models / _data_for(variant), "--labels", labels,
                  "--distances", tmp_path / "d.csv"])
    assert result.exit_code == 1, result.stderr
    assert result.stderr == f"kkmeans: error: {model}: {message}\n"
    assert result.stdout == ""
    assert labels.read_bytes() == OLD and sorted(os.listdir(tmp_path)) == before
    info = run(["info", model])
    assert info.exit_code == 1 and info.stderr == result.stderr


# -- good models load -----------------------------------------------------------------------
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_kind_of_fitted_model_passes_the_checks(models, variant):
    loaded = load_model(str(models / f"{variant}.npz"))
    X = np.loadtxt(models / _data_for(variant), delimiter=",")
    X = loaded.scaler.transform(X)
    labels = loaded.estimator.predict(X)
    assert labels.shape == (40,) and set(labels.tolist()) <= {0, 1, 2}
    if variant != "precomputed":  # the distances of a precomputed model need K(x, x)
        D = loaded.estimator.transform(X)
        assert np.all(np.isfinite(D)) and np.all(D >= -1e-9 * np.abs(D).max())
        # predict is the nearest centre of transform (up to exact ties).
        nearest = D[np.arange(40), labels]
        assert np.all(nearest <= D.min(axis=1) + 1e-9 * np.abs(D).max())


# -- corrupted arrays -------------------------------------------------------------------------
def _scaled(key, factor):
    return lambda a: {key: a[key] * factor}


CORRUPTIONS = [
    ("rbf", lambda a: {"cluster_weights": np.zeros(3)},
     "corrupt model: 'cluster_weights' must be positive; cluster 0 has 0"),
    ("rbf", lambda a: {"cluster_weights": -a["cluster_weights"]},
     "corrupt model: 'cluster_weights' must be positive; cluster 0 has -{W0:g}"),
    ("rbf", _scaled("cluster_weights", 2.0),
     "corrupt model: 'cluster_weights' does not match 'weights' and 'labels' (cluster 0: "
     "{W0x2:.17g}, its members' weights sum to {W0:.17g})"),
    ("rbf", lambda a: {"weights": np.zeros_like(a["weights"]),
                       "cluster_weights": np.zeros(3)},
     "corrupt model: 'cluster_weights' must be positive; cluster 0 has 0"),
    ("rbf", lambda a: {"weights": np.where(a["labels"] == 1, 0.0, a["weights"])},
     "corrupt model: 'cluster_weights' does not match 'weights' and 'labels' (cluster 1: "
     "{W1:.17g}, its members' weights sum to 0)"),
    ("rbf", _scaled("inner_sums", 1e6), "corrupt model: 'inner_sums' is too large for the rbf "
                                        "kernel: cluster 0 has {g0x1e6:g}, at most {W0sq:g} for "
                                        "its points and weights"),
    ("rbf", _scaled("inner_sums", -1.0), "corrupt model: 'inner_sums' must be >= 0 for the rbf "
                                         "kernel; cluster 0 has -{g0:g}"),
    ("poly", _scaled("inner_sums", 1e3), "corrupt model: 'inner_sums' is too large for the poly "
                                         "kernel: cluster 0 has"),
    ("sigmoid", _scaled("inner_sums", 1e3), "corrupt model: 'inner_sums' is too large for the "
                                            "sigmoid kernel: cluster 0 has"),
    ("precomputed", _scaled("inner_sums", 1e3), "corrupt model: 'inner_sums' is too large for "
                                                "the precomputed kernel: cluster 0 has"),
    ("poly", _scaled("X_fit", 1e300), "corrupt model: the poly kernel of 'X_fit' row 1 with "
                                      "itself is not a finite number (overflow)"),
    ("ncut", _scaled("degree_weights", 1e-300), "corrupt model: 'weights' does not match "
                                                "'degree_weights' times 'degrees'"),
    ("ncut", lambda a: {"degrees": a["degrees"] * 1e6, "weights": a["weights"] * 1e6,
                        "cluster_weights": a["cluster_weights"] * 1e6},
     "corrupt model: 'degrees' exceed the sum of 'degree_weights' (the rbf kernel is at most "
     "1)"),
    ("nystroem", _scaled("nystroem_transform", 1e3), "corrupt model: 'nystroem_transform' does "
                                                     "not fit 'landmarks' (its features are "
                                                     "longer than the kernel allows)"),
    ("nystroem", _scaled("inner_sums", 2.0), "corrupt model: 'inner_sums' does not match "
                                             "'centers' and 'cluster_weights'"),
    ("nystroem", lambda a: {"centers": a["centers"] * 10,
                            "inner_sums": a["inner_sums"] * 100},
     "corrupt model: 'centers' lie outside the feature space of the kernel"),
    ("clip", _scaled("psd_components", 2.0), "corrupt model: 'psd_components' are not "
                                             "orthonormal eigenvectors"),
    ("clip", _scaled("psd_col_means", 1e300), "corrupt model: meta 'psd_grand_mean' is not the "
                                              "mean of 'psd_col_means'"),
    ("rbf", lambda a: {"labels": np.where(a["labels"] == 2, 1, a["labels"]),
                       "cluster_sizes": np.bincount(np.where(a["labels"] == 2, 1, a["labels"]),
                                                    minlength=3)},
     "corrupt model: 'cluster_weights' does not match 'weights' and 'labels' (cluster 1: "
     "{W1:.17g}, its members' weights sum to {W12:.17g})"),
    ("rbf", lambda a: {"inertia": np.array(np.inf)},
     "corrupt model: 'inertia' holds NaN or infinite values"),
]


@pytest.mark.parametrize("variant, change, message", CORRUPTIONS)
def test_corrupted_arrays_are_refused(models, tmp_path, variant, change, message):
    arrays = _arrays(models / f"{variant}.npz")
    W, g = arrays["cluster_weights"], arrays["inner_sums"]
    message = message.format(W0=W[0], W1=W[1], W12=W[1] + W[2], W0x2=2 * W[0], g0=g[0], g0x1e6=g[0] * 1e6,
                             W0sq=W[0] ** 2)
    model = _write(tmp_path / "bad.npz", {**arrays, **change(arrays)})
    if message.endswith("has"):  # the numbers depend on the fit; the rest is exact
        result = run(["predict", model, models / _data_for(variant)])
        assert result.exit_code == 1
        assert result.stderr.startswith(f"kkmeans: error: {model}: {message} ")
        assert len(result.stderr.splitlines()) == 1 and result.stdout == ""
        return
    _predict_fails(models, tmp_path, model, variant, message)


def test_corrupt_model_as_subprocess(models, tmp_path):
    arrays = _arrays(models / "rbf.npz")
    _write(tmp_path / "bad.npz", {**arrays, "cluster_weights": np.zeros(3)})
    result = run_process(["predict", "bad.npz", models / "X.csv", "--labels", "out.txt"],
                         tmp_path)
    assert result.returncode == 1
    assert result.stderr == ("kkmeans: error: bad.npz: corrupt model: 'cluster_weights' must "
                             "be positive; cluster 0 has 0\n")
    assert not (tmp_path / "out.txt").exists()


# -- metadata of the wrong type ---------------------------------------------------------------
@pytest.mark.parametrize("variant, key, value, message", [
    ("rbf", "gamma", 10 ** 30, None),  # a finite number: accepted, converted to float
    ("rbf", "n_init", "abc", "meta 'n_init' must be an integer >= 1; got \"abc\""),
    ("rbf", "n_iter", -1, "meta 'n_iter' must be an integer >= 0; got -1"),
    ("rbf", "fit_stats", "abc", "meta 'fit_stats' must be an object; got \"abc\""),
    ("rbf", "options", [1], "meta 'options' must be an object; got [1]"),
    ("rbf", "columns", -1, "meta 'columns' must be a list of names; got -1"),
    ("rbf", "columns", ["a", "b"], "meta 'columns' names 2 columns, the model has 3 features"),
    ("rbf", "psd_sigma", 10 ** 400, "meta 'psd_sigma' must be a finite number; got 1"
                                    + "0" * 36 + "..."),
    ("rbf", "psd_checked", True, "meta 'psd_lambda_min' must be a finite number when "
                                 "'psd_checked' is true"),
    ("nystroem", "nystroem_rank", "abc", "meta 'nystroem_rank' must be an integer; got "
                                         "\"abc\""),
    ("ncut", "ncut", "abc", "meta 'ncut' must be a finite number; got \"abc\""),
    ("clip", "psd_lambda_min", "abc", "meta 'psd_lambda_min' must be a finite number; got "
                                      "\"abc\""),
    ("rbf", "sweep", {"ks": "2..5"}, "meta 'sweep' must hold ks (integers), metric (a string) "
                                     "and best_k"),
    ("rbf", "silhouette", "NaN", "'meta' is not valid JSON (NaN is not a JSON number)"),
    ("rbf", "fit_stats", {"restart_inertias": ["x"]},
     "meta 'fit_stats.restart_inertias' must be a list of finite numbers"),
])
def test_metadata_of_the_wrong_type_is_refused(models, tmp_path, variant, key, value, message):
    arrays = _arrays(models / f"{variant}.npz")
    meta = json.loads(str(arrays["meta"]))
    meta[key] = value
    text = json.dumps(meta).replace('"NaN"', "NaN")
    model = _write(tmp_path / "bad.npz", arrays, meta=text)
    if message is None:
        for args in (["info", model], ["info", model, "--json"],
                     ["predict", model, models / "X.csv", "--distances", tmp_path / "d.csv"]):
            result = run(args)
            assert result.exit_code == 0, result.stderr
        return
    _predict_fails(models, tmp_path, model, variant, "corrupt model: " + message)


# -- archive members --------------------------------------------------------------------------
def test_unknown_member_is_refused_unread(models, tmp_path):
    arrays = _arrays(models / "rbf.npz")
    model = _write(tmp_path / "extra.npz", {**arrays, "payload": np.ones(3)})
    _predict_fails(models, tmp_path, model, "rbf",
                   "corrupt model: unknown member 'payload.npy' (refused unread; a model holds "
                   "only the arrays of its format)")


def _gf2_times(matrix, vector):
    total, i = 0, 0
    while vector:
        if vector & 1:
            total ^= matrix[i]
        vector >>= 1
        i += 1
    return total


def _crc32_combine(crc1, crc2, len2):
    """zlib's crc32_combine: the CRC-32 of A + B from those of A and B and B's length."""
    if len2 <= 0:
        return crc1
    odd = [0xEDB88320] + [1 << i for i in range(31)]
    even = [_gf2_times(odd, odd[i]) for i in range(32)]
    odd = [_gf2_times(even, even[i]) for i in range(32)]
    while True:
        even = [_gf2_times(odd, odd[i]) for i in range(32)]
        if len2 & 1:
            crc1 = _gf2_times(even, crc1)
        len2 >>= 1
        if not len2:
            break
        odd = [_gf2_times(even, even[i]) for i in range(32)]
        if len2 & 1:
            crc1 = _gf2_times(odd, crc1)
        len2 >>= 1
        if not len2:
            break
    return crc1 ^ crc2


def _zero_stream(n_bytes, block=16_000_000):
    """(deflated bytes, CRC-32) of ``n_bytes`` zero bytes, without compressing them all: after
    a full flush the compressor emits the same bytes for the same block."""
    assert n_bytes % block == 0
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    zeros = bytes(block)
    first = compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH)
    steady = compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH)
    tail = compressor.flush()
    count = n_bytes // block
    data = first + steady * (count - 1) + tail
    crc_block = zlib.crc32(zeros)
    crc, length = 0, 0
    # CRC of count blocks by doubling.
    piece_crc, piece_len, remaining = crc_block, block, count
    while remaining:
        if remaining & 1:
            crc = _crc32_combine(crc, piece_crc, piece_len) if length else piece_crc
            length += piece_len
        piece_crc = _crc32_combine(piece_crc, piece_crc, piece_len)
        piece_len *= 2
        remaining >>= 1
    return data, crc


def _zip_with_bomb(src, dst, name, shape):
    """A copy of the archive ``src`` plus a member ``name`` holding a deflated float64 array
    of ``shape`` full of zeros (a valid zip: sizes and CRC are right)."""
    members = []
    with zipfile.ZipFile(src) as archive:
        for info in archive.infolist():
            members.append((info.filename, archive.read(info)))
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False,
                                                  "shape": shape})
    header = header.getvalue()
    n_zero = int(np.prod(shape)) * 8
    zeros, zeros_crc = _zero_stream(n_zero)
    with open(dst, "wb") as out:
        central = []

        def add(filename, raw_size, crc, payload):
            offset = out.tell()
            encoded = filename.encode()
            out.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, crc,
                                  len(payload), raw_size, len(encoded), 0))
            out.write(encoded)
            out.write(payload)
            central.append(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0x21,
                                       crc, len(payload), raw_size, len(encoded), 0, 0, 0, 0,
                                       0, offset) + encoded)

        for filename, raw in members:
            compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
            add(filename, len(raw), zlib.crc32(raw), compressor.compress(raw)
                + compressor.flush())
        # The bomb: the .npy header stored deflated too, then the zero blocks.
        compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
        head = compressor.compress(header) + compressor.flush(zlib.Z_FULL_FLUSH)
        crc = _crc32_combine(zlib.crc32(header), zeros_crc, n_zero)
        add(name, len(header) + n_zero, crc, head + zeros)
        start = out.tell()
        for entry in central:
            out.write(entry)
        out.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(central), len(central),
                              out.tell() - start, start, 0))
    return dst


@pytest.fixture(scope="module")
def bombs(models, tmp_path_factory):
    folder = tmp_path_factory.mktemp("bombs")
    shape = (20000, 20000)  # 3.2 GB of float64 when decompressed
    return {"extra": _zip_with_bomb(models / "rbf.npz", folder / "extra.npz", "extra.npy",
                                    shape),
            "X_fit": _zip_with_bomb(_without(models / "rbf.npz", folder / "base.npz",
                                             "X_fit"), folder / "xfit.npz", "X_fit.npy",
                                    shape)}


def _without(src, dst, key):
    arrays = _arrays(src)
    del arrays[key]
    np.savez(dst, **arrays)
    return dst


def test_bomb_archives_are_valid_zips(bombs):
    """The test files are what they claim: a small zip whose member decompresses to 3.2 GB."""
    for path in bombs.values():
        assert os.path.getsize(path) < 4 * 2 ** 20
        with zipfile.ZipFile(path) as archive:
            big = max(archive.infolist(), key=lambda info: info.file_size)
            assert big.file_size == 20000 * 20000 * 8 + 128
            with archive.open(big) as stream:  # the first blocks decompress and check out
                assert stream.read(128).startswith(b"\x93NUMPY")
                assert stream.read(2 ** 20) == bytes(2 ** 20)


@pytest.mark.parametrize("which, message", [
    ("extra", "corrupt model: unknown member 'extra.npy' (refused unread; a model holds only "
              "the arrays of its format)"),
    ("X_fit", "corrupt model: 'X_fit' has shape (20000, 20000), expected (40, 3) from meta "
              "(n = 40, d = 3, k = 3)"),
])
def test_compressed_giant_member_is_refused_before_decompression(bombs, which, message):
    path = str(bombs[which])
    tracemalloc.start()
    start = time.perf_counter()
    with pytest.raises(ModelFileError) as info:
        load_model(path)
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert str(info.value) == f"{path}: {message}"
    assert seconds < 0.5 and peak < 20 * 2 ** 20
    result = run_process(["info", path], os.path.dirname(path))
    assert result.returncode == 1
    assert result.stderr == f"kkmeans: error: {path}: {message}\n"


def test_declared_size_must_match_the_header(models, tmp_path):
    """A member whose zip header declares more bytes than its .npy header's shape makes is
    refused before it is read."""
    src = models / "rbf.npz"
    dst = tmp_path / "lying.npz"
    with zipfile.ZipFile(src) as archive, zipfile.ZipFile(dst, "w") as out:
        for info in archive.infolist():
            raw = archive.read(info)
            if info.filename == "weights.npy":
                raw += bytes(8 * 1000)  # 1000 numbers more than the header's shape
            out.writestr(info.filename, raw)
    with pytest.raises(ModelFileError) as info:
        load_model(str(dst))
    size = 128 + 40 * 8
    assert str(info.value) == (f"{dst}: corrupt model: member 'weights.npy' declares "
                               f"{size + 8000} bytes, but its dtype and shape make {size}")


def test_meta_lying_about_n_is_caught_on_the_small_arrays_first(models, tmp_path):
    """meta claiming a 20000 x 20000 X_fit does not get it read: labels (40 numbers) already
    disagree, and every header is checked before any member is read."""
    arrays = _arrays(models / "rbf.npz")
    meta = json.loads(str(arrays["meta"]))
    meta.update(n_samples=20000, n_features=20000)
    model = _write(tmp_path / "liar.npz", arrays, meta=meta)
    with pytest.raises(ModelFileError, match=r"'labels' has shape \(40,\), expected "
                                             r"\(20000,\) from meta"):
        load_model(str(model))


def test_zero_stream_helper_matches_zlib():
    """The bomb builder's deflate stream and CRC agree with zlib on a size it can check."""
    data, crc = _zero_stream(7 * 1000, block=1000)
    assert zlib.decompress(data, -15) == bytes(7000)
    assert crc == zlib.crc32(bytes(7000))
    assert _crc32_combine(zlib.crc32(b"head"), zlib.crc32(bytes(12345)), 12345) == \
        zlib.crc32(b"head" + bytes(12345))


def test_member_twice_is_refused(models, tmp_path):
    """Two members of one name: which one a reader takes is not defined; refused."""
    import warnings

    dst = tmp_path / "twice.npz"
    with zipfile.ZipFile(models / "rbf.npz") as src, warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Duplicate name", UserWarning)
        with zipfile.ZipFile(dst, "w") as out:
            for info in src.infolist():
                out.writestr(info.filename, src.read(info))
            out.writestr("inner_sums.npy", src.read("inner_sums.npy"))
    _predict_fails(models, tmp_path, dst, "rbf",
                   "corrupt model: member 'inner_sums.npy' appears more than once")
