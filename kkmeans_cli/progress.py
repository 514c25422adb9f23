"""Progress reports of a fit: one protocol for every stage that reports.

``KernelKMeans.fit(X, progress=callback)`` (and ``kernel_matrix(X, progress=callback)``)
take a callable told how far the long stages are: ``callback(done, total, what)``, where
``what`` names the stage (the Nyström feature rows, the starts on a sample, the Lloyd passes of
a fit on a Dask cluster). A callable of two parameters, ``callback(done, total)``, is told of
the feature rows only. :func:`progress_adapter` turns either into the three-parameter form the
stages call, so each stage reports the same way whatever the caller passed.
"""
import inspect


def takes_what(callback):
    """Whether ``callback`` takes a third positional argument (the stage's name)."""
    try:
        params = inspect.signature(callback).parameters.values()
    except (TypeError, ValueError):
        return False
    return (sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params) >= 3
            or any(p.kind == p.VAR_POSITIONAL for p in params))


def progress_adapter(callback, stages=False):
    """``callback`` as ``progress(done, total, what)``, or None when it should not be told.

    A callback of three parameters is told of everything. One of two parameters
    (``(done, total)``) is told of the feature rows (``stages=False``) and of nothing else
    (``stages=True``: the starts, the passes)."""
    if callback is None:
        return None
    if takes_what(callback):
        return callback
    return None if stages else (lambda done, total, what: callback(done, total))
