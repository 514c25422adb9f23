"""``kkmeans info MODEL``: what a model file holds."""
import click

from .._options import GRAPH_KERNELS
from .._text import plural


@click.command(epilog="\b\nExamples:\n  kkmeans info model.npz\n  kkmeans info model.npz --json")
@click.argument("model_path", metavar="MODEL")
@click.option("--json", is_flag=True, help="Print JSON.")
@click.option("--debug", is_flag=True, help="Show tracebacks of errors.")
def info(model_path, json, debug):
    """Print the metadata of a model file: format, kernel, k, n, d, sizes, how it was fitted."""
    from ..io.outputs import AtomicOutputs, check_outputs, format_json
    from ..model.model_file import load_model
    from .report import format_rows

    check_outputs([("-", "model information", "stdout")])
    details = model_info(model_path, load_model(model_path))
    text = format_json(details) if json else format_rows(model_info_rows(details))
    with AtomicOutputs() as out:
        out.open("-", "model information").write(text.encode())


def model_info(path, loaded):
    """The metadata ``kkmeans info`` shows, as a JSON-ready dict.

    Parameters
    ----------
    path : str
    loaded : LoadedModel
    """
    import numpy as np

    meta = loaded.meta
    result = loaded.result
    sizes = [int(s) for s in np.bincount(result.labels, minlength=meta["n_clusters"])]
    info = {"file": path, "format": meta["format"], "format_version": meta["format_version"],
            "kkmeans_version": meta.get("kkmeans_version"), **result.kernel.params(),
            "n_clusters": meta["n_clusters"], "n_samples": meta["n_samples"],
            "n_features": meta["n_features"], "cluster_sizes": sizes,
            "inertia": float(result.inertia), "scale": meta["scale"], "dtype": meta["dtype"]}
    if loaded.scaler.method != "none":
        info["scale_offset"] = [float(v) for v in loaded.scaler.offset]
        info["scale_factor"] = [float(v) for v in loaded.scaler.factor]
    if getattr(result.kernel, "offset", None) is not None:  # the kernel's centring (format 2)
        info["kernel_offset"] = [float(v) for v in result.kernel.offset]
    for key in ("algorithm", "seed", "n_init", "n_iter", "converged", "approx", "n_landmarks",
                "nystroem_rank", "source",
                "columns", "silhouette", "silhouette_n_used", "silhouette_exact", "sweep",
                "created", "fit_stats", "options"):
        if key in meta:
            info[key] = meta[key]

    info.update({key: meta[key] for key in PSD_INFO_KEYS if key in meta})
    info.update({key: meta[key] for key in ("objective", "refine", "ncut", "optima", "graph")
                 if key in meta})
    if getattr(result, "graph", None) is not None:
        info["ncut"] = result.graph.ncut    # as read: a file's cut of nothing rounded below 0 is 0
    if fixed_starts(info):
        info.pop("n_init", None)    # asked for, but it played no part (the starts are listed)
    return info


def fixed_starts(info):
    """Whether ``info`` is of a graph fit that ran its fixed set of default starts (listed in
    ``optima.start_kinds``), where ``n_init`` played no part (it counts 'spectral' starts)."""
    kinds = (info.get("optima") or {}).get("start_kinds")
    return bool(info.get("graph") and kinds
                and (info.get("options") or {}).get("init") != "spectral")


#: Options that are a pair of flags (``--header/--no-header``) whose default, neither given,
#: is neither value: False is said too.
FLAG_PAIRS = ("header", "whiten")


def option_text(key, value):
    """A stored option as the command line spells it: ``--with-data`` for a flag given,
    ``--no-header`` for the second of a pair, ``--name=value`` else; None for an option
    not given (None, False, or a config's ``whiten: auto``, the default)."""
    flag = "--" + key.replace("_", "-")
    if value is None or (key == "whiten" and value == "auto"):
        return None
    if isinstance(value, bool):
        return flag if value else (f"--no-{flag[2:]}" if key in FLAG_PAIRS else None)
    return f"{flag}={value}"


def model_info_rows(info):
    """(label, value) rows of :func:`model_info` for people."""
    params = ", ".join(f"{key}={info[key]:g}" for key in ("gamma", "degree", "coef0")
                       if key in info)
    options = info.get("options", {})
    unused = ("data", "quiet", "debug", "json")
    if info.get("graph"):           # a graph fit: the dense kernels' settings played no part
        from ..model.params import GRAPH_UNUSED

        unused += GRAPH_UNUSED
    if info["kernel"] not in GRAPH_KERNELS:  # the edge weights of kernel knn's graph alone
        unused += ("weighting", "neighbor_search", "whiten")
    if fixed_starts(info):
        unused += ("n_init",)       # the default starts on a graph are a fixed set
    if info.get("sweep"):          # the k chosen (its own row); sweep takes --k, not -k
        unused += ("n_clusters",)
    kinds = (info.get("optima") or {}).get("start_kinds")
    fitted = " ".join(filter(None, (option_text(key, value) for key, value in options.items()
                                    if key not in unused)))
    rows = [
        ("file", info["file"]),
        ("format", f"{info['format']} version {info['format_version']} "
                   f"(written by kkmeans {info.get('kkmeans_version')})"),
        ("kernel", f"{info['kernel']}({params})" if params else info["kernel"]),
        ("k", str(info["n_clusters"])),
        ("samples", str(info["n_samples"])),
        ("features", str(info["n_features"])
         + (f" ({', '.join(info['columns'])})" if info.get("columns") else "")),
        ("cluster sizes", ", ".join(str(s) for s in info["cluster_sizes"])),
        ("inertia", f"{info['inertia']:.6g}"),
        ("scaling", info["scale"]),
        ("dtype", info["dtype"]),
        ("fit", f"seed={info.get('seed')} {_starts_text(info, kinds)} "
                f"n_iter={info.get('n_iter')} converged={info.get('converged')}"
                + ("" if info.get("graph") else f" algorithm={info.get('algorithm')}")),
    ]
    if info.get("silhouette") is not None:
        how = ("exact" if info.get("silhouette_exact")
               else f"sample of {plural(info.get('silhouette_n_used'), 'point')}")
        rows.insert(-1, ("silhouette", f"{info['silhouette']:.6f} ({how})"))
    if info.get("sweep"):
        sweep = info["sweep"]
        rows.insert(-1, ("sweep", f"k = {sweep.get('best_k')} chosen by "
                                  f"{str(sweep.get('metric')).replace('_', '-')} among "
                                  f"{sweep.get('ks')}"))
    if info.get("source"):
        rows.insert(4, ("trained on", str(info["source"])))
    rows[-1:-1] = _psd_info_rows(info)
    if info.get("approx") == "nystroem":
        landmarks = plural(info.get("n_landmarks"), "landmark")
        rows.insert(-1, ("approximation", f"Nyström, {landmarks} "
                                          f"(rank {info.get('nystroem_rank')})"))
    if info.get("graph"):
        from .report import graph_text

        rows.insert(3, ("graph", graph_text(info["graph"])))
        search = SEARCH_TEXT.get(info["graph"].get("search"))
        if search:
            rows.insert(4, ("neighbour search", search))
    if info.get("objective") == "ncut":
        rows[-1:-1] = [("objective", f"ncut = {info.get('ncut', float('nan')):.6g} "
                                     f"(normalized cut)")]
    if fitted:
        rows.append(("options", fitted))
    rows.append(("created", str(info.get("created"))))
    return rows


def _starts_text(info, kinds):
    """The fit line's starts: a graph fit's own (counted by kind, and the best), else
    n_init."""
    if not (info.get("graph") and kinds):
        return f"n_init={info.get('n_init')}"
    from .report import starts_mix

    best = info["optima"].get("best_start")
    return f"starts={len(kinds)} ({starts_mix(kinds)}" + (f"; best {best})" if best else ")")


#: the ``search`` of a model's graph meta, for people (models written before it was recorded have none)
SEARCH_TEXT = {"kd-tree": "exact (k-d tree)", "exact": "exact",
               "approximate": "approximate (pynndescent's nearest-neighbour descent)"}


PSD_INFO_KEYS = ("solver", "psd_repair", "psd_sigma", "psd_checked", "psd", "psd_lambda_min",
             "psd_objective", "psd_objective_original")


def _psd_info_rows(info):
    """(label, value) rows of ``kkmeans info`` for the PSD state and solver."""
    rows = []
    if info.get("solver", "lloyd") != "lloyd":
        rows.append(("solver", str(info["solver"])))
    if info.get("psd_checked"):
        rows.append(("psd check", f"{'PSD' if info.get('psd') else 'not PSD'}, smallest "
                                  f"eigenvalue {info.get('psd_lambda_min'):.6g}"))
    repair = info.get("psd_repair", "none")
    if repair != "none":
        text = repair + (f", sigma = {info.get('psd_sigma', 0.0):.6g}"
                         if repair == "lingoes" else "")
        if "psd_objective_original" in info:
            text += (f" (objective {info['psd_objective']:.6g} repaired, "
                     f"{info['psd_objective_original']:.6g} original)")
        rows.append(("psd repair", text))
    return rows
