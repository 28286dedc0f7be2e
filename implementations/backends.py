"""The backends: the software a variant's code runs on, which decides the devices it can run on and
whether it can run on each of them here.

A variant declares its backend (``Variant.backend``): the devices it runs on are the backend's
(``Variant.devices``), and it is available where its backend is, unless the variant needs more (a
library of its own: the variant's ``unavailable``). The devices this machine can benchmark are those
some backend can run on here (``machine_devices``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .model import DEVICES, Device


def _always(device: Device) -> str | None:
    return None


@dataclass(frozen=True)
class Backend:
    """A software stack variants are written against: its ``name``, the ``devices`` it offers, and
    ``probe``, which says why it cannot run on one of them here (None where it can)."""

    name: str
    devices: tuple[Device, ...]
    description: str = ""
    probe: Callable[[Device], str | None] = field(default=_always, repr=False, compare=False)

    def unavailable(self, device: Device) -> str | None:
        """Why this backend cannot run on ``device`` here, or None if it can."""
        if device not in self.devices:
            return f"{self.name} does not run on the {device} (it offers: {', '.join(self.devices)})"
        return self.probe(device)


# The probes import their modules when asked: ``gpu`` itself uses the backends, and neither CuPy
# nor MKL is loaded before a variant needs it.
def _cupy_probe(device: Device) -> str | None:
    from .gpu import cupy_unavailable

    return cupy_unavailable()


def _mkl_probe(device: Device) -> str | None:
    from .mkl import mkl_unavailable

    return mkl_unavailable()


HOST = Backend("host", ("cpu",), "NumPy, SciPy, Numba and pyttb on the host's cores (always installed)")
MKL = Backend("mkl", ("cpu",), "Intel MKL on the host's cores, through sparse_dot_mkl and its C API", _mkl_probe)
CUPY = Backend("cupy", ("gpu",), "CuPy on a CUDA or ROCm GPU: its kernels, cuBLAS and cuSPARSE", _cupy_probe)
# In the order ``device_unavailable`` asks them: the host first, so that finding the CPU loads nothing.
BACKENDS: tuple[Backend, ...] = (HOST, MKL, CUPY)


def device_unavailable(device: Device) -> str | None:
    """Why no backend can run on ``device`` here (the reasons of those offering it), or None where one
    can: the backends are asked in ``BACKENDS`` order, up to the first that can."""
    reasons = []
    for backend in BACKENDS:
        if device in backend.devices:
            reason = backend.unavailable(device)
            if reason is None:
                return None
            reasons.append(reason)
    return "; ".join(reasons) or f"no backend runs on the {device}"


def machine_devices() -> list[Device]:
    """The devices this machine can benchmark, in ``DEVICES`` order: those some backend can run on here."""
    return [device for device in DEVICES if device_unavailable(device) is None]
