"""Saving, loading and validating model files (``kkmeans_cli.model.model_file``)."""
import io
import json
from pathlib import Path

import numpy as np
import pytest

from helpers import blobs
from kkmeans_cli import KernelKMeans
from kkmeans_cli.errors import ModelFileError
from kkmeans_cli.model.model_file import FORMAT_VERSION, load_model, model_meta, save_model
from kkmeans_cli.io.scaling import Scaler, fit_scaler


def _fit(kernel="rbf", scale="none", **params):
    X, y = blobs(n=45, d=3, k=3)
    scaler = fit_scaler(X, scale)
    Xs = scaler.transform(X)
    if kernel == "precomputed":
        Xs = np.exp(-0.05 * ((Xs[:, None] - Xs[None]) ** 2).sum(-1))
    est = KernelKMeans(3, kernel=kernel, n_init=2, random_state=3, n_threads=1,
                       **params).fit(Xs)
    return X, Xs, est, scaler


def _save(path, est, scaler, options=None):
    with open(path, "wb") as f:
        save_model(f, est, scaler, model_meta(est, scaler, options))
    return str(path)


@pytest.mark.parametrize("kernel, params", [("rbf", {}), ("poly", {"gamma": 0.1, "degree": 2}),
                                            ("linear", {}), ("laplacian", {"gamma": 0.2})])
def test_round_trip_predicts_like_the_fitted_estimator(tmp_path, kernel, params):
    X, Xs, est, scaler = _fit(kernel, "standard", **params)
    path = _save(tmp_path / "m.npz", est, scaler, {"n_clusters": 3, "seed": 3})
    loaded = load_model(path)
    new = loaded.estimator
    assert new.kernel_ == est.kernel_
    if kernel in ("rbf", "linear"):  # the centring predict must repeat (format version 2)
        assert np.array_equal(new.kernel_.offset, est.kernel_.offset)
    else:
        assert new.kernel_.offset is None and est.kernel_.offset is None
    assert np.array_equal(new.labels_, est.labels_)
    assert np.array_equal(new.X_fit_, est.X_fit_)
    assert np.array_equal(new.inner_sums_, est.inner_sums_)
    assert new.inertia_ == est.inertia_
    assert np.array_equal(new.predict(loaded.scaler.transform(X)), est.labels_)
    assert np.allclose(new.transform(Xs), est.transform(Xs))
    assert loaded.scaler.method == "standard"
    assert np.array_equal(loaded.scaler.offset, scaler.offset)
    meta = loaded.meta
    assert meta["format"] == "kkmeans-model" and meta["format_version"] == FORMAT_VERSION
    assert (meta["n_samples"], meta["n_features"], meta["n_clusters"]) == (45, 3, 3)
    assert meta["options"] == {"n_clusters": 3, "seed": 3}
    assert meta["seed"] == 3 and meta["n_init"] == 2 and meta["approx"] == "none"


@pytest.mark.parametrize("args", [
    ["--kernel", "sigmoid", "--approx", "nystroem"],
    ["--kernel", "poly", "--coef0", "-1", "--approx", "nystroem"],
    ["--kernel", "poly", "--coef0", "-1", "--psd-repair", "lingoes"],
    ["--kernel", "sigmoid", "--psd-repair", "lingoes"],
    ["--kernel", "sigmoid", "--psd-repair", "clip"],
    ["--kernel", "poly", "--coef0", "-1", "--psd-repair", "clip"],
])
def test_a_model_of_a_kernel_that_is_not_psd_is_read_back(tmp_path, args):
    """The loader's checks hold only where they are true: a sigmoid (or poly, coef0 < 0)
    Nystroem model keeps K(L, L)'s positive part, whose features may be longer than
    K(x, x); Lingoes' repair makes the centred kernel PSD, not K' itself, so a cluster's
    inner sum may be below 0. Such files, which fit wrote, were refused as corrupt by
    predict and info; each is read, and predicts its labels."""
    from helpers import run, write_csv

    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(c, 0.5, size=(50, 3)) for c in [(0, 0, 0), (4, 4, 0), (0, 4, 4)]])
    write_csv(tmp_path / "x.csv", X)
    fit = run(["fit", tmp_path / "x.csv", "-k", "3", *args, "-o", tmp_path / "m.npz", "-q"])
    assert fit.exit_code == 0, fit.stderr
    predicted = run(["predict", tmp_path / "m.npz", tmp_path / "x.csv", "-q"])
    assert predicted.exit_code == 0, predicted.stderr
    assert predicted.stdout == fit.stdout
    assert run(["info", tmp_path / "m.npz"]).exit_code == 0


def test_archive_holds_plain_arrays_only(tmp_path):
    X, Xs, est, scaler = _fit(scale="minmax")
    path = _save(tmp_path / "m.npz", est, scaler)
    with np.load(path, allow_pickle=False) as archive:
        assert sorted(archive.files) == sorted(
            ["meta", "X_fit", "labels", "weights", "cluster_sizes", "cluster_weights",
             "inner_sums", "inertia", "scale_offset", "scale_factor", "kernel_offset"])
        assert archive["kernel_offset"].shape == (3,)
        assert archive["labels"].dtype == np.int64 and archive["X_fit"].shape == (45, 3)
        assert archive["meta"].shape == () and archive["meta"].dtype.kind == "U"
        assert archive["cluster_sizes"].sum() == 45


def test_precomputed_model_has_no_X_fit(tmp_path):
    X, K, est, scaler = _fit("precomputed")
    path = _save(tmp_path / "m.npz", est, scaler)
    with np.load(path) as archive:
        assert "X_fit" not in archive.files
    loaded = load_model(path)
    assert loaded.estimator.X_fit_ is None
    assert np.array_equal(loaded.estimator.predict(K), est.labels_)


def _variant(tmp_path, src, drop=(), meta=None, meta_text=None, **arrays):
    with np.load(src) as archive:
        data = {key: archive[key] for key in archive.files if key not in drop}
    if meta_text is not None:
        data["meta"] = np.array(meta_text)
    if meta is not None:
        m = json.loads(str(data["meta"]))
        m.update(meta)
        data["meta"] = np.array(json.dumps(m))
    data.update(arrays)
    path = tmp_path / "variant.npz"
    np.savez(path, **data)
    return str(path)


@pytest.mark.parametrize("change, message", [
    (dict(drop=("inner_sums",)), "the required array 'inner_sums' is missing"),
    (dict(drop=("X_fit",)), "the required array 'X_fit' is missing"),
    (dict(labels=np.zeros(44, dtype=np.int64)), "'labels' has shape (44,), expected (45,)"),
    (dict(labels=np.full(45, 5, dtype=np.int64)), "'labels' must lie in 0..2"),
    (dict(labels=np.zeros(45)), "'labels' has dtype float64, expected integers"),
    (dict(cluster_sizes=np.array([45, 0, 0])), "'cluster_sizes' does not match 'labels'"),
    (dict(inner_sums=np.array([1.0, np.nan, 2.0])), "'inner_sums' holds NaN or infinite"),
    (dict(X_fit=np.ones((45, 2))), "'X_fit' has shape (45, 2), expected (45, 3)"),
    (dict(weights=-np.ones(45)), "'weights' has negative values"),
    (dict(meta={"format_version": 4}), "format_version 4 is newer than this kkmeans"),
    (dict(meta={"format": "other"}), "not a kkmeans model file (format is 'other'"),
    (dict(meta={"n_clusters": "3"}), "meta 'n_clusters' is missing or not an integer"),
    (dict(meta={"kernel": "magic"}), "unknown kernel 'magic'"),
    (dict(meta={"gamma": -1}), "meta 'gamma' must be a positive number"),
    (dict(meta={"scale": "standard"}), "the required array 'scale_offset' is missing"),
    (dict(meta_text="{not json"), "'meta' is not valid JSON"),
    (dict(kernel_offset=np.zeros(2)), "'kernel_offset' has shape (2,), expected (3,)"),
    (dict(kernel_offset=np.array([0.0, np.inf, 0.0])), "'kernel_offset' holds NaN or infinite"),
    (dict(meta={"format_version": 1}), "'kernel_offset' needs format_version 2"),
    (dict(meta={"kernel": "poly", "degree": 2, "coef0": 1.0}),
     "'kernel_offset' is not used by the poly kernel"),
])
def test_invalid_models_are_refused(tmp_path, change, message):
    X, Xs, est, scaler = _fit()
    src = _save(tmp_path / "m.npz", est, scaler)
    path = _variant(tmp_path, src, **change)
    with pytest.raises(ModelFileError) as info:
        load_model(path)
    text = str(info.value)
    assert text.startswith(f"{path}: ")
    assert message in text
    assert "\n" not in text


def test_newer_version_names_both_versions(tmp_path):
    X, Xs, est, scaler = _fit()
    path = _variant(tmp_path, _save(tmp_path / "m.npz", est, scaler),
                    meta={"format_version": 7})
    with pytest.raises(ModelFileError, match=r"format_version 7 is newer .*format_version 3\)"):
        load_model(path)


def test_object_arrays_are_refused_without_unpickling(tmp_path):
    marker = tmp_path / "unpickled"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    np.savez(tmp_path / "evil.npz", meta=np.array("{}"),
             labels=np.array([Payload()], dtype=object))
    with pytest.raises(ModelFileError, match="pickled Python objects; refused"):
        load_model(str(tmp_path / "evil.npz"))
    assert not marker.exists()


def test_not_an_archive(tmp_path):
    (tmp_path / "junk.npz").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(ModelFileError, match="not a kkmeans model"):
        load_model(str(tmp_path / "junk.npz"))
    np.save(tmp_path / "array.npy", np.ones(3))
    with pytest.raises(ModelFileError, match="single .npy array"):
        load_model(str(tmp_path / "array.npy"))
    with pytest.raises(ModelFileError, match="no such file"):
        load_model(str(tmp_path / "none.npz"))
    buf = io.BytesIO()
    np.savez(buf, x=np.ones(3))
    (tmp_path / "other.npz").write_bytes(buf.getvalue())
    with pytest.raises(ModelFileError, match="no 'meta' entry"):
        load_model(str(tmp_path / "other.npz"))


def test_truncated_archive(tmp_path):
    X, Xs, est, scaler = _fit()
    data = Path(_save(tmp_path / "m.npz", est, scaler)).read_bytes()
    for cut in (len(data) // 3, len(data) - 30):
        (tmp_path / "cut.npz").write_bytes(data[:cut])
        with pytest.raises(ModelFileError, match="cut.npz: "):
            load_model(str(tmp_path / "cut.npz"))


def test_none_scaler_round_trip(tmp_path):
    X, Xs, est, scaler = _fit()
    loaded = load_model(_save(tmp_path / "m.npz", est, scaler))
    assert loaded.scaler == Scaler("none")
    assert loaded.scaler.transform(X) is X


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_format_version_1_files_load_with_the_uncentred_kernel(tmp_path, kernel):
    """A model written before the kernel offset existed (format_version 1, no
    'kernel_offset', inner sums of the uncentred kernel) still loads, and predicts with the
    kernel its sums were made with: the brute-force nearest centre of that kernel."""
    import reference as ref

    X, Xs, est, scaler = _fit(kernel)
    Xs = Xs + 5.0  # away from the origin, so centred and uncentred linear sums differ
    est.fit(Xs)
    gamma = est.gamma_ if kernel == "rbf" else None
    K = ref.kernel_matrix(Xs, Xs, kernel, gamma=gamma)  # uncentred
    w, labels = est.sample_weight_, est.labels_
    g = np.array([w[labels == c] @ K[np.ix_(labels == c, labels == c)] @ w[labels == c]
                  for c in range(3)])
    assert kernel == "rbf" or not np.allclose(g, est.inner_sums_)
    path = _variant(tmp_path, _save(tmp_path / "m.npz", est, scaler), drop=("kernel_offset",),
                    meta={"format_version": 1}, inner_sums=g)
    old = load_model(path).estimator
    assert old.kernel_.offset is None
    new_points = Xs + np.random.default_rng(0).normal(scale=0.5, size=Xs.shape)
    K_new = ref.kernel_matrix(new_points, Xs, kernel, gamma=gamma)
    diag = np.diag(ref.kernel_matrix(new_points, new_points, kernel, gamma=gamma))
    W = est.cluster_weights_
    D = np.stack([diag - 2 * K_new[:, labels == c] @ w[labels == c] / W[c] + g[c] / W[c] ** 2
                  for c in range(3)], axis=1)
    np.testing.assert_array_equal(old.predict(new_points), np.argmin(D, axis=1))
    np.testing.assert_allclose(old.transform(new_points), np.maximum(D, 0), rtol=1e-9,
                               atol=1e-9 * np.abs(D).max())
