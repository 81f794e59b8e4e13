"""The one text-table formatter (helpers/harness/tables.py): its layout, and the fixed layouts of checked outputs."""

from __future__ import annotations

import doctest

import pytest

from helpers.harness import tables
from helpers.harness.tables import table


def test_the_docstring_examples_print_what_they_say():
    assert doctest.testmod(tables).failed == 0


def test_least_widths_and_the_gap_fix_a_layout_whatever_the_data():
    text = table([["add", 2, "16 KiB"], ["vec4_streaming", 12, "72 KiB"]], ["kernel", "loads", "in flight/SM"],
                 widths=(15, 6, 12), gap=1)
    assert text.splitlines() == ["kernel           loads in flight/SM",
                                 "add                  2       16 KiB",
                                 "vec4_streaming      12       72 KiB"]
    assert table([["a", 1]], ["x", "y"], widths=(0, 3)) == "x    y\na    1"  # 0: as wide as the cells


def test_a_cell_wider_than_its_least_width_widens_the_column():
    assert table([["scale_by_reciprocal", 1]], ["kernel", "n"], widths=(6, 0), gap=1).splitlines()[1] == \
        "scale_by_reciprocal 1"


@pytest.mark.parametrize("kwargs, message", [({"widths": (1,)}, "one width"), ({"widths": (1, -1)}, "one width"),
                                             ({"gap": 0}, "at least 1"), ({"align": "lx"}, "align")])
def test_bad_layouts_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        table([["a", 1]], ["x", "y"], **kwargs)
