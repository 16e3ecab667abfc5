"""RemoteMatrix: a matrix stored on the daemon, as a SciPy LinearOperator.

``scipy.sparse.linalg.cg(RemoteMatrix(client, id), b)`` runs every product
on the daemon:

- ``_matvec``: one binary spmv (``A @ x``);
- ``_matmat``: one multi-vector request (``?k=``, x column-major) for the
  whole block; the daemon's kernel must take k columns (``max_k`` in
  ``/v1/kernels``): a block wider than the kernel's ``max_k`` goes as
  chunks of ``max_k`` columns;
- ``_rmatvec`` / ``_rmatmat``: the transposed product (``?op=t``).

**Fallbacks**, for a daemon (or kernel) that does not take them yet; each
warns once per matrix with :class:`FallbackWarning` and is recorded in
``RemoteMatrix.fallbacks``:

- ``_matmat``: when the daemon refuses the ``k``-column request (a 400 or
  413, as a daemon that predates ``?k=`` gives for the k-times-longer body;
  a 400 for a kernel without k columns), the block is computed as k single
  products, and later blocks with that kernel go the same way at once
  (per Client). Same answer, k round trips.
- ``_rmatvec``: when the daemon refuses ``op=t`` or ignores it (its answer
  does not say ``"op": "t"``; the A·x it computed is dropped, never
  returned), then, in order: a matrix the descriptor calls ``symmetric``
  uses A·x, a ``skew-symmetric`` one −A·x; a matrix this client uploaded
  (from a path, a SciPy matrix or COO arrays) gets its transpose uploaded
  once, as ``NAME.T``, and products with it (it is deleted with
  :meth:`delete`); anything else raises :class:`~spmvd.errors.Unsupported`.

**dtypes**: ``dtype`` is the matrix's (float64, float32, or mixed: float32
values with float64 vectors, which take and give float64). Real float,
integer and boolean inputs are converted to it (float64 input on a float32
matrix is rounded, as the daemon would); complex and non-numeric inputs
raise ``TypeError``. Non-contiguous inputs are copied. Answers have the
matrix's dtype.

Without SciPy the class still works (``matvec``, ``matmat``, ``rmatvec``,
``@``) on a small stand-in base class.
"""
from __future__ import annotations

import warnings
from typing import Any, Dict, Mapping, Optional, Set, Tuple

import numpy as np

from . import errors
from .client import Client, SpmvResult, _id, as_values, dtype_of

try:
    from scipy.sparse.linalg import LinearOperator as _Base
    HAVE_SCIPY = True
except ImportError:  # pragma: no cover - exercised only without SciPy
    HAVE_SCIPY = False

    class _Base:  # type: ignore[no-redef]
        """The part of scipy.sparse.linalg.LinearOperator RemoteMatrix needs."""

        def __init__(self, dtype: Any, shape: Tuple[int, int]) -> None:
            self.dtype = np.dtype(dtype)
            self.shape = tuple(shape)

        def matvec(self, x: Any) -> np.ndarray:
            x = np.asarray(x)
            y = self._matvec(x.reshape(-1))
            return y.reshape(-1, 1) if x.ndim == 2 else y

        def rmatvec(self, x: Any) -> np.ndarray:
            x = np.asarray(x)
            y = self._rmatvec(x.reshape(-1))
            return y.reshape(-1, 1) if x.ndim == 2 else y

        def matmat(self, X: Any) -> np.ndarray:
            return self._matmat(np.asarray(X))

        def rmatmat(self, X: Any) -> np.ndarray:
            return self._rmatmat(np.asarray(X))

        def dot(self, x: Any) -> np.ndarray:
            x = np.asarray(x)
            return self.matvec(x) if x.ndim == 1 or (x.ndim == 2 and x.shape[1] == 1) else self.matmat(x)

        def __matmul__(self, x: Any) -> np.ndarray:
            return self.dot(x)

__all__ = ["RemoteMatrix", "FallbackWarning", "HAVE_SCIPY"]


class FallbackWarning(UserWarning):
    """A product ran by a documented fallback (k single products, a transpose upload...)."""


class RemoteMatrix(_Base):
    """A matrix held by the daemon; a ``scipy.sparse.linalg.LinearOperator``.

    Args:
        client: the :class:`~spmvd.Client` it lives behind.
        matrix_or_id: a matrix id, a descriptor dict, or another RemoteMatrix.
        kernel: the kernel its products run (``None``: the daemon's default
            for the matrix; ``"auto"``: the tuned choice).
        **params: kernel parameters for every product (``threads=4`` ...).

    Attributes: ``id``, ``name``, ``nnz``, ``descriptor`` (the daemon's JSON),
    ``last`` (the last product's :class:`~spmvd.client.SpmvResult`),
    ``products`` (how many requests its products made), ``fallbacks`` (the
    fallbacks used: ``"matmat"``, ``"rmatvec"``).
    """

    def __init__(self, client: Client, matrix_or_id: Any, *, kernel: Optional[str] = None, **params: int) -> None:
        if isinstance(matrix_or_id, RemoteMatrix):
            desc: Mapping[str, Any] = matrix_or_id.descriptor
            kernel = kernel or matrix_or_id.kernel
            params = params or dict(matrix_or_id.params)
        elif isinstance(matrix_or_id, Mapping) and "rows" in matrix_or_id:
            desc = matrix_or_id
        else:
            desc = client._json("GET", f"/v1/matrices/{_id(matrix_or_id)}")
        self.client = client
        self.descriptor: Dict[str, Any] = dict(desc)
        self.kernel = kernel
        self.params: Dict[str, int] = dict(params)
        self.last: Optional[SpmvResult] = None
        self.products = 0
        self.fallbacks: Set[str] = set()
        self._source: Any = None
        self._t_matrix: Optional[RemoteMatrix] = None
        super().__init__(dtype=dtype_of(self.descriptor["dtype"]).newbyteorder("="),
                         shape=(int(self.descriptor["rows"]), int(self.descriptor["cols"])))

    # ---------------------------------------------------------- descriptor

    @property
    def id(self) -> str:
        """The matrix id (a UUID)."""
        return str(self.descriptor["id"])

    @property
    def name(self) -> str:
        """The name it was uploaded under."""
        return str(self.descriptor.get("name", ""))

    @property
    def nnz(self) -> int:
        """Stored entries, after symmetric expansion and duplicate summing."""
        return int(self.descriptor["nnz"])

    def __repr__(self) -> str:
        return (f"<RemoteMatrix {self.id} {self.name!r} {self.shape[0]}x{self.shape[1]} nnz={self.nnz} "
                f"{self.dtype} on {self.descriptor.get('device')}>")

    def refresh(self) -> "RemoteMatrix":
        """Reads the descriptor again (formats held, device bytes)."""
        self.descriptor = dict(self.client._json("GET", f"/v1/matrices/{self.id}"))
        return self

    def delete(self) -> None:
        """Deletes the matrix on the daemon (and a transpose this object uploaded)."""
        if self._t_matrix is not None:
            try:
                self._t_matrix.delete()
            except errors.NotFound:
                pass
            self._t_matrix = None
        self.client.delete(self.id)

    def spy(self, size: int = 512) -> bytes:
        """The daemon's ``spy.png`` of the pattern, as PNG bytes."""
        return self.client.spy(self, size)

    def bench(self, **kw: Any) -> Any:
        """:meth:`Client.bench` on this matrix."""
        return self.client.bench(self, **kw)

    def tune(self) -> Dict[str, Any]:
        """:meth:`Client.tune` on this matrix."""
        return self.client.tune(self)

    def spmv(self, x: Any, **kw: Any) -> SpmvResult:
        """:meth:`Client.spmv` on this matrix with its kernel and parameters (``kw`` overrides them)."""
        kw.setdefault("kernel", self.kernel)
        for k, v in self.params.items():
            kw.setdefault(k, v)
        return self.client.spmv(self, x, **kw)

    def shared_arrays(self, **kw: Any) -> Any:
        """:meth:`Client.shared_arrays` for this matrix: x and y in a registered shared-memory object (``with`` it)."""
        return self.client.shared_arrays(self, **kw)

    def solve(self, b: Any, **kw: Any) -> Any:
        """:meth:`Client.solve` on this matrix (the daemon's CG / BiCGSTAB / GMRES)."""
        return self.client.solve(self, b, **kw)

    # ------------------------------------------------------------ products

    def _product(self, x: np.ndarray, op: str) -> np.ndarray:
        res = self.client.spmv(self, x, kernel=self.kernel, op=op, **self.params)
        self.products += 1
        self.last = res
        assert res.y is not None
        return res.y

    def _vector(self, x: Any, n: int, what: str) -> np.ndarray:
        a = as_values(x, self.dtype, what)
        if a.ndim == 2 and a.shape[1] == 1:
            a = a[:, 0]
        if a.ndim != 1 or a.shape[0] != n:
            raise ValueError(f"{what} has shape {np.shape(x)}; {self!r} needs ({n},)")
        return a

    def _block(self, X: Any, n: int, what: str) -> np.ndarray:
        a = as_values(X, self.dtype, what)
        if a.ndim != 2 or a.shape[0] != n:
            raise ValueError(f"{what} has shape {np.shape(X)}; {self!r} needs ({n}, k)")
        return a

    def _matvec(self, x: Any) -> np.ndarray:
        return self._product(self._vector(x, self.shape[1], "x"), "n")

    def _matmat(self, X: Any) -> np.ndarray:
        return self._multi(self._block(X, self.shape[1], "X"), "n")

    def _rmatvec(self, x: Any) -> np.ndarray:
        return self._transposed(self._vector(x, self.shape[0], "x"))

    def _rmatmat(self, X: Any) -> np.ndarray:
        X = self._block(X, self.shape[0], "X")
        if (self.kernel, "t") not in self.client._no_trans:
            try:
                return self._multi(X, "t")
            except errors.Unsupported:
                self.client._no_trans.add((self.kernel, "t"))
        return np.column_stack([self._transposed(X[:, j]) for j in range(X.shape[1])])

    def _multi(self, X: np.ndarray, op: str) -> np.ndarray:
        """A block of k columns: one request per ``max_k`` columns, else k single products."""
        k = X.shape[1]
        if k == 1:
            return self._single(X[:, 0], op).reshape(-1, 1)
        key = (op, self.kernel)
        if key not in self.client._no_k:
            width = k
            info = self.client.kernel(self.kernel) if self.kernel else None
            if info is not None and int(info.get("max_k", 1)) < k:
                width = int(info.get("max_k", 1))
            if width > 1:
                try:
                    cols = [self._product(X[:, s:s + width], op) for s in range(0, k, width)]
                    return np.hstack([c.reshape(c.shape[0], -1) for c in cols])
                except (errors.BadRequest, errors.PayloadTooLarge) as e:
                    self.client._no_k.add(key)
                    self._warn("matmat", f"the daemon refused {k} columns in one request ({e.code}: {e.message}); "
                               f"computing them as {k} single products")
        else:
            self._warn("matmat", f"this daemon takes no k-column products: {k} single products")
        return np.column_stack([self._single(X[:, j], op) for j in range(k)])

    def _single(self, x: np.ndarray, op: str) -> np.ndarray:
        return self._product(x, "n") if op == "n" else self._transposed(x)

    def _transposed(self, x: np.ndarray) -> np.ndarray:
        """Aᵀx: ``op=t``, or the documented fallbacks."""
        if (self.kernel, "t") not in self.client._no_trans:
            try:
                return self._product(x, "t")
            except (errors.Unsupported, errors.BadRequest) as e:
                self.client._no_trans.add((self.kernel, "t"))
                why = f"{e.code}: {e.message}"
        else:
            why = "it did not before"
        sym = str(self.descriptor.get("symmetry", "general"))
        if sym in ("symmetric", "hermitian") and self.shape[0] == self.shape[1]:
            self._warn("rmatvec", f"the daemon took no op=t ({why}); the matrix is {sym}: A^T x = A x")
            return self._product(x, "n")
        if sym == "skew-symmetric" and self.shape[0] == self.shape[1]:
            self._warn("rmatvec", f"the daemon took no op=t ({why}); the matrix is skew-symmetric: A^T x = -A x")
            return -self._product(x, "n")
        t = self._transpose_matrix(why)
        y = t._product(x, "n")
        self.products += 1
        self.last = t.last
        return y

    def _transpose_matrix(self, why: str) -> "RemoteMatrix":
        if self._t_matrix is not None:
            return self._t_matrix
        src = self._source
        if src is None:
            raise errors.Unsupported("no_transpose", f"{self!r}: the daemon took no op=t ({why}), the matrix is "
                                     f"{self.descriptor.get('symmetry', 'general')}, and this client did not upload "
                                     "it, so it cannot upload its transpose: upload it with Client.upload to get "
                                     "rmatvec by fallback")
        if isinstance(src, str):
            import scipy.io
            src = scipy.io.mmread(src)
        if hasattr(src, "tocoo"):
            t = src.tocoo().T
        else:  # the client's checked COO arrays
            import scipy.sparse
            t = scipy.sparse.coo_matrix((src.data, (src.row, src.col)), shape=src.shape).T
        self._warn("rmatvec", f"the daemon took no op=t ({why}); uploading the transpose as {self.name}.T once")
        dev = self.descriptor.get("device")
        self._t_matrix = self.client.upload(t, name=f"{self.name}.T", dtype=str(self.descriptor["dtype"]),
                                             device=str(dev) if dev else None, kernel=self.kernel)
        self._t_matrix.params = dict(self.params)
        return self._t_matrix

    def _warn(self, what: str, message: str) -> None:
        if what not in self.fallbacks:
            self.fallbacks.add(what)
            warnings.warn(f"spmvd {what} fallback for matrix {self.id}: {message}", FallbackWarning, stacklevel=4)
