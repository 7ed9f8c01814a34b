"""eagle's view of the compile cache: the very module hawk.abi.cache, which the compiler shares.

This name is the same module object as hawk.abi.cache (not a copy), so state and monkeypatches are shared.
"""

import sys

from hawk.abi import cache as _cache

sys.modules[__name__] = _cache
