"""The ``harness`` command.

Each sub-command lives in its own module ``harness/cli/cmd_<name>.py`` exposing
``add_parser(subparsers)``; modules are discovered, so adding a command touches no other file.
Command modules import heavy libraries (torch, transformers, faiss) inside their handlers only,
so ``harness --help`` stays instant.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from typing import NoReturn

from harness.errors import ConfigError, HarnessError, print_one_line

EXAMPLES = """\
examples:
  harness list benches                         # the seven QA sets, mini variants and their counts
  harness run --method all --bench mini-multihop --limit 10
  harness score predictions.jsonl              # score any predictions file with our metrics
  harness retrieve "who wrote hamlet" --k 3    # a quick look at the default retriever
  harness <command> --help                     # every command has examples
"""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and examples as written, and every option's default shown in its help: appended
    as ``(default: X)`` unless the help already speaks of its default or there is none to show
    (None, False or "": an unset option or a flag; 0 is shown)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (
            not action.option_strings
            or any(action.default is x for x in (None, False, argparse.SUPPRESS))
            or action.default == ""
            or text == argparse.SUPPRESS
            or "default" in text.lower()
        ):
            return action.help
        if isinstance(action.default, list | tuple):
            return f"{text} (default: {' '.join(map(str, action.default))})".replace("%", "%%")
        return text + " (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (``harness run: error: argument --limit: ...``)
    naming the command and ``--help``, instead of the whole usage block; exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def positive_int(text: str) -> int:
    """argparse ``type=``: an integer >= 1 (``--limit 0`` is one line, not a traceback later)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer (1 or more), got {n}")
    return n


def non_negative_int(text: str) -> int:
    """argparse ``type=``: an integer >= 0."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {n}")
    return n


def positive_float(text: str) -> float:
    """argparse ``type=``: a finite number > 0 (seconds, rates)."""
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (x > 0 and x != float("inf")):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return x


def port(text: str) -> int:
    """argparse ``type=``: a TCP port, 0 (any free port) to 65535."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0-65535, got {n}")
    return n


def add_command(
    sub: argparse._SubParsersAction,
    name: str,
    *,
    help: str,
    description: str | None = None,
    examples: str,
    handler: Callable[[argparse.Namespace], int | None],
) -> argparse.ArgumentParser:
    """Create a sub-command parser whose ``--help`` ends with worked examples."""
    p = sub.add_parser(
        name,
        help=help,
        description=description or help,
        epilog="examples:\n" + examples.rstrip() + "\n",
        formatter_class=HelpFormatter,
    )
    p.set_defaults(func=handler)
    return p


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``harness`` parser. Given the command line ``argv``, only the invoked engine command's
    module is imported (``harness score`` reads no other ``cmd_*.py`` and not the entry points:
    importing them all was a tenth of scoring 100k rows); with no command, ``--help`` first, or a
    name that is not an engine command, every command is added, so the listing and the one-line
    error for an unknown command stay as they were."""
    parser = Parser(
        prog="harness",
        description="Benchmark and evaluation harness for retrieval-augmented reasoning.",
        epilog=EXAMPLES,
        formatter_class=HelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    invoked = _invoked_command(argv)
    # ``serve-retriever`` lives in cmd_serve_retriever.py; a name with "_" is not a command's name
    module = invoked.replace("-", "_") if invoked is not None and "_" not in invoked else None
    if module is not None and module in _engine_command_modules():
        importlib.import_module(f"harness.cli.cmd_{module}").add_parser(sub)
        return parser
    for _, add in sorted(commands().items()):
        add(sub)
    return parser


def _invoked_command(argv: Sequence[str] | None) -> str | None:
    """The command named on the command line: its first word, when no option comes before it (the
    top-level parser's only options are ``-h``/``--help``)."""
    args = sys.argv[1:] if argv is None else list(argv)
    return args[0] if args and not args[0].startswith("-") else None


def _engine_command_modules() -> list[str]:
    """The names of the engine's ``harness/cli/cmd_*.py`` commands, without importing them."""
    import harness.cli as pkg

    return [
        info.name.removeprefix("cmd_")
        for info in pkgutil.iter_modules(pkg.__path__)
        if info.name.startswith("cmd_")
    ]


COMMANDS_GROUP = "rar_harness.commands"
"""Entry-point group through which another package adds ``harness`` sub-commands (the leaderboard
app adds ``export`` and ``leaderboard``): ``name = "package.module:add_parser"``; the engine never
imports those packages itself."""


def commands() -> dict[str, Callable[[argparse._SubParsersAction], object]]:
    """Every sub-command's ``add_parser``: the engine's ``harness/cli/cmd_*.py`` and those of the
    installed :data:`COMMANDS_GROUP` entry points."""
    from importlib.metadata import entry_points

    out: dict[str, Callable[[argparse._SubParsersAction], object]] = {}
    for name in _engine_command_modules():
        out[name] = importlib.import_module(f"harness.cli.cmd_{name}").add_parser
    for ep in entry_points(group=COMMANDS_GROUP):
        if ep.name in out:
            raise ConfigError(
                f"entry point {ep.value!r} ({COMMANDS_GROUP}) names a command harness has: {ep.name}"
            )
        out[ep.name] = ep.load()
    return out


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C would be: runs end ``interrupted`` with their time recorded.
    A job started in the background (``nohup ... &``) ignores SIGINT, so ``kill PID`` is how it
    is stopped cleanly."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated()


@contextmanager
def _sigterm_interrupts():
    """SIGTERM raises :class:`Terminated` for the duration (main thread only: ``signal`` allows
    no other); the previous handler is restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        with _sigterm_interrupts():
            return int(args.func(args) or 0)
    except HarnessError as e:
        return print_one_line(e)
    except KeyboardInterrupt as e:
        if hasattr(args, "resume"):  # a command whose work can be resumed (run, train)
            print("interrupted; finished samples are saved (use --resume to continue)", file=sys.stderr)
        else:  # a server, an export, ...: nothing to resume
            print(f"harness {args.command}: stopped", file=sys.stderr)
        return 143 if isinstance(e, Terminated) else 130


if __name__ == "__main__":
    sys.exit(main())
