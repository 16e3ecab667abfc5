"""One keep-alive HTTP/1.1 connection to the daemon, at the socket's speed.

A :class:`Client` holds one :class:`Connection`: an ``http.client``
connection reused from request to request (TCP_NODELAY, as ``http.client``
sets it), opened again transparently when the daemon closed it between two
requests (an idle timeout, ``Connection: close``, a restart). A request is
sent again on a fresh connection only when the reused one failed before
any answer came: the daemon never saw it.

Bulk data never goes through a Python ``bytes`` object it does not need:

- a body that supports the buffer protocol (a ``memoryview`` of a NumPy
  array) is handed to ``socket.sendall`` as it is, with no ``tobytes()``
  copy; a file is streamed in 1 MiB blocks;
- an answer can be received straight into buffers the caller allocates
  once it has seen the headers (``into``): ``readinto`` on the socket, no
  chunk list, no concatenation, no second copy.
"""
from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import urllib.parse
from typing import Any, Callable, List, Mapping, Optional, Sequence, Tuple, Union

Timeout = Union[float, Tuple[float, float], None]
# Given the answer's status and headers, the writable buffers its body goes
# into, in turn, or None to read it into Response.content as usual.
IntoFn = Callable[[int, Any], Optional[Sequence[memoryview]]]

# A reused connection the daemon had closed fails in one of these ways
# before any answer: the request is safe to send again on a new one.
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError, ConnectionAbortedError)
_BLOCK = 1 << 20


class Response:
    """An answer: ``status_code``, ``reason``, ``headers`` (case-insensitive ``get`` and ``in``),
    ``content`` (empty when the body went ``into`` the caller's buffers), ``method`` and ``url``."""

    __slots__ = ("status_code", "reason", "headers", "content", "method", "url", "received_into")

    def __init__(self, status: int, reason: str, headers: Any, content: bytes, method: str, url: str,
                 received_into: bool) -> None:
        self.status_code = status
        self.reason = reason
        self.headers = headers
        self.content = content
        self.method = method
        self.url = url
        self.received_into = received_into

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


def body_length(body: Any) -> Optional[int]:
    """The byte length of a body: a buffer's ``nbytes``, the rest of a file, or None (unknown)."""
    if body is None:
        return 0
    if hasattr(body, "read"):
        try:
            return os.fstat(body.fileno()).st_size - body.tell()
        except (AttributeError, OSError, ValueError):
            return None
    return memoryview(body).nbytes


class Connection:
    """One keep-alive connection to ``url`` (``http://`` or ``https://``); not thread-safe."""

    def __init__(self, url: str) -> None:
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"the daemon's URL must be http://HOST:PORT or https://HOST:PORT, not {url!r}")
        self.https = u.scheme == "https"
        self.host = u.hostname
        self.port = u.port or (443 if self.https else 80)
        self.base = u.path.rstrip("/")
        self._conn: Optional[http.client.HTTPConnection] = None
        self.opened = 0  # connections opened so far (a reused one is not counted again)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _open(self, connect_timeout: Optional[float]) -> http.client.HTTPConnection:
        if self.https:
            c: http.client.HTTPConnection = http.client.HTTPSConnection(
                self.host, self.port, timeout=connect_timeout, context=ssl.create_default_context(),
                blocksize=_BLOCK)
        else:
            c = http.client.HTTPConnection(self.host, self.port, timeout=connect_timeout, blocksize=_BLOCK)
        c.connect()
        self.opened += 1
        return c

    def request(self, method: str, target: str, body: Any = None, headers: Optional[Mapping[str, str]] = None,
                timeout: Timeout = None, into: Optional[IntoFn] = None,
                reopen: Optional[Callable[[], Any]] = None) -> Response:
        """Sends one request (``target``: path and query) and reads its answer.

        ``body``: None, a buffer (sent as it is) or a file (streamed; ``reopen``
        gives a fresh one if the request must be sent again). Raises
        ``OSError`` (``socket.timeout`` included) and ``http.client`` errors.
        """
        connect_t, read_t = timeout if isinstance(timeout, tuple) else (timeout, timeout)
        hdrs = dict(headers or {})
        n = body_length(body)
        if n is not None and (body is not None or method in ("POST", "PUT")):
            hdrs["Content-Length"] = str(n)
        for attempt in (0, 1):
            reused = self._conn is not None and self._conn.sock is not None
            if not reused:
                self.close()
                self._conn = self._open(connect_t)
            conn = self._conn
            assert conn is not None and conn.sock is not None
            conn.sock.settimeout(read_t)
            try:
                resp = self._exchange(conn, method, target, body, hdrs)
            except _STALE:
                self.close()
                if not reused or attempt or (hasattr(body, "read") and reopen is None):
                    raise
                if hasattr(body, "read"):
                    body = reopen()  # type: ignore[misc]
                continue
            except BaseException:
                self.close()
                raise
            try:
                return self._read(resp, method, target, into)
            except BaseException:
                self.close()
                raise
        raise AssertionError("unreachable")

    def _exchange(self, conn: http.client.HTTPConnection, method: str, target: str, body: Any,
                  hdrs: Mapping[str, str]) -> http.client.HTTPResponse:
        """Sends the request and returns the answer's head. The daemon may answer early and close
        (a 413 for a body over its limit, sent after the headers) while the body is still going: the
        send then fails, and the answer, if it came, is read all the same."""
        try:
            conn.request(method, self.base + target, body=body, headers=hdrs)
        except _STALE as sent:
            try:
                return conn.getresponse()
            except (OSError, http.client.HTTPException):
                raise sent from None
        return conn.getresponse()

    def _read(self, resp: http.client.HTTPResponse, method: str, target: str, into: Optional[IntoFn]) -> Response:
        bufs = into(resp.status, resp.headers) if into is not None else None
        length = resp.length
        if bufs is not None and length is not None and length == sum(b.nbytes for b in bufs):
            for b in bufs:
                _fill(resp, b)
            content, received = b"", True
        else:
            content, received = resp.read(), False
        if resp.will_close:
            self.close()
        url = f"{'https' if self.https else 'http'}://{self.host}:{self.port}{self.base}{target}"
        return Response(resp.status, resp.reason, resp.headers, content, method, url, received)


def _fill(resp: http.client.HTTPResponse, buf: memoryview) -> None:
    """Reads exactly ``buf.nbytes`` bytes of the body into ``buf`` (``readinto`` on the socket)."""
    mv = buf.cast("B") if buf.format != "B" or buf.ndim != 1 else buf
    got, total = 0, mv.nbytes
    while got < total:
        n = resp.readinto(mv[got:])
        if not n:
            raise http.client.IncompleteRead(b"", total - got)
        got += n


def encode_query(params: Optional[Mapping[str, Any]]) -> str:
    """``?a=1&b=x`` for the non-None values (booleans as true/false), or an empty string."""
    if not params:
        return ""
    items: List[Tuple[str, str]] = []
    for k, v in params.items():
        if v is None:
            continue
        items.append((k, ("true" if v else "false") if isinstance(v, bool) else str(v)))
    return "?" + urllib.parse.urlencode(items) if items else ""


TIMEOUT_ERRORS: Tuple[type, ...] = (socket.timeout, TimeoutError)
"""What a request raises when the daemon does not answer in time."""
TRANSPORT_ERRORS: Tuple[type, ...] = (OSError, http.client.HTTPException)
"""What a request raises when the daemon cannot be reached or breaks off."""


def as_buffer(a: Any) -> memoryview:
    """The bytes of a C- or Fortran-contiguous NumPy array, in memory order, as a view (no copy)."""
    import numpy as np
    a = np.asarray(a)
    flat = a.reshape(-1, order="F" if a.ndim > 1 and a.flags.f_contiguous and not a.flags.c_contiguous else "C")
    if not np.shares_memory(flat, a) and a.size:
        raise ValueError("as_buffer needs a contiguous array")
    return memoryview(flat).cast("B")
