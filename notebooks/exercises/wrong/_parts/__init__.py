"""The right pieces that several known-wrong solutions (and correct ones written an unusual way) share.

One module per exercise (``_parts.ex5``): each fixture imports the pieces it gets right
and writes out the one it gets wrong, so that the mistake stands in its own file. Not a
solution to hand out: students find the same pieces in the solution notebooks.
"""
