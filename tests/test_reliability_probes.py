"""Red-team probes of the reliability pass (#9): variants of its classes that the first tests did not try.

Each test is one class of failure found by probing, asserting what the docs promise (each failed before its fix):

* a bound launch of a `Sorted[Index]` scatter whose key plane changed after `bind`: the compiled code wrote runs
  of equal keys unchecked (a key past the sink crashed the process; one below -1 was dropped); now refused,
  naming the sink, with the sink untouched, under every policy and for a wide payload;
* a cache entry removed by another process between its rename and its seal: the builder loaded the removed path;
* sinks declared beyond 64-bit indices (raw MLIR TypeError) or larger than memory (bare MemoryError);
* eagle.reduce into memory shared with its values (a wrong second sum), or into a read-only out (raw NumPy error);
* simulate/until_done step counts of odd types (raw TypeError), and their read-only or overlapping outputs;
* the artifact CLI's empty --out (published into the current directory) and too-long --out (raw OSError);
* a global captured by a kernel and changed after decoration: a later dtype was compiled from the new value and
  filed under the old value's key, so a later process ran it (stale code);
* a sink both stored into and added into with a compensated or ordered add (a wrong answer: the adds landed
  after every store), and store-then-add refused with a misleading message and no file:line;
* GPU target options a target does not take (Python's TypeError), m.index(x, n) with n < 1 or a float n
  (silently nothing, or truncated), masked arrays (mask dropped), and .at on a computed value (the rewrite shown
  was the user's own wrong form).
"""

import numpy as np
import pytest

import eagle
import hawk
from hawk import Index, Mutable, Param, Scalar, Sorted, Vector

# ============================================================================================ kernels


@hawk.kernel
def rp_sorted_plain(key: Sorted[Index], x: Scalar, acc: Mutable["slot":4]):
    hawk.scatter(acc, policy="plain")[key] += x


@hawk.kernel
def rp_sorted_comp(key: Sorted[Index], x: Scalar, acc: Mutable["slot":4]):
    hawk.scatter(acc, policy="compensated")[key] += x


@hawk.kernel
def rp_sorted_ord(key: Sorted[Index], x: Scalar, acc: Mutable["slot":4]):
    hawk.scatter(acc, policy="ordered")[key] += x


@hawk.kernel
def rp_sorted_wide(key: Sorted[Index], v: Vector[9], acc: Mutable["slot":4]):
    hawk.scatter(acc)[key] += v


# ============================================================================================ tests


@pytest.mark.parametrize("kernel", [rp_sorted_plain, rp_sorted_comp, rp_sorted_ord, rp_sorted_wide],
                         ids=lambda k: k.name)
@pytest.mark.parametrize("bad", [4, 10**8, -2])
def test_sorted_keys_changed_after_bind_are_refused_not_written(kernel, bad):
    n = 3000
    key = np.repeat(np.arange(4, dtype=np.int64), [700, 800, 700, 800])
    wide = kernel is rp_sorted_wide
    x = np.random.default_rng(3).standard_normal((9, n) if wide else n)
    acc = np.zeros((9, 4) if wide else 4)
    planes = {"key": key, ("v" if wide else "x"): x, "acc": acc}
    bound = eagle.deploy(kernel, threads=2, min_chunk=1024).bind(**planes)
    bound.launch()
    want = np.stack([x[..., key == k].sum(axis=-1) for k in range(4)], axis=-1)
    np.testing.assert_allclose(acc, want, rtol=1e-12, atol=1e-12)
    before = acc.copy()
    key[-1] = bad  # the bound launch reads this very array again (a sorted plane: the last run's key)
    with pytest.raises(eagle.InputError, match=rf"sink 'acc' of kernel '{kernel.name}'.*first bad key: {bad}"):
        bound.launch()
    assert acc.tobytes() == before.tobytes()
    key[-1] = 3  # put right, the same bound launch runs again and adds on top
    bound.launch()
    np.testing.assert_allclose(acc, 2 * want, rtol=1e-12, atol=1e-12)


@hawk.kernel
def rp_cache_race(x: Scalar, total: Mutable[Scalar]):
    total = hawk.sum(x * 5.0, policy="ordered")


def test_a_library_built_here_loads_even_if_another_process_removes_its_fresh_cache_entry(tmp_path, monkeypatch):
    """Process A renames its new library into the cache; before A writes the seal, process B reads the entry,
    finds it unsealed and removes it as damaged. A must still run (it used to dlopen the removed path: OSError)."""
    from hawk.abi import cache as hawk_cache

    monkeypatch.setenv("HAWK_CACHE_DIR", str(tmp_path))
    real_seal = hawk_cache.seal

    def seal_after_another_reader(path, data):
        assert hawk_cache.read_entry(path) is None  # B: unsealed, so removed
        real_seal(path, data)

    monkeypatch.setattr(hawk_cache, "seal", seal_after_another_reader)
    x = np.arange(1.0, 2049.0)
    out = eagle.deploy(rp_cache_race, threads=1).run(x=x)
    assert float(np.asarray(out)[0]) == float(np.sum(x * 5.0))  # exact: integers far below 2**53


def _kernel_from_source(tmp_path, name: str, body: str):
    """A kernel written to a file of its own (hawk reads kernel source from files), imported and returned."""
    import importlib.util

    path = tmp_path / f"{name}.py"
    path.write_text("import hawk\nfrom hawk import *\n\n\n@hawk.kernel\n" + body + "\n")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return path, getattr(mod, name)


@pytest.mark.parametrize("decl", ['Mutable["slot":2**70]', 'Mutable["a":2**32, "b":2**32]'])
def test_a_sink_declared_beyond_64_bit_indices_is_a_kernel_error_at_its_line(tmp_path, decl):
    """It used to reach MLIR and fail there with a raw TypeError ('incompatible function arguments')."""
    key = "key, key" if "," in decl else "key"
    body = f"def rp_vast(key: Index, x: Scalar, acc: {decl}):\n    hawk.scatter(acc)[{key}] += x"
    with pytest.raises(hawk.KernelError, match=r"rp_vast\.py:6: kernel 'rp_vast': parameter 'acc'.*64-bit") as info:
        _kernel_from_source(tmp_path, "rp_vast", body)
    assert "declare smaller extents" in str(info.value)


def test_a_sink_larger_than_memory_is_refused_naming_it_before_anything_is_written(tmp_path):
    """A sink's size comes from its declaration, not from the lanes the binder sizes: 2**40 slots used to end in
    NumPy's bare MemoryError."""
    _, k = _kernel_from_source(tmp_path, "rp_huge_sink", "def rp_huge_sink(key: Index, x: Scalar, "
                                                         "y: Mutable[Scalar], acc: Mutable['slot':2**40]):\n"
                                                         "    y = x + 1.0\n    hawk.scatter(acc)[key] += x")
    y = np.full(3, 7.0)
    with pytest.raises(eagle.InputError, match=r"sink 'acc' of kernel 'rp_huge_sink'.*bytes.*memory"):
        eagle.deploy(k).run(key=np.zeros(3, np.int64), x=np.ones(3), y=y)
    assert np.all(y == 7.0)


def test_eagle_reduce_into_memory_shared_with_its_values_sums_the_values_as_passed():
    """`out` a slice of the very values it sums: writing the first sum used to change the second's terms."""
    buf = np.arange(1.0, 9.0).reshape(2, 4)
    want = [buf[0].sum(), buf[1].sum()]  # 10 and 26
    out = buf[1, :2]
    for policy in ("auto", "compensated", "ordered"):
        buf[:] = np.arange(1.0, 9.0).reshape(2, 4)
        eagle.reduce(buf, out, policy=policy).launch()
        assert out.tolist() == want, policy


def test_eagle_reduce_into_a_read_only_out_is_an_input_error():
    out = np.zeros(1)
    out.flags.writeable = False
    with pytest.raises(eagle.InputError, match=r"eagle\.reduce: out .*read-only"):
        eagle.reduce(np.ones(3), out).launch()


@hawk.kernel
def rp_step(x: Scalar, y: Mutable[Scalar]):
    y = x + 1.0


@pytest.mark.parametrize("value", ["3", 2.5, True, 0, np.float64(2.0)], ids=repr)
def test_step_counts_take_whole_numbers_like_base_and_count(value):
    """simulate(steps=) and until_done(max_steps=) used to die in Python's range() with a raw TypeError (or run one
    step for True, or report 'did not finish' for 0); now one InputError names the kernel and the argument."""
    plan = eagle.deploy(rp_step)
    y = np.full(3, 9.0)
    with pytest.raises(eagle.InputError, match=r"kernel 'rp_step': simulate needs steps >= 1, a whole number"):
        plan.simulate(value, carry={"y": "x"}, x=np.zeros(3), y=y)
    with pytest.raises(eagle.InputError, match=r"kernel 'rp_step': until_done needs max_steps >= 1, a whole number"):
        plan.until_done(lambda r: True, carry={"y": "x"}, max_steps=value, x=np.zeros(3), y=y)
    assert np.all(y == 9.0)
    assert np.asarray(plan.simulate(np.int64(3), carry={"y": "x"}, x=np.zeros(3))).tolist() == [3.0] * 3


@pytest.mark.parametrize("out,words", [("", "is empty"), ("   ", "is empty"), ("x" * 300, "File name too long")],
                         ids=["empty", "blank", "name-too-long"])
def test_the_artifact_cli_refuses_more_bad_out_paths_in_one_line(tmp_path, out, words):
    """An empty --out (an unset shell variable) used to publish into the current directory; a name longer than the
    file system takes died with a raw OSError traceback. Both are one `hawk-artifact: error:` line, status 2."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "rpk.py").write_text("import hawk\nfrom hawk import Mutable, Scalar\n\n\n@hawk.kernel\n"
                                     "def rpk(x: Scalar, t: Mutable[Scalar]):\n    t = hawk.sum(x)\n")
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "hawk.artifact", "build", "--out", out, "rpk.py:rpk"],
                       capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, (r.returncode, r.stderr[-2000:])
    assert lines[0].startswith("hawk-artifact: error: --out ") and words in lines[0], lines[0]
    assert not (tmp_path / "rpk.json").exists()


LATE_SCRIPT = '''
import sys
import numpy as np
import eagle
import hawk
from hawk import Mutable, Scalar

SCALE = float(sys.argv[1])


@hawk.kernel
def rp_late(x: Scalar, o: Mutable[Scalar]):
    o = x * SCALE


if len(sys.argv) > 2:
    SCALE = float(sys.argv[2])  # after decoration: the float32 specialisation is built later, at its first run
try:
    f32 = float(np.asarray(eagle.deploy(rp_late).run(x=np.ones(2, np.float32)))[0])
except hawk.KernelError as exc:
    print("REFUSED", exc)
    raise SystemExit(0)
print("F32", f32, float(np.asarray(eagle.deploy(rp_late).run(x=np.ones(2)))[0]))
'''


def test_a_global_changed_after_decoration_never_files_other_code_under_the_kernels_key(tmp_path):
    """The float32 specialisation used to be built from the global's new value and filed (code and kernel facts)
    under the key made from the old one: a later process with the old value then ran the new value's code."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "rp_late_mod.py"
    script.write_text(LATE_SCRIPT)
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, HAWK_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))

    def run(*args: str) -> str:
        r = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, env=env, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        return r.stdout.strip()

    assert run("41") == "F32 41.0 41.0"  # the float64 facts (decoration) and both binaries on disk
    changed = run("41", "43")
    assert changed.startswith("REFUSED") and "rp_late_mod.py:13: kernel 'rp_late': 'SCALE' has changed" in changed
    assert run("41") == "F32 41.0 41.0"  # nothing was filed under 41's key for 43


def test_at_on_a_computed_value_suggests_the_kernels_own_input_plane(tmp_path):
    """The rewrite used to show the user's own wrong form back (`u.at(i)` for a computed `u`)."""
    with pytest.raises(hawk.KernelError, match=r"rp_alias_at\.py:8: kernel 'rp_alias_at': 'u' is a value") as info:
        _kernel_from_source(tmp_path, "rp_alias_at", "def rp_alias_at(speed: Scalar, o: Mutable[Scalar]):\n"
                                                     "    u = speed\n    o = u.at(0) + speed")
    assert "(e.g. speed.at(i))" in str(info.value)


@pytest.mark.parametrize("target,option,known", [("spirv", "chip", "subgroup"), ("nvvm", "subgroup", "chip"),
                                                 ("rocdl", "bogus", "chip")])
def test_an_option_a_gpu_target_does_not_take_is_one_clear_line(target, option, known):
    """It used to be Python's "SpirvTarget.__init__() got an unexpected keyword argument 'chip'" (a TypeError)."""
    pattern = rf"the {target} target takes the options \[[^]]*'{known}'[^]]*\], got \['{option}'\]"
    with pytest.raises(ValueError, match=pattern):
        eagle.deploy(rp_step, target=target, **{option: 1})


@hawk.kernel
def rp_loop(x: Scalar, y: Mutable[Scalar], total: Mutable[Scalar]):
    y = x + 1.0
    total = hawk.sum(x)


def test_step_loops_check_the_arrays_they_write_before_stepping():
    """The loops step private copies, so the binder never saw the caller's arrays: a read-only one ended the loop in
    NumPy's 'assignment destination is read-only' after the other outputs had been written back, and two outputs
    sharing memory were written one over the other."""
    plan = eagle.deploy(rp_loop)
    y = np.full(3, 5.0)
    total = np.zeros(1)
    total.flags.writeable = False
    for door in (lambda **p: plan.simulate(3, carry={"y": "x"}, **p),
                 lambda **p: plan.until_done(lambda r: True, carry={"y": "x"}, **p)):
        with pytest.raises(eagle.InputError, match=r"plane 'total' of kernel 'rp_loop': .*read-only"):
            door(x=np.zeros(3), y=y, total=total)
        assert y.tolist() == [5.0] * 3
    buf = np.full(4, 5.0)
    with pytest.raises(eagle.InputError, match=r"plane 'total' of kernel 'rp_loop': shares memory with plane 'y'"):
        plan.simulate(3, carry={"y": "x"}, x=np.zeros(3), y=buf[:3], total=buf[2:3])
    assert buf.tolist() == [5.0] * 4
    plan.simulate(3, carry={"y": "x"}, x=np.zeros(3), y=buf[:3], total=buf[3:])  # halves of one buffer are fine
    assert buf.tolist() == [3.0, 3.0, 3.0, 6.0]


@pytest.mark.parametrize("n,words", [("0", "n must be at least 1, got 0"), ("-3", "n must be at least 1, got -3"),
                                     ("2.5", "'2.5' is a float: write m.index(x, int(2.5))"),
                                     ("w", "'w' is a float: write m.index(x, int(w))")],
                         ids=["zero", "negative", "float-constant", "float-param"])
def test_m_index_takes_a_whole_number_of_slots(tmp_path, n, words):
    """m.index(x, 0) used to send every lane to key -1 (adding nothing, silently), and a float n was truncated
    without a word, where range(2.5) is refused."""
    body = (f"def rp_mindex(x: Scalar, w: Param, acc: Mutable['slot':4]):\n"
            f"    hawk.scatter(acc)[m.index(x, {n})] += 1.0")
    path = tmp_path / "rp_mindex.py"
    with pytest.raises(hawk.KernelError, match=r"rp_mindex\.py:7: kernel 'rp_mindex': m\.index") as info:
        import importlib.util

        path.write_text("import hawk\nimport hawk.math as m\nfrom hawk import *\n\n@hawk.kernel\n" + body + "\n")
        spec = importlib.util.spec_from_file_location("rp_mindex", path)
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    assert words in str(info.value)


def test_a_masked_array_with_masked_entries_is_refused_not_read_through():
    """The mask used to be dropped without a word: the run added the hidden value NumPy's own sum would skip."""
    x = np.ma.array([1.0, 2.0, 3.0], mask=[False, True, False])
    with pytest.raises(eagle.InputError, match=r"plane 'x' of kernel 'rp_cache_race': is a masked array"):
        eagle.deploy(rp_cache_race).run(x=x)
    unmasked = np.ma.array([1.0, 2.0, 3.0], mask=False)  # nothing hidden: the values are the data
    assert float(np.asarray(eagle.deploy(rp_cache_race).run(x=unmasked))[0]) == 30.0


def _lane_order(key, x, ops, start=100.0):
    buf = np.full(4, start)
    for k, v in zip(key, x, strict=True):
        for op in ops:
            if op == "store":
                buf[k] = v
            else:
                buf[k] += v * 0.5 if op == "add" else 1.0
    return buf


def test_a_sink_stored_into_and_added_into_keeps_lane_order_or_is_refused(tmp_path):
    """Compensated or ordered adds into a sink that a store also writes used to be added on top after the stores
    (a wrong answer, add-then-store), or refused as 'policies plain and compensated' with no file:line although the
    user wrote no policy (store-then-add). Plain adds (and whole-number counts) follow lane order."""
    rng = np.random.default_rng(2)
    key = rng.integers(0, 4, 3000).astype(np.int32)
    x = rng.standard_normal(3000)
    for policy in ("", ", policy='compensated'", ", policy='ordered'"):
        with pytest.raises(hawk.KernelError, match=r"rp_mixed\.py:7: kernel 'rp_mixed': sink 'buf' is both stored "
                                                   r"into \(=\) and added into \(\+=\).*policy=\"plain\""):
            _kernel_from_source(tmp_path, "rp_mixed", "def rp_mixed(key: Index, x: Scalar, buf: Mutable['slot':4]):\n"
                                                      f"    hawk.scatter(buf{policy})[key] += x * 0.5\n"
                                                      "    hawk.scatter(buf)[key] = x")
    _, plain = _kernel_from_source(tmp_path, "rp_mixed_plain",
                                   "def rp_mixed_plain(key: Index, x: Scalar, buf: Mutable['slot':4]):\n"
                                   "    hawk.scatter(buf, policy='plain')[key] += x * 0.5\n"
                                   "    hawk.scatter(buf)[key] = x")
    _, count = _kernel_from_source(tmp_path, "rp_mixed_count",
                                   "def rp_mixed_count(key: Index, x: Scalar, buf: Mutable['slot':4]):\n"
                                   "    hawk.scatter(buf)[key] = x\n"
                                   "    hawk.scatter(buf)[key] += 1.0")
    for kernel, ops in ((plain, ("add", "store")), (count, ("store", "one"))):
        for threads in (1, 2):
            buf = np.full(4, 100.0)
            eagle.deploy(kernel, threads=threads, min_chunk=1024).run(key=key, x=x, buf=buf)
            np.testing.assert_allclose(buf, _lane_order(key, x, ops), rtol=1e-13)


def test_a_dump_dir_that_cannot_hold_files_is_refused_naming_the_setting(tmp_path, monkeypatch):
    """$HAWK_DUMP_DIR naming a file (here /dev/null's kind: something that is not a folder) gives one line that
    names the setting, not an OSError from inside the compile."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("HAWK_DUMP_DIR", str(blocker))
    monkeypatch.setenv("HAWK_CACHE_DIR", str(tmp_path / "cache"))  # compiled here, never found in a cache
    with pytest.raises(ValueError, match=r"^\$HAWK_DUMP_DIR='.*not-a-folder' cannot hold the IR dumps"):

        @hawk.kernel
        def rp_dumped(x: Scalar) -> Scalar:
            return x * 3.0 + 0.5


@hawk.kernel
def rp_scaled(x: Scalar, p: Param) -> Scalar:
    return x * p


def test_a_param_beyond_int64_and_a_list_of_integers_get_messages_that_say_what_to_pass():
    with pytest.raises(eagle.InputError, match=r"plane 'p' of kernel 'rp_scaled': is a Param and takes a number, "
                                               r"got the integer 1180591620717411303424, beyond int64 .*float\("):
        eagle.deploy(rp_scaled).run(x=np.ones(3), p=2**70)
    with pytest.raises(eagle.InputError, match=r"plane 'x' of kernel 'rp_scaled': takes float32 or float64 values, "
                                               r"got int64 \(convert with np.asarray\(\.\.\., dtype=np.float64\)\)"):
        eagle.deploy(rp_scaled).run(x=[1, 2, 3], p=1.0)
