"""Reading data files and writing outputs.

Readers turn delimited text, ``.npy``, HDF5 or CSV on stdin into a float64 matrix and report
problems as :class:`~kkmeans_cli.errors.DataError` with the file, row and column. Positions in
messages are 1-based as an editor or spreadsheet shows them: for text, the *line* of the file
(a header is line 1) and the column; for ``.npy`` and HDF5, the row and column of the array.

Writers never leave a half-written file: :class:`AtomicOutputs` stages every file as a
temporary file in the destination folder and renames all of them into place only at the end.
"""
import csv
import io
import json
import os
import sys
import tempfile
from dataclasses import dataclass

import numpy as np

from .._text import plural
from ..errors import DataError, OutputError, UsageError

TEXT_SUFFIXES = (".csv", ".tsv", ".txt", ".dat")
NPY_SUFFIXES = (".npy",)
HDF5_SUFFIXES = (".h5", ".hdf5", ".hdf", ".he5")
MISSING_TOKENS = frozenset({"", "na", "nan", "n/a", "null", "none", "?"})
MISSING_MODES = ("error", "drop")
STDIN = "-"


@dataclass
class DataSet:
    """Numeric data read from a file.

    Attributes
    ----------
    X : ndarray of float64, shape (n_kept, n_features)
        The rows that were kept.
    kept : ndarray of bool, shape (n_rows,)
        Which rows of the file are in ``X`` (all True unless ``missing='drop'`` dropped some).
    source : str
        The file (and dataset) for messages, ``<stdin>`` for ``-``.
    columns : list of str or None
        Names of the columns of ``X`` when the file had a header.
    """

    X: np.ndarray
    kept: np.ndarray
    source: str
    columns: list = None

    @property
    def n_rows(self):
        """Rows in the file, including dropped ones."""
        return self.kept.shape[0]

    @property
    def n_dropped(self):
        """Rows dropped for missing values."""
        return int(self.n_rows - np.count_nonzero(self.kept))


def split_hdf5_spec(spec):
    """Split ``file.h5:/group/dataset`` into the file and the dataset path.

    Parameters
    ----------
    spec : str
        A data argument as given on the command line.

    Returns
    -------
    path : str
    dataset : str or None
        None when ``spec`` names no dataset.
    """
    head, sep, tail = spec.rpartition(":")
    if sep and head.lower().endswith(HDF5_SUFFIXES) and tail:
        return head, tail
    return spec, None


def read_data(spec, *, header=None, delimiter=None, columns=None, dataset=None,
              missing="error", stdin=None):
    """Read a data matrix from a file, ``file.h5:/dataset`` or ``-`` (CSV on stdin).

    Parameters
    ----------
    spec : str
        Path, ``path.h5:/dataset`` or ``-``.
    header : bool or None
        Whether a text file starts with a header line; None detects it (a first line with a
        cell that is not a number is a header).
    delimiter : str or None
        Field separator of text files; None picks ``,``, tab or ``;`` from the first line, and
        whitespace when none of them occurs. ``\\t`` or ``tab`` mean a tab.
    columns : str or sequence or None
        Columns to use, by name (needs a header) or 0-based index, e.g. ``"x,y"`` or ``"0,2"``.
    dataset : str or None
        HDF5 dataset path (instead of the ``:/path`` suffix).
    missing : {'error', 'drop'}
        What to do with rows holding an empty cell or NaN: report the first one as an error, or
        drop the rows (``DataSet.kept`` tells which rows survived).
    stdin : file-like, optional
        Text stream read for ``-`` (default ``sys.stdin``).

    Returns
    -------
    DataSet
    """
    if missing not in MISSING_MODES:
        raise UsageError(f"--missing must be one of {', '.join(MISSING_MODES)}; got {missing!r}")
    path, inline_dataset = split_hdf5_spec(spec)
    if inline_dataset and dataset and inline_dataset != dataset:
        raise UsageError(f"{spec}: names dataset {inline_dataset} but --dataset says {dataset}")
    dataset = dataset or inline_dataset
    wanted = _parse_columns(columns)
    if path == STDIN:
        stream = stdin if stdin is not None else sys.stdin
        return _read_text(stream, "<stdin>", header, delimiter, wanted, missing)
    if not os.path.exists(path):
        raise DataError(f"{path}: no such file")
    if os.path.isdir(path):
        raise DataError(f"{path}: is a folder, not a data file")
    suffix = os.path.splitext(path)[1].lower()
    if dataset is not None or suffix in HDF5_SUFFIXES:
        X, source = _read_hdf5(path, dataset)
        return _finish_array(X, source, wanted, missing)
    if suffix in NPY_SUFFIXES:
        return _finish_array(_read_npy(path), path, wanted, missing)
    try:
        with open(path, newline="", encoding="utf-8-sig") as stream:
            return _read_text(stream, path, header, delimiter, wanted, missing)
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not a text file ({exc.reason} at byte {exc.start}); "
                        f"binary data must be .npy or HDF5") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from None


def read_vector(path, what, *, integer=False):
    """Read one number per line (an optional header line is skipped).

    Parameters
    ----------
    path : str
        Text or ``.npy`` file.
    what : str
        What the numbers are, for messages (``"weights"``, ``"initial labels"``).
    integer : bool
        Require whole numbers and return int64.

    Returns
    -------
    ndarray of shape (n_rows,)
    """
    if os.path.splitext(path)[1].lower() in NPY_SUFFIXES and os.path.exists(path):
        values = _read_npy(path, ndim=(1, 2))
        values = values.reshape(values.shape[0], -1)
        source = path
    else:
        data = read_data(path, header=None, delimiter=None)
        values, source = data.X, data.source
    if values.shape[1] != 1:
        raise DataError(f"{source}: {what} need one value per line; found "
                        f"{plural(values.shape[1], 'column')}")
    values = values[:, 0]
    if not np.all(np.isfinite(values)):
        row = int(np.flatnonzero(~np.isfinite(values))[0]) + 1
        raise DataError(f"{source}: {what} value {row} is not a finite number")
    if integer:
        if np.any(values != np.round(values)):
            row = int(np.flatnonzero(values != np.round(values))[0]) + 1
            raise DataError(f"{source}: {what} value {row} ({values[row - 1]:g}) is not a "
                            f"whole number")
        return values.astype(np.int64)
    return values


# -- text -----------------------------------------------------------------------------------
def _read_text(stream, source, header, delimiter, wanted, missing):
    lines = stream.read().splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise DataError(f"{source}: the file is empty")
    delimiter = _resolve_delimiter(delimiter, lines[0], source)
    rows = _split_lines(lines, delimiter)
    if header is None:
        header = any(not _is_number_or_missing(cell) for cell in rows[0])
    names, first_line = None, 1
    if header:
        names = [cell.strip() for cell in rows[0]]
        rows, first_line = rows[1:], 2
        if not rows:
            raise DataError(f"{source}: has a header line but no data rows")
    width = len(names) if names is not None else len(rows[0])
    select = _column_indexes(wanted, names, width, source)
    n = len(rows)
    X = np.empty((n, len(select)))
    kept = np.ones(n, dtype=bool)
    for r, cells in enumerate(rows):
        line = first_line + r
        if len(cells) != width:
            if len(cells) == 1 and not cells[0].strip():
                cells = [""] * width  # a blank line inside the data: a row of missing cells
            else:
                raise DataError(f"{source}: line {line} has {len(cells)} field"
                                f"{'' if len(cells) == 1 else 's'}, expected "
                                f"{width} (as on line {first_line})")
        for c, col in enumerate(select):
            cell = cells[col].strip()
            try:
                value = float(cell)
            except ValueError:
                if cell.lower() not in MISSING_TOKENS:
                    raise DataError(f"{source}: line {line}, column {_column_name(col, names)}: "
                                    f"{cell!r} is not a number") from None
                value = np.nan
            if np.isnan(value):
                if missing == "error":
                    raise DataError(f"{source}: line {line}, column {_column_name(col, names)}: "
                                    f"missing value"
                                    f"{'' if not cell else f' ({cell!r})'}; use --missing drop "
                                    f"to skip such rows")
                kept[r] = False
            elif np.isinf(value):
                raise DataError(f"{source}: line {line}, column {_column_name(col, names)}: "
                                f"infinite value {cell!r}")
            X[r, c] = value
    return _kept_dataset(X, kept, source, [names[i] for i in select] if names else None)


def _resolve_delimiter(delimiter, first_line, source):
    if delimiter is None:
        for candidate in (",", "\t", ";"):
            if candidate in first_line:
                return candidate
        return None  # whitespace
    if delimiter.lower() in ("\\t", "tab"):
        return "\t"
    if delimiter.lower() in ("whitespace", "space", " "):
        return None
    if len(delimiter) != 1:
        raise UsageError(f"--delimiter must be one character, 'tab' or 'whitespace'; got "
                         f"{delimiter!r} (reading {source})")
    return delimiter


def _split_lines(lines, delimiter):
    if delimiter is None:
        return [line.split() or [""] for line in lines]
    return [row or [""] for row in csv.reader(lines, delimiter=delimiter)]


def _is_number_or_missing(cell):
    cell = cell.strip()
    if cell.lower() in MISSING_TOKENS:
        return True
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _column_name(index, names):
    """Column for messages: its header name, else its 1-based position."""
    if names:
        return f"{index + 1} ({names[index]!r})"
    return str(index + 1)


# -- columns --------------------------------------------------------------------------------
def _parse_columns(columns):
    if columns is None:
        return None
    if isinstance(columns, str):
        items = [item.strip() for item in columns.split(",")]
    else:
        items = [str(item).strip() for item in columns]
    if not items or any(not item for item in items):
        raise UsageError(f"--columns must list names or 0-based indexes separated by commas; "
                         f"got {columns!r}")
    return items


def _column_indexes(wanted, names, width, source):
    if wanted is None:
        return list(range(width))
    out = []
    for item in wanted:
        if item.lstrip("-").isdigit():
            index = int(item)
            if not 0 <= index < width:
                raise UsageError(f"--columns: index {index} is out of range; {source} has "
                                 f"{plural(width, 'column')} (0-based indexes 0..{width - 1})")
        elif names is None:
            raise UsageError(f"--columns: {item!r} is a name but {source} has no header line; "
                             f"use 0-based indexes or --header")
        elif item not in names:
            raise UsageError(f"--columns: {source} has no column {item!r}; its columns are "
                             f"{', '.join(names)}")
        else:
            index = names.index(item)
        out.append(index)
    return out


# -- binary formats -------------------------------------------------------------------------
def _read_npy(path, ndim=(2,)):
    try:
        X = np.load(path, allow_pickle=False)
    except ValueError as exc:
        if "allow_pickle" in str(exc) or "Object arrays" in str(exc):
            raise DataError(f"{path}: holds Python objects; only numeric arrays are read "
                            f"(pickles are never loaded)") from None
        raise DataError(f"{path}: not a valid .npy file ({exc})") from None
    except (OSError, EOFError) as exc:
        raise DataError(f"{path}: cannot read .npy file ({exc})") from None
    if not isinstance(X, np.ndarray):
        raise DataError(f"{path}: is an .npz archive, not an .npy array")
    return _check_array(X, path, ndim)


def _read_hdf5(path, dataset):
    import h5py

    try:
        handle = h5py.File(path, "r")
    except OSError as exc:
        raise DataError(f"{path}: not a readable HDF5 file ({exc})") from None
    with handle:
        if dataset is None:
            names = _hdf5_datasets(handle)
            if len(names) != 1:
                listing = ", ".join(names) if names else "none"
                raise UsageError(f"{path}: name the dataset as {path}:/path or with --dataset "
                                 f"(datasets: {listing})")
            dataset = names[0]
        source = f"{path}:{dataset}"
        if dataset not in handle:
            names = _hdf5_datasets(handle)
            raise DataError(f"{source}: no such dataset in {path} (datasets: "
                            f"{', '.join(names) if names else 'none'})")
        node = handle[dataset]
        if not isinstance(node, h5py.Dataset):
            raise DataError(f"{source}: is an HDF5 group, not a dataset")
        try:
            X = node[()]
        except (OSError, TypeError, ValueError) as exc:
            raise DataError(f"{source}: cannot read dataset ({exc})") from None
    return _check_array(np.asarray(X), source, (2,)), source


def _hdf5_datasets(handle):
    import h5py

    names = []
    handle.visititems(lambda name, node: names.append("/" + name)
                      if isinstance(node, h5py.Dataset) else None)
    return names


def _check_array(X, source, ndim):
    if X.ndim not in ndim:
        hint = "; reshape a single feature to (n, 1)" if X.ndim == 1 else ""
        raise DataError(f"{source}: expected a 2-D array (rows × features), got "
                        f"{X.ndim}-D shape {X.shape}{hint}")
    if X.dtype.kind not in "biuf":
        raise DataError(f"{source}: holds {X.dtype} values; a numeric array is needed")
    if X.size == 0:
        raise DataError(f"{source}: the array is empty (shape {X.shape})")
    return X


def _finish_array(X, source, wanted, missing):
    X = np.asarray(X, dtype=np.float64)
    select = _column_indexes(wanted, None, X.shape[1], source)
    X = np.ascontiguousarray(X[:, select])
    if np.any(np.isinf(X)):
        r, c = np.argwhere(np.isinf(X))[0]
        raise DataError(f"{source}: row {r + 1}, column {select[c] + 1}: infinite value")
    nan_rows = np.isnan(X).any(axis=1)
    if nan_rows.any() and missing == "error":
        r, c = np.argwhere(np.isnan(X))[0]
        raise DataError(f"{source}: row {r + 1}, column {select[c] + 1}: missing value (NaN); "
                        f"use --missing drop to skip such rows")
    return _kept_dataset(X, ~nan_rows, source, None)


def _kept_dataset(X, kept, source, names):
    if not kept.any():
        raise DataError(f"{source}: every row has a missing value; nothing is left to cluster")
    if not kept.all():
        X = np.ascontiguousarray(X[kept])
    return DataSet(X=X, kept=kept, source=source, columns=names)


# -- writing --------------------------------------------------------------------------------
def check_output_path(path, what):
    """Fail early, before any work, when ``path`` cannot be written.

    Parameters
    ----------
    path : str
        Output file (``-`` is stdout and always fine).
    what : str
        What goes there, for messages (``"model"``, ``"labels"``).
    """
    if path == STDIN:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise OutputError(f"cannot write the {what} to {path}: it is a folder")
    existing = _existing_ancestor(folder)
    if not os.path.isdir(existing):
        raise OutputError(f"cannot write the {what} to {path}: {existing} is a file, not a "
                          f"folder")
    if existing != folder:
        raise OutputError(f"cannot write the {what} to {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise OutputError(f"cannot write the {what} to {path}: folder {folder} is not writable")


def _existing_ancestor(folder):
    """``folder`` or its nearest ancestor that exists."""
    while not os.path.exists(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    return folder


class AtomicOutputs:
    """Stage output files and put them in place together, or not at all.

    Use as a context manager; ``open(path)`` returns a binary file object writing to a
    temporary file in the destination folder. When the block ends without an exception every
    staged file is renamed onto its destination (``os.replace``); on an exception or interrupt
    the temporary files are removed and existing destinations are untouched.
    """

    def __init__(self):
        self._staged = []

    def __enter__(self):
        return self

    def open(self, path, what):
        """A writable binary file that becomes ``path`` when the block succeeds."""
        check_output_path(path, what)
        folder = os.path.dirname(os.path.abspath(path))
        try:
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.",
                                       suffix=".tmp")
        except OSError as exc:
            raise OutputError(f"cannot write the {what} to {path}: "
                              f"{exc.strerror or exc}") from None
        handle = os.fdopen(fd, "wb")
        self._staged.append((handle, tmp, path, what))
        return handle

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self._discard()
            return False
        try:
            for handle, tmp, path, what in self._staged:
                handle.flush()
                os.fsync(handle.fileno())
                handle.close()
            for handle, tmp, path, what in self._staged:
                try:
                    os.replace(tmp, path)
                except OSError as err:
                    raise OutputError(f"cannot write the {what} to {path}: "
                                      f"{err.strerror or err}") from None
        except BaseException:
            self._discard()
            raise
        return False

    def _discard(self):
        for handle, tmp, _, _ in self._staged:
            handle.close()
            if os.path.exists(tmp):
                os.unlink(tmp)
        self._staged = []


def format_labels(labels, kept=None):
    """Labels one per line; rows that were dropped (``kept`` False) get ``-1``.

    Parameters
    ----------
    labels : array of int, shape (n_kept,)
    kept : array of bool, shape (n_rows,), optional

    Returns
    -------
    str
    """
    labels = np.asarray(labels, dtype=np.int64)
    if kept is not None and not np.all(kept):
        full = np.full(kept.shape[0], -1, dtype=np.int64)
        full[kept] = labels
        labels = full
    return "".join(f"{v}\n" for v in labels.tolist())


def format_json(obj):
    """Indented JSON text ending in a newline."""
    return json.dumps(obj, indent=2, allow_nan=False) + "\n"


def write_matrix(handle, path, M):
    """Write a matrix to an open binary file: ``.npy`` by suffix, else CSV text."""
    if path.lower().endswith(".npy"):
        np.save(handle, M, allow_pickle=False)
        return
    text = io.StringIO()
    np.savetxt(text, M, delimiter=",", fmt="%.10g")
    handle.write(text.getvalue().encode())
