"""spmvd: the Python client of the spmvd sparse matrix-vector multiply daemon.

    import spmvd, scipy.sparse.linalg as sla
    c = spmvd.Client("http://127.0.0.1:8080")
    A = c.upload("bcsstk13.mtx")              # a RemoteMatrix: a LinearOperator
    x, info = sla.cg(A, b)                    # every A @ v runs on the daemon

- :class:`Client`: every route (upload, list, get, delete, kernels, info,
  health, spmv over the binary path, bench, jobs, vectors, ops, solve);
- :class:`RemoteMatrix`: a stored matrix as a ``scipy.sparse.linalg.LinearOperator``;
- :class:`Vector`: a resident vector; :class:`Batch`: ``/v1/ops`` steps;
- :class:`SharedArrays`, :class:`ShmOperand`: x and y through POSIX shared
  memory on the daemon's host (``/v1/shm``, :mod:`spmvd.shm`);
- :mod:`spmvd.errors`: the exceptions (also exported here);
- :mod:`spmvd.plot`: PNG plots of a bench (matplotlib, imported on demand);
- :mod:`spmvd.study`: a collection study of a folder of matrices (report.md, results.csv, PNGs).

The guide is docs/python.md in the spmvd tree.
"""
from ._version import __version__
from .client import BenchResult, Client, SolveResult, SpmvResult
from .errors import (ApiError, BadRequest, Conflict, ConnectionFailed, Forbidden, Gone, InsufficientStorage, JobFailed,
                     MethodNotAllowed, NotFound, PayloadTooLarge, ServerError, SpmvdError, Timeout, TransportError,
                     Unauthorized, Unavailable, Unprocessable, Unsupported, UnsupportedMediaType)
from .matrix import FallbackWarning, RemoteMatrix
from .shm import SharedArrays, ShmOperand
from .vector import Batch, Vector

__all__ = [
    "__version__", "Client", "RemoteMatrix", "Vector", "Batch", "SharedArrays", "ShmOperand", "SpmvResult",
    "BenchResult", "SolveResult", "Forbidden", "Gone",
    "FallbackWarning", "SpmvdError", "ApiError", "BadRequest", "Unauthorized", "NotFound", "MethodNotAllowed",
    "Conflict", "PayloadTooLarge", "UnsupportedMediaType", "Unprocessable", "ServerError", "Unavailable",
    "InsufficientStorage", "JobFailed", "TransportError", "ConnectionFailed", "Timeout", "Unsupported",
]
