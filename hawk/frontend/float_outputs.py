"""Float outputs of their own dtype (Spec.float_outputs): a per-lane float output whose array has another float
type than the run's. Stores convert into the output's type (truncf rounds once to nearest even, as NumPy's
astype; extf is exact); reads of the output convert back, and a read that would round is refused.

The builder's `itypes` maps such an output to its MLIR float type (beside the integer planes' types).
"""

from __future__ import annotations

import numpy as np
from mlir import ir

from hawk.abi.signature import PlaneSpec
from hawk.frontend.values import HVal
from hawk.ir.build import create


class FloatOutputsMixin:
    """Conversions between the run's float type and a float output's own (mixed into KernelBuilder)."""

    def own_float(self, name: str, value: ir.Value, back: bool = False) -> ir.Value:
        """A value of the run's float type converted to the float type output `name` holds (unchanged when the
        output has the run's type). `back`: the other way, a value the output holds read as the run's type."""
        own = self.itypes.get(name)
        if own is None or isinstance(own, ir.IntegerType) or own == self.sem.ftype:
            return value
        to = self.sem.ftype if back else own
        vt = value.type
        t = ir.VectorType.get(ir.VectorType(vt).shape, to) if isinstance(vt, ir.VectorType) else to
        return create("arith.extf" if isinstance(to, ir.F64Type) else "arith.truncf", [value], [t]).result

    def as_stored(self, name: str, v: HVal) -> HVal:
        """A per-lane float value assigned to output `name`, as the output will hold it: rounded once when the
        output is float32 in a float64 run, so that reading the output later in the body gives what was stored."""
        own = self.itypes.get(name)
        if not isinstance(own, ir.F32Type) or own == self.sem.ftype or v.reduced is not None or v.kind != "f":
            return v
        if v.is_const:
            with np.errstate(over="ignore"):  # (beyond float32: inf, as the store gives)
                return HVal(float(np.float32(v.value)), "f", v.shape)
        return HVal(self.own_float(name, self.own_float(name, v.value), back=True), "f", v.shape)

    def read_float_output(self, spec: PlaneSpec) -> HVal:
        """A float output's value before the launch, in the run's type: a float32 output widens exactly; a
        float64 output in a float32 run is refused (the read would round)."""
        own = self.itypes.get(spec.name, self.sem.ftype)
        if own != self.sem.ftype and isinstance(own, ir.F64Type):
            raise self.error(f"output '{spec.name}' is read in the body, and its array is float64 while the run's "
                             f"float type is float32 (its float inputs'): the read would round. Pass "
                             f"'{spec.name}' as float32, or the inputs as float64")
        shape = spec.payload.shape
        t_own = ir.VectorType.get(list(shape), own) if shape else own
        raw = create("hawk.load", [self.plane_arg(spec.name)], [t_own]).result
        return HVal(self.own_float(spec.name, raw, back=True), "f", shape)
