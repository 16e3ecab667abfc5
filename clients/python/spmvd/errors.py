"""The exceptions of the spmvd client.

Every failure the client reports is an :class:`SpmvdError`:

- :class:`ApiError` and its subclasses, one per HTTP status the daemon uses,
  when the daemon answered with an error. They carry the daemon's ``code``
  (``"shape_mismatch"``, ``"queue_full"``, ...), its ``message`` (which names
  what was wrong and where) and the HTTP ``status``.
- :class:`JobFailed` when an asynchronous job ended in ``failed`` (the job's
  own error code, message and the status the request would have had).
- :class:`ConnectionFailed` when the daemon cannot be reached at all (nothing
  listens, the name does not resolve, the connection was reset), and
  :class:`Timeout` when it did not answer within the client's timeout (also a
  :class:`TimeoutError`). Their ``status`` is ``None``.
- :class:`Unsupported` when this daemon lacks a feature a call needs and no
  fallback applies (see ``docs/python.md``).

Arguments the client can check itself (wrong shapes, dtypes it cannot send)
raise the usual ``ValueError`` / ``TypeError`` before any request is made.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Type

__all__ = [
    "SpmvdError", "ApiError", "BadRequest", "Unauthorized", "Forbidden", "NotFound", "Gone", "MethodNotAllowed",
    "Conflict", "PayloadTooLarge", "UnsupportedMediaType", "Unprocessable", "ServerError", "Unavailable",
    "InsufficientStorage", "JobFailed", "TransportError", "ConnectionFailed", "Timeout", "Unsupported",
    "error_for",
]


class SpmvdError(Exception):
    """Base of every exception the client raises for the daemon's sake.

    Attributes:
        code: the daemon's error code (``"not_found"``, ...), or a client-side
            code such as ``"connection_failed"`` or ``"timeout"``.
        message: a sentence saying what went wrong.
        status: the HTTP status, or ``None`` when no answer came.
    """

    def __init__(self, code: str, message: str, status: Optional[int] = None) -> None:
        super().__init__(f"{message} ({code}" + (f", HTTP {status})" if status is not None else ")"))
        self.code = code
        self.message = message
        self.status = status


class ApiError(SpmvdError):
    """The daemon answered with an error status and body ``{"error": {"code", "message"}}``.

    ``retry_after`` holds the ``Retry-After`` seconds of a 503, ``body`` the
    decoded error object (or the raw text when it was not JSON).
    """

    def __init__(self, code: str, message: str, status: int, retry_after: Optional[float] = None,
                 body: Any = None) -> None:
        super().__init__(code, message, status)
        self.retry_after = retry_after
        self.body = body


class BadRequest(ApiError, ValueError):
    """400: malformed request, unknown field, wrong shape or dtype (``shape_mismatch``, ...)."""


class Unauthorized(ApiError, PermissionError):
    """401: the token is missing or wrong."""


class Forbidden(ApiError, PermissionError):
    """403: refused by policy (``shm_disabled``: the daemon runs without ``allow_shm``; ``shm_forbidden``)."""


class NotFound(ApiError, KeyError):
    """404: no such matrix, job or vector (or route: an older daemon)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return Exception.__str__(self)


class MethodNotAllowed(ApiError):
    """405: the path does not take this method."""


class Conflict(ApiError):
    """409: the kernel or device cannot run here (``kernel_unavailable``, ``wrong_device``)."""


class Gone(ApiError):
    """410: the shared-memory object behind a region was shrunk or unlinked (``shm_gone``)."""


class PayloadTooLarge(ApiError):
    """413: the body is over the daemon's limit."""


class UnsupportedMediaType(ApiError):
    """415: a content type the route does not read."""


class Unprocessable(ApiError):
    """422: the Matrix Market input was refused (the message names the line)."""


class ServerError(ApiError):
    """500 and other 5xx but 503 and 507: the daemon failed (I/O, memory, CUDA)."""


class Unavailable(ApiError):
    """503: queue full, not ready or shutting down, still so after the client's retries."""


class InsufficientStorage(ApiError):
    """507: device memory or vector limits."""


class JobFailed(ApiError):
    """An asynchronous job ended ``failed``; ``job`` holds the job's last JSON."""

    def __init__(self, code: str, message: str, status: int, job: Dict[str, Any]) -> None:
        super().__init__(code, message, status, body=job)
        self.job = job


class TransportError(SpmvdError):
    """No HTTP answer came back."""


class ConnectionFailed(TransportError, ConnectionError):
    """The daemon could not be reached (down, wrong address, connection reset)."""


class Timeout(TransportError, TimeoutError):
    """The daemon did not answer (or a job did not finish) within the timeout."""


class Unsupported(SpmvdError, NotImplementedError):
    """This daemon lacks what the call needs, and there is no correct fallback."""


_BY_STATUS: Dict[int, Type[ApiError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 405: MethodNotAllowed, 409: Conflict,
    410: Gone, 413: PayloadTooLarge, 415: UnsupportedMediaType, 422: Unprocessable, 503: Unavailable,
    507: InsufficientStorage,
}


def error_for(status: int, code: str, message: str, retry_after: Optional[float] = None,
              body: Any = None) -> ApiError:
    """The :class:`ApiError` subclass for an HTTP status (``ServerError`` for other 5xx)."""
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else ApiError
    return cls(code, message, status, retry_after=retry_after, body=body)
