"""The one command-line shell of every lesson's measurement run.

Each lesson folder's ``__main__.py`` is one line, ``run(__package__, COMMANDS)``, so that
``python -m helpers.lessons.<topic> --help`` lists what it measures.  A :class:`Command`
adds its own options and returns the records it measured; the shell gives every command
the same ``--out`` (a folder, checked before anything runs), saves each record there
(``results/<device>/`` by default, see :func:`helpers.results.save`) and says where.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..results import Record, save


@dataclass(frozen=True)
class Command:
    """One thing a lesson's run measures: ``python -m helpers.lessons.<topic> [name] [options]``."""

    name: str  # the sub-command ("" when the lesson has one command)
    help: str
    run: Callable[[argparse.Namespace], Record | Sequence[Record] | int | None]
    options: Callable[[argparse.ArgumentParser], None] = field(default=lambda parser: None)
    check: Callable[[argparse.Namespace], None] = field(default=lambda args: None)  # ValueError: a usage error


def check_output_folder(folder: Path) -> Path:
    """``folder`` if it is, or can be made, a writable folder; else a ``ValueError`` that says why."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        what = "is a file" if existing == folder else f"is inside {existing}, which is a file"
        raise ValueError(f"--out {folder} {what}, not a folder: give a folder for the JSON and PNG files")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"--out {folder}: cannot write in {existing} (permission denied)")
    return folder


def _out(text: str) -> Path:
    try:
        return check_output_folder(Path(text))
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def parser_for(prog: str, description: str, commands: Sequence[Command]) -> argparse.ArgumentParser:
    """The parser: ``--out`` for all, and one sub-command per command (none when there is one)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    if len(commands) == 1 and not commands[0].name:
        commands[0].options(parser)
        parser.add_argument("--out", type=_out, default=None, help="folder for the records (default results/<device>/)")
        parser.set_defaults(command=commands[0])
        return parser
    sub = parser.add_subparsers(dest="name", required=True, metavar="COMMAND")
    for command in commands:
        one = sub.add_parser(command.name, help=command.help, description=command.help)
        command.options(one)
        one.add_argument("--out", type=_out, default=None, help="folder for the records (default results/<device>/)")
        one.set_defaults(command=command)
    return parser


def parse_args(prog: str, description: str, commands: Sequence[Command],
               argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The parsed options, each command's ``check`` passed; a bad option exits with a usage error naming it."""
    if not commands:
        raise ValueError(f"{prog} has no commands")
    parser = parser_for(prog, description, commands)
    args = parser.parse_args(argv)
    try:
        args.command.check(args)
    except ValueError as error:
        parser.error(str(error))
    return args


def parse(package: str, commands: Sequence[Command], argv: Sequence[str] | None = None) -> argparse.Namespace:
    """:func:`parse_args` for ``python -m <package>``, as :func:`run` parses it."""
    return parse_args(f"python -m {package}", _description(package), commands, argv)


def main(prog: str, description: str, commands: Sequence[Command], argv: Sequence[str] | None = None) -> int:
    """Parse, run the command, save what it returns; the exit status (1 when it returned one)."""
    args = parse_args(prog, description, commands, argv)
    done: Any = args.command.run(args)
    if isinstance(done, int) or done is None:
        return int(done or 0)
    for record in [done] if isinstance(done, Record) else done:
        print(f"wrote {save(record, args.out)}")
    return 0


def _description(package: str) -> str:
    module = importlib.import_module(package)
    return (module.__doc__ or package).strip().split("\n")[0]


def main_of(package: str, commands: Sequence[Command], argv: Sequence[str] | None = None) -> int:
    """:func:`main` for ``python -m <package>``: its package's docstring is the description."""
    return main(f"python -m {package}", _description(package), commands, argv)


def run(package: str, commands: Sequence[Command]) -> None:
    """What a lesson's ``__main__.py`` calls: :func:`main_of`, then exit with its status."""
    sys.exit(main_of(package, commands))
