"""Parquet and Feather DATA (``io/arrow.py``) and globs of parts read in one process: the labels
of the same data from ``.npy``; the errors name the column or the part; nothing is written on
an error."""
import os
import sys

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from helpers import FAST, blobs, labels_of, run, run_process, run_shell, write_csv
from kkmeans_cli.errors import UsageError
from kkmeans_cli.io.readers import read_data

ARGS = ["-k", "3", "--no-model", "-q", *FAST]


@pytest.fixture
def tables(tmp_path):
    X, _ = blobs(n=300, d=3, k=3)
    np.save(tmp_path / "X.npy", X)
    table = pa.table({"x0": X[:, 0], "x1": X[:, 1], "x2": X[:, 2],
                      "name": [f"p{i}" for i in range(len(X))]})
    pq.write_table(table, tmp_path / "X.parquet", row_group_size=70)
    feather.write_feather(table, tmp_path / "X.feather", chunksize=50)
    with pa.ipc.new_stream(tmp_path / "X.arrows", table.schema) as writer:
        writer.write_table(table, max_chunksize=64)
    return X, tmp_path


def files(folder):
    return sorted(os.listdir(folder))


@pytest.mark.parametrize("name", ["X.parquet", "X.feather", "X.arrows"])
def test_table_gives_the_labels_of_the_npy(tables, name):
    X, work = tables
    expected = run(["fit", "--kernel", "rbf", work / "X.npy", *ARGS])
    assert expected.exit_code == 0, expected.stderr
    result = run(["fit", "--kernel", "rbf", work / name, "--columns", "x0,x1,x2", *ARGS])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected.stdout
    data = read_data(str(work / name), columns="0,1,2")
    assert data.X.tobytes() == X.tobytes() and data.columns == ["x0", "x1", "x2"]


def test_format_by_content_and_by_extension(tables):
    X, work = tables
    os.rename(work / "X.parquet", work / "table.dat")  # no extension of its own: magic bytes
    assert read_data(str(work / "table.dat"), columns="x2,x0").X.tolist() == X[:, [2, 0]].tolist()
    (work / "fake.parquet").write_bytes(b"not parquet at all")
    result = run(["fit", "--kernel", "rbf", work / "fake.parquet", *ARGS])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"kkmeans: error: {work / 'fake.parquet'}: not a readable "
                                    f"Parquet file (")
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize("name", ["X.parquet", "X.feather"])
def test_a_name_twice_is_read_by_position(tmp_path, name):
    """A table whose columns repeat a name ('x', 'x', 'y') is read by position: --columns by
    index picks either 'x' and no --columns all three (Parquet picks columns by name, and the
    name gave both); by name 'x' is refused, as in a CSV header: only an index says which."""
    X, _ = blobs(n=120, d=3, k=3)
    table = pa.Table.from_arrays([pa.array(X[:, c]) for c in range(3)], names=["x", "x", "y"])
    if name.endswith(".parquet"):
        pq.write_table(table, tmp_path / name, row_group_size=50)
    else:
        feather.write_feather(table, tmp_path / name, chunksize=50)
    path = str(tmp_path / name)
    for columns, picked in (("1,2", [1, 2]), ("2,0", [2, 0]), (None, [0, 1, 2])):
        data = read_data(path, columns=columns)
        assert data.X.tobytes() == np.ascontiguousarray(X[:, picked]).tobytes(), columns
    with pytest.raises(UsageError, match=r"has 2 columns named 'x' \(0-based indexes 0, 1\); "
                                         r"pick one by its index"):
        read_data(path, columns="x,y")
    result = run(["fit", "--kernel", "rbf", tmp_path / name, "--columns", "1,2", *ARGS])
    np.save(tmp_path / "X.npy", X[:, 1:])
    expected = run(["fit", "--kernel", "rbf", tmp_path / "X.npy", *ARGS])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected.stdout


def test_non_numeric_column_is_named(tables):
    _, work = tables
    (work / "labels.txt").write_text("OLD\n")
    before = files(work)
    for name in ["X.parquet", "X.feather"]:
        result = run(["fit", "--kernel", "rbf", work / name, "-k", "3", "--labels", work / "labels.txt",
                      "-o", work / "m.npz"])
        assert result.exit_code == 1
        assert result.stderr == (f"kkmeans: error: {work / name}: column 4 ('name') holds "
                                 f"string values, not numbers; pick the numeric columns with "
                                 f"--columns\n")
        assert result.stdout == "" and files(work) == before
    assert (work / "labels.txt").read_text() == "OLD\n"
    result = run(["fit", "--kernel", "rbf", work / "X.parquet", "--columns", "x0,nope", *ARGS])
    assert result.exit_code == 2
    assert "has no column 'nope'; its columns are x0, x1, x2, name" in result.stderr


@pytest.mark.parametrize("name", ["X.parquet", "X.feather", "X.arrows"])
def test_tables_of_many_batches_and_types_are_read_bit_for_bit(tmp_path, monkeypatch, name):
    """Batches and the row tiles they are copied in by do not line up; every numeric type
    is cast to float64 as NumPy casts it, column by column, in order."""
    from kkmeans_cli.io import arrow

    monkeypatch.setattr(arrow, "_BATCH_ROWS", 1000)
    monkeypatch.setattr(arrow, "_TILE_ROWS", 300)
    rng = np.random.default_rng(7)
    n = 10_001
    columns = {"f64": rng.standard_normal(n), "f32": rng.standard_normal(n).astype(np.float32),
               "i32": rng.integers(-1000, 1000, n, dtype=np.int32),
               "u8": rng.integers(0, 255, n, dtype=np.uint8), "b": rng.random(n) < 0.5}
    table = pa.table(columns)
    path = tmp_path / name
    if name == "X.parquet":
        pq.write_table(table, path, row_group_size=2345)
    elif name == "X.feather":
        feather.write_feather(table, path, chunksize=777)
    else:
        with pa.ipc.new_stream(path, table.schema) as writer:
            writer.write_table(table, max_chunksize=4321)
    want = np.column_stack([np.asarray(v, dtype=np.float64) for v in columns.values()])
    got = read_data(str(path)).X
    assert got.flags.c_contiguous and got.tobytes() == want.tobytes()
    got = read_data(str(path), columns="u8,f64").X
    assert got.tobytes() == want[:, [3, 0]].copy().tobytes()


def test_text_options_on_a_table_are_warned_about(tables):
    _, folder = tables
    want = run(["fit", "--kernel", "rbf", folder / "X.npy", *ARGS])
    for extra, flags in ((["--delimiter", ";"], "--delimiter applies"),
                         (["--no-header", "--delimiter", ";"],
                          "--no-header and --delimiter apply")):
        for name, columns, kind in (("X.parquet", ["--columns", "0,1,2"], "Parquet"),
                                    ("X.npy", [], ".npy")):
            result = run(["fit", "--kernel", "rbf", folder / name, *columns, *extra, *ARGS])
            assert result.exit_code == 0, result.stderr
            assert result.stdout == want.stdout
            loud = run(["fit", "--kernel", "rbf", folder / name, *columns, *extra, "-k", "3",
                        "--no-model", *FAST])
            assert loud.exit_code == 0, loud.stderr
            assert loud.stderr.startswith(f"kkmeans: warning: {flags} to text DATA; "
                                          f"{folder / name} is not text ({kind}); ignored\n")
            # with standard error closed the fit still succeeds (a warning is no output)
            closed = run_shell(" ".join(["kkmeans", "fit", "--kernel", "rbf", str(folder / name),
                                         *columns, *[f"'{a}'" for a in extra], "-k", "3",
                                         "--no-model", *FAST, "2>&-"]), folder)
            assert closed.returncode == 0 and closed.stdout == want.stdout
    X, _ = blobs(n=20, d=2, k=2)
    write_csv(folder / "t.csv", X)
    result = run(["fit", "--kernel", "rbf", folder / "t.csv", "-k", "2", "--no-model", *FAST,
                  "--delimiter", ","])
    assert result.exit_code == 0 and "warning" not in result.stderr
    # from a config: its key and file named; predict (which may read DATA twice) says it once
    (folder / "run.yaml").write_text('delimiter: ";"\n')
    fit = run(["fit", "--kernel", "rbf", folder / "X.parquet", "--columns", "x2,x1,x0", "-k", "3",
               *FAST, "-o", folder / "m.npz", "--config", folder / "run.yaml"])
    assert fit.exit_code == 0, fit.stderr
    assert (f"kkmeans: warning: --delimiter applies to text DATA; {folder / 'X.parquet'} is not "
            f"text (Parquet); ignored (--delimiter is key 'delimiter' of config "
            f"{folder / 'run.yaml'})") in fit.stderr
    predicted = run(["predict", folder / "m.npz", folder / "X.parquet", "--delimiter", ";"])
    assert predicted.exit_code == 0, predicted.stderr
    assert "taken by name" in predicted.stderr and predicted.stdout == fit.stdout
    assert predicted.stderr.count("--delimiter applies to text DATA") == 1


def test_the_first_bad_cell_of_a_table_is_reported(tmp_path):
    """In row order, as in a text file: a NaN before an inf is the NaN."""
    table = pa.table({"a": pa.array([1.0, float("nan"), 3.0, 4.0]),
                      "b": pa.array([1.0, 2.0, float("inf"), 4.0])})
    pq.write_table(table, tmp_path / "t.parquet")
    with pytest.raises(ValueError, match=r"t\.parquet: row 2, column 1 \('a'\): missing value"):
        read_data(str(tmp_path / "t.parquet"))
    with pytest.raises(ValueError, match=r"t\.parquet: row 3, column 2 \('b'\): infinite value"):
        read_data(str(tmp_path / "t.parquet"), missing="drop")


def test_nulls_are_missing_values(tmp_path):
    table = pa.table({"a": pa.array([1.0, 2.0, None, 4.0, 5.0, 6.0]),
                      "b": pa.array([1, 2, 3, None, 5, 6], pa.int32()),
                      "c": pa.array([True, False, True, False, True, False])})
    pq.write_table(table, tmp_path / "n.parquet")
    result = run(["fit", "--kernel", "rbf", tmp_path / "n.parquet", *ARGS[2:], "-k", "2"])
    assert result.exit_code == 1
    assert result.stderr == (f"kkmeans: error: {tmp_path / 'n.parquet'}: row 3, column 1 "
                             f"('a'): missing value (null or NaN); use --missing drop to skip "
                             f"such rows\n")
    result = run(["fit", "--kernel", "rbf", tmp_path / "n.parquet", "--missing", "drop", *ARGS[2:], "-k", "2"])
    assert result.exit_code == 0, result.stderr
    labels = labels_of(result.stdout)
    assert labels.shape == (6,) and labels[2] == labels[3] == -1
    data = read_data(str(tmp_path / "n.parquet"), missing="drop")
    assert data.X.tolist() == [[1, 1, 1], [2, 2, 0], [5, 5, 1], [6, 6, 0]]


def test_without_pyarrow_the_message_says_what_to_install(tables, monkeypatch):
    _, work = tables
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # `import pyarrow` raises ImportError
    result = run(["fit", "--kernel", "rbf", work / "X.parquet", *ARGS])
    assert result.exit_code == 1
    assert result.stderr == (f"kkmeans: error: {work / 'X.parquet'}: reading Parquet files "
                             f"needs pyarrow (pip install 'kkmeans-cli[arrow]')\n")


# -- globs ----------------------------------------------------------------------------------
@pytest.fixture
def parts(tmp_path):
    X, _ = blobs(n=301, d=3, k=3, seed=4)
    whole = write_csv(tmp_path / "whole.csv", X)
    os.mkdir(tmp_path / "parts")
    bounds = [0, 90, 200, 301]
    for j, (i0, i1) in enumerate(zip(bounds, bounds[1:])):
        write_csv(tmp_path / "parts" / f"p{j}.csv", X[i0:i1])
        np.save(tmp_path / "parts" / f"n{j}.npy", read_data(whole).X[i0:i1])
        pq.write_table(pa.table({f"x{c}": read_data(whole).X[i0:i1, c] for c in range(3)}),
                       tmp_path / "parts" / f"t{j}.parquet")
    return tmp_path, whole


@pytest.mark.parametrize("pattern", ["p*.csv", "n*.npy", "t?.parquet"])
def test_glob_fits_and_predicts_as_the_whole_file(parts, pattern):
    work, whole = parts
    spec = str(work / "parts" / pattern)
    expected = run(["fit", "--kernel", "rbf", whole, "-k", "3", "-o", work / "m.npz", "-q", *FAST])
    assert expected.exit_code == 0, expected.stderr
    result = run(["fit", "--kernel", "rbf", spec, *ARGS])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected.stdout
    predicted = run(["predict", work / "m.npz", spec])
    assert predicted.exit_code == 0, predicted.stderr
    assert predicted.stdout == expected.stdout


def test_glob_with_data_and_as_a_subprocess(parts):
    work, whole = parts
    by_file = run(["fit", "--kernel", "rbf", whole, "-k", "3", "-q", "--with-data", "-o", work / "m.npz", *FAST])
    proc = run_process(["predict", "m.npz", "parts/p*.csv", "--with-data"], work)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == by_file.stdout
    assert proc.stdout.splitlines()[0] == "x0,x1,x2,label"
    assert len(proc.stdout.splitlines()) == 302


def test_glob_parts_that_differ_are_named(parts):
    work, _ = parts
    (work / "labels.txt").write_text("OLD\n")
    spec, first, last = (work / "parts" / name for name in ("p*.csv", "p0.csv", "p3.csv"))
    cases = [("x0,x1\n1,2\n", f"{last}: has 2 columns, {first} has 3; every file of {spec} "
                                f"needs the same columns"),
             ("x0,x1,y\n1,2,3\n", f"{last}: its columns are x0, x1, y; {first} has x0, x1, "
                                   f"x2; every file of {spec} needs the same columns"),
             ("x0,x1,x2\n1,2,oops\n", f"{last}: line 2, column 3 ('x2'): 'oops' is not a "
                                       f"number")]
    for content, message in cases:
        last.write_text(content)
        before = files(work / "parts")
        result = run(["fit", "--kernel", "rbf", spec, "-k", "2", "--labels", work / "labels.txt",
                      "-o", work / "m.npz"])
        assert (result.exit_code, result.stderr) == (1, f"kkmeans: error: {message}\n")
        assert files(work / "parts") == before and not (work / "m.npz").exists()
    result = run(["fit", "--kernel", "rbf", work / "nothing" / "*.csv", *ARGS])
    assert result.exit_code == 1
    assert result.stderr == f"kkmeans: error: {work / 'nothing' / '*.csv'}: no file matches\n"
    assert (work / "labels.txt").read_text() == "OLD\n"


def test_output_may_not_replace_a_part(parts):
    work, _ = parts
    before = (work / "parts" / "p1.csv").read_bytes()
    result = run(["fit", "--kernel", "rbf", work / "parts" / "p*.csv", "-k", "3", "--labels",
                  work / "parts" / "p1.csv", "--no-model"])
    assert result.exit_code == 2
    assert "--labels names the input DATA" in result.stderr
    assert (work / "parts" / "p1.csv").read_bytes() == before


def test_zstandard_text(tmp_path):
    """Zstandard-compressed CSV, by its magic bytes (through pyarrow or zstandard)."""
    X, _ = blobs(n=40, d=2)
    path = write_csv(tmp_path / "X.csv", X)
    with open(path, "rb") as f, pa.CompressedOutputStream(str(tmp_path / "X.dat"), "zstd") as z:
        z.write(f.read())
    packed, plain = read_data(str(tmp_path / "X.dat")), read_data(path)
    assert packed.X.tobytes() == plain.X.tobytes() and packed.columns == plain.columns
