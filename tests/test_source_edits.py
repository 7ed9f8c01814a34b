"""hawk reads a kernel's (or func's) source from its file when the decorator runs. A file edited after it was
imported holds other lines there: the decorator must refuse by name, pointing at the file, instead of reading
another function's lines as the body (which once gave "'import' statements are not supported" for a kernel
that has none)."""

import importlib.util
import sys
import textwrap

import numpy as np
import pytest

import eagle
import hawk

MODULE = '''
def make(n):
    import hawk
    from hawk import Scalar

    @hawk.func
    def twice(a):
        return a * 2.0

    @hawk.kernel
    def k_edit(x: Scalar) -> Scalar:
        return hawk.sum(twice(x) + n)

    return k_edit


def make_plain():
    import hawk
    from hawk import Scalar

    @hawk.kernel
    def k_plain(x: Scalar) -> Scalar:
        return hawk.sum(x)

    return k_plain


def make_func():
    import hawk

    @hawk.func
    def thrice(a):
        return a * 3.0

    return thrice
'''


def _import(path):
    path.write_text(textwrap.dedent(MODULE))
    sys.modules.pop(path.stem, None)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_kernel_decorated_after_its_file_changed_is_refused_by_name(tmp_path):
    path = tmp_path / "edited_kernels.py"
    mod = _import(path)
    x = np.arange(5.0)
    assert float(eagle.deploy(mod.make(1.0)).run(x=x)) == float((x * 2.0 + 1.0).sum())  # (as imported: runs)
    path.write_text("import os\nimport sys\n\n" + textwrap.dedent(MODULE))  # lines shift under the loaded module
    with pytest.raises(hawk.KernelError) as err:
        mod.make(2.0)
    msg = str(err.value)
    assert str(path) in msg and "edited after it was imported" in msg and "re-import" in msg, msg
    assert "func 'twice'" in msg or "kernel 'k_edit'" in msg, msg
    with pytest.raises(hawk.KernelError, match="kernel 'k_plain'.*edited after it was imported"):
        mod.make_plain()
    with pytest.raises(hawk.KernelError, match="func 'thrice'.*edited after it was imported"):
        mod.make_func()


def test_a_kernel_named_after_its_def_still_reads_its_source():
    """A factory may name the kernels it makes (eagle.algorithms does): the def is found by its code's name."""
    from hawk import Scalar

    def body(x: Scalar) -> Scalar:
        return hawk.sum(x)

    body.__name__ = body.__qualname__ = "renamed_sum"
    k = hawk.kernel(body)
    assert k.name == "renamed_sum"
    assert float(eagle.deploy(k).run(x=np.arange(4.0))) == 6.0
