"""Vector and Batch: resident vectors and batched steps (``/v1/vectors``, ``/v1/ops``).

A :class:`Vector` is a handle to n·k values the daemon holds (on a GPU or
the host) between requests, so that a solver's products and BLAS-1 steps
need not send vectors back and forth. It is made by
:meth:`spmvd.Client.vector`; ``to_numpy()`` reads it back. Vectors expire
after the daemon's ``vector_ttl_s`` idle; a gone vector raises
:class:`~spmvd.errors.NotFound` (code ``vector_not_found``).

A :class:`Batch` collects ``/v1/ops`` steps with one method per step and
sends them as one request with :meth:`Batch.run`; everything is checked by
the daemon before the first step runs.

Both are thin: each method is one request of the contract (docs/api.md).
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from . import _http
from .client import Client, _id, as_values, dtype_of

__all__ = ["Vector", "Batch"]

Operand = Union[str, "Vector"]


class Vector:
    """A resident vector (or block of k vectors) on the daemon.

    Attributes: ``id``, ``n``, ``k``, ``dtype`` (NumPy), ``device``
    (``"cpu"``, ``"gpu0"``...), ``descriptor`` (the daemon's JSON).
    """

    def __init__(self, client: Client, descriptor: Mapping[str, Any]) -> None:
        self.client = client
        self.descriptor: Dict[str, Any] = dict(descriptor)

    @property
    def id(self) -> str:
        """The vector id."""
        return str(self.descriptor["id"])

    @property
    def n(self) -> int:
        """Length of each column."""
        return int(self.descriptor["n"])

    @property
    def k(self) -> int:
        """Number of columns (1 for a plain vector)."""
        return int(self.descriptor.get("k", 1))

    @property
    def dtype(self) -> np.dtype:
        """The values' dtype (float64 or float32)."""
        return dtype_of(self.descriptor["dtype"]).newbyteorder("=")

    @property
    def device(self) -> str:
        """Where the daemon holds it."""
        return str(self.descriptor.get("device", ""))

    @property
    def shape(self) -> Tuple[int, ...]:
        """``(n,)`` or ``(n, k)``, the shape of :meth:`to_numpy`."""
        return (self.n,) if self.k == 1 else (self.n, self.k)

    def __repr__(self) -> str:
        return f"<spmvd.Vector {self.id} shape={self.shape} {self.dtype} on {self.device}>"

    def __len__(self) -> int:
        return self.n

    def to_numpy(self, into: Any = None) -> np.ndarray:
        """The values, read back over the binary path: shape ``(n,)`` or ``(n, k)``.

        ``into``: a shared-memory region operand (``(region, byte_offset)``,
        a :class:`~spmvd.ShmOperand`): the daemon writes the values there
        (``GET ?shm=&offset=``) and the result is a view onto the region.
        """
        if into is not None:
            from .shm import as_operand
            so = as_operand(into, "y")
            if so is None:
                raise TypeError("into must be a region operand: (region, byte_offset) or a spmvd.ShmOperand")
            self.descriptor = dict(self.client._json("GET", f"/v1/vectors/{self.id}",
                                                     params={"shm": so.name, "offset": so.offset}))
            self.descriptor.pop("values", None)
            return so.view(self.dtype, self.shape)
        out = np.empty(self.n * self.k, dtype=dtype_of(self.descriptor["dtype"]))

        def into(status: int, headers: Any) -> Optional[List[memoryview]]:
            return [memoryview(out).cast("B")] if status == 200 else None
        r = self.client.request("GET", f"/v1/vectors/{self.id}", headers={"Accept": "application/octet-stream"},
                                into=into)
        hdr = r.headers.get("X-SpMV-Vector")
        if hdr:
            self.descriptor.update(json.loads(hdr))
        if not r.received_into:
            raise ValueError(f"vector {self.id}: {len(r.content)} bytes came back for n={self.n}, k={self.k}")
        a = out.astype(self.dtype, copy=False)
        return a if self.k == 1 else a.reshape((self.n, self.k), order="F")

    def __array__(self, dtype: Any = None) -> np.ndarray:
        a = self.to_numpy()
        return a if dtype is None else a.astype(dtype)

    def refresh(self) -> "Vector":
        """Reads the descriptor again (``idle_s``, ``expires_in_s``)."""
        self.descriptor = dict(self.client._json("GET", f"/v1/vectors/{self.id}"))
        self.descriptor.pop("values", None)
        return self

    def update(self, values: Any) -> "Vector":
        """Overwrites the values in place (``PUT``, binary); shape and dtype must match.

        ``values`` may be a shared-memory region operand (``(region,
        byte_offset)``, a :class:`~spmvd.ShmOperand`): the daemon reads the
        n·k values from there.
        """
        from .shm import as_operand
        so = as_operand(values, "x")
        if so is not None:
            self.descriptor = dict(self.client._json("PUT", f"/v1/vectors/{self.id}", json_body={
                "values": {"shm": so.name, "offset": so.offset}}))
            return self
        a = as_values(values, self.dtype, "values")
        if a.shape != self.shape and not (self.k == 1 and a.shape == (self.n, 1)):
            raise ValueError(f"values has shape {a.shape}; vector {self.id} is {self.shape}")
        body = _http.as_buffer(np.asfortranarray(a).astype(dtype_of(self.descriptor["dtype"]), copy=False))
        self.descriptor = dict(self.client._json("PUT", f"/v1/vectors/{self.id}", data=body,
                                                 headers={"Content-Type": "application/octet-stream"}))
        return self

    def fill(self, value: Union[float, str], seed: Optional[int] = None) -> "Vector":
        """Sets every value to ``value``, or to uniform random ones (``"random"``, ``seed``)."""
        obj: Dict[str, Any] = {"fill": value}
        if seed is not None:
            obj["seed"] = int(seed)
        self.descriptor = dict(self.client._json("PUT", f"/v1/vectors/{self.id}", json_body=obj))
        return self

    def delete(self) -> None:
        """Deletes it on the daemon."""
        self.client.request("DELETE", f"/v1/vectors/{self.id}", ok=(204, 200))

    # one-step ops, for convenience
    def dot(self, other: Operand) -> Any:
        """xᵀy on the daemon (a number, or k numbers)."""
        return Batch(self.client).dot(self, other, "dot").run()["results"]["dot"]

    def nrm2(self) -> Any:
        """‖x‖₂ on the daemon."""
        return Batch(self.client).nrm2(self, "nrm2").run()["results"]["nrm2"]

    def axpy(self, alpha: float, x: Operand) -> "Vector":
        """self += alpha·x on the daemon."""
        Batch(self.client).axpy(alpha, x, self).run()
        return self

    def scal(self, alpha: float) -> "Vector":
        """self *= alpha on the daemon."""
        Batch(self.client).scal(alpha, self).run()
        return self

    def copy_from(self, x: Operand) -> "Vector":
        """self = x on the daemon."""
        Batch(self.client).copy(x, self).run()
        return self


class Batch:
    """Steps for one ``POST /v1/ops``: build with the methods (each returns the Batch), then :meth:`run`.

    Operands are :class:`Vector` objects or ids, matrices RemoteMatrix
    objects or ids, scalars numbers. ``as_`` names a result of ``dot`` and
    ``nrm2`` in the answer's ``results``.
    """

    def __init__(self, client: Client) -> None:
        self.client = client
        self.steps: List[Dict[str, Any]] = []

    def _add(self, **step: Any) -> "Batch":
        self.steps.append({k: v for k, v in step.items() if v is not None})
        return self

    def spmv(self, matrix: Any, x: Operand, y: Operand, alpha: float = 1.0, beta: float = 0.0, trans: str = "n",
             kernel: Optional[str] = None) -> "Batch":
        """y = alpha·op(A)·x + beta·y."""
        return self._add(op="spmv", matrix=_id(matrix), x=_id(x), y=_id(y), alpha=alpha, beta=beta, trans=trans,
                         kernel=kernel)

    def dot(self, x: Operand, y: Operand, as_: str) -> "Batch":
        """results[as_] = xᵀy."""
        return self._add(op="dot", x=_id(x), y=_id(y), **{"as": as_})

    def nrm2(self, x: Operand, as_: str) -> "Batch":
        """results[as_] = ‖x‖₂."""
        return self._add(op="nrm2", x=_id(x), **{"as": as_})

    def axpy(self, alpha: float, x: Operand, y: Operand) -> "Batch":
        """y += alpha·x."""
        return self._add(op="axpy", alpha=alpha, x=_id(x), y=_id(y))

    def axpby(self, alpha: float, x: Operand, beta: float, y: Operand) -> "Batch":
        """y = alpha·x + beta·y."""
        return self._add(op="axpby", alpha=alpha, x=_id(x), beta=beta, y=_id(y))

    def scal(self, alpha: float, x: Operand) -> "Batch":
        """x *= alpha."""
        return self._add(op="scal", alpha=alpha, x=_id(x))

    def copy(self, x: Operand, y: Operand) -> "Batch":
        """y = x."""
        return self._add(op="copy", x=_id(x), y=_id(y))

    def fill(self, x: Operand, value: float) -> "Batch":
        """x = value everywhere."""
        return self._add(op="fill", x=_id(x), value=value)

    def run(self) -> Dict[str, Any]:
        """Sends the steps: ``{"results", "steps", "total_ms", "queue_ms", "device"}``."""
        return self.client._json("POST", "/v1/ops", json_body={"steps": self.steps})
