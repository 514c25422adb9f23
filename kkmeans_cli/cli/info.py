"""``kkmeans info MODEL``: what a model file holds."""

import click


@click.command(epilog="\b\nExamples:\n  kkmeans info model.npz\n  kkmeans info model.npz --json")
@click.argument("model_path", metavar="MODEL")
@click.option("--json", is_flag=True, help="Print JSON.")
@click.option("--debug", is_flag=True, help="Show tracebacks of errors.")
def info(model_path, json, debug):
    """Print the metadata of a model file: format, kernel, k, n, d, sizes, how it was fitted."""
    from ..io.outputs import format_json
    from ..model.model_file import load_model
    from .report import format_rows, model_info, model_info_rows

    details = model_info(model_path, load_model(model_path))
    if json:
        click.echo(format_json(details), nl=False)
    else:
        click.echo(format_rows(model_info_rows(details)), nl=False)
