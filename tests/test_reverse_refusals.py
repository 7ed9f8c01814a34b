"""What the reverse cannot differentiate is refused before any launch, naming the kernel and pointing at the
user's line (hawk.KernelError), or naming the plane (eagle.InputError): never a silent zero."""

import numpy as np
import pytest

import eagle
import hawk
import hawk.math as m
from hawk import Index, Mutable, Scalar


@hawk.kernel
def store_and_add(x: Scalar, k: Index, h: Mutable["slot":4]):
    hawk.scatter(h, policy="plain")[k] = x
    hawk.scatter(h, policy="plain")[k] += x


@hawk.kernel
def at_in_loop_in_if(x: Scalar) -> Scalar:
    y = 0.0
    if x > 0.0:
        for k in range(2):
            y = y + x.at(k) * m.sin(x)
    return y


CASES = [
    (store_and_add, dict(x=np.ones(4), k=np.zeros(4, np.int32)), {"h": np.ones(4)},
     ["'h'", "both stored into (=) and added into (+=)"]),
    (at_in_loop_in_if, dict(x=np.ones(4)), np.ones(4), ["inside a for loop inside an if"]),
]


@pytest.mark.parametrize("kernel, planes, ct, words", CASES, ids=[c[0].name for c in CASES])
def test_refused_before_any_launch_at_the_users_line(kernel, planes, ct, words):
    plan = eagle.deploy(kernel)
    with pytest.raises(hawk.KernelError) as info:
        plan.reverse(ct, **planes)
    text = str(info.value)
    assert f"kernel '{kernel.name}'" in text
    for word in words:
        assert word in text, text
    if "both stored" not in text:  # found on an op: the file and line of the kernel's own code
        assert text.startswith(f"{__file__}:"), text
    assert plan.last_chunks == ()  # nothing launched
