"""Sparse graphs as DATA (io/graphs.py): .npz of scipy.sparse.save_npz and Matrix Market."""
import bz2
import gzip
import os
import zipfile

import numpy as np
import pytest
import scipy.io
from scipy import sparse

from helpers import run, run_process
from kkmeans_cli.errors import DataError
from kkmeans_cli.io.graphs import is_graph_file, read_graph
from kkmeans_cli.kernels import graph as kgraph
from kkmeans_cli.kernels.graph_fit import fit_graph


def two_moons_graph(n=300, seed=0):
    from sklearn.datasets import make_moons

    X, _ = make_moons(n, noise=0.05, random_state=seed)
    return kgraph.knn_graph(X, 10).affinity


@pytest.fixture
def graph():
    rng = np.random.default_rng(0)
    A = sparse.random(40, 40, density=0.2, random_state=1, format="csr") * 3.0
    A = (A + A.T).tocsr()
    A.setdiag(rng.uniform(0.5, 1.0, 40))
    return A.tocsr()


def same(A, B):
    assert B.format == "csr" and B.dtype == np.float64 and B.has_sorted_indices
    assert B.shape == A.shape
    assert (abs(A - B)).nnz == 0 or abs(A - B).max() == 0


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "bsr", "dia"])
def test_save_npz_round_trip(tmp_path, graph, fmt):
    path = tmp_path / "g.npz"
    sparse.save_npz(path, graph.asformat(fmt))
    A = read_graph(path)
    same(graph, A)
    np.testing.assert_array_equal(A.toarray(), graph.toarray())
    assert is_graph_file(path)


@pytest.mark.parametrize("symmetry", ["general", "symmetric"])
def test_mmwrite_round_trip(tmp_path, graph, symmetry):
    path = tmp_path / "g.mtx"
    scipy.io.mmwrite(path, graph, symmetry=symmetry, precision=17)
    A = read_graph(path)
    same(graph, A)
    np.testing.assert_array_equal(A.toarray(), graph.toarray())
    assert is_graph_file(path)


def test_gzipped_mtx_and_pattern_and_integer_files(tmp_path):
    path = tmp_path / "p.mtx.gz"
    with gzip.open(path, "wt") as f:
        f.write("%%MatrixMarket matrix coordinate pattern symmetric\n3 3 3\n2 1\n3 2\n3 3\n")
    np.testing.assert_array_equal(read_graph(path).toarray(),
                                  [[0, 1, 0], [1, 0, 1], [0, 1, 1]])
    path = tmp_path / "i.mtx"
    path.write_text("%%MatrixMarket matrix coordinate integer general\n2 2 3\n"
                    "1 1 2\n1 1 3\n2 2 4\n")
    A = read_graph(path)
    assert A.dtype == np.float64 and A.nnz == 2          # the duplicate (1, 1) is summed
    np.testing.assert_array_equal(A.toarray(), [[5, 0], [0, 4]])


@pytest.mark.parametrize("name, opener", [("G.MTX.GZ", gzip.open), ("g.Mtx.Gz", gzip.open),
                                          ("G.MTX.BZ2", bz2.open), ("g.mtx.bz2", bz2.open)])
def test_compressed_mtx_files_are_read_whatever_the_case_of_their_ending(tmp_path, graph,
                                                                         name, opener):
    """The ending is matched in any case (``graph_kind``), and so is the decompression:
    SciPy alone reads an upper-case ``.GZ`` as text ("not a Matrix Market file")."""
    plain = tmp_path / "g.mtx"
    scipy.io.mmwrite(plain, graph, precision=17)
    path = tmp_path / name
    with opener(path, "wb") as f:
        f.write(plain.read_bytes())
    assert is_graph_file(path)
    np.testing.assert_array_equal(read_graph(path).toarray(), graph.toarray())


def test_a_dense_real_mtx_array_is_read(tmp_path):
    dense = np.array([[1.0, 0.5], [0.5, 2.0]])
    path = tmp_path / "d.mtx"
    scipy.io.mmwrite(path, dense)
    np.testing.assert_array_equal(read_graph(path).toarray(), dense)


def test_unsorted_duplicate_entries_become_canonical(tmp_path):
    A = sparse.csr_matrix((np.array([1.0, 2.0, 4.0]), np.array([1, 0, 1]),
                           np.array([0, 3, 3])), shape=(2, 2))
    assert not A.has_canonical_format
    path = tmp_path / "u.npz"
    sparse.save_npz(path, A, compressed=False)
    B = read_graph(path)
    assert B.has_canonical_format
    np.testing.assert_array_equal(B.toarray(), [[2.0, 5.0], [0.0, 0.0]])


def test_model_and_data_archives_are_not_graphs(tmp_path):
    data = tmp_path / "data.npz"
    np.savez(data, X=np.ones((3, 2)))
    model = tmp_path / "model.npz"
    np.savez(model, meta=np.array('{"kind": "model"}'), labels=np.zeros(3, dtype=np.int32))
    for path in (data, model):
        assert not is_graph_file(path)
    with pytest.raises(DataError, match=r"data\.npz: is an \.npz archive without a sparse "
                                        r"matrix \(arrays X\)"):
        read_graph(data)
    with pytest.raises(DataError, match=r"model\.npz: .*\(a model file\)"):
        read_graph(model)
    assert not is_graph_file(tmp_path / "x.csv")
    assert not is_graph_file(tmp_path / "missing.npz")


def corrupt_files(tmp_path, graph):
    """(path, message) of each bad file."""
    out = []
    good = tmp_path / "good.npz"
    sparse.save_npz(good, graph)
    raw = good.read_bytes()
    cut = tmp_path / "truncated.npz"
    cut.write_bytes(raw[: len(raw) // 2])
    out.append((cut, r"truncated\.npz: a truncated or damaged \.npz archive"))
    text = tmp_path / "text.npz"
    text.write_text("1,2,3\n")
    out.append((text, r"text\.npz: not an \.npz archive \(it does not start as a zip"))
    fmt = tmp_path / "format.npz"
    np.savez(fmt, format=np.array("lil"), data=np.ones(2))
    out.append((fmt, r"format\.npz: its 'format' entry is 'lil', not a sparse format"))
    lacking = tmp_path / "lacking.npz"
    np.savez(lacking, format=np.array("csr"), data=np.ones(2), shape=np.array([2, 2]))
    out.append((lacking, r"lacking\.npz: a csr matrix without its array"))
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, format=np.array([{"a": 1}], dtype=object))
    out.append((pickled, r"pickled\.npz: cannot read \(.*allow_pickle"))
    mtx = tmp_path / "g.mtx"
    scipy.io.mmwrite(mtx, graph)
    lines = mtx.read_text().splitlines(keepends=True)
    short = tmp_path / "short.mtx"
    short.write_text("".join(lines[: len(lines) // 2]))
    out.append((short, r"short\.mtx: truncated Matrix Market coordinate file"))
    banner = tmp_path / "banner.mtx"
    banner.write_text("1 2 3\n4 5 6\n")
    out.append((banner, r"banner\.mtx: not a Matrix Market file"))
    cplx = tmp_path / "complex.mtx"
    scipy.io.mmwrite(cplx, np.array([[1.0, 2.0j], [2.0j, 1.0]]))
    out.append((cplx, r"complex\.mtx: holds complex numbers; an affinity is real"))
    skew = tmp_path / "skew.mtx"
    skew.write_text("%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n2 1 1.0\n")
    out.append((skew, r"skew\.mtx: is skew-symmetric; an affinity is symmetric"))
    huge = tmp_path / "huge.mtx"  # 800 GB of row pointers if it were made
    huge.write_text("%%MatrixMarket matrix coordinate real symmetric\n"
                    "100000000000 100000000000 1\n1 1 1.0\n")
    out.append((huge, r"huge\.mtx: declares 100,000,000,000 rows but holds 1 entry, so some "
                      r"row has no positive weight"))
    claims = tmp_path / "claims.mtx"  # 16 TB of coordinates if they were read
    claims.write_bytes(b"%%MatrixMarket matrix coordinate real general\n3 3 1000000000000\n"
                       b"1 1 1.0\n")
    out.append((claims, r"claims\.mtx: truncated Matrix Market coordinate file \(its header "
                        r"declares 1,000,000,000,000 entries; its 72 bytes hold at most 18\)"))
    dense = tmp_path / "dense.mtx"
    dense.write_bytes(b"%%MatrixMarket matrix array real general\n1000000 1000000\n1.0\n")
    out.append((dense, r"dense\.mtx: truncated Matrix Market array file \(its header declares "
                       r"1,000,000,000,000 entries; its 61 bytes hold at most 30\)"))
    big = tmp_path / "bigint.mtx"     # beyond int64: SciPy's OverflowError, not a ValueError
    big.write_text("%%MatrixMarket matrix coordinate integer symmetric\n3 3 3\n2 1 5\n3 3 1\n"
                   "3 1 99999999999999999999\n")
    out.append((big, r"bigint\.mtx: corrupt Matrix Market coordinate file \(Line 5: Integer "
                     r"out of range"))
    # a symmetric file lists each weight once: mmread mirrors and adds, doubling them unseen
    both = tmp_path / "both.mtx"
    both.write_text("%%MatrixMarket matrix coordinate real symmetric\n3 3 4\n2 1 1.0\n"
                    "1 2 1.0\n3 2 2.0\n3 1 0.5\n")
    out.append((both, r"both\.mtx: is symmetric and lists the weight of \(2, 1\) more than "
                      r"once \(both triangles, or an entry again\), which reading would add up"))
    again = tmp_path / "again.mtx"
    again.write_text("%%MatrixMarket matrix coordinate pattern symmetric\n3 3 3\n3 2\n2 1\n"
                     "3 2\n")
    out.append((again, r"again\.mtx: is symmetric and lists the weight of \(3, 2\) more than "
                       r"once"))
    out.append((tmp_path / "absent.mtx", r"absent\.mtx: no such file"))
    folder = tmp_path / "folder.npz"
    folder.mkdir()
    out.append((folder, r"folder\.npz: is a folder, not a graph file"))
    out.append((tmp_path / "x.csv", r"x\.csv: not a graph file"))
    return out


def test_each_bad_file_gives_its_one_line_message(tmp_path, graph):
    for path, message in corrupt_files(tmp_path, graph):
        with pytest.raises(DataError, match=message) as err:
            read_graph(path)
        assert "\n" not in str(err.value), path
        assert str(path) in str(err.value)


@pytest.mark.parametrize("pattern", ["g*.npz", "g*.mtx", "g*"])
@pytest.mark.parametrize("command", ["fit", "sweep"])
def test_a_pattern_of_graph_files_is_a_usage_error(tmp_path, graph, pattern, command):
    """A glob's files are parts of one table: a pattern of graphs told the user to add the
    --kernel precomputed they had given, or found no .mtx file at all."""
    sparse.save_npz(tmp_path / "g1.npz", graph)
    scipy.io.mmwrite(tmp_path / "g2.mtx", graph)
    before = sorted(os.listdir(tmp_path))
    args = [command, tmp_path / pattern, "--kernel", "precomputed"] + (
        ["-k", "2", "-o", tmp_path / "m.npz"] if command == "fit" else ["--k", "2..3"])
    result = run(args)
    first = "g2.mtx" if pattern == "g*.mtx" else "g1.npz"
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (f"kkmeans: error: {tmp_path / pattern}: the files of a pattern "
                             f"are read as parts of one table; a sparse graph is one file: "
                             f"give it by name ({tmp_path / first})\n")
    assert sorted(os.listdir(tmp_path)) == before


def test_a_header_beyond_memory_in_a_compressed_file_names_the_file(tmp_path, monkeypatch):
    """A compressed file's size does not bound its entries: where reading the declared arrays
    runs out of memory, the one line names the file and what its header declares."""
    path = tmp_path / "claims.mtx.gz"
    with gzip.open(path, "wt") as f:
        f.write("%%MatrixMarket matrix coordinate real general\n3 3 1000000000000\n1 1 1.0\n")

    def out_of_memory(_path):
        raise MemoryError

    monkeypatch.setattr(scipy.io, "mmread", out_of_memory)
    with pytest.raises(DataError, match=r"claims\.mtx\.gz: its header declares 3 × 3 with "
                                        r"1,000,000,000,000 entries, more than memory holds"):
        read_graph(path)


def test_a_header_beyond_the_file_is_one_line_and_writes_nothing(tmp_path):
    """In process and as a subprocess: exit 1, the line naming the file, nothing written."""
    path = tmp_path / "claims.mtx"
    path.write_bytes(b"%%MatrixMarket matrix coordinate real general\n3 3 1000000000000\n"
                     b"1 1 1.0\n")
    line = (f"kkmeans: error: {path}: truncated Matrix Market coordinate file (its header "
            f"declares 1,000,000,000,000 entries; its 72 bytes hold at most 18)\n")
    command = ["fit", path, "-k", "2", "--kernel", "precomputed", "-o", tmp_path / "m.npz",
               "--labels", tmp_path / "l.txt"]
    result = run(command)
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", line)
    process = run_process(command, cwd=tmp_path)
    assert (process.returncode, process.stdout, process.stderr) == (1, "", line)
    assert sorted(os.listdir(tmp_path)) == ["claims.mtx"]


def test_a_corrupt_member_of_a_graph_archive(tmp_path, graph):
    path = tmp_path / "member.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("format.npy", b"\x93NUMPY garbage")
    with pytest.raises(DataError, match=r"member\.npz: cannot read") as err:
        read_graph(path)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("bad, message", [
    (sparse.csr_matrix((0, 0)), r"affinity is empty \(0×0\)"),
    (np.array([1.0, 2.0]), "must be a 2-D matrix, got 1 dimensions"),
    (np.array([["a", "b"], ["b", "a"]]), "must hold real numbers"),
    (sparse.csr_matrix(np.array([[1.0, 1j], [1j, 1.0]])), "must hold real numbers"),
    (np.array([[1.0, np.inf], [np.inf, 1.0]]), "row 0, column 1: inf is not a finite"),
])
def test_the_affinity_checks_of_what_a_file_can_hold(bad, message):
    with pytest.raises(DataError, match=message) as err:
        kgraph.check_affinity(bad)
    assert "\n" not in str(err.value)


def test_more_clusters_than_points_of_a_given_affinity(graph):
    with pytest.raises(DataError, match="affinity has 40 points, fewer than the 41 clusters"):
        fit_graph(affinity=graph, n_clusters=41)


@pytest.mark.parametrize("bad, message", [
    (np.array([[1.0, -2.0], [-2.0, 1.0]]), "row 0, column 1: negative weight -2"),
    (np.array([[1.0, 2.0], [0.5, 1.0]]), "not symmetric: row 0, column 1 holds 2"),
    (np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]),
     "row 2 has no positive weight"),
    (np.ones((2, 3)), "must be square, got 2×3"),
])
def test_a_bad_graph_read_from_a_file_is_refused_by_the_fit(tmp_path, bad, message):
    path = tmp_path / "bad.mtx"
    scipy.io.mmwrite(path, sparse.coo_matrix(bad))
    with pytest.raises(DataError, match=message):
        fit_graph(affinity=read_graph(path), n_clusters=2)


def test_weights_near_the_float_limits_fit_as_the_graph_at_scale_one(tmp_path):
    """Weights whose row sums (or their total) overflow, and a subnormal weight, are read
    divided by the largest weight: the fit, its model and the model's description are those of
    the same graph at scale 1, finite, with no NumPy warning."""
    path = tmp_path / "big.mtx"
    head = "%%MatrixMarket matrix coordinate real symmetric\n"
    for body, k in (("3 3 4\n1 1 {w}\n2 1 {w}\n3 2 {w}\n3 3 {w}\n", "2"),
                    ("4 4 2\n2 1 {w}\n4 3 {w}\n", "2"), ("2 2 1\n2 1 {w}\n", "1")):
        outputs = []
        for weight in ("1", "1e308", "5e-324"):
            path.write_text(head + body.format(w=weight))
            result = run_process(["fit", path, "--kernel", "precomputed", "-k", k, "-o",
                                  tmp_path / "m.npz"], cwd=tmp_path)
            assert result.returncode == 0, result.stderr
            assert "warning" not in result.stderr and "nan" not in result.stderr
            report = [line for line in result.stderr.splitlines()
                      if line.startswith(("inertia", "graph", "objective"))]
            outputs.append((result.stdout, report))
            info = run_process(["info", tmp_path / "m.npz", "--json"], cwd=tmp_path)
            assert info.returncode == 0, info.stderr
        assert outputs[0] == outputs[1] == outputs[2], body
    labels = outputs[0][0].split()
    assert labels[0] == labels[1]


@pytest.mark.parametrize("name, written", [("g.npz", "scipy.sparse.save_npz"),
                                           ("g.mtx", "Matrix Market")])
def test_a_graph_without_kernel_precomputed_says_how_to_cluster_it(tmp_path, graph, name,
                                                                   written):
    path = tmp_path / name
    if name.endswith(".npz"):
        sparse.save_npz(path, graph)
    else:
        scipy.io.mmwrite(path, graph)
    for command in (["fit", path, "-k", "2", "--labels", tmp_path / "l.txt"],
                    ["fit", path, "-k", "2", "--kernel", "rbf", "-o", tmp_path / "m.npz"],
                    ["sweep", path, "--k", "2..3", "--table", tmp_path / "t.csv"]):
        result = run_process(command, cwd=tmp_path)
        assert result.returncode == 1
        assert result.stderr == (f"kkmeans: error: {path} is a sparse graph ({written}): fit "
                                 f"and sweep cluster it with --kernel precomputed\n"), command
        assert sorted(os.listdir(tmp_path)) == [name]


def test_kernel_settings_with_a_precomputed_kernel_are_warned_about(tmp_path, graph):
    """--gamma (and, for a matrix, --degree and --coef0) set kernels computed from the data:
    with --kernel precomputed they are warned about and change nothing; a graph refuses
    --degree (one line, no warning before it)."""
    sparse.save_npz(tmp_path / "g.npz", graph)
    np.save(tmp_path / "K.npy", graph.toarray())
    for name, extra, flags, what in (
            ("K.npy", ["--gamma", "2", "--degree", "4"], ["--gamma", "--degree"],
             "the kernel matrix"),
            ("g.npz", ["--gamma", "2"], ["--gamma"], "the graph")):
        plain = run_process(["fit", tmp_path / name, "--kernel", "precomputed", "-k", "2",
                             "--no-model"], cwd=tmp_path)
        result = run_process(["fit", tmp_path / name, "--kernel", "precomputed", "-k", "2",
                              "--no-model", *extra], cwd=tmp_path)
        assert result.returncode == 0 and result.stdout == plain.stdout
        warned = [line for line in result.stderr.splitlines() if "is a setting" in line]
        assert warned == [f"kkmeans: warning: {flag} is a setting of the kernels computed "
                          f"from the data; with --kernel precomputed DATA is {what}; ignored"
                          for flag in flags]
    result = run_process(["fit", tmp_path / "g.npz", "--kernel", "precomputed", "-k", "2",
                          "--degree", "2", "--no-model"], cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("kkmeans: error: --degree 2 is a setting of the dense "
                                    "kernels") and len(result.stderr.splitlines()) == 1


def test_starts_and_tolerance_settings_with_a_graph_file_are_warned_about(tmp_path):
    """A graph as DATA is fitted by the graph route, whose starts are a fixed set and whose
    passes run until no point moves: --n-init (without --init spectral) and --tol are warned
    about, through the command line and a config alike, and change nothing (the labels of
    the plain fit, the same ``.npz`` or ``.mtx``); --n-init with --init spectral counts its
    starts and is not warned about."""
    A = two_moons_graph(200, seed=3)
    sparse.save_npz(tmp_path / "g.npz", A)
    scipy.io.mmwrite(tmp_path / "g.mtx", A)
    (tmp_path / "run.yaml").write_text("n_init: 7\n")
    for name in ("g.npz", "g.mtx"):
        base = ["fit", tmp_path / name, "--kernel", "precomputed", "-k", "2", "--no-model"]
        plain = run(base)
        assert plain.exit_code == 0, plain.stderr
        for extra, notes in (
                (["--n-init", "9", "--tol", "0.5"],
                 ["--n-init counts the starts of --init spectral; a sparse graph as DATA "
                  "starts from a fixed set of its own; ignored",
                  "--tol applies to the dense kernels; a sparse graph as DATA iterates until "
                  "no point moves; ignored"]),
                (["--config", tmp_path / "run.yaml"],
                 ["--n-init counts the starts of --init spectral; a sparse graph as DATA "
                  "starts from a fixed set of its own; ignored (--n-init is key 'n_init' of "
                  f"config {tmp_path / 'run.yaml'})"])):
            result = run(base + extra)
            assert result.exit_code == 0, result.stderr
            assert result.stdout == plain.stdout
            warned = [line for line in result.stderr.splitlines() if "warning" in line]
            assert warned == [f"kkmeans: warning: {note}" for note in notes]
        spectral = run(base + ["--init", "spectral", "--n-init", "3"])
        assert spectral.exit_code == 0, spectral.stderr
        assert "warning" not in spectral.stderr


def test_a_graph_of_more_components_than_clusters_is_fitted_with_a_warning(tmp_path):
    """Four blobs' graph as DATA, k = 2: any grouping of the components cuts nothing; the
    fit groups them by volume and says so once (the runner and a real process alike), the
    labels are written, the exit code is 0. With k = 4 (the components) nothing is said."""
    rng = np.random.default_rng(3)
    X = np.vstack([rng.normal(size=(50, 2)) + 40.0 * c for c in range(4)])
    sparse.save_npz(tmp_path / "g.npz", kgraph.knn_graph(X, 8).affinity)
    expected = ("kkmeans: warning: the graph has 4 connected components, more than the "
                "clusters asked for: any grouping of them cuts nothing, and they are grouped "
                "by volume (a given graph has no points to join them by)")
    for how in ("runner", "process"):
        args = ["fit", tmp_path / "g.npz", "--kernel", "precomputed", "-k", "2", "--no-model",
                "--labels", tmp_path / f"{how}.txt"]
        result = run(args) if how == "runner" else run_process(args, cwd=tmp_path)
        code = result.exit_code if how == "runner" else result.returncode
        assert code == 0
        assert [line for line in result.stderr.splitlines() if "warning" in line] == [expected]
        labels = np.loadtxt(tmp_path / f"{how}.txt", dtype=int)
        assert labels.shape == (200,) and np.unique(labels).size == 2
        for c in range(4):
            assert np.unique(labels[50 * c:50 * (c + 1)]).size == 1
    result = run(["fit", tmp_path / "g.npz", "--kernel", "precomputed", "-k", "4", "--no-model",
                  "--labels", tmp_path / "four.txt"])
    assert result.exit_code == 0 and "warning" not in result.stderr


def test_npz_and_mtx_of_one_graph_give_the_same_labels(tmp_path):
    A = two_moons_graph()
    npz, mtx = tmp_path / "moons.npz", tmp_path / "moons.mtx"
    sparse.save_npz(npz, A)
    scipy.io.mmwrite(mtx, A, symmetry="symmetric", precision=17)
    from_npz = fit_graph(affinity=read_graph(npz), n_clusters=2, random_state=0)
    from_mtx = fit_graph(affinity=read_graph(mtx), n_clusters=2, random_state=0)
    direct = fit_graph(affinity=A, n_clusters=2, random_state=0)
    np.testing.assert_array_equal(from_npz.labels, from_mtx.labels)
    np.testing.assert_array_equal(from_npz.labels, direct.labels)
    assert from_npz.ncut == from_mtx.ncut


# -- sparse files whose arrays do not fit their shape -----------------------------------------
def small_graph():
    """A connected 30×30 symmetric CSR affinity with self-loops."""
    M = sparse.random(30, 30, density=0.2, random_state=1, format="csr")
    return (M + M.T + sparse.eye(30)).tocsr()


def bad_npz_files(folder):
    """(name, message) of .npz files whose arrays reach outside the matrix, each written as
    save_npz writes its format but with one array broken."""
    A = small_graph()
    out = []

    def write(name, message, **arrays):
        np.savez(folder / name, **arrays)
        out.append((name, message))

    shape = np.array([30, 30])
    indices = A.indices.copy()
    indices[0] = 999
    write("csr_index.npz", "not a valid csr sparse matrix (its 'indices' entry holds 999 at "
          "position 0, outside 0..29 for the 30×30 shape)", format=np.array(b"csr"),
          shape=shape, data=A.data, indices=indices, indptr=A.indptr)
    write("negative.npz", "not a valid csr sparse matrix (its 'indices' entry holds -1 at "
          "position 1, outside 0..1 for the 2×2 shape)", format=np.array("csr"),
          shape=np.array([2, 2]), data=np.ones(2), indices=np.array([0, -1]),
          indptr=np.array([0, 1, 2]))
    C = A.tocsc()
    indices = C.indices.copy()
    indices[3] = 30
    write("csc_row.npz", "not a valid csc sparse matrix (its 'indices' entry holds 30 at "
          "position 3, outside 0..29", format=np.array("csc"), shape=shape, data=C.data,
          indices=indices, indptr=C.indptr)
    O = A.tocoo()
    row = O.row.copy()
    row[5] = -3
    write("coo_row.npz", "not a valid coo sparse matrix (its 'row' entry holds -3 at "
          "position 5, outside 0..29", format=np.array("coo"), shape=shape, data=O.data,
          row=row, col=O.col)
    write("coo_coords.npz", "not a valid coo sparse matrix (its 'col' entry holds 30 at",
          format=np.array("coo"), shape=shape, data=O.data,
          coords=np.vstack([O.row, O.col + 1]))
    B = A.tobsr(blocksize=(3, 3))
    indices = B.indices.copy()
    indices[0] = 10
    write("bsr_block.npz", "not a valid bsr sparse matrix (its 'indices' entry holds 10 at "
          "position 0, outside 0..9", format=np.array("bsr"), shape=shape, data=B.data,
          indices=indices, indptr=B.indptr)
    D = A.todia()
    write("dia_offset.npz", "not a valid dia sparse matrix (its 'offsets' entry holds",
          format=np.array("dia"), shape=shape, data=D.data, offsets=D.offsets + 100)
    indptr = A.indptr.copy()
    indptr[5], indptr[6] = indptr[6], indptr[5]
    write("indptr_order.npz", f"not a valid csr sparse matrix (its 'indptr' entry holds "
          f"{indptr[6]} at position 6; it must rise from 0 to the {A.nnz} indices)",
          format=np.array("csr"), shape=shape, data=A.data, indices=A.indices, indptr=indptr)
    write("indptr_length.npz", "not a valid csr sparse matrix (its 'indptr' entry has 30 "
          "values; the 30×30 shape needs 31)", format=np.array("csr"), shape=shape,
          data=A.data, indices=A.indices, indptr=A.indptr[:-1])
    write("data_length.npz", f"not a valid csr sparse matrix (its 'data' entry has "
          f"{A.nnz - 1} values but 'indices' has {A.nnz})", format=np.array("csr"),
          shape=shape, data=A.data[:-1], indices=A.indices, indptr=A.indptr)
    write("huge_shape.npz", "declares 100,000,000,000 rows but holds 1 entry",
          format=np.array("coo"), shape=np.array([10 ** 11, 10 ** 11]), data=np.ones(1),
          row=np.zeros(1, dtype=np.int64), col=np.zeros(1, dtype=np.int64))
    return out


def test_npz_arrays_outside_the_shape_are_one_line_in_the_reader(tmp_path):
    for name, message in bad_npz_files(tmp_path):
        with pytest.raises(DataError) as err:
            read_graph(tmp_path / name)
        assert str(err.value).startswith(f"{tmp_path / name}: {message}"), str(err.value)
        assert "\n" not in str(err.value)


def test_npz_arrays_outside_the_shape_are_a_data_error_of_fit_and_sweep(tmp_path):
    """In-process (CliRunner): each broken file is one error line, exit 1, nothing written."""
    from helpers import run

    for name, message in bad_npz_files(tmp_path):
        before = sorted(os.listdir(tmp_path))
        for command in (["fit", tmp_path / name, "-k", "2", "--kernel", "precomputed", "-o",
                         tmp_path / "m.npz", "--labels", tmp_path / "l.txt"],
                        ["sweep", tmp_path / name, "--k", "2", "--kernel", "precomputed",
                         "-o", tmp_path / "s.npz", "--table", tmp_path / "t.csv"]):
            result = run(command)
            assert result.exit_code == 1, (name, result.stderr)
            assert result.stdout == ""
            assert result.stderr.startswith(f"kkmeans: error: {tmp_path / name}: {message}")
            assert result.stderr.count("\n") == 1, result.stderr
            assert sorted(os.listdir(tmp_path)) == before


def test_npz_index_outside_the_shape_does_not_crash_a_process(tmp_path):
    """As a subprocess (a crash in SciPy's compiled code shows only there): exit 1, the one
    line, no labels or model written."""
    bad = dict(bad_npz_files(tmp_path))
    for name in ("csr_index.npz", "negative.npz", "coo_row.npz", "bsr_block.npz"):
        for command in (["fit", name, "-k", "2", "--kernel", "precomputed", "-o", "m.npz",
                         "--labels", "l.txt"],
                        ["sweep", name, "--k", "2", "--kernel", "precomputed", "-o",
                         "s.npz"]):
            result = run_process(command, cwd=tmp_path)
            assert result.returncode == 1, (name, result.returncode, result.stderr)
            assert result.stdout == ""
            assert result.stderr.startswith(f"kkmeans: error: {name}: {bad[name]}")
            assert result.stderr.count("\n") == 1, result.stderr
            assert not {"m.npz", "l.txt", "s.npz"} & set(os.listdir(tmp_path))


# -- the scale of a given affinity -------------------------------------------------------------
def three_cluster_graph():
    """A 90-node affinity of three clusters (dense inside, sparse between), self-loops 1."""
    rng = np.random.default_rng(3)
    y = np.repeat(np.arange(3), 30)
    M = (rng.random((90, 90)) < np.where(y[:, None] == y[None, :], 0.3, 0.02)) \
        * rng.uniform(0.5, 2.0, (90, 90))
    M = np.triu(M, 1)
    return sparse.csr_matrix(M + M.T + np.eye(90))


@pytest.mark.parametrize("scale", [1e200, 1.0, 1e-300])
def test_a_given_affinity_fits_the_same_at_any_scale(scale):
    """The normalized cut does not depend on the weights' scale: the labels, the cut and the
    objective of the graph times 1e200 or 1e-300 are those of the graph itself, and so are a
    sweep's silhouettes, with no NumPy warning (the suite turns warnings into errors)."""
    from kkmeans_cli.measures.graph_sweep import sweep_graph

    A = three_cluster_graph()
    ref = fit_graph(affinity=A, n_clusters=3, random_state=0)
    got = fit_graph(affinity=A * scale, n_clusters=3, random_state=0)
    np.testing.assert_array_equal(got.labels, ref.labels)
    assert got.ncut == pytest.approx(ref.ncut, rel=1e-12)
    assert got.objective == pytest.approx(ref.objective, rel=1e-12)
    want = sweep_graph(affinity=A, ks=(2, 3), random_state=0)
    swept = sweep_graph(affinity=A * scale, ks=(2, 3), random_state=0)
    for one, two in zip(want, swept):
        np.testing.assert_array_equal(one.labels, two.labels)
        assert two.ncut == pytest.approx(one.ncut, rel=1e-12)
        assert two.silhouette == pytest.approx(one.silhouette, rel=1e-9)
        assert two.silhouette != 0.0


def test_a_scaled_graph_file_gives_the_same_labels_and_cut(tmp_path):
    A = three_cluster_graph()
    outputs = []
    for scale in (1.0, 1e200, 1e-300):
        sparse.save_npz(tmp_path / "g.npz", A * scale)
        result = run_process(["fit", "g.npz", "-k", "3", "--kernel", "precomputed",
                              "--seed", "0", "--no-model"], cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert "warning" not in result.stderr
        cut = [line for line in result.stderr.splitlines() if line.startswith("objective")]
        outputs.append((result.stdout, cut))
    assert outputs[0] == outputs[1] == outputs[2]


def test_weights_whose_squared_degrees_leave_float_range_are_one_line(tmp_path):
    """A row whose only weight is 1e-170 beside weights of 1: its squared degree (which the
    kernel's diagonal divides by) is below the float range at any scale: one line, exit 1."""
    A = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1e-170]])
    with pytest.raises(DataError, match=r"affinity row 2: its weights sum to 1e-170, 1e-170 "
                                        r"times the largest weight \(1\); the graph kernel "
                                        r"squares the degrees"):
        fit_graph(affinity=sparse.csr_matrix(A), n_clusters=2)
    with pytest.raises(DataError, match=r"row 2: its weights sum to 1e-70, 1e-170 times the "
                                        r"largest weight \(1e\+100\)"):
        kgraph.check_affinity(A * 1e100)
    path = tmp_path / "spread.mtx"
    scipy.io.mmwrite(path, sparse.coo_matrix(A), symmetry="symmetric")
    result = run_process(["fit", path, "-k", "2", "--kernel", "precomputed", "-o",
                          tmp_path / "m.npz"], cwd=tmp_path)
    assert result.returncode == 1
    # (a Matrix Market file counts its rows from 1: the third row is row 3 there)
    assert result.stderr == (f"kkmeans: error: {path} row 3: its weights sum to 1e-170, "
                             f"1e-170 times the largest weight (1); the graph kernel squares "
                             f"the degrees, and below about 1.5e-154 times the largest weight "
                             f"the square leaves float range; give the row larger weights\n")
    assert sorted(os.listdir(tmp_path)) == ["spread.mtx"]
    # just inside the range: the fit runs
    A[2, 2] = 1e-150
    assert kgraph.check_affinity(A)[2, 2] == 1e-150


def test_a_weight_below_float_range_beside_the_largest_is_one_line():
    A = np.array([[1e300, 1e-30], [1e-30, 1e300]])
    with pytest.raises(DataError, match=r"affinity row 0, column 1: weight 1e-30 is too small "
                                        r"beside the largest weight \(1e\+300\)"):
        kgraph.check_affinity(A)


@pytest.mark.parametrize("suffix, first", [(".npz", 0), (".mtx", 1)])
def test_bad_graph_files_name_rows_as_their_format_counts_them(tmp_path, suffix, first):
    """An .npz names rows and columns from 0 (as scipy does), a Matrix Market file from 1
    (as its entries do); a near-symmetric pair is shown with the digits that tell it apart."""
    A = np.array([[1.0, 0.1, 0.0], [0.1, 1.0, -2.0], [0.0, -2.0, 1.0]])
    B = np.array([[1.0, 0.1, 0.0], [0.1000001, 1.0, 0.0], [0.0, 0.0, 1.0]])
    for M, message in [
            (A, f"row {1 + first}, column {2 + first}: negative weight -2"),
            (B, f"is not symmetric: row {0 + first}, column {1 + first} holds 0.1 but row "
                f"{1 + first}, column {0 + first} holds 0.1000001")]:
        path = tmp_path / f"g{suffix}"
        if suffix == ".npz":
            sparse.save_npz(path, sparse.csr_matrix(M))
        else:
            scipy.io.mmwrite(path, sparse.coo_matrix(M))
        result = run(["fit", path, "-k", "2", "--kernel", "precomputed", "-o",
                      tmp_path / "m.npz"])
        assert result.exit_code == 1 and result.stdout == ""
        assert result.stderr == f"kkmeans: error: {path} {message}\n"
        assert not (tmp_path / "m.npz").exists()
        path.unlink()


@pytest.mark.parametrize("suffix", [".npz", ".mtx"])
def test_a_graph_that_is_not_square_or_has_an_empty_row_is_named_so(tmp_path, suffix):
    """A 3×4 graph of 2 entries was said to hold too few entries for its rows (a square
    one of 3 entries was said not square), and a 4×4 graph whose row 3 is empty, with fewer
    entries than rows, was said to leave "some row" empty: the shape is checked first, and
    a file of up to 10⁶ rows is read so that the row is named (one line, exit 1, nothing
    written; from 0 in an .npz, from 1 in a Matrix Market file, as their indices count); a
    file declaring more rows than that and fewer entries is refused from its header, as
    before."""
    rect = sparse.csr_matrix(np.array([[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]], float))
    empty = np.zeros((4, 4))
    empty[0, 1] = empty[1, 0] = empty[2, 2] = 1.0
    for name, matrix, line in (
            ("rect", rect, "{} must be square, got 3×4"),
            ("row3", sparse.csr_matrix(empty),   # a Matrix Market file counts from 1
             "{} row " + ("3" if suffix == ".npz" else "4") + " has no positive weight (a point of degree 0 belongs to no cut); "
             "give it an edge or a self-loop")):
        path = tmp_path / (name + suffix)
        if suffix == ".npz":
            sparse.save_npz(path, matrix)
        else:
            scipy.io.mmwrite(path, matrix)
        for command in (["fit", path, "-k", "2", "--kernel", "precomputed", "-o",
                         tmp_path / "m.npz"],
                        ["sweep", path, "--k", "2", "--kernel", "precomputed", "--table",
                         tmp_path / "t.csv"]):
            result = run_process(command, cwd=tmp_path)
            assert result.returncode == 1, result.stderr
            assert result.stderr == f"kkmeans: error: {line.format(path)}\n"
            assert result.stdout == ""
        assert sorted(os.listdir(tmp_path)) == sorted(
            p for p in os.listdir(tmp_path) if p.startswith(("rect", "row3")))
