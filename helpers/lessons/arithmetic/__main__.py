"""``python -m helpers.lessons.arithmetic {all,lanes,ncu,compile,show}``: the seed's three claims, measured."""

from helpers.harness.cli import run

from .measure import COMMANDS

run(__package__, COMMANDS)
