"""eagle.algorithms: statistics, histograms, copies and gathers over arrays, written as hawk kernels.

`import eagle` does not load this package; import from it directly:
`from eagle.algorithms import var, std, norm, absmax, count_nonzero, dot, histogram, copy, fill_value, gather`.
Inputs are NumPy arrays or eagle.Arrays; every function takes `n=` (the first n values in flat order) and the
keywords `target=` ("host", the default, or a GPU target such as "spirv") and `threads=` (host threads).
Semantics, and what is not built yet, are in docs/algorithms.md.
"""

from eagle.algorithms.copying import copy, copy_with_offset, fill_value, gather
from eagle.algorithms.histogram import histogram
from eagle.algorithms.stats import absmax, count_nonzero, dot, norm, std, var

__all__ = ["absmax", "copy", "copy_with_offset", "count_nonzero", "dot", "fill_value", "gather", "histogram",
           "norm", "std", "var"]
