"""A target's refusal of a kernel (made after lowering, which keeps no source locations) still points at the
user's file and line: the line of the call it names."""

import inspect

import numpy as np
import pytest

import eagle
import hawk
import hawk.artifact
import hawk.math as m
from hawk import Scalar


@hawk.kernel
def _erf_late(x: Scalar) -> Scalar:
    y = x * 2.0
    return m.erf(y)


_CALL_LINE = inspect.getsourcelines(_erf_late.source.fn)[1] + 3


def test_a_spirv_refusal_names_the_line_of_the_call():
    with pytest.raises(hawk.KernelError) as info:
        eagle.deploy(_erf_late, target="spirv").run(x=np.ones(4))
    err = info.value
    assert err.file == __file__ and err.line == _CALL_LINE, str(err)
    assert str(err).startswith(f"{__file__}:{_CALL_LINE}: kernel '_erf_late': target 'spirv' cannot compute "
                               "hawk.math.erf on float64 lanes")


def test_an_artifact_build_refusal_names_the_line_of_the_call(tmp_path):
    with pytest.raises(hawk.KernelError) as info:
        hawk.artifact.build(_erf_late, tmp_path, targets=("spirv",))
    assert info.value.line == _CALL_LINE, str(info.value)
