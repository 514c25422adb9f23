"""What the commands read and write per row: DATA, the weights and initial labels (checked
with the estimator's own checks, their errors worded with the file, row and column), the
checks made on what was read before any work, and the label output."""
import contextlib
import difflib
import os
import sys

import click

from .._options import INITS as INIT_CHOICES
from .._options import GRAPH_KERNELS, PRECOMPUTED_KERNELS
from .._text import plural
from ..errors import AmbiguousColumn, ColumnNotFound, DataError, UsageError


def read_input(opts, spec):
    """DATA read with the data options."""
    from ..io.readers import read_data

    stdin_open("DATA", spec)
    return read_data(spec, header=opts["header"], delimiter=opts["delimiter"],
                     columns=columns_list(opts["columns"]), dataset=opts["dataset"],
                     missing=opts["missing"], stdin=sys.stdin,
                     announce=None if opts.get("quiet") else
                     lambda text: click.echo(f"kkmeans: {text}", err=True))


def columns_list(text):
    """``--columns`` as a list: split at commas as CSV is (a name holding a comma or a quote
    in double quotes, ``"a,b",c``); an index is written in ASCII digits (``１``, a full-width
    digit, is not the index 1). None stays None; a list is taken as it is."""
    if text is None or not isinstance(text, str):
        return text
    import csv

    try:
        items = next(csv.reader([text], skipinitialspace=True, strict=True))
    except (csv.Error, StopIteration):
        raise UsageError(f"--columns {text!r}: a name in double quotes must end in one "
                         f"(\"a,b\",c)") from None
    for item in items:
        bare = item.strip().lstrip("-")
        if bare.isdigit() and not bare.isascii():
            raise UsageError(f"--columns: {item!r} is not an index: write indexes with the "
                             f"digits 0-9")
    return items


def stdin_open(option, path):
    """Refuse (exit 1) to read ``-`` when the command was started with stdin closed
    (``<&-``)."""
    if path == "-" and sys.stdin is None:
        raise DataError(f"{option} -: standard input is closed; give a file instead of -")


def prepare_fit_data(opts):
    """Read DATA, the weights and initial labels, and fit the scaling.

    Returns
    -------
    data : DataSet
    scaler : Scaler
    X : ndarray
        The scaled kept rows.
    weights : ndarray or None
    init : str or ndarray
    """
    import numpy as np

    from ..io.scaling import fit_scaler

    if opts["kernel"] in PRECOMPUTED_KERNELS and opts["scale"] != "none":
        raise UsageError(f"--scale cannot be used with --kernel {opts['kernel']} (DATA is an "
                         f"n×n matrix)")
    if is_graph_data(opts):
        return _prepare_graph_data(opts)
    data = read_input(opts, opts["data"])
    weights = _per_row(opts["weights"], "--weights", "weights", data)
    if weights is not None:
        _check_weights(weights, opts["weights"], opts["kernel"], opts.get("objective"))
    init = opts["init"]
    if init_is_file(init):
        init = _per_row(init, "--init", "initial labels", data, integer=True)
        k = opts.get("n_clusters")
        outside = np.flatnonzero((init < 0) | (init >= (k or 0)))
        if k is not None and outside.size:
            raise DataError(f"--init {opts['init']}: label {init[outside[0]]} (value "
                            f"{outside[0] + 1}) is outside 0..{k - 1} (-k {k})")
    scaler = fit_scaler(data.X, opts["scale"])
    X = scaler.transform(data.X)
    total = data.X.shape[0] if weights is None else float(weights.sum())
    check_values(data, X, opts["kernel"], total, opts["scale"], objective=opts["objective"])
    return data, scaler, X, weights, init


def is_graph_data(opts):
    """Whether DATA is a sparse affinity graph (``--kernel precomputed`` and an ``.npz`` of
    ``scipy.sparse.save_npz`` or a Matrix Market ``.mtx``: ``io/graphs.py``). A pattern of
    files that matches graphs is a usage error: a glob's files are parts of one table, and a
    graph is one file."""
    import glob

    from ..io.graphs import is_graph_file
    from ..io.readers import is_glob

    data = opts["data"]
    if opts["kernel"] != "precomputed" or data == "-":
        return False
    if not os.path.exists(data) and is_glob(data):
        graphs = [path for path in sorted(glob.glob(data)) if is_graph_file(path)]
        if graphs:
            raise UsageError(f"{data}: the files of a pattern are read as parts of one table; "
                             f"a sparse graph is one file: give it by name ({graphs[0]})")
        return False
    return is_graph_file(data)


def _prepare_graph_data(opts):
    """DATA that is a sparse affinity graph, read (``io.graphs.read_graph``) and checked
    (``kernels.graph.check_affinity``: square, finite, non-negative, symmetric, no empty
    row), every problem one line naming the file (exit 1). The options of text DATA and the
    per-row files do not apply (a usage error); k is checked against its nodes."""
    import numpy as np

    from ..io.graphs import graph_kind, read_graph
    from ..io.readers import DataSet
    from ..io.scaling import Scaler
    from ..kernels.graph import check_affinity

    path = opts["data"]
    given = [flag for key, flag, default in (
        ("columns", "--columns", None), ("dataset", "--dataset", None),
        ("header", "--header/--no-header", None), ("delimiter", "--delimiter", None),
        ("weights", "--weights", None), ("missing", "--missing", "error"))
        if opts.get(key) != default]
    if given or init_is_file(opts["init"]):
        flag = given[0] if given else "--init FILE"
        raise UsageError(f"{flag} does not apply to a sparse graph as DATA ({path}: its rows "
                         f"and columns are its nodes); drop {flag.split('/')[0]}")
    A = check_affinity(read_graph(path), what=path,        # a .mtx counts from 1
                       first_index=1 if graph_kind(path) == "mtx" else 0)
    k = opts.get("n_clusters")
    if k is not None and k > A.shape[0]:
        raise DataError(f"{path}: k = {k} is larger than the number of nodes ({A.shape[0]}); "
                        f"use a smaller -k")
    data = DataSet(A, np.ones(A.shape[0], dtype=bool), path)
    return data, Scaler("none"), A, None, opts["init"]


def _check_weights(weights, path, kernel, objective=None):
    """The estimator's checks of the weights read from ``path`` for a fit with ``kernel``
    and ``objective`` (``model/checks.py``), their error worded for the command line (exit
    1)."""
    from ..errors import WeightsError
    from ..model.checks import check_graph_weights, check_weight_values

    try:
        check_weight_values(weights, objective=objective or "kmeans")
        if kernel in GRAPH_KERNELS:
            check_graph_weights(weights, kernel)
    except WeightsError as exc:
        if exc.problem == "negative":
            what = "negative" if exc.value < 0 else "not a finite number"
            why = (f"weight {exc.index + 1} is {what} ({exc.value:g}); sample weights must "
                   f"be >= 0")
        elif exc.problem == "all zero":
            why = "every weight is 0; give the points to cluster a positive weight"
        else:
            why = exc.detail or str(exc)
        raise DataError(f"--weights {path}: {why}") from None


def dropped_note(data):
    """``", after 2 rows with missing values were dropped"`` where --missing drop dropped rows
    (a count of rows that DATA seems to have more of says why), else ``""``."""
    dropped = getattr(data, "n_dropped", 0)
    return (f", after {plural(dropped, 'row')} with missing values "
            f"{'was' if dropped == 1 else 'were'} dropped" if dropped else "")


#: what a sweep of data too few for k = 2 is told (no smaller --k helps)
CANNOT_SWEEP = "a sweep's ks start at 2, so these data cannot be swept"


def check_distinct(data, X, k, weights, kernel, option="-k"):
    """Refuse (exit 1) a k above the number of distinct points of DATA, before any work."""
    from ..errors import TooFewDistinctPointsError
    from ..kernels.functions import count_distinct

    distinct = count_distinct(X, k, weights, kernel)
    if distinct < k:
        advice = f"use a smaller {option}" if option == "-k" or distinct >= 2 else \
            CANNOT_SWEEP
        raise DataError(f"{data.source}: {TooFewDistinctPointsError(distinct, k)}"
                        f"{dropped_note(data)}; {advice}")


def check_values(data, X, kernel, total_weight, scale="none", resolved=None,
                 objective="kmeans"):
    """Refuse (exit 1) data whose kernel cannot be computed in floating point, before any
    work: non-finite values after ``--scale``, and the rule of ``functions.check_range`` (the
    message states it), with the row of DATA (1-based, header not counted) and its column."""
    import numpy as np

    from ..errors import ValueRangeError
    from ..kernels.functions import check_range, data_offset

    finite = np.isfinite(X)
    if not finite.all():
        r, c = np.argwhere(~finite)[0]
        raise DataError(f"{where(data, r, c)}: the value {data.X[r, c]:g} is {X[r, c]} after "
                        f"--scale {scale} (the scaling overflows floating point)")
    try:
        offset = (resolved.offset if resolved is not None else
                  None if kernel in PRECOMPUTED_KERNELS else
                  data_offset(kernel, X, objective, quiet=True))
        check_range(kernel, X, total_weight, kernel=resolved, offset=offset)
    except ValueRangeError as exc:
        scaled = "" if scale == "none" else (f" (the value is DATA's "
                                             f"{data.X[exc.row, exc.column]:g} after --scale "
                                             f"{scale})")
        raise DataError(f"{where(data, exc.row, exc.column)}: {exc.detail}{scaled}") from None


def where(data, r, c):
    """'SOURCE: row R, column C' of row r (0-based, of the rows DATA kept) and column c of
    DATA: the row as in its file (1-based, header not counted), the column by its name."""
    import numpy as np

    name = data.columns[c] if data.columns else str(c + 1)
    source, row = data.locate(int(np.flatnonzero(data.kept)[r]))
    return f"{source}: row {row + 1}, column {name}"


def _per_row(path, option, what, data, integer=False):
    """One value per row of DATA from ``path`` (given as ``option``), keeping the rows DATA
    kept; every error names the option and the file."""
    from ..io.readers import read_vector

    if path is None:
        return None
    if path == "-" and data.source == "<stdin>":
        raise UsageError(f"DATA is read from standard input, so the {what} cannot be too; "
                         f"give the {what} as a file")
    stdin_open(option, path)
    try:
        values = read_vector(path, what, integer=integer)
    except DataError as exc:
        raise DataError(f"{option} {exc}") from None
    if values.shape[0] != data.n_rows:
        raise DataError(f"{option} {path}: has {plural(values.shape[0], what[:-1], what)}, "
                        f"{data.source} has {plural(data.n_rows, 'row')}")
    return values[data.kept]


def init_is_file(value):
    """Whether ``--init VALUE`` names a file of initial labels (else it is a start method).

    Raises
    ------
    UsageError
        VALUE is neither a method nor an existing file and does not look like a path (no
        folder, no extension) or is close to a method name: ``--init kmeans++``.
    DataError
        VALUE looks like a path to a file that does not exist.
    """
    if value in INIT_CHOICES:
        return False
    from ..io.readers import split_hdf5_spec

    # file.h5:/labels names an HDF5 file; - is standard input (when DATA is a file)
    if value == "-" or os.path.exists(split_hdf5_spec(value)[0]):
        return True
    close = difflib.get_close_matches(value.lower(), INIT_CHOICES, n=1, cutoff=0.6)
    if close or not (os.sep in value or os.path.splitext(value)[1]):
        hint = f"; did you mean --init {close[0]}?" if close else ""
        raise UsageError(f"--init {value}: not a start method ({', '.join(INIT_CHOICES)}) "
                         f"and no such file{hint}")
    raise DataError(f"--init {value}: no such file")


def labels_text(opts, labels, data):
    """What goes where the labels go: one label per row of DATA (-1 for a dropped row), or
    with ``--with-data`` each row's values and then its label, as CSV."""
    from ..io.outputs import format_labels

    if not opts.get("with_data"):
        return format_labels(labels, data.kept)
    return format_data_with_labels(data, labels)


def format_data_with_labels(data, labels):
    """CSV of DATA's rows (the columns used, values as read) each followed by its label.

    A header line, when DATA has one, names the columns and then ``label``. A row dropped by
    ``--missing drop`` keeps its place with empty cells and the label -1. Numbers are written
    in the shortest form that reads back to the same float64 (``3`` for 3.0).
    """
    import csv
    import io

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if data.columns is not None:
        writer.writerow([*data.columns, "label"])
    labels = iter(int(v) for v in labels)
    rows = iter(data.X.tolist())
    empty = [""] * data.X.shape[1]
    for kept in data.kept.tolist():
        if kept:
            writer.writerow([*map(_number_text, next(rows)), next(labels)])
        else:
            writer.writerow([*empty, -1])
    return out.getvalue()


def _number_text(value):
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


def input_paths(opts):
    """The files a command reads, (path, option) for :func:`check_outputs`."""
    init = opts.get("init")
    return [(opts["data"], "DATA"), (opts.get("weights"), "--weights"),
            (init if init not in INIT_CHOICES else None, "--init"),
            (opts.get("config"), "--config")]


def read_model_columns(opts, names, read, reporter, hold=contextlib.nullcontext):
    """DATA for a model trained on columns with names, in one process or on a cluster
    (``read(opts)`` reads DATA with those options): when DATA has a header too (and no
    --columns is given), the model's columns are taken by name, whatever their order and
    whatever other columns DATA has; a name DATA lacks is an error listing both. DATA without
    names (.npy, HDF5, text without a header) is taken by position, as is DATA read with
    --columns or for a model whose names repeat or read as numbers (``--columns`` takes a
    number for an index; a warning says so when the names differ); DATA whose header names a
    column of the model's twice is an error.
    Returns the data and whether the columns were picked by name (in another order, or out of
    more).

    The usual DATA, with the model's columns in order, is read once; DATA is read again with
    the model's columns only when they must be picked out (so that a missing value in a column
    the model does not use neither stops nor drops a row), within ``hold()``. When DATA read
    whole fails, the error of reading the model's columns stands (a column of the model that
    DATA lacks, or a problem in one the model uses); where those read, DATA's own."""
    from ..io.text import reads_as_index

    if (not names or len(set(names)) != len(names) or opts["columns"] is not None
            or opts["header"] is False or any(reads_as_index(name) for name in names)):
        # a name twice (a header 'x,x') picks no column; a name '0' would pick column 0
        data = read(opts)
        if names and data.columns is not None and list(data.columns) != list(names) \
                and len(data.columns) == len(names):
            reporter.warn(f"{data.source}: its columns {_column_names(data.columns)} are "
                          f"matched by position to the model's {_column_names(names)}")
        return data, False
    by_name = dict(opts, columns=list(names))
    with hold():
        try:
            data = read(opts)
        except DataError as exc:
            try:  # perhaps a problem in a column the model does not use
                return read(by_name), True
            except ColumnNotFound as lacked:
                raise _lacks_columns(lacked.source, lacked.names, names, opts) from None
            except AmbiguousColumn as twice:
                raise _names_twice(twice.source, twice.name, twice.places, opts) from None
            except DataError as named:      # in a column the model uses: that one
                raise named from None
            except UsageError:
                raise exc from None
        if data.columns is None or list(data.columns) == list(names):
            return data, False
        if any(name not in data.columns for name in names):
            raise _lacks_columns(data.source, data.columns, names, opts)
        try:
            return read(by_name), True
        except AmbiguousColumn as twice:    # which of them the model's is, only the user says
            raise _names_twice(twice.source, twice.name, twice.places, opts) from None


def _names_twice(source, name, places, opts):
    """The error for DATA (``source``) whose header gives the model's column ``name`` to the
    columns at the 0-based ``places``."""
    return DataError(f"{source}: has {len(places)} columns named {name!r} (0-based indexes "
                     f"{', '.join(map(str, places))}), a column of the model "
                     f"{opts['model_path']}; give --columns to take DATA's columns by position")


def _lacks_columns(source, columns, names, opts):
    """The error for DATA (``source``, its ``columns``) that lacks a column of the model's
    ``names``."""
    missing = [name for name in names if name not in columns]
    return DataError(f"{source}: has no column {_column_names(missing)} of the model "
                     f"{opts['model_path']}; its columns are {_column_names(columns)}, the "
                     f"model's {_column_names(names)} (give --columns to take DATA's columns "
                     f"by position instead)")


def columns_row(data, by_name):
    """The report's row for DATA's columns picked by name (none otherwise)."""
    return ([("columns", f"{', '.join(data.columns)} (the model's, taken by name)")]
            if by_name else [])


def _column_names(names):
    return ", ".join(repr(str(name)) for name in names)
