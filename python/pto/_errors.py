"""The exceptions of pto-rt's Python package (raised by the extension, ``pto._native``)."""

from __future__ import annotations

from typing import Any, Optional


class PtoError(RuntimeError):
    """Any error of the runtime that has no more specific class."""


class ConfigError(PtoError, ValueError):
    """A run, board or device option the runtime or the board cannot take."""


class GraphError(PtoError, ValueError):
    """A graph that cannot run: a bad task, tensor, view or dependency (INVALID_ARGS)."""


class KernelError(PtoError, ValueError):
    """A kernel that cannot be registered (unknown, or already registered for that core)."""


class GoldenMismatch(PtoError):
    """A built-in workload ran, but its result differs from its golden."""


class DeviceError(PtoError):
    """A fault the device latched during a run.

    Attributes: ``code`` (the runtime's error code, an int), ``code_name`` (its name, e.g.
    ``"KERNEL_FAULT"``), ``site`` (where it was latched, e.g. ``"aicore"``), ``task`` and
    ``core`` (``None`` when the fault names none), ``detail`` (the site's detail word),
    ``kernel`` (the kernel's name when the fault names a registered one), ``device_message``
    (the text the latching agent left, e.g. a kernel's panic message), ``description`` and
    ``hint`` (of the code), ``also`` (what the host learned besides, as text) and ``trace``
    (a :class:`pto.Trace` of the failed run, when it traced).
    """

    def __init__(
        self,
        message: str,
        *,
        code: int,
        code_name: str,
        site: str,
        task: Optional[int],
        core: Optional[int],
        detail: int,
        kernel: Optional[str] = None,
        device_message: str = "",
        description: str = "",
        hint: str = "",
        also: Optional[str] = None,
        trace: Any = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.code_name = code_name
        self.site = site
        self.task = task
        self.core = core
        self.detail = detail
        self.kernel = kernel
        self.device_message = device_message
        self.description = description
        self.hint = hint
        self.also = also
        self.trace = trace

    def __reduce__(self):  # picklable, e.g. across pytest-xdist workers
        return (
            _rebuild_device_error,
            (
                str(self),
                dict(
                    code=self.code,
                    code_name=self.code_name,
                    site=self.site,
                    task=self.task,
                    core=self.core,
                    detail=self.detail,
                    kernel=self.kernel,
                    device_message=self.device_message,
                    description=self.description,
                    hint=self.hint,
                    also=self.also,
                ),
            ),
        )


def _rebuild_device_error(message: str, fields: dict) -> DeviceError:
    return DeviceError(message, **fields)
