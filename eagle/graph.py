"""eagle.reduce and eagle.Graph: launches as values, run in a fixed order.

A *node* is anything with a `launch()` method: `plan.bind(**planes)`, `eagle.reduce(values, out, policy=)`.
`Graph().add_node(node, name=...)` records nodes; `build()` checks them once; `launch()` runs them in the order
they were added and returns each node's results by name.
"""

from __future__ import annotations

import numpy as np

from eagle.errors import InputError
from eagle.kernels import reduce_auto, reduce_compensated, reduce_ordered

_REDUCERS = {"auto": reduce_auto, "compensated": reduce_compensated, "ordered": reduce_ordered}
_PLANS: dict = {}


class ReduceNode:
    """Adds `values` (one row per entry of `out`) under a policy into `out` when launched."""

    def __init__(self, values, out: np.ndarray, policy: str):
        if policy not in _REDUCERS:
            raise InputError(f"eagle.reduce: policy= is one of {sorted(_REDUCERS)}, got {policy!r}")
        v = np.asarray(values)
        if v.dtype.name not in ("float32", "float64"):
            raise InputError(f"eagle.reduce: values must be float32 or float64, got {v.dtype}")
        if not isinstance(out, np.ndarray) or out.dtype != v.dtype or not out.flags.c_contiguous:
            raise InputError(f"eagle.reduce: out must be a C-contiguous {v.dtype} array (a (1,) array for one sum, "
                             f"(k,) for k rows of values)")
        if not out.flags.writeable:
            raise InputError("eagle.reduce: out is written in place but the array passed is read-only "
                             "(writeable=False): pass a writable array")
        rows = v.reshape(1, -1) if v.ndim <= 1 else v.reshape(v.shape[0], -1)
        if out.ndim != 1 or out.size != rows.shape[0]:
            raise InputError(f"eagle.reduce: out has {out.size} entries but values give {rows.shape[0]} sum(s): "
                             "pass values shaped (n,) with out (1,), or (k, n) with out (k,)")
        plan = _PLANS.get(policy)
        if plan is None:
            from eagle.plan import Plan

            plan = _PLANS[policy] = Plan(_REDUCERS[policy])
        self.policy, self.out = policy, out
        self.launches = [plan.bind(values=np.ascontiguousarray(r)) for r in rows]

    def launch(self) -> np.ndarray:
        """Every sum first, then `out`: `out` may share memory with the values (a row of them, say), and writing
        one sum must not change the terms of the next."""
        sums = [np.asarray(b.launch())[0] for b in self.launches]
        self.out.reshape(-1)[:] = sums
        return self.out

    def __repr__(self) -> str:
        return f"<eagle.reduce policy={self.policy} sums={len(self.launches)}>"


def reduce(values, out: np.ndarray, policy: str = "auto") -> ReduceNode:
    """A node that sums `values` into `out` under `policy` ("auto", "compensated", "ordered") when launched.

    "ordered" gives the exact sum of the values rounded once (docs/ordered.md): the bits of any hawk kernel's
    ordered sum of the same terms and of an artifact's cell. Call `.launch()` or add it to a Graph.
    """
    return ReduceNode(values, out, policy)


class Graph:
    """An ordered list of named launches."""

    def __init__(self):
        self.nodes: list[tuple[str, object]] = []

    def add_node(self, node, name: str | None = None) -> Graph:
        if not callable(getattr(node, "launch", None)):
            raise TypeError(f"a graph node needs a launch() method (plan.bind(...), eagle.reduce(...)), got "
                            f"{type(node).__name__}")
        name = name or f"node{len(self.nodes)}"
        if any(n == name for n, _ in self.nodes):
            raise ValueError(f"the graph already has a node named {name!r}")
        self.nodes.append((name, node))
        return self

    def build(self) -> BuiltGraph:
        if not self.nodes:
            raise ValueError("an empty graph has nothing to launch: add_node(...) first")
        return BuiltGraph(list(self.nodes))


class BuiltGraph:
    def __init__(self, nodes: list[tuple[str, object]]):
        self.nodes = nodes

    def launch(self) -> dict[str, object]:
        """Run every node in order; each node's results by its name. A node that refuses writes nothing (every
        launch is all or nothing) and stops the graph there: the nodes before it have run, and their writes stay
        (a later node may have read them), the nodes after it do not run."""
        return {name: node.launch() for name, node in self.nodes}

    def __repr__(self) -> str:
        return f"<eagle.Graph nodes={[n for n, _ in self.nodes]}>"
