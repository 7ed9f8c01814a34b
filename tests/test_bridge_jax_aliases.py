"""Outputs and sinks passed to eagle.jax.wrap with several dimensions: a Grid kernel's Mutable output (rows, cols),
a sink with two axes, a Vector output (3, n). XLA aliases an operand only to a result of the same shape, and the
call's results were its flat stage buffers, so such a call failed ("input_output_aliases contains the mapping
'7:0' referring to an input with abstract value float64[5,6] and an output with ... float64[30]"; found by
tests/fuzz_bridges.py). Each is compared with Plan.run bit for bit, eager and under jit, and so is eagle.torch."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import eagle
import eagle.jax
import eagle.torch
import hawk
import hawk.math as m
from hawk import Grid, Index, Mutable, Scalar, Vector

jax.config.update("jax_enable_x64", True)
RNG = np.random.default_rng(53)


@hawk.kernel
def grid_out(g: Grid["row", "col":6], x: Scalar, out: Mutable[Scalar]):
    for j in range(2):
        out = out * 0.5 + x * m.to_float(g.col + j)


@hawk.kernel
def two_axis_sink(r: Index, s: Index, v: Scalar, acc: Mutable["a":2, "b":5]):
    hawk.scatter(acc, policy="ordered")[r, s] += v


@hawk.kernel
def vector_out(x: Scalar, w: Mutable[Vector[3]]):
    w = w * 2.0 + x


CASES = {
    "grid_out": (grid_out, lambda: {"x": RNG.normal(size=(5, 6)), "out": RNG.normal(size=(5, 6)), "row": 5}),
    "two_axis_sink": (two_axis_sink, lambda: {"r": RNG.integers(0, 2, 40).astype(np.int32),
                                              "s": RNG.integers(0, 5, 40).astype(np.int32),
                                              "v": RNG.normal(size=40), "acc": RNG.normal(size=(2, 5))}),
    "vector_out": (vector_out, lambda: {"x": RNG.normal(size=9), "w": RNG.normal(size=(3, 9))}),
}


def _bits(res) -> dict:
    res = res if isinstance(res, dict) else {"_": res}
    return {k: np.asarray(v).tobytes() for k, v in res.items()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_passed_outputs_of_several_dimensions(name):
    kernel, draw = CASES[name]
    planes = draw()
    want = _bits(eagle.deploy(kernel).run(**{k: (v.copy() if isinstance(v, np.ndarray) else v)
                                             for k, v in planes.items()}))
    f = eagle.jax.wrap(kernel)
    as_jax = {k: (jnp.asarray(v) if isinstance(v, np.ndarray) else v) for k, v in planes.items()}
    assert _bits(f(**as_jax)) == want
    arrays = {k: v for k, v in as_jax.items() if not isinstance(v, int)}
    grid = {k: v for k, v in as_jax.items() if isinstance(v, int)}
    assert _bits(jax.jit(lambda a: f(**a, **grid))(arrays)) == want
    for k, v in planes.items():  # JAX arrays are values: the caller's are never written
        if isinstance(v, np.ndarray):
            assert np.asarray(as_jax[k]).tobytes() == v.tobytes()
    got = eagle.torch.wrap(kernel)(**{k: (torch.from_numpy(v.copy()) if isinstance(v, np.ndarray) else v)
                                      for k, v in planes.items()})
    assert _bits({k: t.numpy() for k, t in (got if isinstance(got, dict) else {"_": got}).items()}) == want
