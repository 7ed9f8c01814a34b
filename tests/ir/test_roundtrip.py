"""Round trip: a kernel's hawk IR printed to text parses back, in a fresh context with only the dialect loaded,
prints the same, and compiles to the same code as the IR the front end built (the same LLVM-dialect text for
every stage, and the same object bytes).

The IR is read back three ways: the printed form, MLIR's generic form, and the printed form with source
locations (what the reverse reads). Kernels cover sums under each policy, means with where=, max and min,
over= with kept axes, scatters (add and store, vector payloads, two keys), staged kernels (cut cells), grids,
`.at` reads (flat, by axis, a table), a fold with a user's combiner, vectors, for and if, Index planes,
Params, generated kernels from the fuzz grammar and an adjoint from the reverse.
"""

import importlib.util
import sys
from pathlib import Path

import pytest
from mlir import ir

import hawk
import hawk.math as m
from hawk import Grid, Index, Mutable, Param, Scalar, Table, Vector
from hawk.compiler import Stage
from hawk.ir import access, new_context
from hawk.passes.verify import verify_hawk

# ------------------------------------------------------------------ the kernels


@hawk.kernel
def rt_sums(x: Scalar, w: Scalar, a: Mutable[Scalar], b: Mutable[Scalar], c: Mutable[Scalar]):
    a = hawk.sum(x * w)
    b = hawk.sum(x, policy="ordered")
    c = hawk.sum(x * x, policy="compensated")


@hawk.kernel
def rt_mean_where(x: Scalar, w: Scalar) -> Scalar:
    return hawk.mean(x * w, where=x > 0.5)


@hawk.kernel
def rt_extrema(g: Grid["row", "col":4], v: Scalar, hi: Mutable[Scalar], per_row: Mutable[Scalar]):
    hi = hawk.max(v)
    per_row = hawk.max(v, over="col")


@hawk.kernel
def rt_min_kept(g: Grid["row":3, "col":5], v: Vector[2]) -> Vector[2]:
    return hawk.min(v, over="row")


@hawk.kernel
def rt_histogram(v: Scalar, bins: Mutable["bin":8]):
    hawk.scatter(bins)[m.index(v * 8.0, 8)] += 1.0


@hawk.kernel
def rt_place(key: Index, row: Index, v: Scalar, slots: Mutable["r":2, "s":5]):
    hawk.scatter(slots, policy="plain")[row, key] = v


@hawk.kernel
def rt_vector_scatter(k: Index, p: Vector[3], acc: Mutable["k":4]):
    hawk.scatter(acc, policy="ordered")[k] += p * 2.0


@hawk.kernel
def rt_standardize(x: Scalar, z: Mutable[Scalar]):
    mu = hawk.mean(x)
    sd = m.sqrt(hawk.mean((x - mu) * (x - mu)))
    z = (x - mu) / sd


@hawk.kernel
def rt_staged_mixed(key: Index, x: Scalar, y: Mutable[Scalar], total: Mutable[Scalar], counts: Mutable["k":5],
                    z: Mutable[Scalar]):
    y = 2.0 * x
    hawk.scatter(counts)[key] += 1.0
    total = hawk.sum(x)
    z = x / hawk.mean(x)


@hawk.kernel
def rt_stencil(g: Grid["row", "col":6], u: Scalar, src: Index, t: Table["a":2, "b":3], out: Mutable[Scalar]):
    out = u.at(row=g.row, col=g.col + 1) - 2.0 * u + u.at(col=0) + u.at(src) * t.at(b=2, a=1)


@hawk.func
def rt_larger_abs(a, b):
    return m.where(m.abs(a) > m.abs(b), a, b)


@hawk.kernel
def rt_fold(x: Scalar) -> Scalar:
    return hawk.reduce(rt_larger_abs, x, identity=0.0)


@hawk.kernel
def rt_control(v: Scalar, scale: Param, lo: Mutable[Scalar], hi: Mutable[Vector[2]], bins: Mutable["bin":3]):
    acc = 0.0
    term = 1.0
    for i in range(4):
        acc = acc + term
        term = term * v
        hawk.scatter(bins)[i % 3] += v * i
    if v > scale:
        a = acc
    else:
        a = -acc
    lo = a
    hi = m.vec(a, term)


@hawk.kernel
def rt_scan(v: Scalar, k: Index, out: Mutable[Scalar]):
    c = hawk.scan(k, exclusive=True, reset=k == 0)
    out = hawk.scan(v, op=m.max) + m.to_float(c)


KERNELS = [rt_sums, rt_mean_where, rt_extrema, rt_min_kept, rt_histogram, rt_place, rt_vector_scatter,
           rt_standardize, rt_staged_mixed, rt_stencil, rt_fold, rt_control, rt_scan]


# ------------------------------------------------------------------ the round trip


def _stages_of(kernel, spec, text: str) -> list[Stage]:
    """The stages of a kernel made from hawk IR text (as the compiler splits its own)."""
    from hawk import lowering

    parts = lowering.split(text, kernel.name, kernel.signature, kernel.outputs)
    return [Stage(n, f"roundtrip{k}", ci, co, ow, t) for k, (n, t, ci, co, ow) in enumerate(parts)]


def _lower_all(kernel, spec, text: str) -> list[str]:
    from hawk import lowering

    stages = _stages_of(kernel, spec, text)
    return [lowering.lower_stage(kernel.signature, kernel.outputs, spec, st, len(stages) > 1)[0] for st in stages]


def _read_back(text: str) -> dict[str, str]:
    """The IR parsed in a fresh context, printed three ways; and each of those parsed in a fresh context again
    and printed in the ordinary form."""
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        module.operation.verify()
        verify_hawk(module)
        forms = {"printed": str(module),
                 "generic": module.operation.get_asm(print_generic_op_form=True),
                 "located": module.operation.get_asm(enable_debug_info=True)}
    again = {}
    for how, form in forms.items():
        with new_context(), ir.Location.unknown():
            again[how] = str(ir.Module.parse(form))
    return again


def _object(llvm_text: str, path: Path) -> bytes:
    from hawk.targets.host import compile_object

    compile_object(llvm_text, path, cpu="x86-64")
    return path.read_bytes()


def _check_round_trip(kernel, dtype: str, tmp_path: Path, objects: bool = True) -> None:
    spec = kernel.spec_for(dtype, {})
    text = kernel.hawk_ir(spec)
    again = _read_back(text)
    for how, printed in again.items():
        assert printed == text, f"{kernel.name}: the {how} form does not read back to the same IR"
    direct = [kernel.lowered(spec, k).llvm_ir for k in range(len(kernel.stages(spec)))]
    through = _lower_all(kernel, spec, again["generic"])
    assert len(through) == len(direct)
    for k, (a, b) in enumerate(zip(direct, through, strict=True)):
        assert a == b, f"{kernel.name} stage {k}: the lowered LLVM IR differs after the round trip"
        if objects:
            assert _object(a, tmp_path / f"d{k}.o") == _object(b, tmp_path / f"r{k}.o")


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
def test_hawk_ir_round_trips_to_the_same_code(kernel, tmp_path):
    _check_round_trip(kernel, "float64", tmp_path)


@pytest.mark.parametrize("kernel", [rt_sums, rt_stencil, rt_staged_mixed, rt_fold], ids=lambda k: k.name)
def test_float32_hawk_ir_round_trips(kernel, tmp_path):
    _check_round_trip(kernel, "float32", tmp_path, objects=False)


def test_round_trip_keeps_the_typed_arguments():
    # the names and types of the planes survive the text: read them back through the accessors
    text = rt_stencil.hawk_ir()
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        from hawk.ir.types import parts

        kinds = {n: parts(a.type).kind for n, a in access.kernel_args(access.kernel_func(module)).items()}
    assert kinds == {"u": "plane", "src": "plane", "t": "table", "out": "output"}


def test_a_staged_kernel_round_trips_stage_by_stage(tmp_path):
    # each stage's own text (with its cut cells as arguments) also reads back and lowers the same
    spec = rt_standardize.default_spec()
    stages = rt_standardize.stages(spec)
    assert len(stages) == 3
    for k in range(len(stages)):
        st = rt_standardize.stage_text(spec, k)
        assert _read_back(st.text)["generic"] == st.text
        with new_context(), ir.Location.unknown():
            module = ir.Module.parse(st.text)
            kfunc = access.kernel_func(module)
            from hawk.ir.types import arg_names

            assert set(st.cells_in) <= set(arg_names(kfunc))


@pytest.mark.parametrize("kernel", [rt_stencil, rt_fold, rt_control], ids=lambda k: k.name)
def test_hawk_opt_reads_the_printed_ir_in_another_process(kernel, tmp_path):
    # a fresh process (nothing of this one's contexts) parses the text, verifies it and prints it back
    import subprocess

    path = tmp_path / f"{kernel.name}.mlir"
    path.write_text(kernel.hawk_ir())
    out = subprocess.run([sys.executable, "-m", "hawk.opt", str(path), "--passes", "verify-hawk"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout == kernel.hawk_ir()


def test_an_adjoint_round_trips(tmp_path):
    adj, _, _ = rt_mean_where.adjoint(("x", "w"), None)
    _check_round_trip(adj, "float64", tmp_path, objects=False)


# ------------------------------------------------------------------ generated kernels

_FUZZ = 12


def _fuzz_kernel(index: int, workdir: Path):
    here = str(Path(__file__).parents[1])
    if here not in sys.path:
        sys.path.insert(0, here)
    from fuzz_kernels import case

    c = case(7, index)
    if c.expect == "kernel_error":
        return None
    path = workdir / f"{c.name}.py"
    path.write_text(c.source)
    spec = importlib.util.spec_from_file_location(c.name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, c.name)


@pytest.mark.parametrize("index", range(_FUZZ))
def test_generated_kernels_round_trip(index, tmp_path):
    kernel = _fuzz_kernel(index, tmp_path)
    if kernel is None:
        pytest.skip("case is a deliberately wrong kernel")
    _check_round_trip(kernel, "float64", tmp_path, objects=False)
