"""Shared-memory regions (``/v1/shm``): x and y through POSIX shared memory, not the HTTP body.

A client on the daemon's host creates a shared-memory object, registers it
with the daemon (:meth:`spmvd.Client.register_shm`), and then names the
region and a byte offset wherever x or y goes: the daemon reads x from the
pages and writes y into them, so no vector crosses the socket. The daemon
needs ``allow_shm = true`` (else every call raises
:class:`~spmvd.errors.Forbidden`, code ``shm_disabled``).

- :class:`ShmOperand`: a region name and a byte offset, an operand of
  :meth:`spmvd.Client.spmv` (``x=`` / ``y=``); a ``(region, offset)`` tuple
  whose first item is a name, a ``SharedMemory`` or a :class:`SharedArrays`
  is taken the same way.
- :class:`SharedArrays`: the convenience: one ``SharedMemory`` big enough for
  x and y of a matrix, registered, with NumPy views ``x`` and ``y`` onto it;
  ``spmv()`` computes y = A·x in place, ``solve()`` A·y = x. A context manager that unregisters
  the region and unlinks the object on exit.

Values in a region are native little-endian values of the matrix's dtype,
column after column for k columns.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from multiprocessing import shared_memory
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple, Union

import numpy as np

from . import errors
from .client import Client, SpmvResult, _id, dtype_of

__all__ = ["ShmOperand", "SharedArrays", "shm_name", "share_with_group"]

# Offsets of y in a SharedArrays object are rounded up to this (a multiple of every value size).
_ALIGN = 64

Region = Union[str, shared_memory.SharedMemory, "SharedArrays"]


def shm_name(region: Region) -> str:
    """The region name of ``region``: a name (leading ``/`` dropped), a ``SharedMemory`` or a :class:`SharedArrays`."""
    if isinstance(region, SharedArrays):
        return region.name
    if isinstance(region, shared_memory.SharedMemory):
        return region.name.lstrip("/")
    if isinstance(region, str):
        return region.lstrip("/")
    raise TypeError(f"a region is a name, a multiprocessing.shared_memory.SharedMemory or a spmvd.SharedArrays, "
                    f"not {type(region).__name__}")


@dataclass(frozen=True)
class ShmOperand:
    """An operand in a registered region: ``offset`` bytes into region ``name``.

    ``memory`` (optional) is the ``SharedMemory`` the region lives in, so
    that :meth:`spmvd.Client.spmv` can hand back y as a view onto it without
    opening the object again.
    """

    name: str
    offset: int = 0
    memory: Optional[shared_memory.SharedMemory] = None

    def view(self, dtype: np.dtype, shape: Tuple[int, ...]) -> np.ndarray:
        """A NumPy view of ``shape`` values of ``dtype`` at this operand (column-major for 2-D).

        A view onto ``memory`` holds a buffer export of its mapping
        (``np.frombuffer``; ``np.ndarray(buffer=...)`` would not), so the
        mapping cannot be unmapped under it: ``memory.close()`` raises
        ``BufferError`` while the view lives, as Python's rule for shared
        memory with exported buffers says, instead of leaving a dangling
        pointer that crashes the interpreter at the next access.
        """
        count = int(np.prod(shape))
        order = "F" if len(shape) == 2 else "C"
        if self.memory is not None:
            flat = np.frombuffer(self.memory.buf, dtype=dtype, count=count, offset=self.offset)
            return flat.reshape(shape, order=order)
        # Only a name: map the object directly (attaching a SharedMemory
        # would enrol it with the resource tracker, which unlinks it at exit).
        path = os.path.join("/dev/shm", self.name)
        return np.memmap(path, dtype=dtype, mode="r+", offset=self.offset, shape=(count,)).reshape(shape, order=order)


def share_with_group(name: str, group: Union[str, int]) -> None:
    """Gives /dev/shm/NAME to ``group`` (a name or a gid) with mode 0660, so a daemon in that group may use it."""
    import grp
    gid = group if isinstance(group, int) else grp.getgrnam(group).gr_gid
    path = os.path.join("/dev/shm", name)
    os.chown(path, -1, gid)
    os.chmod(path, 0o660)


def as_operand(v: Any, which: str) -> Optional[ShmOperand]:
    """``v`` as a :class:`ShmOperand` when it names a region, else None.

    ``which`` (``"x"`` or ``"y"``) picks the operand of a :class:`SharedArrays`.
    """
    if isinstance(v, ShmOperand):
        return v
    if isinstance(v, SharedArrays):
        return v.x_operand if which == "x" else v.y_operand
    if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], (str, shared_memory.SharedMemory, SharedArrays)):
        offset = v[1]
        if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or offset < 0:
            raise ValueError(f"a region operand is (region, byte offset >= 0), not offset {offset!r}")
        mem = v[0] if isinstance(v[0], shared_memory.SharedMemory) else (
            v[0].memory if isinstance(v[0], SharedArrays) else None)
        return ShmOperand(shm_name(v[0]), int(offset), mem)
    return None


class SharedArrays:
    """x and y of one matrix in one shared-memory object, registered with the daemon.

    Args:
        client: the :class:`~spmvd.Client` of a daemon on this host with ``allow_shm``.
        matrix: the matrix (a :class:`~spmvd.RemoteMatrix`, a descriptor or an id).
        k: columns of x and y (a block product, the daemon's ``?k=``).
        op: ``"n"`` (x has ``cols`` rows, y ``rows``) or ``"t"`` (the other way round).
        name: the object's name (default: a fresh ``psm_...`` name).
        group: a group (name or gid) the daemon is in, for a daemon running
            as another user (the packaged unit's ``spmvd``, in ``spmvd-shm``):
            the object is given to it with mode 0660 before it is registered.

    ``x`` and ``y`` are NumPy views onto the object (shape ``(n,)``, or
    ``(n, k)`` column-major), in the matrix's dtype; ``y`` starts as NaN.
    Write x, call :meth:`spmv`, read y: the values never leave this host's
    memory. The object is created with mode 0600, which serves a daemon of
    the same user; ``group`` shares it with another (docs/security.md).
    On exit (or :meth:`close`) the region is unregistered and the object
    unlinked. Views still held then (``x``, ``y``, a result's ``y``) stay
    valid: they keep the values they had at release, in a mapping that is
    unmapped when the last of them goes (no one else writes there any
    more). They never crash the interpreter.
    """

    def __init__(self, client: Client, matrix: Any, *, k: int = 1, op: str = "n", name: Optional[str] = None,
                 group: Union[None, str, int] = None) -> None:
        if op not in ("n", "t"):
            raise ValueError(f"op must be 'n' or 't', not {op!r}")
        if int(k) < 1:
            raise ValueError(f"k must be 1 or more, not {k}")
        self.client = client
        self.matrix = matrix if hasattr(matrix, "descriptor") else client.get(matrix)
        d = self.matrix.descriptor
        rows, cols = int(d["rows"]), int(d["cols"])
        self.op, self.k = op, int(k)
        self.dtype: np.dtype = dtype_of(d["dtype"]).newbyteorder("=")
        n_in, n_out = (cols, rows) if op == "n" else (rows, cols)
        item = self.dtype.itemsize
        self.y_offset = -(-n_in * self.k * item // _ALIGN) * _ALIGN
        self.nbytes = self.y_offset + n_out * self.k * item
        self.memory: Optional[shared_memory.SharedMemory] = shared_memory.SharedMemory(
            name=name, create=True, size=self.nbytes)
        self.descriptor: Dict[str, Any] = {}
        try:
            if group is not None:
                share_with_group(self.name, group)
            self.descriptor = client.register_shm(self.memory, size=self.nbytes)
        except BaseException:
            self._release()
            raise
        shape_in = (n_in,) if self.k == 1 else (n_in, self.k)
        shape_out = (n_out,) if self.k == 1 else (n_out, self.k)
        self.x: np.ndarray = self.x_operand.view(self.dtype, shape_in)
        self.y: np.ndarray = self.y_operand.view(self.dtype, shape_out)
        self.x[...] = 0
        self.y[...] = np.nan

    @property
    def name(self) -> str:
        """The region's (and the object's) name."""
        assert self.memory is not None, "SharedArrays is closed"
        return self.memory.name.lstrip("/")

    @property
    def x_operand(self) -> ShmOperand:
        """x as an operand: byte 0 of the region."""
        return ShmOperand(self.name, 0, self.memory)

    @property
    def y_operand(self) -> ShmOperand:
        """y as an operand: byte :attr:`y_offset` of the region."""
        return ShmOperand(self.name, self.y_offset, self.memory)

    def spmv(self, **kw: Any) -> SpmvResult:
        """y = op(A)·x in place (``kw``: kernel, runs... of :meth:`spmvd.Client.spmv`); ``result.y`` is :attr:`y`."""
        if hasattr(self.matrix, "spmv"):
            return self.matrix.spmv(self, op=self.op, **kw)
        return self.client.spmv(self.matrix, self, op=self.op, **kw)

    def solve(self, **kw: Any) -> Any:
        """A·y = x solved in place: b in :attr:`x`, the solution written into :attr:`y` by the daemon.

        ``kw`` are :meth:`spmvd.Client.solve`'s (``method``, ``tol``,
        ``preconditioner``...); ``result.x`` is a view of :attr:`y`'s values.
        Needs a square matrix and ``op="n"``.
        """
        if self.op != "n":
            raise ValueError("a solve takes A itself: make the SharedArrays with op='n'")
        return self.client.solve(self.matrix, self, **kw)

    def region(self) -> Dict[str, Any]:
        """The daemon's descriptor of the region now (``state``, ``uses``...)."""
        return self.client.shm_region(self.name)

    def close(self) -> None:
        """Unregisters the region (an already gone one is fine) and unlinks the object."""
        if self.memory is None:
            return
        try:
            self.client.unregister_shm(self.name)
        except errors.NotFound:
            pass
        finally:
            self._release()

    def _release(self) -> None:
        """Unlinks the object and drops this SharedArrays' hold on the mapping.

        Views handed out (``x``, ``y``, ``result.y``) hold buffer exports of
        the mapping (:meth:`ShmOperand.view`), so it is unmapped only when the
        last of them goes: until then they keep the values they had, in
        memory no one else shares any more (the region is unregistered and
        the name unlinked). They never point at unmapped pages.
        """
        mem, self.memory = self.memory, None
        self.x = self.y = None  # type: ignore[assignment]
        if mem is None:
            return
        try:
            mem.close()
        except BufferError:
            # A view still exports the mapping: the mmap object now lives as
            # long as the views do (each export holds it) and unmaps when the
            # last goes. Detached from `mem`, so that closing `mem` (now, for
            # its descriptor, and again when it is collected) does not try.
            mem._mmap = None  # type: ignore[attr-defined]
            mem.close()
        mem.unlink()

    def __enter__(self) -> "SharedArrays":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.memory is None else f"{self.nbytes} bytes"
        name = self.name if self.memory else ""
        return f"<spmvd.SharedArrays {name} for {_id(self.matrix)} k={self.k} op={self.op} {state}>"


if TYPE_CHECKING:  # pragma: no cover
    from .matrix import RemoteMatrix  # noqa: F401
