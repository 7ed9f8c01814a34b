"""Random lane expressions (seeded): the reverse of each against jax.grad of the same expression in jax.numpy.

Each kernel is written to a file (kernels are read from their source) from one template, spelled once with
hawk.math and once with jax.numpy, so both sides compute the same function; the operations are chosen where
both are smooth or agree on their one-sided choices (where, max, abs away from ties and zeros)."""

import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import eagle

jax.config.update("jax_enable_x64", True)

UNARY = ["SIN({0})", "COS({0})", "TANH({0})", "EXP(TANH({0}))", "SQRT(1.0 + ({0}) * ({0}))",
         "LOG(1.0 + ({0}) * ({0}))", "ATAN({0})", "ABS({0}) + 0.5", "({0}) * 0.75"]
BINARY = ["({0}) + ({1})", "({0}) - ({1})", "({0}) * ({1})", "({0}) / (1.5 + ({1}) * ({1}))", "MAX({0}, {1})",
          "WHERE(({0}) > ({1}), ({0}) * 2.0, ({1}) - 1.0)", "ATAN2({0}, 2.0 + ({1}) * ({1}))"]
HAWK = {"SIN": "m.sin", "COS": "m.cos", "TANH": "m.tanh", "EXP": "m.exp", "SQRT": "m.sqrt", "LOG": "m.log",
        "ATAN2": "m.atan2", "ATAN": "m.atan", "ABS": "m.abs", "MAX": "m.max", "WHERE": "m.where"}
JAX = {"SIN": "jnp.sin", "COS": "jnp.cos", "TANH": "jnp.tanh", "EXP": "jnp.exp", "SQRT": "jnp.sqrt",
       "LOG": "jnp.log", "ATAN2": "jnp.arctan2", "ATAN": "jnp.arctan", "ABS": "jnp.abs", "MAX": "jnp.maximum",
       "WHERE": "jnp.where"}


def _expr(rng, depth: int) -> str:
    if depth == 0:
        return str(rng.choice(["x", "y", "a", "x * a", "y + 0.25"]))
    if rng.uniform() < 0.4:
        return str(rng.choice(UNARY)).format(_expr(rng, depth - 1))
    return str(rng.choice(BINARY)).format(_expr(rng, depth - 1), _expr(rng, depth - 1))


def _spell(text: str, names: dict) -> str:
    for k in sorted(names, key=len, reverse=True):
        text = text.replace(k + "(", names[k] + "(")
    return text


def _kernel(tmp_path, k: int, body: str):
    src = ("import hawk\nimport hawk.math as m\nfrom hawk import Param, Scalar\n\n\n@hawk.kernel\n"
           f"def rand{k}(x: Scalar, y: Scalar, a: Param) -> Scalar:\n    return {_spell(body, HAWK)}\n")
    path = tmp_path / f"rand_kernel_{k}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"rand_kernel_{k}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, f"rand{k}")


@pytest.mark.parametrize("k", range(12))
def test_random_expression_matches_jax(tmp_path, k):
    rng = np.random.default_rng(100 + k)
    body = _expr(rng, 3)
    kernel = _kernel(tmp_path, k, body)
    n = 24
    x, y, ct = rng.normal(size=n), rng.normal(size=n), rng.normal(size=n)
    g = {name: np.asarray(v) for name, v in eagle.deploy(kernel).reverse(ct, x=x, y=y, a=0.6).items()}
    f = eval(f"lambda x, y, a: jnp.sum(ct * ({_spell(body, JAX)}))", {"jnp": jnp, "ct": ct})
    jx, jy, ja = jax.grad(f, argnums=(0, 1, 2))(x, y, 0.6)
    for name, got, want in (("x", g["x"], jx), ("y", g["y"], jy), ("a", g["a"], [ja])):
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-11, atol=1e-12, err_msg=f"{name}: {body}")
