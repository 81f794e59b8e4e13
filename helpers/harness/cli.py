"""The one command-line shell of every lesson's measurement run.

Each lesson folder's ``__main__.py`` is one line, ``run(__package__, COMMANDS)``, so that
``python -m helpers.lessons.<topic> --help`` lists what it measures.  Every command gets the
same ``--out`` (a folder, checked before anything runs); the records a command returns are
saved there (``results/<device>/`` by default, see :func:`helpers.results.save`).
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


def _out(text: str) -> Path:
    """``--out``: a folder that is, or can be made, writable; else a usage error saying why."""
    folder = existing = Path(text)
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        what = "is a file" if existing == folder else f"is inside {existing}, which is a file"
        raise argparse.ArgumentTypeError(f"--out {folder} {what}, not a folder: give a folder for the JSON and PNG "
                                         "files")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"--out {folder}: cannot write in {existing} (permission denied)")
    return folder


def parser_for(prog: str, description: str, commands: Sequence[Command]) -> argparse.ArgumentParser:
    """The parser: ``--out`` for all, and one sub-command per command (none when there is one)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    single = len(commands) == 1 and not commands[0].name
    sub = None if single else parser.add_subparsers(dest="name", required=True, metavar="COMMAND")
    for command in commands:
        one = parser if sub is None else sub.add_parser(command.name, help=command.help, description=command.help)
        command.options(one)
        one.add_argument("--out", type=_out, default=None, help="folder for the records (default results/<device>/)")
        one.set_defaults(command=command)
    return parser


def parse(package: str, commands: Sequence[Command], argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The options of ``python -m <package>``, each command's ``check`` passed; a bad one exits naming it."""
    if not commands:
        raise ValueError(f"python -m {package} has no commands")
    module = importlib.import_module(package)
    parser = parser_for(f"python -m {package}", (module.__doc__ or package).strip().split("\n")[0], commands)
    args = parser.parse_args(argv)
    try:
        args.command.check(args)
    except ValueError as error:
        parser.error(str(error))
    return args


def main_of(package: str, commands: Sequence[Command], argv: Sequence[str] | None = None) -> int:
    """Parse, run the command, save what it returns; the exit status (the command's, when it returns one)."""
    args = parse(package, commands, argv)
    done: Any = args.command.run(args)
    if isinstance(done, int) or done is None:
        return int(done or 0)
    for record in [done] if isinstance(done, Record) else done:
        print(f"wrote {save(record, args.out)}")
    return 0


def run(package: str, commands: Sequence[Command]) -> None:
    """What a lesson's ``__main__.py`` calls: :func:`main_of`, then exit with its status."""
    sys.exit(main_of(package, commands))
