"""What went wrong in a launch, in words a kernel engineer acts on: :class:`KernelLaunchError`
(its ``kind`` classified from the driver's or the runtime's message, and whether the CUDA context
is lost), and out-of-memory before a launch with how much was asked and how much was free."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from ..records.errors import TilelabError


class KernelLaunchError(TilelabError, RuntimeError):
    """A launch failed on the GPU; ``cause`` is what tilelab thinks went wrong (may be None).

    ``kind`` is one of "illegal_address", "misaligned_address", "launch_failure", "device_assert",
    "out_of_memory", "tma_descriptor", "resources", "other". ``sticky`` is True when the CUDA
    context is now unusable and the Python process must be restarted before the next launch.
    ``device_fault`` locates a device-side assert or a trap (:class:`tilelab.launch._device_faults.DeviceFault`:
    the kernel's line, the user's line, block, thread, message); ``tma_rules`` names the driver's
    rules a refused TMA descriptor breaks, with the launch's own sizes and addresses.
    """

    def __init__(self, kernel: str, kind: str, detail: str, cause: str | None = None,
                 sticky: bool = False, flagged: Sequence[str] = ()) -> None:
        self.kernel, self.kind, self.detail, self.cause = kernel, kind, detail, cause
        self.sticky, self.flagged = sticky, tuple(flagged)
        self.isolated = False  # True when it happened in a worker process (the notebook's context is intact)
        self.located: str | None = None  # compute-sanitizer's finding, when tilelab could locate the fault
        self.hang: Any = None  # a timeout's HangReport: where the warps were (a watched relaunch)
        self.hang_note: str | None = None  # why the hang was not located, when tilelab tried
        self.device_fault: Any = None  # a DeviceFault, when a device-side assert or a trap was located
        self.tma_rules: tuple[str, ...] = ()  # "<rule id>: <finding>" for a refused TMA descriptor
        super().__init__(str(self))

    def __reduce__(self) -> tuple[Any, ...]:  # crosses from the worker process intact
        return (_rebuild_launch_error, (self.kernel, self.kind, self.detail, self.cause, self.sticky, self.flagged,
                                        self.isolated, self.located, self.hang, self.hang_note, self.device_fault,
                                        self.tma_rules))

    def refresh(self) -> KernelLaunchError:
        """Recompute ``args`` (what a traceback prints) after a field was filled in."""
        self.args = (str(self),)
        return self

    def __str__(self) -> str:
        headline = CUDA_ERROR_KINDS.get(self.kind, ("launch failed", ""))[0]
        text = f"{self.kernel}: {headline} ({self.detail.strip()[:300]})"
        if self.hang is not None:
            text += "\n  " + str(self.hang).replace("\n", "\n  ")
        if self.hang_note:
            text += f"\n  {self.hang_note}"
        if self.cause:
            text += f"\n  likely cause: {self.cause}"
        if self.device_fault is not None:
            from ._device_faults import describe

            text += f"\n  {describe(self.device_fault)}"
        for rule in self.tma_rules:
            text += f"\n  the driver's rule it breaks: {rule}"
        for item in self.flagged:
            text += f"\n  flagged by inspection: {item}"
        if self.located:
            text += f"\n  compute-sanitizer located it: {self.located}"
        elif self.kind in ("illegal_address", "misaligned_address"):
            text += ("\n  To find the line and the buffer: tilelab.sanitize(kernel, ...) or %%tilelang --sanitize "
                     "runs it once under compute-sanitizer.")
        if self.sticky and self.isolated:
            text += ("\n  It happened in tilelab's worker process, which was discarded: this notebook's CUDA context "
                     "is untouched and the next launch starts a fresh worker.")
        elif self.sticky:
            text += ("\n  The CUDA context is now unusable (the error is sticky): restart the Python kernel "
                     "before launching again.")
        return text


def _rebuild_launch_error(kernel: str, kind: str, detail: str, cause: str | None, sticky: bool,
                          flagged: Sequence[str], isolated: bool, located: str | None, hang: Any = None,
                          hang_note: str | None = None, device_fault: Any = None,
                          tma_rules: Sequence[str] = ()) -> KernelLaunchError:
    err = KernelLaunchError(kernel, kind, detail, cause, sticky, flagged)
    err.isolated, err.located, err.hang, err.hang_note = isolated, located, hang, hang_note
    err.device_fault, err.tma_rules = device_fault, tuple(tma_rules)
    return err.refresh()


# kind -> (headline, likely cause), matched against the driver/runtime message in order.
CUDA_ERROR_KINDS: dict[str, tuple[str, str]] = {
    "tma_descriptor": ("the driver rejected a TMA descriptor",
                       "a cuTensorMapEncode rule is broken (address or stride alignment, box size, swizzle "
                       "span against the inner box); tilelab.inspect(kernel).tma_descriptors lists each"),
    "illegal_address": ("illegal memory access",
                        "a thread read or wrote outside its buffers (an address no allocation "
                        "covers): an index past a tile edge, a wrong stride, or a dynamic size larger than "
                        "the tensor passed"),
    "misaligned_address": ("misaligned address",
                           "a vectorised or bulk (TMA) access at an address not aligned to its width: a "
                           "tensor view whose offset or stride is not a multiple of 16 bytes"),
    "out_of_memory": ("out of GPU memory", "the inputs, outputs and L2-flush buffer do not fit; use smaller sizes"),
    "resources": ("the launch asked for more than the device allows",
                  "too much shared memory or too many registers or threads per block for this GPU"),
    "launch_failure": ("the kernel failed", "an exception inside the kernel (trap, assert, timeout)"),
    "device_assert": ("a device-side assert failed",
                      "a T.device_assert (or assert) condition was false in some thread; where, below"),
    "timeout": ("the kernel did not finish", "a loop that never exits, an mbarrier phase that never completes, "
                "or a producer/consumer deadlock"),
    "other": ("launch failed", ""),
}
# Word boundaries everywhere: "TMA" must not match inside "bitmap", "tensor map" not inside a name.
_PATTERNS: list[tuple[str, str, bool]] = [
    (r"\btensor ?map\b|\bCUtensorMap\w*|\bcuTensorMapEncode\w*|\bTMA\b", "tma_descriptor", False),
    (r"\billegal memory access\b|\billegal address\b|\bILLEGAL_ADDRESS\b|\bIllegalAddress\b|"
     r"\baddress space\b|\bInvalidAddressSpace\b", "illegal_address", True),
    (r"\bmisaligned address\b|\bMISALIGNED_ADDRESS\b|\bMisalignedAddress\b", "misaligned_address", True),
    (r"\bout of memory\b|\bOUT_OF_MEMORY\b|\bMemoryAllocation\b", "out_of_memory", False),
    (r"\btoo many resources\b|\bshared memory\b|\bOUT_OF_RESOURCES\b|\bLaunchOutOfResources\b|"
     r"\binvalid configuration\b", "resources", False),
    # "device-side assert triggered", not torch's hint on every CUDA error ("Compile with
    # `TORCH_USE_CUDA_DSA` to enable device-side assertions"), which a trap's error carries too.
    (r"\bdevice-side assert triggered\b|\bcudaErrorAssert\b|\bCUDA_ERROR_ASSERT\b", "device_assert", True),
    (r"\bunspecified launch failure\b|\bLAUNCH_FAILED\b|\blaunch failure\b|"
     r"\billegal instruction\b|\bLAUNCH_TIMEOUT\b|\bunknown error\b", "launch_failure", True),
]


def classify_cuda_error(message: str) -> tuple[str, bool]:
    """(kind, sticky) for a CUDA error message; ("other", False) when nothing matches."""
    for pattern, kind, sticky in _PATTERNS:
        if re.search(pattern, message, re.IGNORECASE):
            return kind, sticky
    return "other", False


def launch_error(kernel_name: str, err: BaseException, flagged: Callable[[], Sequence[str]] | None = None,
                 tma_rules: Callable[[str], Sequence[str]] | None = None) -> KernelLaunchError:
    """The :class:`KernelLaunchError` of a failed launch; ``tma_rules(message)`` names the driver
    rules a refused TMA descriptor breaks (:func:`tilelab.launch._tma_refusal.explain`)."""
    kind, sticky = classify_cuda_error(str(err))
    broken: Sequence[str] = ()
    if tma_rules is not None and kind == "tma_descriptor":
        try:
            broken = tuple(tma_rules(str(err)))
        except Exception:  # naming the rule is a bonus: the driver's refusal is what matters
            broken = ()
    cause = CUDA_ERROR_KINDS[kind][1] or None
    problems: Sequence[str] = ()
    if flagged is not None and kind in ("tma_descriptor", "illegal_address", "misaligned_address", "other"):
        try:
            problems = list(flagged())
        except Exception:  # inspection is best effort here: the launch error is what matters
            problems = ()
        if problems and kind in ("other", "misaligned_address"):
            cause = "the TMA descriptor problem that inspection had already flagged (below)"
    out = KernelLaunchError(kernel_name, kind, f"{type(err).__name__}: {err}", cause, sticky, problems)
    if broken:
        out.tma_rules = tuple(broken)
        out.cause = "this launch's sizes or addresses break a driver rule for the descriptor (below)"
        out.refresh()
    return out


def is_out_of_memory(err: BaseException) -> bool:
    import torch

    oom = getattr(torch.cuda, "OutOfMemoryError", None) or getattr(torch, "OutOfMemoryError", None)
    return (oom is not None and isinstance(err, oom)) or classify_cuda_error(str(err))[0] == "out_of_memory"


def out_of_memory_error(kernel_name: str, what: str, err: BaseException) -> KernelLaunchError:
    """OOM before the launch (inputs, rotating copies, the L2-flush buffer) as a KernelLaunchError."""
    first = (str(err).strip().splitlines() or [type(err).__name__])[0]
    return KernelLaunchError(kernel_name, "out_of_memory", f"while allocating {what}: {memory_text(str(err))}; {first}",
                             f"{what} do not fit in the GPU's free memory: use smaller sizes, free tensors "
                             "you hold (del x; torch.cuda.empty_cache()) or fewer rotating copies")


def memory_text(message: str, free_total: tuple[int, int] | None = None) -> str:
    """"asked for 2.00 GiB, 1.25 GiB free of 79.19 GiB": the request from the allocator's message
    (torch's "Tried to allocate X") and the device's free memory (cudaMemGetInfo, or ``free_total``)."""
    asked = re.search(r"[Tt]ried to allocate ([\d.]+ ?[KMGT]?i?B)", message)
    parts = [f"asked for {asked.group(1)}"] if asked else []
    if free_total is None:
        try:
            import torch

            free_total = tuple(int(v) for v in torch.cuda.mem_get_info())  # type: ignore[assignment]
        except Exception:
            free_total = None
    if free_total is not None:
        free, total = free_total
        parts.append(f"{free / 2**30:.2f} GiB free of {total / 2**30:.2f} GiB")
    return ", ".join(parts) or "the allocator did not say how much"
