"""Launch SPIR-V kernels through Vulkan (the PyPI `vulkan` package: raw Vulkan through cffi).

Imports only NumPy and `vulkan`: an artifact runs on a machine without MLIR. Any Vulkan 1.2 device with compute
works; a real GPU is preferred over a CPU implementation, and on a machine without a GPU Mesa's lavapipe
("llvmpipe") runs the very same SPIR-V. EAGLE_VULKAN_DEVICE=<part of a device name> picks a device by name.

A launch: argument k of the kernel is the storage buffer at (set 0, binding k). An argument that is a
VulkanBuffer (eagle/targets/vulkan_memory.py: device-local memory, what a device eagle.Array holds) is bound where
it lies, never copied; a numpy array is copied into a host-visible, coherent buffer (kept between launches and
grown as needed) and, when written, back. One compute dispatch of `grid.groups` workgroups runs. Every copy
between host and device is counted in `transfers` (eagle.targets.device.Transfers; `transfers()` here).
Pipelines are cached per (binary, entry point). The only atomics the lowering emits are 64-bit integer adds into
the exact accumulators of policy="ordered" (hawk/exact.py) that threads share; Float64, Int64 and 64-bit buffer
(and workgroup) atomics are enabled when the device has them, and a kernel that needs a feature the device lacks
is refused with the feature named.

Binaries from eagle's SPIR-V target take one more binding after their arguments: a status buffer (i64 [2, 0, 0])
the runtime adds and reads back. Word 1 set: an invocation ran out of lavapipe's loop budget (LoopBudgetExceeded):
the launch's results are discarded and the error says why; a binary without the extra binding launches as it is.
(Word 2 is not set by binaries any more: sin/cos/tan reduce every argument, hawk/targets/spirv_math.py.)
"""

from __future__ import annotations

import atexit
import os
import threading
import weakref

import numpy as np

from eagle.targets import vulkan_memory
from eagle.targets.device import DeviceRuntime, Grid, Placed, Transfers, missing
from eagle.targets.vulkan_memory import VulkanBuffer
from hawk.abi.targets import CANARY_TRIPS

MIN_BUFFER = 16  # bytes: a zero-size plane still binds a (tiny) buffer
HELD_MAX = 4096  # bytes: launch arguments up to this size are not copied again when the binding holds them already
# SPIR-V OpCapability operands -> the device feature they need (VkPhysicalDeviceFeatures, or Vulkan 1.2's
# VkPhysicalDeviceVulkan12Features for Int64Atomics: 64-bit atomics on storage buffers)
_CAP_FEATURE = {10: "shaderFloat64", 11: "shaderInt64", 12: "shaderBufferInt64Atomics", 22: "shaderInt16"}
_CORE_FEATURES = ("shaderFloat64", "shaderInt64", "shaderInt16")
_VK12_FEATURES = ("shaderBufferInt64Atomics", "shaderSharedInt64Atomics")
_OP_CAPABILITY = 17
_OP_DECORATE, _BINDING = 71, 33
_HOST_MEMORY = 0x2 | 0x4  # HOST_VISIBLE | HOST_COHERENT

_LOCK = threading.Lock()
_SHARED: VulkanRuntime | None = None


def _instructions(spirv: bytes):
    """(opcode, operand words) of each instruction of a SPIR-V binary."""
    words = np.frombuffer(spirv, dtype="<u4")
    if len(words) < 5 or words[0] != 0x07230203:
        raise ValueError("not a SPIR-V binary (bad magic number)")
    i = 5
    while i < len(words):
        count, op = int(words[i]) >> 16, int(words[i]) & 0xFFFF
        if count == 0 or i + count > len(words):
            raise ValueError("malformed SPIR-V (an instruction runs past the end)")
        yield op, words[i + 1:i + count]
        i += count


def capabilities(spirv: bytes) -> set[int]:
    """The OpCapability operands a SPIR-V binary declares."""
    return {int(w[0]) for op, w in _instructions(spirv) if op == _OP_CAPABILITY}


def bindings(spirv: bytes) -> int:
    """How many descriptor bindings (0..n-1 in set 0) the binary's variables use."""
    used = [int(w[2]) for op, w in _instructions(spirv) if op == _OP_DECORATE and len(w) >= 3 and w[1] == _BINDING]
    return max(used) + 1 if used else 0


class LoopBudgetExceeded(RuntimeError):
    """A launch on lavapipe whose invocations ran out of its loop budget (its results are wrong and discarded)."""


def transfers() -> Transfers:
    """The copies between host and device of this process's Vulkan runtime so far (made on first use)."""
    return VulkanRuntime.shared().transfers


class _Buffer:
    """A host-visible, coherent buffer mapped for its life: a launch's copy of a numpy argument, or staging."""

    def __init__(self, rt: VulkanRuntime, size: int, usage: int | None = None):
        vk = rt.vk
        self.size = size
        info = vk.VkBufferCreateInfo(sType=vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, size=size,
                                     usage=vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT if usage is None else usage,
                                     sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE)
        self.buffer = vk.vkCreateBuffer(rt.device, info, None)
        req = vk.vkGetBufferMemoryRequirements(rt.device, self.buffer)
        alloc = vk.VkMemoryAllocateInfo(sType=vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, allocationSize=req.size,
                                        memoryTypeIndex=rt.memory_type(req.memoryTypeBits))
        self.memory = vk.vkAllocateMemory(rt.device, alloc, None)
        vk.vkBindBufferMemory(rt.device, self.buffer, self.memory, 0)
        self.mapped = np.frombuffer(vk.vkMapMemory(rt.device, self.memory, 0, size, 0), dtype=np.uint8)

    def destroy(self, rt: VulkanRuntime) -> None:
        vk = rt.vk
        vk.vkUnmapMemory(rt.device, self.memory)
        vk.vkDestroyBuffer(rt.device, self.buffer, None)
        vk.vkFreeMemory(rt.device, self.memory, None)


class _Pipeline:
    def __init__(self, rt: VulkanRuntime, binary: bytes, entry: str, nbuf: int):
        vk, dev = rt.vk, rt.device
        self.nbuf = nbuf  # bindings 0..nbuf-1 (the kernel's arguments, then eagle's status buffer if any)
        self._code = binary  # kept alive while the create-info points at it
        module_info = vk.VkShaderModuleCreateInfo(sType=vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                                  codeSize=len(binary), pCode=binary)
        self.module = vk.vkCreateShaderModule(dev, module_info, None)
        bindings = [vk.VkDescriptorSetLayoutBinding(binding=k, descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                    descriptorCount=1, stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT)
                    for k in range(nbuf)]
        layout_info = vk.VkDescriptorSetLayoutCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, bindingCount=nbuf, pBindings=bindings)
        self.set_layout = vk.vkCreateDescriptorSetLayout(dev, layout_info, None)
        set_layouts = [self.set_layout]
        pl_info = vk.VkPipelineLayoutCreateInfo(sType=vk.VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                                setLayoutCount=1, pSetLayouts=set_layouts)
        self.layout = vk.vkCreatePipelineLayout(dev, pl_info, None)
        self._entry = entry  # kept alive too
        stage = vk.VkPipelineShaderStageCreateInfo(sType=vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                                                   stage=vk.VK_SHADER_STAGE_COMPUTE_BIT, module=self.module,
                                                   pName=entry)
        info = vk.VkComputePipelineCreateInfo(sType=vk.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, stage=stage,
                                              layout=self.layout)
        self.pipeline = vk.vkCreateComputePipelines(dev, None, 1, [info], None)[0]
        sizes = [vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=max(nbuf, 1))]
        pool_info = vk.VkDescriptorPoolCreateInfo(sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, maxSets=1,
                                                  poolSizeCount=1, pPoolSizes=sizes)
        self.pool = vk.vkCreateDescriptorPool(dev, pool_info, None)
        alloc = vk.VkDescriptorSetAllocateInfo(sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                               descriptorPool=self.pool, descriptorSetCount=1,
                                               pSetLayouts=set_layouts)
        self.set = vk.vkAllocateDescriptorSets(dev, alloc)[0]
        # small arguments (HELD_MAX bytes at most) live in this pipeline's own arena, HELD_MAX bytes per binding,
        # and `held[k]` is what binding k's slot holds (copied in, or read back): a launch whose argument k has
        # those very bytes skips the copy (a bound plan's #meta, a clean #err, unchanged cuts and Params)
        self.arena: _Buffer | None = None
        self.held: dict[int, bytes] = {}

    def slot(self, rt: VulkanRuntime, k: int, nargs: int) -> np.ndarray:
        """The mapped HELD_MAX bytes of binding k's slot in the arena (made on first use)."""
        if self.arena is None:
            self.arena = _Buffer(rt, HELD_MAX * max(1, nargs))
        return self.arena.mapped[k * HELD_MAX:(k + 1) * HELD_MAX]

    def destroy(self, rt: VulkanRuntime) -> None:
        vk, dev = rt.vk, rt.device
        if self.arena is not None:
            self.arena.destroy(rt)
            self.arena = None
        vk.vkDestroyDescriptorPool(dev, self.pool, None)
        vk.vkDestroyPipeline(dev, self.pipeline, None)
        vk.vkDestroyPipelineLayout(dev, self.layout, None)
        vk.vkDestroyDescriptorSetLayout(dev, self.set_layout, None)
        vk.vkDestroyShaderModule(dev, self.module, None)


class VulkanRuntime(DeviceRuntime):
    """A Vulkan instance, one compute device and queue; launches SPIR-V kernels over numpy buffers and device
    buffers, and keeps device buffers for eagle.Arrays on target 'spirv' (`alloc`, `upload`, `download`)."""

    name = "vulkan"
    target = "spirv"

    @classmethod
    def shared(cls) -> VulkanRuntime:
        """One runtime per process (a Vulkan instance and device are costly to make)."""
        global _SHARED
        with _LOCK:
            if _SHARED is None:
                _SHARED = cls()
                atexit.register(_SHARED.close)
            return _SHARED

    def __init__(self):
        try:
            import vulkan as vk
        except ImportError as exc:
            raise missing("spirv", "the Python package 'vulkan'", "pip install vulkan") from exc
        except OSError as exc:  # the package loads libvulkan.so.1 at import
            raise missing("spirv", "a Vulkan loader (libvulkan.so.1)",
                          "apt-get install libvulkan1 mesa-vulkan-drivers, or a GPU driver with Vulkan") from exc
        self.vk = vk
        self._closed = False
        self._lock = threading.RLock()  # (re-entrant: a device buffer collected while a launch holds it frees itself)
        self.pipelines: dict[tuple[bytes, str], _Pipeline] = {}
        self.buffers: list[_Buffer] = []
        self.transfers = Transfers()
        self.live: weakref.WeakSet = weakref.WeakSet()  # device buffers not yet freed (close frees them)
        self._staging: _Buffer | None = None
        app = vk.VkApplicationInfo(sType=vk.VK_STRUCTURE_TYPE_APPLICATION_INFO, pApplicationName="eagle",
                                   applicationVersion=1, pEngineName="eagle", engineVersion=1,
                                   apiVersion=vk.VK_MAKE_VERSION(1, 2, 0))
        info = vk.VkInstanceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, pApplicationInfo=app)
        try:
            self.instance = vk.vkCreateInstance(info, None)
        except Exception as exc:
            raise missing("spirv", "a Vulkan driver (ICD)",
                          f"vkCreateInstance failed: {type(exc).__name__}; apt-get install mesa-vulkan-drivers "
                          "for lavapipe") from exc
        try:
            self._open_device()
        except BaseException:
            vk.vkDestroyInstance(self.instance, None)
            raise

    def _open_device(self) -> None:
        vk = self.vk
        self.physical, self.device_name, self.device_type = self._pick_device()
        if self.device_type == vk.VK_PHYSICAL_DEVICE_TYPE_CPU:  # (lavapipe: invocations share the CPU's cores)
            self.range_threads = max(2, os.cpu_count() or 2)
        self.family = self._compute_family()
        have12 = vk.VkPhysicalDeviceVulkan12Features(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES)
        have = vk.VkPhysicalDeviceFeatures2(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, pNext=have12)
        vk.vkGetPhysicalDeviceFeatures2(self.physical, have)
        self.features = {f for f in _CORE_FEATURES if getattr(have.features, f)} | \
            {f for f in _VK12_FEATURES if getattr(have12, f)}
        # every create-info struct a pointer reaches is kept in a variable (inline temporaries are freed early)
        core = vk.VkPhysicalDeviceFeatures(**{f: vk.VK_TRUE for f in _CORE_FEATURES if f in self.features})
        enabled12 = vk.VkPhysicalDeviceVulkan12Features(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
            **{f: vk.VK_TRUE for f in _VK12_FEATURES if f in self.features})
        enabled = vk.VkPhysicalDeviceFeatures2(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                               pNext=enabled12, features=core)
        priorities = [1.0]
        queue_info = vk.VkDeviceQueueCreateInfo(sType=vk.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                                queueFamilyIndex=self.family, queueCount=1,
                                                pQueuePriorities=priorities)
        queue_infos = [queue_info]
        dev_info = vk.VkDeviceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, pNext=enabled,
                                         queueCreateInfoCount=1, pQueueCreateInfos=queue_infos)
        self.device = vk.vkCreateDevice(self.physical, dev_info, None)
        self.queue = vk.vkGetDeviceQueue(self.device, self.family, 0)
        props = vk.vkGetPhysicalDeviceProperties(self.physical)
        self.max_range = int(props.limits.maxStorageBufferRange)
        self.max_buffers = int(props.limits.maxPerStageDescriptorStorageBuffers)
        self.max_groups = int(props.limits.maxComputeWorkGroupCount[0])
        sub = vk.VkPhysicalDeviceSubgroupProperties(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES)
        vk.vkGetPhysicalDeviceProperties2(self.physical, vk.VkPhysicalDeviceProperties2(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, pNext=sub))
        self.subgroup_size = int(sub.subgroupSize)
        shuffles = vk.VK_SUBGROUP_FEATURE_SHUFFLE_BIT | vk.VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT
        self.subgroup_shuffles = (sub.supportedOperations & shuffles) == shuffles and \
            bool(sub.supportedStages & vk.VK_SHADER_STAGE_COMPUTE_BIT)
        self.memory = vk.vkGetPhysicalDeviceMemoryProperties(self.physical)
        pool_info = vk.VkCommandPoolCreateInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                               flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                               queueFamilyIndex=self.family)
        self.command_pool = vk.vkCreateCommandPool(self.device, pool_info, None)
        cb_info = vk.VkCommandBufferAllocateInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                                 commandPool=self.command_pool,
                                                 level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1)
        self.command = vk.vkAllocateCommandBuffers(self.device, cb_info)[0]
        fence_info = vk.VkFenceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO)
        self.fence = vk.vkCreateFence(self.device, fence_info, None)

    def __repr__(self) -> str:
        return f"<VulkanRuntime {self.device_name}>"

    # ---- setup ----------------------------------------------------------------------------------------------
    def _pick_device(self):
        vk = self.vk
        try:
            devices = vk.vkEnumeratePhysicalDevices(self.instance)
        except Exception as exc:
            raise missing("spirv", "a Vulkan device", f"vkEnumeratePhysicalDevices failed: {exc!r}") from exc
        want = os.environ.get("EAGLE_VULKAN_DEVICE", "").lower()
        rank = {vk.VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: 4, vk.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: 3,
                vk.VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: 2, vk.VK_PHYSICAL_DEVICE_TYPE_CPU: 1}
        best, seen = None, []
        for pd in devices:
            p = vk.vkGetPhysicalDeviceProperties(pd)
            name = vk.ffi.string(p.deviceName).decode() if not isinstance(p.deviceName, str) else p.deviceName
            seen.append(name)
            if p.apiVersion < vk.VK_MAKE_VERSION(1, 2, 0):
                continue  # SPIR-V 1.5 needs Vulkan 1.2
            if want and want not in name.lower():
                continue
            score = rank.get(p.deviceType, 0)
            if best is None or score > best[0]:
                best = (score, pd, name, p.deviceType)
        if best is None:
            what = f"no Vulkan 1.2 device matching EAGLE_VULKAN_DEVICE={want!r}" if want else \
                "no Vulkan 1.2 device"
            raise missing("spirv", "a Vulkan 1.2 device", f"{what}; devices seen: {seen or 'none'}; "
                          "apt-get install mesa-vulkan-drivers for lavapipe")
        return best[1], best[2], best[3]

    def _compute_family(self) -> int:
        vk = self.vk
        for k, q in enumerate(vk.vkGetPhysicalDeviceQueueFamilyProperties(self.physical)):
            if q.queueFlags & vk.VK_QUEUE_COMPUTE_BIT:
                return k
        raise missing("spirv", "a Vulkan device with a compute queue", f"{self.device_name} has none")

    def memory_type(self, bits: int) -> int:
        for k in range(self.memory.memoryTypeCount):
            if bits & (1 << k) and (self.memory.memoryTypes[k].propertyFlags & _HOST_MEMORY) == _HOST_MEMORY:
                return k
        raise RuntimeError(f"Vulkan device {self.device_name} has no host-visible coherent memory for buffers")

    def pipeline(self, binary: bytes, entry: str, nargs: int) -> _Pipeline:
        """The cached pipeline for (binary, entry); `.status` says whether binding `nargs` is eagle's status
        buffer (binaries from eagle's SPIR-V target have one)."""
        key = (binary, entry)
        p = self.pipelines.get(key)
        if p is None:
            need = {_CAP_FEATURE[c] for c in capabilities(binary) if c in _CAP_FEATURE}
            lacking = sorted(need - self.features)
            if lacking:
                raise RuntimeError(f"target 'spirv': kernel '{entry}' needs the Vulkan feature(s) {lacking}, which "
                                   f"device {self.device_name} lacks")
            nbind = bindings(binary)
            if nbind > nargs + 1:
                raise ValueError(f"kernel '{entry}' uses {nbind} storage buffers but was given {nargs}")
            p = self.pipelines[key] = _Pipeline(self, binary, entry, max(nbind, nargs))
            p.status = nbind == nargs + 1
        if p.nbuf != nargs + p.status:
            raise ValueError(f"kernel '{entry}' was launched with {nargs} buffers, its pipeline binds {p.nbuf}")
        return p

    def _buffer(self, k: int, size: int) -> _Buffer:
        while len(self.buffers) <= k:
            self.buffers.append(None)
        b = self.buffers[k]
        if b is None or b.size < size:
            if b is not None:
                b.destroy(self)
            cap = max(MIN_BUFFER, 1 << (size - 1).bit_length())  # grow by powers of two
            self.buffers[k] = b = _Buffer(self, cap if cap <= self.max_range else size)
        return b

    # ---- device buffers (eagle/targets/vulkan_memory.py) ------------------------------------------------------
    def alloc(self, nbytes: int) -> VulkanBuffer:
        """A device buffer of `nbytes` (device-local memory where the device has it), contents undefined."""
        if nbytes > self.max_range:
            raise RuntimeError(f"target 'spirv': a device array of {nbytes} bytes is larger than device "
                               f"{self.device_name} binds ({self.max_range} bytes per storage buffer)")
        with self._lock:
            self._check_open()
            return VulkanBuffer(self, nbytes)

    def upload(self, buf: VulkanBuffer, a: np.ndarray, what: str = "array") -> None:
        """Copy host array `a` (C-contiguous) into `buf`, through staging; counted as one transfer of `what`."""
        with self._lock:
            self._check_open()
            vulkan_memory.copy(self, buf, np.ascontiguousarray(a), True, what)

    def download(self, buf: VulkanBuffer, a: np.ndarray, what: str = "array", offset: int = 0) -> None:
        """Copy `buf` (from byte `offset`) into host array `a` (C-contiguous, written in place); counted as one
        transfer of `what`."""
        with self._lock:
            self._check_open()
            vulkan_memory.copy(self, buf, a, False, what, offset)

    def device_copy(self, src: VulkanBuffer, src_at: int, dst: VulkanBuffer, dst_at: int, nbytes: int) -> None:
        """`nbytes` from `src` at byte `src_at` to `dst` at `dst_at`, on the device (not a transfer)."""
        with self._lock:
            self._check_open()
            vulkan_memory.device_copy(self, src, src_at, dst, dst_at, nbytes)

    def zero(self, buf: VulkanBuffer) -> None:
        """Every byte of `buf` set to 0 on the device (not a transfer)."""
        with self._lock:
            self._check_open()
            vulkan_memory.zero(self, buf)

    def staging(self, size: int) -> _Buffer:
        """The host-visible buffer transfers go through, at least `size` bytes (the lock held)."""
        if self._staging is None or self._staging.size < size:
            if self._staging is not None:
                self._staging.destroy(self)
                self._staging = None
            vk = self.vk
            usage = vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
            self._staging = _Buffer(self, max(MIN_BUFFER, 1 << (size - 1).bit_length()), usage)
        return self._staging

    def submit(self, record) -> None:
        """Record commands with `record(command_buffer)`, submit them and wait (the lock held)."""
        vk = self.vk
        begin = vk.VkCommandBufferBeginInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                            flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)
        vk.vkBeginCommandBuffer(self.command, begin)
        record(self.command)
        vk.vkEndCommandBuffer(self.command)
        commands = [self.command]
        submit = vk.VkSubmitInfo(sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, commandBufferCount=1,
                                 pCommandBuffers=commands)
        vk.vkQueueSubmit(self.queue, 1, [submit], self.fence)
        try:
            vk.vkWaitForFences(self.device, 1, [self.fence], vk.VK_TRUE, 0xFFFFFFFFFFFFFFFF)
        finally:
            vk.vkResetFences(self.device, 1, [self.fence])

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the Vulkan runtime was closed")

    def check_subgroup(self, size: int) -> None:
        """Refuse a binary compiled with shuffles for subgroups of `size` unless this device runs exactly those."""
        if self.subgroup_size != size or not self.subgroup_shuffles:
            have = f"subgroups of {self.subgroup_size}" + ("" if self.subgroup_shuffles else " without shuffles")
            raise RuntimeError(f"target 'spirv' was compiled with subgroup={size}, but device {self.device_name} "
                               f"runs {have} in compute shaders: deploy with subgroup="
                               f"{self.subgroup_size if self.subgroup_shuffles else 0} (or 0, which runs anywhere)")

    # ---- launch ---------------------------------------------------------------------------------------------
    def launch(self, binary: bytes, entry: str, buffers: list, written: list[bool], grid: Grid,
               roles: list[str] | None = None):
        """One dispatch over `buffers` (numpy arrays, copied in and, where `written`, back; or Placed
        VulkanBuffers of this runtime, bound in place). `roles`: each buffer's layout role, by which `transfers`
        counts copies."""
        vk = self.vk
        n = len(buffers) + 1  # with the status buffer
        if n > self.max_buffers:
            raise RuntimeError(f"target 'spirv': kernel '{entry}' binds {n} storage buffers; device "
                               f"{self.device_name} allows {self.max_buffers} per shader: run it on another "
                               f"target (the host, nvvm, rocdl) or device, or split the kernel into kernels with "
                               f"fewer planes, sinks, reductions and scans each")
        groups = grid.groups
        if groups > self.max_groups:
            raise RuntimeError(f"target 'spirv': {groups} workgroups exceed device {self.device_name}'s limit of "
                               f"{self.max_groups}")
        for k, a in enumerate(buffers):
            if isinstance(a, Placed) and a.buffer.runtime is not self:
                raise RuntimeError(f"target 'spirv': argument {k} of kernel '{entry}' is a device buffer of another "
                                   "Vulkan runtime")
            if a.nbytes > self.max_range:
                raise RuntimeError(f"target 'spirv': argument {k} of kernel '{entry}' is {a.nbytes} bytes; device "
                                   f"{self.device_name} binds storage buffers of at most {self.max_range} bytes")
        with self._lock:
            self._check_open()
            pipe = self.pipeline(binary, entry, len(buffers))
            status = np.array([CANARY_TRIPS, 0, 0], dtype=np.int64)
            bound = [*buffers, status] if pipe.status else list(buffers)
            infos, writes = [], []
            held, used = pipe.held, {}
            for k, a in enumerate(bound):
                if isinstance(a, Placed):  # on the device already: bound where it lies
                    info = vk.VkDescriptorBufferInfo(buffer=a.buffer.buffer, offset=0, range=a.buffer.size)
                    infos.append(info)
                    writes.append(self._write(pipe, k, info))
                    continue
                size = max(MIN_BUFFER, -(-a.nbytes // 4) * 4)
                small = k < len(buffers) and size <= HELD_MAX
                mapped = pipe.slot(self, k, len(buffers)) if small else self._buffer(k, size).mapped
                used[k] = mapped
                if a.nbytes:
                    data = np.ascontiguousarray(a).view(np.uint8).reshape(-1)
                    raw = data.tobytes() if small else None
                    if not (small and held.get(k) == raw):  # (else: the slot holds these bytes already)
                        mapped[:a.nbytes] = data
                        if k < len(buffers):
                            self.transfers.add("up", roles[k] if roles else "buffer", a.nbytes)
                    if small:
                        held[k] = raw
                if small:
                    info = vk.VkDescriptorBufferInfo(buffer=pipe.arena.buffer, offset=k * HELD_MAX, range=HELD_MAX)
                else:
                    info = vk.VkDescriptorBufferInfo(buffer=self.buffers[k].buffer, offset=0, range=size)
                infos.append(info)
                writes.append(self._write(pipe, k, info))
            if writes:
                vk.vkUpdateDescriptorSets(self.device, len(writes), writes, 0, None)
            seen = vk.VkMemoryBarrier(sType=vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER,  # device buffers' earlier writes
                                      srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                                      dstAccessMask=vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT)
            done = vk.VkMemoryBarrier(sType=vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                      srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT,
                                      dstAccessMask=vk.VK_ACCESS_HOST_READ_BIT | vk.VK_ACCESS_TRANSFER_READ_BIT)

            def record(cb):
                vk.vkCmdPipelineBarrier(cb, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                                        vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, [seen], 0, None, 0, None)
                vk.vkCmdBindPipeline(cb, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipe.pipeline)
                vk.vkCmdBindDescriptorSets(cb, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipe.layout, 0, 1, [pipe.set], 0,
                                           None)
                vk.vkCmdDispatch(cb, groups, 1, 1)
                vk.vkCmdPipelineBarrier(cb, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                        vk.VK_PIPELINE_STAGE_HOST_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, [done],
                                        0, None, 0, None)

            self.submit(record)
            budget = self.buffers[len(buffers)].mapped[8:16].view(np.int64)[0] if pipe.status else 0  # (word 1)
            if budget:
                raise LoopBudgetExceeded(
                    f"target 'spirv': kernel '{entry}' ran out of the loop budget of device {self.device_name}: "
                    f"lavapipe silently ends every loop of a shader invocation after 65535 loop iterations in all, "
                    f"and this launch gave each of its {grid.groups * grid.block} invocation(s) up to "
                    f"{grid.per_thread} lanes; the "
                    f"results were discarded. Run it on a GPU (target 'spirv' on a Vulkan GPU, 'nvvm', 'rocdl') or "
                    f"on 'host', or give it fewer lanes per launch")
            for k, (a, w) in enumerate(zip(buffers, written, strict=True)):
                if w and a.nbytes and not isinstance(a, Placed):
                    np.copyto(a, used[k][:a.nbytes].view(a.dtype).reshape(a.shape))
                    self.transfers.add("down", roles[k] if roles else "buffer", a.nbytes)
                    if k in held:  # what the slot holds now
                        held[k] = used[k][:a.nbytes].tobytes()

    def _write(self, pipe: _Pipeline, k: int, info):
        vk = self.vk
        return vk.VkWriteDescriptorSet(sType=vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, dstSet=pipe.set, dstBinding=k,
                                       dstArrayElement=0, descriptorCount=1,
                                       descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, pBufferInfo=[info])

    def close(self) -> None:
        """Release every Vulkan object (at exit, or by hand)."""
        global _SHARED
        with self._lock:
            if self._closed:
                return
            self._closed = True
            vk = self.vk
            try:
                vk.vkDeviceWaitIdle(self.device)
                for p in self.pipelines.values():
                    p.destroy(self)
                for b in self.buffers:
                    if b is not None:
                        b.destroy(self)
                for d in list(self.live):  # device arrays still alive: their memory goes with the device
                    d.release()
                if self._staging is not None:
                    self._staging.destroy(self)
                    self._staging = None
                vk.vkDestroyFence(self.device, self.fence, None)
                vk.vkDestroyCommandPool(self.device, self.command_pool, None)
                vk.vkDestroyDevice(self.device, None)
                vk.vkDestroyInstance(self.instance, None)
            finally:
                self.pipelines.clear()
                self.buffers.clear()
                if _SHARED is self:
                    _SHARED = None
