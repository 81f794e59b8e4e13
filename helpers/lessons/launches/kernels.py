"""Notebook 09's own kernels: one launch each, with 0 to 5 array arguments, to time a launch's host cost
against the arguments it passes."""

from __future__ import annotations

from numba import cuda

@cuda.jit
def args0():
    pass


@cuda.jit
def args1(x0):
    i = cuda.grid(1)
    if i < x0.size:
        x0[i] = 1.0


@cuda.jit
def args2(x0, x1):
    i = cuda.grid(1)
    if i < x0.size:
        x0[i] = x1[i]


@cuda.jit
def args3(x0, x1, x2):
    i = cuda.grid(1)
    if i < x0.size:
        x0[i] = x1[i] + x2[i]


@cuda.jit
def args4(x0, x1, x2, x3):
    i = cuda.grid(1)
    if i < x0.size:
        x0[i] = x1[i] + x2[i] + x3[i]


@cuda.jit
def args5(x0, x1, x2, x3, x4):
    i = cuda.grid(1)
    if i < x0.size:
        x0[i] = x1[i] + x2[i] + x3[i] + x4[i]


ARITY_KERNELS = (args0, args1, args2, args3, args4, args5)
