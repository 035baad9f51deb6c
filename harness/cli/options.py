"""The options several commands share, each defined once: ``--db``, ``--data-dir``,
``--protocol``, ``--model``, ``--corpus``, ``--device`` and the servers' connection limits; and
:func:`run_choices`, the one place a command's parsed options become the run set-up's typed
input (:class:`harness.eval.setup.RunChoices`).

Each ``add_*`` helper adds its option where it is called, so a command's ``--help`` lists its
options in the order the command adds them; ``default`` and ``help`` are the command's own where
the option means something narrower there. Nothing heavy is imported here (``harness --help``).
The judge's and the retrieval commands' options are in :mod:`harness.cli.judge_options` and
:mod:`harness.cli.retrieval_options`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from harness.device import check_device_spec
from harness.errors import ConfigError

if TYPE_CHECKING:
    import pydantic

    from harness.eval.setup import RunChoices

DEFAULT_DB = Path("results/harness.duckdb")
DEFAULT_MODEL = "smollm2-135m-instruct"
CORPUS_HELP = "corpus jsonl for protocols without a packaged one"


def add_db_arg(
    p: argparse.ArgumentParser | argparse._ArgumentGroup,
    *,
    default: Path | None = DEFAULT_DB,
    help: str = "results database",
) -> None:
    """``--db``: the results file (DuckDB)."""
    p.add_argument("--db", type=Path, default=default, help=help)


def add_data_dir_arg(
    p: argparse.ArgumentParser | argparse._ArgumentGroup,
    *,
    help: str = "directory with the training splits",
) -> None:
    """``--data-dir``: full datasets instead of the packaged rows (see DATA.md)."""
    p.add_argument("--data-dir", type=Path, default=None, help=help)


def add_protocol_arg(
    p: argparse.ArgumentParser | argparse._ArgumentGroup,
    *,
    default: str | None = "mini",
    help: str = "protocol preset (see `harness list protocols`)",
) -> None:
    """``--protocol``: a protocol preset (or, for commands that read results, a stored id)."""
    p.add_argument("--protocol", default=default, help=help)


def add_model_arg(
    p: argparse.ArgumentParser | argparse._ArgumentGroup,
    *,
    default: str | None = DEFAULT_MODEL,
    help: str = "base model: name or local HF dir",
) -> None:
    """``--model``: the model a command runs, trains or exports."""
    p.add_argument("--model", default=default, help=help)


def add_corpus_arg(p: argparse.ArgumentParser | argparse._ArgumentGroup, *, help: str = CORPUS_HELP) -> None:
    """``--corpus``: a corpus file (wiki-18 jsonl) for a protocol or retriever over it."""
    p.add_argument("--corpus", type=Path, default=None, help=help)


def device_arg(value: str) -> str:
    """argparse type for ``--device`` (:func:`harness.device.check_device_spec`)."""
    try:
        return check_device_spec(value)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_device_arg(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, *, what: str, default: str | None = "auto"
) -> None:
    """The one ``--device`` option (``what``: which model the device is for, for the help;
    ``default`` None where the option only applies to some of the command's backends)."""
    parser.add_argument(
        "--device",
        type=device_arg,
        default=default,
        help=f"where {what} runs: auto (the first GPU when torch sees one, else the CPU; the default), "
        "cpu, cuda, cuda:N",
    )


def add_connection_limit_args(
    p: argparse.ArgumentParser | argparse._ArgumentGroup,
    *,
    max_body_bytes: int,
    read_timeout_s: float,
    max_connections: int,
    beyond_connections: str,
) -> None:
    """A server's connection limits, ``--max-body-bytes``, ``--read-timeout`` and
    ``--max-connections`` (serve-model, serve-retriever). The defaults come from the server's
    limits model; ``beyond_connections`` says what that server does past the last connection."""
    p.add_argument(
        "--max-body-bytes",
        type=int,
        default=max_body_bytes,
        help=f"largest request body in bytes, 413 above (default {max_body_bytes})",
    )
    p.add_argument(
        "--read-timeout",
        type=float,
        default=read_timeout_s,
        help=f"seconds a client has to send a whole request, 408 after (default {read_timeout_s:g})",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        default=max_connections,
        help=f"open connections; {beyond_connections} (default {max_connections})",
    )


def output_dir(path: Path, flag: str = "--out") -> Path:
    """``path`` as a directory a command writes into (made later): a :class:`ConfigError` in one line
    when it, or a folder above it, is a file (``mkdir`` raised FileExistsError / NotADirectoryError)."""
    for p in (path, *path.parents):
        if p.exists() and not p.is_dir():
            what = "is a file" if p == path else f"is under {p}, which is a file"
            raise ConfigError(f"{flag} {path} {what}; give a directory (it is created if missing)")
    return path


def output_file(path: Path, flag: str = "--out", suffix: str = ".csv") -> Path:
    """``path`` as a file a command writes (replacing it): a :class:`ConfigError` in one line when it
    is a directory (the example path it suggests ends in ``suffix``), or when a folder above it is
    a file."""
    if path.is_dir():
        raise ConfigError(f"{flag} {path} is a directory; give a file path (e.g. {path / 'out'}{suffix})")
    output_dir(path.parent, flag=f"{flag} {path}: its folder")
    return path


def limits_error(e: pydantic.ValidationError) -> ConfigError:
    """One line naming the flag behind a server limits model's first validation error
    (``read_timeout_s`` is ``--read-timeout``; any other field ``--field-name``)."""
    first = e.errors()[0]
    field = str(first["loc"][0])
    flag = "--read-timeout" if field == "read_timeout_s" else "--" + field.replace("_", "-")
    return ConfigError(f"{flag} {first['input']}: {first['msg'].lower()}")


def run_choices(args: argparse.Namespace) -> RunChoices:
    """The run set-up's input from a command's parsed options (``harness run``, ``train``,
    ``sft``); an option the command does not have is None."""
    from harness.eval.setup import RunChoices

    def opt(name: str):
        return getattr(args, name, None)

    return RunChoices(
        protocol=args.protocol,
        db=args.db,
        corpus=opt("corpus"),
        data_dir=opt("data_dir"),
        retriever_url=opt("retriever_url"),
        retriever_declare=opt("retriever_declare"),
        limit=opt("limit"),
        sample=opt("sample"),
        seed=opt("seed"),
        top_k=opt("top_k"),
    )
