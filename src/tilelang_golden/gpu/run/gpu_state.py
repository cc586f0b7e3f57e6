"""What the GPU is doing while it is timed: clocks, power, temperature, throttle reasons, other processes.

Read through NVML (the `nvidia-ml-py` package). The H200's GEMMs run into its power limit, so the
SM clock moves with the load: the report records the state after every measured pair and says
when a power or thermal cap was active. Without NVML the timing still runs, with a note why
there is no state.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

# NVML clock-event (throttle) reason bits, from nvml.h.
REASONS = {
    0x1: "idle",
    0x2: "application clocks setting",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
    0x100: "display clock setting",
}
CAPS = (
    "software power cap",
    "hardware slowdown",
    "software thermal slowdown",
    "hardware thermal slowdown",
    "hardware power brake",
)


class GpuState:
    """NVML for one device index; `sample()` returns {} and `note` says why when NVML is unusable."""

    def __init__(self, index: int = 0) -> None:
        self.note: str | None = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except Exception as error:  # no package, no driver library, no permission: report, don't stop
            self._nvml = None
            self.note = f"no GPU state: NVML unavailable ({type(error).__name__}: {error}); install nvidia-ml-py"

    def sample(self) -> dict[str, Any]:
        if self._nvml is None:
            return {}
        nvml, handle = self._nvml, self._handle
        reasons = nvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
        return {
            "sm_clock_mhz": nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
            "memory_clock_mhz": nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM),
            "power_w": nvml.nvmlDeviceGetPowerUsage(handle) / 1000,
            "power_limit_w": nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000,
            "temperature_c": nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
            "throttle": [name for bit, name in REASONS.items() if reasons & bit],
        }

    def other_processes(self) -> list[int]:
        """Process ids besides this one and its parent (the GPU check's driver, when this is its worker) that hold a
        compute context on the GPU."""
        if self._nvml is None:
            return []
        running = self._nvml.nvmlDeviceGetComputeRunningProcesses(self._handle)
        return sorted({p.pid for p in running} - {os.getpid(), os.getppid()})


def summarize(states: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """SM clock range, share of samples with a power or thermal cap active, largest power draw."""
    states = [s for s in states if s]
    if not states:
        return None
    capped = [s for s in states if any(reason in CAPS for reason in s["throttle"])]
    return {
        "samples": len(states),
        "sm_clock_mhz": [min(s["sm_clock_mhz"] for s in states), max(s["sm_clock_mhz"] for s in states)],
        "capped_fraction": len(capped) / len(states),
        "caps": sorted({r for s in capped for r in s["throttle"] if r in CAPS}),
        "max_power_w": max(s["power_w"] for s in states),
        "power_limit_w": states[0]["power_limit_w"],
    }
