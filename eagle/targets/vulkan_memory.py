"""Device buffers for the Vulkan runtime: memory a kernel binds in place, filled and read through staging.

A `VulkanBuffer` is a storage buffer in the device's DEVICE_LOCAL memory when it has any (on a discrete GPU the
host cannot map it; Mesa's lavapipe has one memory type, device-local and host-visible at once, and still takes
this path). Data moves only by `vkCmdCopyBuffer` through a host-visible staging buffer the runtime keeps (grown
as needed, at most STAGING bytes per copy), each copy fenced and counted in the runtime's `transfers`. A
`VulkanBuffer` frees its memory when it is collected (or when the runtime closes, whichever comes first).
"""

from __future__ import annotations

import numpy as np

from eagle.targets.device import DeviceBuffer

DEVICE_LOCAL = 0x1
HOST_VISIBLE_COHERENT = 0x2 | 0x4
STAGING = 64 << 20  # bytes: the largest single staging copy (bigger arrays go in several)


def memory_type(memory, bits: int, want: int) -> int | None:
    """The first memory type allowed by `bits` whose flags include `want`, or None."""
    for k in range(memory.memoryTypeCount):
        if bits & (1 << k) and (memory.memoryTypes[k].propertyFlags & want) == want:
            return k
    return None


class VulkanBuffer(DeviceBuffer):
    """A storage buffer of `nbytes` (rounded up to 4, at least 16) in device-local memory, never mapped."""

    def __init__(self, rt, nbytes: int):
        vk = rt.vk
        self.runtime, self.nbytes = rt, nbytes
        self.size = max(16, -(-nbytes // 4) * 4)
        usage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | \
            vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
        info = vk.VkBufferCreateInfo(sType=vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, size=self.size, usage=usage,
                                     sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE)
        self.buffer = vk.vkCreateBuffer(rt.device, info, None)
        req = vk.vkGetBufferMemoryRequirements(rt.device, self.buffer)
        kind = memory_type(rt.memory, req.memoryTypeBits, DEVICE_LOCAL)
        if kind is None:
            kind = memory_type(rt.memory, req.memoryTypeBits, 0)
        alloc = vk.VkMemoryAllocateInfo(sType=vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, allocationSize=req.size,
                                        memoryTypeIndex=kind)
        try:
            self.memory = vk.vkAllocateMemory(rt.device, alloc, None)
        except Exception as exc:
            vk.vkDestroyBuffer(rt.device, self.buffer, None)
            raise MemoryError(f"Vulkan device {rt.device_name}: no room for a buffer of {nbytes} bytes "
                              f"({type(exc).__name__})") from None
        vk.vkBindBufferMemory(rt.device, self.buffer, self.memory, 0)
        rt.live.add(self)

    def release(self) -> None:
        """Free the buffer and its memory (once; the runtime's lock held)."""
        if self.buffer is None:
            return
        rt, vk = self.runtime, self.runtime.vk
        vk.vkDestroyBuffer(rt.device, self.buffer, None)
        vk.vkFreeMemory(rt.device, self.memory, None)
        self.buffer = self.memory = None
        rt.live.discard(self)

    def __del__(self):
        rt = getattr(self, "runtime", None)
        if rt is None or getattr(self, "buffer", None) is None or rt._closed:
            return
        try:
            with rt._lock:
                if not rt._closed:
                    self.release()
        except Exception:  # interpreter shutdown: the runtime's close frees what is left
            pass

    def __repr__(self) -> str:
        return f"<VulkanBuffer {self.nbytes} bytes on {self.runtime.device_name}>"


def copy(rt, buf: VulkanBuffer, a: np.ndarray, up: bool, what: str, offset: int = 0) -> None:
    """Copy host array `a` into `buf` (`up`) or `buf` into `a`, through the staging buffer, counted as one
    transfer of `what`; `offset`: where in `buf` (bytes). The caller holds the runtime's lock."""
    _live(buf)
    if offset + a.nbytes > buf.nbytes:
        raise ValueError(f"a copy of {a.nbytes} bytes at byte {offset} does not fit a device buffer of {buf.nbytes}")
    vk = rt.vk
    flat = a.reshape(-1).view(np.uint8)
    step = min(STAGING, max(a.nbytes, 16))
    stage = rt.staging(step)
    for lo in range(0, a.nbytes, step):
        n = min(step, a.nbytes - lo)
        if up:
            stage.mapped[:n] = flat[lo:lo + n]
        src, dst = (stage.buffer, buf.buffer) if up else (buf.buffer, stage.buffer)
        region = vk.VkBufferCopy(srcOffset=0 if up else offset + lo, dstOffset=offset + lo if up else 0, size=n)
        rt.submit(lambda cb, src=src, dst=dst, region=region: _record_copy(vk, cb, src, dst, region))
        if not up:
            flat[lo:lo + n] = stage.mapped[:n]
    rt.transfers.add("up" if up else "down", what, a.nbytes)


def _live(buf: VulkanBuffer) -> None:
    if buf.buffer is None:
        raise RuntimeError("this device array's memory was released (its Vulkan runtime closed)")


def device_copy(rt, src: VulkanBuffer, src_at: int, dst: VulkanBuffer, dst_at: int, nbytes: int) -> None:
    """Copy `nbytes` from `src` (at byte `src_at`) to `dst` (at `dst_at`) on the device: no host memory, not a
    transfer. The caller holds the runtime's lock."""
    _live(src)
    _live(dst)
    if src_at + nbytes > src.nbytes or dst_at + nbytes > dst.nbytes:
        raise ValueError(f"a device copy of {nbytes} bytes runs past a buffer ({src.nbytes} bytes at {src_at} -> "
                         f"{dst.nbytes} bytes at {dst_at})")
    if nbytes:
        vk = rt.vk
        region = vk.VkBufferCopy(srcOffset=src_at, dstOffset=dst_at, size=nbytes)
        rt.submit(lambda cb: _record_copy(vk, cb, src.buffer, dst.buffer, region))


def zero(rt, buf: VulkanBuffer) -> None:
    """Set every byte of `buf` to 0 on the device (vkCmdFillBuffer): no host memory, not a transfer."""
    _live(buf)
    vk = rt.vk

    def record(cb):
        vk.vkCmdFillBuffer(cb, buf.buffer, 0, buf.size, 0)
        after = vk.VkMemoryBarrier(sType=vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                   srcAccessMask=vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                                   dstAccessMask=vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT |
                                   vk.VK_ACCESS_TRANSFER_READ_BIT)
        vk.vkCmdPipelineBarrier(cb, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1,
                                [after], 0, None, 0, None)

    rt.submit(record)


def _record_copy(vk, cb, src, dst, region) -> None:
    """A buffer copy between barriers: earlier shader and transfer writes are seen by it, and it is seen by
    later shaders, transfers and host reads."""
    before = vk.VkMemoryBarrier(sType=vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT |
                                vk.VK_ACCESS_HOST_WRITE_BIT,
                                dstAccessMask=vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT)
    vk.vkCmdPipelineBarrier(cb, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1,
                            [before], 0, None, 0, None)
    vk.vkCmdCopyBuffer(cb, src, dst, 1, [region])
    after = vk.VkMemoryBarrier(sType=vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER, srcAccessMask=vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                               dstAccessMask=vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT |
                               vk.VK_ACCESS_HOST_READ_BIT | vk.VK_ACCESS_TRANSFER_READ_BIT)
    vk.vkCmdPipelineBarrier(cb, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1,
                            [after], 0, None, 0, None)
