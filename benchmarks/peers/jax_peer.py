"""JAX on the CPU: each operation jitted once per shape and dtype; calls end with block_until_ready()."""

from __future__ import annotations

from benchmarks.data import BINS, DT, KEYS, RATE, Data
from benchmarks.ops import Impl

NAME = "jax"
jax = jnp = None
_FN: dict = {}


def load() -> None:
    global jax, jnp
    import jax as _jax

    _jax.config.update("jax_enable_x64", True)  # float64 data stays float64
    _jax.config.update("jax_platforms", "cpu")
    import jax.numpy as _jnp

    jax, jnp = _jax, _jnp
    jnp.zeros(1).block_until_ready()


def version() -> str:
    return jax.__version__


def _fns() -> dict:
    if _FN:
        return _FN
    j = jax.jit

    def stencil(u, rate):
        c = u[1:-1, 1:-1]
        return u.at[1:-1, 1:-1].set(c + rate * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * c))

    def particles(p, v):
        q = p + DT * v
        return jnp.where(q > 1.0, 2.0 - q, q)

    def hist_bincount(t):
        idx = jnp.clip(jnp.floor(t * 256.0), 0, BINS - 1).astype(jnp.int32)
        return jnp.bincount(idx, length=BINS)

    _FN.update(
        sum=j(jnp.sum),
        masked_sum=j(lambda x: jnp.sum(jnp.where(x > 0, x, 0))),
        mean=j(jnp.mean),
        max=j(jnp.max),
        row_sum=j(lambda u: jnp.sum(u, axis=1)),
        row_max_masked=j(lambda u: jnp.max(u, axis=1, where=u < 0.5, initial=-jnp.inf)),
        col_sum=j(lambda u: jnp.sum(u, axis=0)),
        segment_sum=j(lambda k, x: jax.ops.segment_sum(x, k, KEYS)),
        segment_sum_sorted=j(lambda k, x: jax.ops.segment_sum(x, k, KEYS, indices_are_sorted=True)),
        at_add=j(lambda k, x: jnp.zeros(KEYS, x.dtype).at[k].add(x)),
        histogram=j(lambda t: jnp.histogram(t, BINS, (0.0, 1.0))[0]),
        hist_bincount=j(hist_bincount),
        stencil=j(stencil),
        centre=j(lambda x: x - jnp.mean(x)),
        particles=j(particles),
    )
    return _FN


def _dev(d: Data, name: str):
    """The input `name` of d as a JAX array (copied to JAX once per Data)."""
    key = ("jax", name)
    if key not in d.cache:
        d.cache[key] = jnp.asarray(getattr(d, name)).block_until_ready()
    return d.cache[key]


def _impl(fn, *args) -> Impl:
    return Impl(lambda: fn(*args).block_until_ready())


def impls(op: str, d: Data) -> dict[str, Impl]:
    f = _fns()
    if op in ("sum", "masked_sum", "mean", "max", "centre"):
        return {"jax": _impl(f[op], _dev(d, "x"))}
    if op in ("row_sum", "row_max_masked", "col_sum"):
        return {"jax": _impl(f[op], _dev(d, "u"))}
    if op in ("scatter_random", "scatter_sorted"):
        k = _dev(d, "skeys" if op == "scatter_sorted" else "keys")
        seg = f["segment_sum_sorted"] if op == "scatter_sorted" else f["segment_sum"]
        return {"jax segment_sum": _impl(seg, k, _dev(d, "x")), "jax .at[].add": _impl(f["at_add"], k, _dev(d, "x"))}
    if op == "histogram":
        return {"jax histogram": _impl(f["histogram"], _dev(d, "t")),
                "jax bincount": _impl(f["hist_bincount"], _dev(d, "t"))}
    if op == "stencil":
        return {"jax": _impl(f["stencil"], _dev(d, "u"), d.dtype.type(RATE))}
    if op == "particles":
        return {"jax": _impl(f["particles"], _dev(d, "p"), _dev(d, "v"))}
    return {}
