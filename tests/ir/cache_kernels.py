"""Kernels shared by test_cache.py and the fresh processes it starts (which import this file by path)."""

import hawk
from hawk import Index, Mutable, Scalar


@hawk.kernel
def ir_c_energy(v: Scalar, w: Scalar, total: Mutable[Scalar], scaled: Mutable[Scalar]):
    total = hawk.sum(v * v * w)
    scaled = v * 0.5 + w


@hawk.kernel
def ir_c_bykey(key: Index, v: Scalar, acc: Mutable["slot":4]):
    hawk.scatter(acc)[key] += v
