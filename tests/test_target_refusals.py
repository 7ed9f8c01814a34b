"""A target's refusal of a kernel (made after lowering, which keeps no source locations) still points at the
user's file and line: the line of the call it names.

The spirv target computes every math function the front end makes today (hawk/targets/spirv_math*.py), so the
refusal is made here by taking erf off its lists (spirv_math's F64_MORE and F32_FUNCS, onto spirv's NO_SPIRV), with
a disk cache of the test's own so that the kernel is really compiled.
"""

import inspect

import numpy as np
import pytest

import eagle
import hawk
import hawk.artifact
import hawk.math as m
import hawk.targets.spirv as spirv_target
import hawk.targets.spirv_math as spirv_math
from hawk import Scalar


@hawk.kernel
def _erf_late(x: Scalar) -> Scalar:
    y = x * 2.0
    return m.erf(y)


_CALL_LINE = inspect.getsourcelines(_erf_late.source.fn)[1] + 3


@pytest.fixture(autouse=True)
def spirv_lacks_erf(monkeypatch, tmp_path):
    monkeypatch.setattr(spirv_math, "F64_MORE", tuple(f for f in spirv_math.F64_MORE if f != "erf"))
    monkeypatch.setattr(spirv_math, "F32_FUNCS", tuple(f for f in spirv_math.F32_FUNCS if f != "erf"))
    monkeypatch.setattr(spirv_target, "NO_SPIRV", spirv_target.NO_SPIRV | {"erf"})
    monkeypatch.setenv("HAWK_CACHE_DIR", str(tmp_path / "cache"))


def test_a_spirv_refusal_names_the_line_of_the_call():
    with pytest.raises(hawk.KernelError) as info:
        eagle.deploy(_erf_late, target="spirv").run(x=np.ones(4))
    err = info.value
    assert err.file == __file__ and err.line == _CALL_LINE, str(err)
    assert str(err).startswith(f"{__file__}:{_CALL_LINE}: kernel '_erf_late': target 'spirv' cannot compute "
                               "hawk.math.erf on float64 lanes")


def test_an_artifact_build_refusal_names_the_line_of_the_call(tmp_path):
    with pytest.raises(hawk.KernelError) as info:
        hawk.artifact.build(_erf_late, tmp_path / "out", targets=("spirv",))
    assert info.value.line == _CALL_LINE, str(info.value)
