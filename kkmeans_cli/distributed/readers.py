"""DATA as row chunks that the Dask workers read themselves; nothing is gathered on the client.

- ``.npy``: memory-mapped on the worker (``np.load(mmap_mode='r')``), rows i0:i1 copied out;
- HDF5 (``file.h5:/dataset`` or ``--dataset``): the worker opens the file and reads a slab;
- Zarr (a ``.zarr`` folder, ``--dataset`` for an array inside a group): ``zarr.open``, slab;
- a glob of files (``'parts/*.csv'``: text, .npy, Parquet, Feather): each file is one chunk,
  read on a worker with the same reader as one process (``io.readers.read_data``); the files
  are those of ``io.readers.expand_glob``, in sorted order, as in one process;
- a Dask array (the Python API) or a NumPy array.

The client only opens file headers (shape and dtype). Rows with NaN or infinite values are an
error on the cluster route (``--missing drop`` would need the kept rows on the client).
"""
import os
from dataclasses import dataclass

import numpy as np

from ..engine.features import CHUNK_ROWS
from ..errors import DataError, UsageError
from ..io.readers import (HDF5_SUFFIXES, NPY_SUFFIXES, array_columns, check_array_header,
                          check_npy, check_parts, expand_glob, is_glob, parse_columns,
                          read_data, split_hdf5_spec)
from ..io.text import MISSING_DROP_HINT
from . import chunks

#: Bytes of a chunk's rows or features at most (about): the chunks never depend on the
#: number of workers, and start at multiples of the engine's block of rows.
CHUNK_BYTES = 64 * 2**20


#: DATA on standard input with --cluster or --scheduler (refused before any connection).
STDIN_REFUSED = ("DATA on stdin cannot be read by the workers of a cluster; give a file "
                 "(.npy, HDF5, Zarr) or a glob of CSV/.npy files")


def chunk_rows(width, wanted=None):
    """Rows per chunk: ``wanted`` (or what keeps ``width`` float64 columns near
    ``CHUNK_BYTES``) rounded up to a multiple of ``features.CHUNK_ROWS``."""
    rows = int(wanted) if wanted else CHUNK_BYTES // (8 * max(int(width), 1))
    return max(1, -(-rows // CHUNK_ROWS)) * CHUNK_ROWS


def _checked(X, source, i0, columns):
    X = np.asarray(X)
    if X.dtype.kind not in "biuf":
        raise DataError(f"{source}: holds {X.dtype} values; a numeric array is needed")
    if columns is not None:
        X = X[:, columns]
    X = np.ascontiguousarray(X, dtype=np.float64)
    bad = ~np.isfinite(X)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        what = "missing value (NaN)" if np.isnan(X[r, c]) else "infinite value"
        raise DataError(f"{source}: row {i0 + r + 1}, column {c + 1}: {what}; the cluster "
                        f"route reads every row (clean the data first)")
    return X


def _unreadable(shown, path, exc):
    """A worker that cannot open or read DATA (another machine, another folder): one line."""
    return DataError(f"{shown}: a worker of the cluster cannot read it "
                     f"({exc.strerror or exc}); the workers must see DATA at {path}")


@dataclass
class NpyReader:
    path: str               # absolute: a worker may run in another folder
    columns: tuple = None
    shown: str = None       # DATA as given, for messages

    def rows(self, i0, i1):
        shown = self.shown or self.path
        try:
            X = np.load(self.path, mmap_mode="r", allow_pickle=False)
        except OSError as exc:
            error = _unreadable(shown, self.path, exc)
        else:
            return _checked(X[i0:i1], shown, i0, self.columns)
        raise error


@dataclass
class Hdf5Reader:
    path: str
    dataset: str
    columns: tuple = None
    shown: str = None

    def rows(self, i0, i1):
        import h5py

        shown = self.shown or self.path
        try:
            with h5py.File(self.path, "r") as f:
                X = f[self.dataset][i0:i1]
        except OSError as exc:
            error = _unreadable(shown, self.path, exc)
        else:
            return _checked(X, f"{shown}:{self.dataset}", i0, self.columns)
        raise error


@dataclass
class ZarrReader:
    path: str
    component: str = None
    columns: tuple = None
    shown: str = None

    def rows(self, i0, i1):
        import zarr

        shown = self.shown or self.path
        try:
            arr = zarr.open(self.path, mode="r", path=self.component)
            X = arr[i0:i1]
        except OSError as exc:
            error = _unreadable(shown, self.path, exc)
        else:
            return _checked(X, shown, i0, self.columns)
        raise error


@dataclass
class FileReader:
    """One whole file of a glob, read as one process reads DATA."""

    path: str
    options: dict
    shown: str = None

    def rows(self, i0, i1):
        return self.read().X[i0:i1]

    def read(self):
        """The file as a ``DataSet`` (its rows and column names)."""
        shown = self.shown or self.path
        if not os.path.exists(self.path):
            error = _unreadable(shown, self.path, FileNotFoundError(
                2, "no such file on the worker"))
        else:
            try:
                data = read_data(self.path, missing="error", **self.options)
            except DataError as exc:
                error = DataError(cluster_wording(str(exc).replace(self.path, shown)))
            except UsageError as exc:       # --columns: DATA named as given, as ever
                error = as_given(exc, self.path, shown)
            except OSError as exc:
                error = _unreadable(shown, self.path, exc)
            else:
                return data
        raise error  # (raised here, a new error: nothing of the reader's goes to the client)


def as_given(exc, path, shown):
    """The same error (its type and fields) naming DATA as given (``shown``) where it named
    the absolute ``path`` a worker read."""
    kind, args = exc.__reduce__()[:2]
    return kind(*(arg.replace(path, shown) if isinstance(arg, str) else arg for arg in args))


def cluster_wording(message):
    """A reader's message as the cluster route says it: ``--missing drop`` is not offered
    (the cluster route reads every row)."""
    return message.replace(MISSING_DROP_HINT,
                           "; the cluster route reads every row (clean the data first)")


@dataclass
class ChunkedData:
    """DATA as chunks: ``sources[j]`` is ``("read", reader, i0, i1)`` or a future holding
    ``("x", X)``; ``bounds[j]`` the rows (i0, i1) of chunk j in the whole data."""

    sources: list
    bounds: list
    n: int
    d: int
    source: str
    columns: list = None

    def is_aligned(self):
        """Whether every chunk starts at a multiple of the engine's ``CHUNK_ROWS``."""
        return all(i0 % CHUNK_ROWS == 0 for i0, _ in self.bounds)

    def aligned(self, client, rows):
        """The same rows in chunks of ``rows`` (a multiple of the engine's ``CHUNK_ROWS``,
        so each chunk starts where a block of the one-process fit starts). File slabs are
        cut anew; held chunks (files of a glob, arrays) are joined or cut on the workers."""
        bounds = [(i0, min(self.n, i0 + rows)) for i0 in range(0, self.n, rows)]
        if bounds == self.bounds:
            return self
        reader = self.sources[0][1] if isinstance(self.sources[0], tuple) else None
        if reader is not None and all(isinstance(s, tuple) and s[0] == "read"
                                      and s[1] is reader for s in self.sources):
            sources = [("read", reader, i0, i1) for i0, i1 in bounds]
        else:
            sources = []
            for i0, i1 in bounds:
                pieces = [(src, max(i0, a) - a, min(i1, b) - a)
                          for src, (a, b) in zip(self.sources, self.bounds)
                          if a < i1 and b > i0]
                sources.append(client.submit(chunks.concat_rows, pieces, pure=False))
        return ChunkedData(sources, bounds, self.n, self.d, self.source, self.columns)


def _column_select(columns, width, source):
    """``--columns`` for binary data (0-based indexes: an array's columns have no names), as
    one process takes it (``io.readers.array_columns``); None for all of them."""
    wanted = parse_columns(columns)
    return None if wanted is None else tuple(array_columns(wanted, width, source))


def open_data(client, spec, *, dataset=None, columns=None, header=None, delimiter=None,
              missing="error"):
    """DATA as :class:`ChunkedData` for the workers to read (one chunk per file until the
    fit or predict cuts it with :meth:`ChunkedData.aligned`)."""
    if missing != "error":
        raise UsageError("--missing drop cannot be used with a cluster (the kept rows would "
                         "have to be gathered on the client); clean the data first")
    if spec == "-":
        raise UsageError(STDIN_REFUSED)
    if is_glob(spec):
        return _open_glob(client, spec, columns=columns, header=header, delimiter=delimiter)
    path, inline = split_hdf5_spec(spec)
    if inline and dataset and inline != dataset:
        raise UsageError(f"{spec}: names dataset {inline} but --dataset says {dataset}")
    dataset = dataset or inline
    if not os.path.exists(path):
        raise DataError(f"{path}: no such file")
    suffix = os.path.splitext(path.rstrip("/"))[1].lower()
    if suffix == ".zarr" or os.path.isdir(path):
        reader, shape, source = _zarr(path, dataset, columns)
    elif dataset is not None or suffix in HDF5_SUFFIXES:
        reader, shape, source = _hdf5(path, dataset, columns)
    elif suffix in NPY_SUFFIXES:
        reader, shape, source = _npy(path, columns)
    else:
        # One text file: one chunk, read on a worker.
        return _open_files(client, [path], path, dict(header=header, delimiter=delimiter,
                                                      columns=columns))
    n = int(shape[0])
    d = len(reader.columns) if reader.columns is not None else int(shape[1])
    if n == 0 or d == 0:
        raise DataError(f"{source}: the array is empty (shape {tuple(shape)})")
    return ChunkedData([("read", reader, 0, n)], [(0, n)], n, d, source)


def _shape_2d(shape, dtype, source):
    """The one process's checks of an array's header (a null dataspace, not 2-D, not
    numeric, empty), with its messages."""
    check_array_header(shape, np.dtype(dtype), source, (2,))


def _npy(path, columns):
    try:
        shape, dtype = check_npy(path)  # the checks of one process, with its messages
    except OSError as exc:
        raise DataError(f"{path}: cannot read .npy file ({exc})") from None
    _shape_2d(shape, dtype, path)
    return NpyReader(os.path.abspath(path), _column_select(columns, shape[1], path),
                     shown=path), shape, path


def _hdf5(path, dataset, columns):
    import h5py

    try:
        handle = h5py.File(path, "r")
    except OSError as exc:
        raise DataError(f"{path}: not a readable HDF5 file ({exc})") from None
    with handle:
        if dataset is None:
            names = []
            handle.visititems(lambda name, node: names.append("/" + name)
                              if isinstance(node, h5py.Dataset) else None)
            if len(names) != 1:
                raise UsageError(f"{path}: name the dataset as {path}:/path or with --dataset "
                                 f"(datasets: {', '.join(names) if names else 'none'})")
            dataset = names[0]
        source = f"{path}:{dataset}"
        if dataset not in handle or not isinstance(handle[dataset], h5py.Dataset):
            raise DataError(f"{source}: no such dataset in {path}")
        node = handle[dataset]
        _shape_2d(node.shape, node.dtype, source)
        shape = node.shape
    return Hdf5Reader(os.path.abspath(path), dataset, _column_select(columns, shape[1], source),
                      shown=path), shape, source


def _zarr(path, component, columns):
    try:
        import zarr
    except ImportError:
        raise DataError(f"{path}: reading Zarr needs the zarr package "
                        f"(pip install zarr)") from None
    try:
        arr = zarr.open(path, mode="r", path=component)
    except Exception as exc:  # noqa: BLE001 -- zarr raises many kinds
        raise DataError(f"{path}: not a readable Zarr array ({exc})") from None
    if not hasattr(arr, "shape") or not hasattr(arr, "dtype"):
        raise UsageError(f"{path}: is a Zarr group; name the array with --dataset")
    source = path if component is None else f"{path}:{component}"
    _shape_2d(arr.shape, arr.dtype, source)
    return ZarrReader(os.path.abspath(path), component,
                      _column_select(columns, arr.shape[1], source), shown=path), \
        arr.shape, source


def _open_glob(client, spec, **options):
    return _open_files(client, expand_glob(spec), spec, options)


def _open_files(client, paths, spec, options):
    """Each file one chunk: read on a worker and held there (``("x", X, names)``); the
    client gets only each file's shape and column names (checked as in one process)."""
    futures = [client.submit(chunks.hold_file, FileReader(os.path.abspath(p), options, shown=p),
                             pure=False) for p in paths]
    heads = client.gather([client.submit(chunks.head_of, f) for f in futures])
    names = check_parts(spec, [(p, shape[1], names) for p, (shape, names) in zip(paths, heads)])
    bounds, i0 = [], 0
    for shape, _ in heads:
        bounds.append((i0, i0 + shape[0]))
        i0 += shape[0]
    return ChunkedData(futures, bounds, i0, heads[0][0][1], spec, names)


def from_array(client, X):
    """A Dask or NumPy array as :class:`ChunkedData` (a Dask array is computed on the
    workers, chunk by chunk along the rows; a NumPy array is scattered in row chunks)."""
    if hasattr(X, "dask") and hasattr(X, "to_delayed"):
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D (n_samples, n_features); got {X.ndim}-D")
        if any(np.isnan(c) for c in X.chunks[0]):
            X = X.compute_chunk_sizes()
        if len(X.chunks[1]) != 1:
            X = X.rechunk({1: -1})
        parts = X.to_delayed()[:, 0].tolist()
        futures = client.compute([_delayed_hold(p) for p in parts])
        bounds, i0 = [], 0
        for r in X.chunks[0]:
            bounds.append((i0, i0 + int(r)))
            i0 += int(r)
        return ChunkedData(futures, bounds, i0, int(X.shape[1]), "dask array")
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features); got {X.ndim}-D")
    n = X.shape[0]
    rows = chunk_rows(X.shape[1])
    bounds = [(i0, min(n, i0 + rows)) for i0 in range(0, n, rows)]
    # Submitted as tasks (not scattered): a chunk lost with a worker is made again.
    futures = [client.submit(_hold_array, np.array(X[i0:i1]), i0, pure=False)
               for i0, i1 in bounds]
    return ChunkedData(futures, bounds, n, X.shape[1], "array")


def _delayed_hold(part):
    import dask

    return dask.delayed(_hold_array)(part)


def _hold_array(X, i0=0):
    return ("x", _checked(X, "X", i0, None))
