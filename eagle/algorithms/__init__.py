"""eagle.algorithms: statistics, histograms, scans, sorts, runs, copies and gathers over arrays, as hawk kernels.

`import eagle` does not load this package; import from it directly:
`from eagle.algorithms import var, std, norm, absmax, count_nonzero, dot, histogram, exclusive_scan,
inclusive_scan, copy, fill_value, argsort, sort_by_key, gather, unique, reduce_by_key`.
Inputs are NumPy arrays or eagle.Arrays, on the host or on a GPU target's device (a device array's device picks
the target, and array results stay there); every function takes `n=` (the first n values in flat order) and the
keywords `target=` ("host", the default, or a GPU target such as "spirv") and `threads=` (host threads).
Semantics, and what is not built yet, are in docs/algorithms.md.
"""

from eagle.algorithms.copying import copy, copy_with_offset, fill_value, gather
from eagle.algorithms.histogram import histogram
from eagle.algorithms.runs import reduce_by_key, unique
from eagle.algorithms.scans import exclusive_scan, inclusive_scan
from eagle.algorithms.sorting import argsort, sort_by_key
from eagle.algorithms.stats import absmax, count_nonzero, dot, norm, std, var

__all__ = ["absmax", "argsort", "copy", "copy_with_offset", "count_nonzero", "dot", "exclusive_scan",
           "fill_value", "gather", "histogram", "inclusive_scan", "norm", "reduce_by_key", "sort_by_key", "std",
           "unique", "var"]
