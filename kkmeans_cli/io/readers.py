"""Reading data files.

Readers turn delimited text, ``.npy``, HDF5 or CSV on stdin into a float64 matrix and report
problems as :class:`~kkmeans_cli.errors.DataError` with the file, row and column. Positions in
messages are 1-based as an editor or spreadsheet shows them: for text, the *line* of the file
(a header is line 1) and the column; for ``.npy`` and HDF5, the row and column of the array.
"""
import glob
import os
import stat
import sys
from dataclasses import dataclass

import numpy as np

from .._text import plural
from ..errors import DataError, KKMeansError, NoRowLeft, UsageError
from .arrow import TABLE_NAMES, read_table, table_kind
from .graphs import ZIP_MAGIC, graph_kind, is_graph_file, starts_as_zip, zip_damage
from .text import MISSING_DROP_HINT, column_indexes, column_label, column_name, read_text

NPY_SUFFIXES = (".npy",)
HDF5_SUFFIXES = (".h5", ".hdf5", ".hdf", ".he5")
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
    parts : list of (str, int) or None
        For the files of a glob: each file and its number of rows, in order.
    """

    X: np.ndarray
    kept: np.ndarray
    source: str
    columns: list = None
    parts: list = None

    def locate(self, row):
        """The file and the 0-based row in it of row ``row`` of the data (for messages)."""
        for source, n in self.parts or ():
            if row < n:
                return source, row
            row -= n
        return self.source, row

    @property
    def n_rows(self):
        """Rows in the file, including dropped ones."""
        return self.kept.shape[0]

    @property
    def n_dropped(self):
        """Rows dropped for missing values."""
        return int(self.n_rows - np.count_nonzero(self.kept))


#: What DATA may be, said where a file named .npz is none of it
DATA_KINDS = ("DATA is text, .npy, HDF5, Parquet or Feather (with --kernel precomputed, also a "
              "sparse graph: an .npz of scipy.sparse.save_npz or a Matrix Market .mtx)")


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
              missing="error", stdin=None, announce=None):
    """Read a data matrix from a file, ``file.h5:/dataset`` or ``-`` (CSV on stdin).

    Parameters
    ----------
    spec : str
        Path, ``path.h5:/dataset`` or ``-``.
    header : bool or None
        Whether a text file starts with a header line; None detects it: the first line is a
        header when none of its fields is a number (and not all of them are empty or missing
        markers). Lines starting with ``#`` are comments, skipped wherever they are; blank
        lines before the first line of data are skipped too. Line numbers in messages count
        every line of the file.
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
        Text stream read for ``-`` (default ``sys.stdin``); its bytes are read (``.buffer``)
        and decoded as UTF-8 when it has them.
    announce : callable, optional
        Called with a line of text when ``-`` is read from a terminal (so a user knows the
        command waits for typed CSV).

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
    wanted = parse_columns(columns)
    if path == STDIN:
        stream = stdin if stdin is not None else sys.stdin
        if announce is not None and _isatty(stream):
            announce("reading CSV from standard input (the terminal); end it with Ctrl-D, "
                     "or give a file instead of -")
        binary = getattr(stream, "buffer", None)
        return _read_text(binary.read if binary is not None else stream.read, "<stdin>",
                          header, delimiter, wanted, missing)
    if not os.path.exists(path) and is_glob(path):
        return _read_parts(path, expand_glob(path), header=header, delimiter=delimiter,
                           columns=columns, dataset=dataset, missing=missing)
    if not os.path.exists(path):
        raise DataError(f"{path}: no such file")
    if os.path.isdir(path):
        zarr = path.rstrip("/").lower().endswith(".zarr") or any(
            os.path.exists(os.path.join(path, name)) for name in (".zarray", ".zgroup",
                                                                  "zarr.json"))
        raise DataError(f"{path}: is a folder, not a data file" + (
            "; a Zarr array is read by the workers of a cluster (--cluster local[:N] "
            "--approx nystroem), or save it as .npy or HDF5" if zarr else ""))
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        # /dev/zero or /dev/urandom would be read forever; a pipe or FIFO is fine.
        raise DataError(f"{path}: is a device, not a data file (give - to read standard "
                        f"input)")
    suffix = os.path.splitext(path)[1].lower()
    if dataset is not None and suffix not in HDF5_SUFFIXES and not _is_hdf5(path):
        raise DataError(f"{path}: --dataset names a dataset inside an HDF5 file, and this file "
                        f"is not HDF5; drop --dataset")
    if dataset is not None or suffix in HDF5_SUFFIXES:
        X, source = _read_hdf5(path, dataset)
        return _finish_array(X, source, wanted, missing)
    if suffix in NPY_SUFFIXES:
        return _finish_array(_read_npy(path), path, wanted, missing)
    if is_graph_file(path):
        written = "Matrix Market" if graph_kind(path) == "mtx" else "scipy.sparse.save_npz"
        raise DataError(f"{path} is a sparse graph ({written}): fit and sweep cluster it with "
                        f"--kernel precomputed")
    if suffix == ".npz" and not starts_as_zip(path):
        raise DataError(f"{path}: not an .npz archive (it does not start as a zip file); "
                        f"{DATA_KINDS}")
    damage = zip_damage(path) if suffix == ".npz" else None
    if damage is not None:
        raise DataError(f"{path}: a truncated or damaged .npz archive ({damage}); {DATA_KINDS}")
    if suffix == ".npz":
        raise DataError(f"{path}: is an .npz archive, not DATA (a model is read by 'kkmeans "
                        f"predict MODEL DATA'; a sparse graph is an archive of save_npz); DATA is "
                        f"text, .npy, HDF5, Parquet or Feather")
    try:
        stream = open(path, "rb")
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from None
    with stream:
        try:
            head = stream.peek(8)[:8]
        except OSError as exc:
            raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from None
        kind = table_kind(path, head)
        if kind is not None:
            X, select, names = read_table(path, kind, wanted, _check_fits_in_memory)
            return _finish_table(X, path, select, names, missing)
        size = os.fstat(stream.fileno()).st_size if stat.S_ISREG(mode) else None
        read = _decompressed(stream, path, head)
        if read is not None:
            return _read_text(read, path, header, delimiter, wanted, missing)
        return _read_text(stream.read, path, header, delimiter, wanted, missing, size)


def binary_format(spec, dataset=None):
    """The format of DATA ``spec`` when it is not text, for a warning that the text options
    do not apply (``'HDF5'``, ``'.npy'``, ``'Parquet'``, ``'Feather'``, …), else None: text,
    standard input, a sparse graph, or a file that cannot be looked at (its reader reports
    it). A glob is judged by its first file. Reads at most a few bytes."""
    path, inline = split_hdf5_spec(spec)
    if dataset or inline:
        return "HDF5"
    if path == STDIN:
        return None
    if not os.path.exists(path) and is_glob(path):
        try:
            path = expand_glob(path)[0]
        except (KKMeansError, IndexError):
            return None
    suffix = os.path.splitext(path)[1].lower()
    if suffix in HDF5_SUFFIXES:
        return "HDF5"
    if suffix in NPY_SUFFIXES:
        return ".npy"
    try:
        with open(path, "rb") as f:
            kind = table_kind(path, f.read(8))
    except OSError:
        return None
    return None if kind is None else TABLE_NAMES[kind]


def _is_hdf5(path):
    """Whether ``path`` holds the HDF5 signature where the format puts it: at offset 0, or
    after a user block of 512, 1024, 2048, … bytes (a read of 8 bytes at each power of two
    up to the file's end)."""
    try:
        with open(path, "rb") as f:
            offset = 0
            while True:
                f.seek(offset)
                head = f.read(8)
                if head == b"\x89HDF\r\n\x1a\n":
                    return True
                if len(head) < 8:
                    return False
                offset = 512 if offset == 0 else 2 * offset
    except OSError:
        return True  # the HDF5 reader reports the file's own error


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
        try:
            data = read_data(path, header=None, delimiter=None)
        except DataError as exc:    # --missing drop is DATA's: a vector needs every value
            raise DataError(str(exc).replace(MISSING_DROP_HINT, "")) from None
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
        if np.any(np.abs(values) >= 2.0 ** 63):     # int64 cannot hold it
            row = int(np.flatnonzero(np.abs(values) >= 2.0 ** 63)[0]) + 1
            raise DataError(f"{source}: {what} value {row} ({values[row - 1]:g}) is too "
                            f"large for a whole number")
        return values.astype(np.int64)
    return values


# -- globs ----------------------------------------------------------------------------------
def is_glob(spec):
    """Whether DATA is a pattern of files (``parts/*.csv``) rather than one file."""
    return any(ch in spec for ch in "*?[")


def expand_glob(spec):
    """The files of a pattern in sorted order: the parts of DATA, in one process or on a
    cluster, are these files one after the other."""
    paths = sorted(glob.glob(spec))
    if not paths:
        raise DataError(f"{spec}: no file matches")
    dirs = [p for p in paths if os.path.isdir(p)]
    if dirs:
        raise DataError(f"{dirs[0]}: is a folder, not a data file")
    return paths


def check_parts(spec, parts):
    """The files of a glob, ``[(path, width, names or None), ...]``, in one process or on a
    cluster: parts of different widths or column names are an error naming the part. Returns
    the column names (of the first part that has them) or None."""
    first = parts[0]
    for path, width, names in parts[1:]:
        if width != first[1]:
            raise DataError(f"{path}: has {width} columns, {first[0]} has {first[1]}; every "
                            f"file of {spec} needs the same columns")
        if names is not None and first[2] is not None and list(names) != list(first[2]):
            raise DataError(f"{path}: its columns are {', '.join(names)}; {first[0]} has "
                            f"{', '.join(first[2])}; every file of {spec} needs the same "
                            f"columns")
    return next((list(p[2]) for p in parts if p[2] is not None), None)


def _read_parts(spec, paths, **options):
    """The files of a glob read one by one as DATA and joined: the same rows as the
    concatenated file (each part is read by its own rules: header detection, line numbers in
    messages). Parts of different widths or column names are an error naming the part."""
    parts, first = [], None
    for path in paths:
        try:
            parts.append(read_data(path, **options))
        except NoRowLeft as exc:    # --missing drop took all of this part: the others stay
            parts.append(exc.data)
            first = first or exc
        check_parts(spec, [(p.source, p.X.shape[1], p.columns) for p in (parts[0], parts[-1])])
    columns = next((p.columns for p in parts if p.columns is not None), None)
    X = parts[0].X if len(parts) == 1 else np.concatenate([p.X for p in parts])
    kept = np.concatenate([p.kept for p in parts])
    data = DataSet(X=X, kept=kept, source=spec, columns=columns,
                   parts=[(p.source, p.n_rows) for p in parts])
    if not kept.any():      # a column with no value says which (a delimiter ends lines)
        raise NoRowLeft(str(first), data, empty_columns=True) if first.empty_columns else \
            NoRowLeft(f"{spec}: every row of its files has a missing value; nothing is left "
                      f"to cluster", data)
    return data


# -- compressed text ------------------------------------------------------------------------
def _decompressed(stream, path, head):
    """``read(n)`` of the text inside a gzip or Zstandard file (by its first bytes or its
    extension); None for other files."""
    lower = path.lower()
    if head.startswith(b"\x1f\x8b") or lower.endswith(".gz"):
        import gzip
        import zlib

        inner = gzip.GzipFile(fileobj=stream, mode="rb")
        errors = (EOFError, zlib.error)
    elif head.startswith(b"\x28\xb5\x2f\xfd") or lower.endswith(".zst"):
        inner, errors = _zstd(stream, path)
    else:
        return None

    def read(n):
        try:
            return inner.read(n)
        except errors as exc:
            raise OSError(f"{exc} (a damaged compressed file?)") from None
    return read


def _zstd(stream, path):
    try:
        import zstandard
    except ImportError:
        zstandard = None
    if zstandard is not None:
        return zstandard.ZstdDecompressor().stream_reader(stream), (zstandard.ZstdError,)
    try:
        import pyarrow as pa
    except ImportError:
        raise DataError(f"{path}: reading Zstandard-compressed text needs pyarrow or "
                        f"zstandard (pip install 'kkmeans-cli[arrow]')") from None
    return pa.CompressedInputStream(pa.PythonFile(stream, mode="r"), "zstd"), \
        (pa.ArrowException,)


# -- text -----------------------------------------------------------------------------------
def _isatty(stream):
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False


def _read_text(read, source, header, delimiter, wanted, missing, size=None):
    X, kept, names, columns = read_text(read, source, header=header, delimiter=delimiter,
                                        wanted=wanted, missing=missing, size=size)
    return _kept_dataset(X, kept, source, names, columns)


# -- columns --------------------------------------------------------------------------------
def parse_columns(columns):
    """``--columns`` as a list of its items (names or indexes), or None; a ``UsageError``
    for an empty item."""
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


# -- binary formats -------------------------------------------------------------------------
def read_npy_header(stream):
    """Shape, Fortran order and dtype from the header of an ``.npy`` stream (which is left at
    the first data byte), and the header's length in bytes.

    Raises
    ------
    ValueError
        Not an ``.npy`` header, or one NumPy does not read (too long, unknown version).
    """
    fmt = np.lib.format
    version = fmt.read_magic(stream)
    if version == (1, 0):
        shape, fortran, dtype = fmt.read_array_header_1_0(stream)
    elif version == (2, 0):
        shape, fortran, dtype = fmt.read_array_header_2_0(stream)
    else:
        raise ValueError(f".npy format version {version[0]}.{version[1]} is not supported")
    return shape, fortran, dtype, stream.tell()


def _read_npy(path, ndim=(2,)):
    check_npy(path, ndim)
    try:
        X = np.load(path, allow_pickle=False)
    except ValueError as exc:
        raise DataError(f"{path}: not a valid .npy file ({exc})") from None
    except (OSError, EOFError) as exc:
        raise DataError(f"{path}: cannot read .npy file ({exc})") from None
    return _check_array(X, path, ndim)


def check_npy(path, ndim=(2,)):
    """An ``.npy`` file's header checked before its data are read, in one process or on a
    cluster (an .npz, a pickle, objects, a wrong shape, a truncated file: a ``DataError``
    naming the file); returns its shape and dtype."""
    with open(path, "rb") as stream:
        magic = stream.read(6)
        if magic.startswith(ZIP_MAGIC):
            raise DataError(f"{path}: is an .npz archive, not an .npy array")
        if magic != b"\x93NUMPY":
            raise DataError(f"{path}: not an .npy file (it does not start as one; a "
                            f"pickle is never loaded)")
        stream.seek(0)
        try:
            shape, _, dtype, offset = read_npy_header(stream)
        except (ValueError, OSError, EOFError) as exc:
            raise DataError(f"{path}: not a valid .npy file ({exc})") from None
        size = os.fstat(stream.fileno()).st_size
    if dtype.hasobject:
        raise DataError(f"{path}: holds Python objects; only numeric arrays are read "
                        f"(pickles are never loaded)")
    check_array_header(shape, dtype, path, ndim)
    expected = offset + int(np.prod(shape, dtype=object)) * dtype.itemsize
    if size != expected:
        raise DataError(f"{path}: {'truncated' if size < expected else 'corrupt'}: its "
                        f"header declares a {dtype} array of shape {tuple(shape)} "
                        f"({expected} bytes with the header), the file has {size} bytes")
    return tuple(shape), dtype


def _read_hdf5(path, dataset):
    import h5py

    try:
        handle = h5py.File(path, "r")
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: not a readable HDF5 file ({exc})") from None
    with handle:
        if dataset is None:
            names = _hdf5_datasets(handle, path)
            if len(names) != 1:
                listing = ", ".join(names) if names else "none"
                raise UsageError(f"{path}: name the dataset as {path}:/path or with --dataset "
                                 f"(datasets: {listing})")
            dataset = names[0]
        source = f"{path}:{dataset}"
        node = _hdf5_node(handle, dataset, path, source)
        if isinstance(node, h5py.Group):
            raise DataError(f"{source}: is an HDF5 group, not a dataset")
        if not isinstance(node, h5py.Dataset):
            raise DataError(f"{source}: is not an HDF5 dataset")
        check_array_header(node.shape, node.dtype, source, (2,))
        _check_fits_in_memory(node.shape, source)
        try:
            X = node[()]
        except Exception as exc:  # noqa: BLE001 -- h5py raises many types for one bad file
            raise DataError(f"{source}: cannot read dataset ({_hdf5_reason(exc)})") from None
    return _check_array(np.asarray(X), source, (2,)), source


def _hdf5_reason(exc):
    text = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
    return " ".join(str(text).split()) or type(exc).__name__


def _hdf5_node(handle, dataset, path, source):
    """The object at ``dataset``; a missing name, a broken soft link or an external link
    whose file or object cannot be opened is a DataError naming it."""
    import h5py

    def missing():
        names = _hdf5_datasets(handle, path)
        return DataError(f"{source}: no such dataset in {path} (datasets: "
                         f"{', '.join(names) if names else 'none'})")

    try:
        link = handle.get(dataset, getlink=True)  # None when there is no such name
    except Exception:  # noqa: BLE001 -- e.g. a path through a dataset
        link = None
    if link is None:
        raise missing()
    try:
        return handle[dataset]
    except Exception as exc:  # noqa: BLE001 -- KeyError, OSError, RuntimeError from h5py
        if isinstance(link, h5py.ExternalLink):
            raise DataError(f"{source}: is an external link to {link.filename}:{link.path}, "
                            f"which cannot be opened ({_hdf5_reason(exc)})") from None
        if isinstance(link, h5py.SoftLink):
            raise DataError(f"{source}: is a link to {link.path}, which does not exist") \
                from None
        raise DataError(f"{source}: cannot be opened ({_hdf5_reason(exc)})") from None


def _hdf5_datasets(handle, path):
    import h5py

    names = []
    try:
        handle.visititems(lambda name, node: names.append("/" + name)
                          if isinstance(node, h5py.Dataset) else None)
    except Exception as exc:  # noqa: BLE001 -- a damaged file
        raise DataError(f"{path}: cannot list its datasets ({_hdf5_reason(exc)})") from None
    return names


def check_array_header(shape, dtype, source, ndim):
    """Shape and dtype checks that need no data (run before reading it)."""
    if shape is None:       # HDF5's null dataspace (h5py.Empty): no array at all
        raise DataError(f"{source}: holds no array (an empty dataspace)")
    if len(shape) not in ndim:
        hint = "; reshape a single feature to (n, 1)" if len(shape) == 1 else ""
        raise DataError(f"{source}: expected a 2-D array (rows × features), got "
                        f"{len(shape)}-D shape {tuple(shape)}{hint}")
    if dtype.kind not in "biuf":
        raise DataError(f"{source}: holds {dtype} values; a numeric array is needed")
    if int(np.prod(shape)) == 0:
        raise DataError(f"{source}: the array is empty (shape {tuple(shape)})")


def _check_fits_in_memory(shape, source):
    """Refuse before reading an array whose float64 copy would not fit in the memory
    available (a compressed HDF5 dataset can declare far more than its file holds)."""
    from ..memory import default_limit, format_bytes

    need, limit = int(np.prod(shape, dtype=object)) * 8, default_limit()
    if limit is not None and need > limit:
        raise DataError(f"{source}: the dataset of shape {tuple(shape)} needs "
                        f"{format_bytes(need)} as float64, more than the memory available "
                        f"({format_bytes(limit)})")


def _check_array(X, source, ndim):
    check_array_header(X.shape, X.dtype, source, ndim)
    return X


def array_columns(wanted, width, source):
    """The 0-based columns of an array (NPY, HDF5, Zarr: no names) that ``--columns``
    (parsed: ``wanted``) lists, all of them when ``wanted`` is None."""
    return column_indexes(wanted, None, width, source,
                          "is an array, whose columns have no names; use 0-based indexes")


def _finish_array(X, source, wanted, missing):
    X = np.asarray(X, dtype=np.float64)
    select = array_columns(wanted, X.shape[1], source)
    if select != list(range(X.shape[1])):
        X = X[:, select]
    X = np.ascontiguousarray(X)         # no copy of an array read whole, as is usual
    return _finish_table(X, source, select, None, missing, "NaN")


def _finish_table(X, source, select, names, missing, nan="null or NaN"):
    """The rows of ``X`` (the columns ``select`` of a file) checked: an infinite value is an
    error, a missing one (NaN) too unless ``missing='drop'``."""
    if np.isfinite(X).all():            # the usual case in one pass
        return _kept_dataset(X, np.ones(X.shape[0], dtype=bool), source,
                             [names[i] for i in select] if names else None, select)
    # the first bad cell in row order, as a text file reports it (NaN is bad unless dropped)
    bad = np.argwhere(~np.isfinite(X) if missing == "error" else np.isinf(X))
    if bad.size:
        r, c = bad[0]
        if np.isinf(X[r, c]):
            raise DataError(f"{source}: row {r + 1}, column {column_name(select[c], names)}: "
                            f"infinite value")
        raise DataError(f"{source}: row {r + 1}, column {column_name(select[c], names)}: "
                        f"missing value ({nan}){MISSING_DROP_HINT}")
    nan_rows = np.isnan(X).any(axis=1)
    return _kept_dataset(X, ~nan_rows, source, [names[i] for i in select] if names else None,
                         select)


def _kept_dataset(X, kept, source, names, columns):
    """The rows ``kept`` of ``X`` as a DataSet; none kept is an error, which names the
    columns with no value on any row by their place in the file (``columns``: the file's
    0-based column of each of X's) and their header ``names`` (X's, or None)."""
    if not kept.any():
        data = DataSet(X=np.empty((0, X.shape[1])), kept=kept, source=source, columns=names)
        empty = np.flatnonzero(np.isnan(X).all(axis=0)) if X.shape[0] else []
        if 0 < len(empty) < X.shape[1]:     # a column with no value (a delimiter ends lines)
            shown = ", ".join(column_label(columns[c], names[c] if names else None)
                              for c in empty)
            raise NoRowLeft(f"{source}: column{'s' if len(empty) > 1 else ''} {shown} "
                            f"hold{'' if len(empty) > 1 else 's'} no value on any row; "
                            f"--columns picks the columns to read", data, empty_columns=True)
        raise NoRowLeft(f"{source}: every row has a missing value; nothing is left to cluster",
                        data)
    if not kept.all():
        X = np.ascontiguousarray(X[kept])
    return DataSet(X=X, kept=kept, source=source, columns=names)
