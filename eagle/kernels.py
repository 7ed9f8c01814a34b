"""Kernels eagle itself runs (written in hawk, compiled like any user kernel).

Kernel bodies assign Mutable outputs, which linters read as unused locals: pyproject ignores F841 here.
"""

from __future__ import annotations

import hawk
from hawk import Mutable, Scalar


@hawk.kernel
def reduce_auto(values: Scalar, total: Mutable[Scalar]):
    total = hawk.sum(values)


@hawk.kernel
def reduce_compensated(values: Scalar, total: Mutable[Scalar]):
    total = hawk.sum(values, policy="compensated")


@hawk.kernel
def reduce_ordered(values: Scalar, total: Mutable[Scalar]):
    total = hawk.sum(values, policy="ordered")


