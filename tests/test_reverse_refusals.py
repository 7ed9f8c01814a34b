"""What the reverse cannot differentiate is refused before any launch, naming the kernel and pointing at the
user's line (hawk.KernelError), or naming the plane (eagle.InputError): never a silent zero. (Refusals at a line:
tests/test_scan_keyed_reverse.py, conftest's bt_reverse_refused. A `.at` read in a loop inside an if, refused here
until stop 61, is differentiated: tests/test_reverse_loop_in_if.py.)"""

import numpy as np
import pytest

import eagle
import hawk
from hawk import Index, Mutable, Scalar


@hawk.kernel
def store_and_add(x: Scalar, k: Index, h: Mutable["slot":4]):
    hawk.scatter(h, policy="plain")[k] = x
    hawk.scatter(h, policy="plain")[k] += x


CASES = [
    (store_and_add, dict(x=np.ones(4), k=np.zeros(4, np.int32)), {"h": np.ones(4)},
     ["'h'", "both stored into (=) and added into (+=)"]),
]


@pytest.mark.parametrize("kernel, planes, ct, words", CASES, ids=[c[0].name for c in CASES])
def test_refused_before_any_launch_naming_the_kernel(kernel, planes, ct, words):
    plan = eagle.deploy(kernel)
    with pytest.raises(hawk.KernelError) as info:
        plan.reverse(ct, **planes)
    text = str(info.value)
    assert f"kernel '{kernel.name}'" in text
    for word in words:
        assert word in text, text
    assert plan.last_chunks == ()  # nothing launched
