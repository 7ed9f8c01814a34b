"""The GPU check's device-planes case: a bundle case run with its lane planes already in device memory.

On nvvm the planes are torch CUDA tensors when torch sees a CUDA device (memory eagle borrows: their pointers go
straight into the launch), else eagle device Arrays (`eagle.asarray(a, device="nvvm")`); on spirv and rocdl they
are eagle device Arrays. The run must copy no lane plane between host and device (the runtime's transfer
counter), hand its per-lane outputs back as device Arrays, and give the case's expected results. On the host
target there is nothing to check: the line says so. docs/devices.md.
"""

from __future__ import annotations

import numpy as np


def pick(entries: list, loaded_kernel) -> dict | None:
    """The case to run: the first with stored inputs whose kernel runs in several stages, else the first with
    stored inputs (None when every selected case is a benchmark)."""
    stored = [e for e in entries if e["inputs"] is not None and "build_error" not in e]
    split = [e for e in stored if loaded_kernel(e["kernel"]).stage_count > 1]
    return (split or stored or [None])[0]


def _on_device(planes: dict, names: list[str], target: str) -> tuple[dict, str, list]:
    """(planes with `names` moved to the device, how, the torch tensors made)."""
    import eagle

    if target == "nvvm":
        try:
            import torch

            if torch.cuda.is_available():
                tensors = {n: torch.as_tensor(planes[n], device="cuda") for n in names}
                return {**planes, **tensors}, "torch CUDA tensors, read in place", list(tensors.values())
        except ImportError:
            pass
    moved = {n: eagle.asarray(planes[n], device=target) for n in names}
    return {**planes, **moved}, "eagle device Arrays", []


def check(hawk, lk, entry: dict, planes: dict, expected: dict, target: str, compare, as_outputs) -> tuple[str, str]:
    """("ok" or "FAIL", note) of `entry` run twice with its lane planes on the device."""
    from eagle.array import DeviceArray

    names = [n for n, v in planes.items() if isinstance(v, np.ndarray) and lk.signature.get(n) is not None
             and lk.signature.get(n).kind in ("lane", "index") and v.size]
    dev, how, tensors = _on_device(planes, names, target)
    rt = lk.runtime()
    before = rt.transfers.planes()
    hawk.run(lk, **dev)
    got = hawk.run(lk, **dev)
    copied = rt.transfers.planes() - before
    results = got if isinstance(got, dict) else {"_": got}
    on_device = [k for k, v in results.items() if isinstance(v, DeviceArray)]
    ok, problems, bitwise = compare(as_outputs(got), expected, entry["exact"], entry["rtol"])
    keys = sum(1 for n in names if lk.signature.get(n).kind == "index")
    if copied != 2 * keys:  # Index keys: one copy per run for their range check, nothing else
        problems.append(f"{copied} lane-plane copies between host and device in two runs (expected {2 * keys})")
    if not on_device:
        problems.append("no result came back as a device Array")
    if tensors:  # torch reads a device result in place: the very pointer eagle allocated
        import torch

        r = results[on_device[0]] if on_device else None
        if r is not None and torch.as_tensor(r, device="cuda").data_ptr() != r.buffer.ptr:
            problems.append("torch.as_tensor(result) is not the result's own device memory")
        import eagle

        if eagle.asarray(tensors[0], device="nvvm").buffer.ptr != tensors[0].data_ptr():
            problems.append("eagle.asarray(tensor, device='nvvm') did not wrap the tensor's own memory")
    note = f"{entry['id']}: {len(names)} plane(s) as {how}; results on the device: {on_device}; " \
           f"lane-plane copies: {copied}; bitwise={'yes' if bitwise else 'no'}"
    return ("ok" if ok and not problems else "FAIL"), note + ("; " + "; ".join(problems) if problems else "")
