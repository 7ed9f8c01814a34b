"""Integer output planes: `Mutable[Index]`, one int32 or int64 value per lane.

A float stored into one converts by truncation toward zero (NumPy's astype for in-range values); an integer wraps
to the array's width (astype again). The array is int32 or int64 (compiled per dtype); an omitted one comes back
int64 with the lane shape. Checked against NumPy on the host and on spirv (lavapipe), with refusals: wrong dtypes
(InputError naming kernel and plane) and reductions stored into an integer output (KernelError at the line).
"""

import numpy as np
import pytest
from conftest import bt_target_missing

import eagle
import hawk
from eagle.errors import InputError
from hawk import Grid, Index, Mutable, Scalar
from hawk.abi.signature import Signature
from hawk.errors import KernelError


@hawk.kernel
def io_trunc(x: Scalar, out: Mutable[Index]):
    out = x * 3.0


@hawk.kernel
def io_both(x: Scalar, k: Index, y: Mutable[Scalar], j: Mutable[Index]):
    y = x + 1.0
    j = k * 3 - 7


@hawk.kernel
def io_bump(k: Index, out: Mutable[Index]):
    out = out + k  # reads the caller's array as it was before the launch


@hawk.kernel
def io_centred(x: Scalar, out: Mutable[Index]):
    out = (x - hawk.mean(x)) * 10.0  # a later stage stores it


@hawk.kernel
def io_counted(x: Scalar, out: Mutable[Index]):
    out = 0
    for i in range(4):
        if x > float(i):
            out = out + 1


@hawk.kernel
def io_cells(img: Grid["row", "col":5], out: Mutable[Index]):
    out = img.row * 5 + img.col


def _targets():
    return ["host"] + ([] if bt_target_missing("spirv") else ["spirv"])


@pytest.mark.parametrize("target", _targets())
@pytest.mark.parametrize("odt", [np.int32, np.int64])
def test_float_truncates_toward_zero(target, odt):
    rng = np.random.default_rng(0)
    x = rng.uniform(-1e5, 1e5, 4097)
    x[:6] = [0.3, -0.3, 0.999, -0.999, 2.5, -2.5]
    out = np.zeros(x.size, dtype=odt)
    eagle.deploy(io_trunc, target=target).run(x=x, out=out)
    np.testing.assert_array_equal(out, (x * 3.0).astype(odt))
    x32 = x.astype(np.float32)
    out = np.zeros(x.size, dtype=odt)
    eagle.deploy(io_trunc, target=target).run(x=x32, out=out)
    np.testing.assert_array_equal(out, (x32 * np.float32(3.0)).astype(odt))


def test_omitted_output_is_int64():
    plan = eagle.deploy(io_trunc)
    for _ in range(3):  # the later runs take the prepared (rebound) path
        got = plan.run(x=np.array([1.9, -1.9]))
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, [5, -5])


@pytest.mark.parametrize("target", _targets())
@pytest.mark.parametrize("odt", [np.int32, np.int64])
def test_integers_wrap_to_the_width(target, odt):
    k = np.array([0, 1, -5, 2**40, 2**61, -(2**61)], dtype=np.int64)
    x = np.linspace(0.0, 1.0, k.size)
    j = np.zeros(k.size, dtype=odt)
    y = eagle.deploy(io_both, target=target).run(x=x, k=k, j=j)["y"]
    np.testing.assert_array_equal(j, (k * 3 - 7).astype(odt))
    np.testing.assert_array_equal(y, x + 1.0)


@pytest.mark.parametrize("target", _targets())
def test_read_then_write_and_loops(target):
    out = np.array([10, 20, 30], dtype=np.int32)
    eagle.deploy(io_bump, target=target).run(k=np.array([1, -2, 3]), out=out)
    np.testing.assert_array_equal(out, [11, 18, 33])
    x = np.array([-1.0, 0.5, 1.5, 2.5, 3.5, 9.0])
    np.testing.assert_array_equal(eagle.deploy(io_counted, target=target).run(x=x), [0, 1, 2, 3, 4, 4])


@pytest.mark.parametrize("target", _targets())
def test_staged_kernel_and_grid(target):
    x = np.array([1.0, 2.0, 3.0, 10.0])
    want = ((x - x.mean()) * 10.0).astype(np.int64)
    np.testing.assert_array_equal(eagle.deploy(io_centred, target=target).run(x=x), want)
    got = eagle.deploy(io_cells, target=target).run(row=3)
    assert got.shape == (3, 5) and got.dtype == np.int64
    np.testing.assert_array_equal(got, np.arange(15).reshape(3, 5))


@pytest.mark.parametrize("threads", [1, 3])
def test_many_lanes_on_threads(threads):
    x = np.random.default_rng(5).uniform(-1e6, 1e6, 300_001)
    out = np.empty(x.size, dtype=np.int32)
    eagle.deploy(io_trunc, threads=threads, min_chunk=4096).run(x=x, out=out)
    np.testing.assert_array_equal(out, (x * 3.0).astype(np.int32))


def test_dtype_refusals():
    with pytest.raises(InputError, match=r"plane 'out' of kernel 'io_trunc'.*int32 or int64.*float64"):
        eagle.deploy(io_trunc).run(x=np.ones(3), out=np.zeros(3))
    with pytest.raises(InputError, match=r"plane 'out' of kernel 'io_trunc'.*int32 or int64.*uint8"):
        eagle.deploy(io_trunc).run(x=np.ones(3), out=np.zeros(3, dtype=np.uint8))
    with pytest.raises(InputError, match=r"plane 'out' of kernel 'io_trunc'.*extent 4"):
        eagle.deploy(io_trunc).run(x=np.ones(3), out=np.zeros(4, dtype=np.int64))


def test_a_reduction_into_an_integer_output_is_refused():
    def k(x: Scalar, out: Mutable[Index]):
        out = hawk.sum(x)

    with pytest.raises(KernelError, match=r"output 'out' is Mutable\[Index\].*reduced value.*Mutable\[Scalar\]"):
        hawk.kernel(k).mlir()


def test_annotation_and_signature():
    assert repr(Mutable[Index]) == "Mutable[Index]"
    with pytest.raises(TypeError, match=r"Mutable\[Index\]"):
        Mutable[hawk.Sorted[Index]]
    sig = io_trunc.signature
    assert sig.get("out").integer and sig.get("out").kind == "output"
    back = Signature.from_json(sig.to_json())
    assert back.get("out").integer and repr(back.get("out").annotation) == "Mutable[Index]"
    assert "integer" not in io_both.signature.to_json()["planes"][2]  # float outputs: the JSON is as before


@hawk.kernel
def io_rv_mixed(x: Scalar, y: Mutable[Scalar], j: Mutable[Index]):
    y = x * x
    j = x * 10.0


def test_reverse_skips_integer_outputs():
    x = np.array([1.0, 2.0, -3.0])
    plan = eagle.deploy(io_rv_mixed)
    got = plan.reverse({"y": np.array([1.0, 0.5, 2.0])}, x=x)
    np.testing.assert_array_equal(np.asarray(got["x"]), 2.0 * x * np.array([1.0, 0.5, 2.0]))
    with pytest.raises(InputError, match=r"'j', an integer output .* no cotangent"):
        plan.reverse({"y": np.ones(3), "j": np.ones(3)}, x=x)


def test_reverse_of_a_kernel_with_integer_results_only_says_so():
    with pytest.raises(InputError, match=r"kernel 'io_trunc'.*no float result to differentiate.*\['out'\]"):
        eagle.deploy(io_trunc).reverse(np.ones(3), x=np.ones(3))


def test_artifact_round_trip(tmp_path):
    hawk.artifact.build(io_both, tmp_path, index_dtypes={"k": "int64", "j": "int32"})
    art = hawk.load(tmp_path, "io_both")
    k = np.array([4, -1, 2**33], dtype=np.int64)
    j = np.zeros(3, dtype=np.int32)
    hawk.run(art, x=np.zeros(3), k=k, j=j)
    np.testing.assert_array_equal(j, (k * 3 - 7).astype(np.int32))
    with pytest.raises(InputError, match=r"plane 'j' of kernel 'io_both'.*built for int32 outputs"):
        hawk.run(art, x=np.zeros(3), k=k, j=np.zeros(3, dtype=np.int64))
    with pytest.raises(InputError, match=r"got int8 .*artifacts are built for int32 or int64 only") as e:
        hawk.run(art, x=np.zeros(3), k=k, j=np.zeros(3, dtype=np.int8))
    assert "rebuild" not in str(e.value)
