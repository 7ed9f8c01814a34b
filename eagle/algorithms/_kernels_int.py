"""The hawk kernels behind the integer forms of copy, fill_value and gather: integer output planes
(`Mutable[Index]`, int32 or int64 arrays; compiled per dtype).

A store into an integer plane converts as the reference's kernels do: a float truncates toward zero, an integer
wraps to the plane's width. An integer fill value travels as two exact float Params (`high` * 2**32 + `low`),
since a Param is one real number and int64 values past 2**53 would round.
"""

import hawk
from hawk import Index, Mutable, Param, Scalar

HALF = 4294967296  # 2**32


@hawk.kernel
def int_copy(k: Index, out: Mutable[Index]):
    out = k


@hawk.kernel
def float_to_int_copy(x: Scalar, out: Mutable[Index]):
    out = int(x)


@hawk.kernel
def int_fill(high: Param, low: Param, out: Mutable[Index]):
    out = int(high) * HALF + int(low)


@hawk.kernel
def float_to_int_fill(value: Param, out: Mutable[Index]):
    out = int(value)


@hawk.kernel
def int_gather(values: Index, perm: Index, out: Mutable[Index]):
    out = values.at(perm)
