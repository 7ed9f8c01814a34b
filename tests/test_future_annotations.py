"""Kernels in modules that use `from __future__ import annotations` (annotations stay strings until read)."""

import importlib.util
import textwrap

import numpy as np

import eagle

SOURCE = textwrap.dedent('''
    from __future__ import annotations

    import hawk
    from hawk import Grid, Scalar


    def make(cols: int):
        @hawk.kernel
        def fa_row_total(g: Grid["row", "col":cols], x: Scalar) -> Scalar:
            return hawk.sum(x, over="col")

        return fa_row_total
''')


def test_string_annotations_see_the_closure(tmp_path):
    path = tmp_path / "fa_kernels.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("fa_kernels", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    kernel = mod.make(7)  # the extent 7 lives only in make()'s closure
    x = np.random.default_rng(81).normal(size=(3, 7))
    np.testing.assert_allclose(np.asarray(eagle.deploy(kernel).run(x=x, row=3)), x.sum(axis=1), rtol=1e-13)
