"""Client: one keep-alive connection to one spmvd daemon, and every route as a method.

The client holds one HTTP/1.1 connection (:mod:`spmvd._http`: reused from
request to request, opened again transparently when the daemon closed it;
uploads are streamed from the file, never read into memory whole), the
bearer token, the timeout and the retry policy:

- a 503 answer (queue full, not ready, shutting down) is retried up to
  ``retries`` times after the ``Retry-After`` seconds it carries (at most
  ``max_retry_wait``; one second when it carries none);
- a daemon that cannot be reached raises :class:`~spmvd.errors.ConnectionFailed`,
  one that does not answer within ``timeout`` seconds :class:`~spmvd.errors.Timeout`;
- every other error answer raises the :class:`~spmvd.errors.ApiError`
  subclass of its status, carrying the daemon's ``code`` and ``message``.

Products and solves travel over the binary path (little-endian values of
the matrix dtype both ways, sent from the array's own buffer and received
straight into a new array; the report in the ``X-SpMV-Stats`` or
``X-SpMV-Solve`` header), or, on the daemon's host, through shared-memory
regions (:mod:`spmvd.shm`): x and y stay in pages both processes map.
Jobs are waited for with long polls (``GET /v1/jobs/{id}?wait=S``), never
by sleeping between polls.
"""
from __future__ import annotations

import email.utils
import json
import math
import os
import sys
import tempfile
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import (IO, TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union)

import numpy as np

from . import _http, errors
from ._version import __version__

__all__ = ["Client", "SpmvResult", "BenchResult", "SolveResult", "ProgressFn", "default_url"]

URL_VARIABLES = ("SPMVD_URL", "SPMV_URL")
"""The environment variables :func:`default_url` reads, in order: ``SPMVD_URL``, and ``SPMV_URL`` as an alias."""
DEFAULT_URL = "http://127.0.0.1:8080"
JOB_WAIT_MAX_S = 60.0
"""The longest long poll the daemon takes (``GET /v1/jobs/{id}?wait=S``, S in 0..60)."""


def default_url() -> str:
    """The daemon's URL when none is given: ``$SPMVD_URL``, else ``$SPMV_URL``, else ``http://127.0.0.1:8080``."""
    for var in URL_VARIABLES:
        if os.environ.get(var):
            return os.environ[var]
    return DEFAULT_URL


ProgressFn = Callable[[float, Dict[str, Any]], None]
"""A job progress callback: ``fn(fraction_done, job_json)``."""

# "mixed" matrices hold float32 values and take and give float64 vectors.
_DTYPES = {"float64": np.dtype("<f8"), "float32": np.dtype("<f4"), "mixed": np.dtype("<f8")}

MatrixRef = Union[str, "RemoteMatrix", Mapping[str, Any]]  # noqa: F821 (matrix.RemoteMatrix)


def dtype_of(name: str) -> np.dtype:
    """The little-endian NumPy dtype of the vectors of a daemon dtype name (``"float64"``, ``"float32"``;
    ``"mixed"``: float64)."""
    try:
        return _DTYPES[name]
    except KeyError:
        raise errors.Unsupported("unsupported_dtype", f"the daemon reported dtype {name!r}; this client knows "
                                 "float64, float32 and mixed") from None


def as_values(x: Any, dtype: np.dtype, what: str = "x") -> np.ndarray:
    """``x`` as an array of ``dtype`` (the matrix's), following the documented rules.

    Real floating, integer and boolean arrays are converted (float64 to
    float32 rounds, as the daemon would); complex, object, string and other
    dtypes raise ``TypeError``. The result may share memory with ``x``.
    """
    a = np.asarray(x)
    if a.dtype.kind == "c":
        raise TypeError(f"{what} is complex ({a.dtype}); spmvd holds real float64/float32 values: pass the real "
                        "and imaginary parts as two products")
    if a.dtype.kind not in "fiub":
        raise TypeError(f"{what} has dtype {a.dtype}; spmvd takes real numbers (float, int or bool arrays)")
    return a.astype(dtype, copy=False)


@dataclass
class SpmvResult:
    """What one product returned: ``y`` (``None`` when y went into a resident vector) and ``stats``.

    ``stats`` is the whole ``X-SpMV-Stats`` object (kernel, params, device,
    ``stats`` with mean/median/min/max ms, GFLOP/s, GB/s, ``queue_ms``, and
    ``verify`` or ``auto`` when asked). Unpacks as ``y, stats = client.spmv(...)``.
    """

    y: Optional[np.ndarray]
    stats: Dict[str, Any]

    def __iter__(self) -> Iterator[Any]:
        yield self.y
        yield self.stats

    @property
    def kernel(self) -> str:
        """The kernel that ran (``auto``'s choice when ``auto`` was asked)."""
        return str(self.stats.get("kernel", ""))

    @property
    def median_ms(self) -> float:
        """Median time of the timed runs, in milliseconds."""
        return float(self.stats.get("stats", {}).get("median_ms", math.nan))


class BenchResult(List[Dict[str, Any]]):
    """A bench table as a list of flat records, one per kernel and parameter combination.

    Each record holds ``kernel``, ``device``, ``params`` (dict) and each
    parameter at the top level too (``block_size``, ``hack_size``,
    ``threads``...), the statistics (``median_ms``, ``mean_ms``, ``min_ms``,
    ``max_ms``, ``stddev_ms``, ``gflops``, ``gbps``, ``stat``: the time the
    rates are at), ``speedup`` over ``cpu.csr.serial``, ``efficiency``
    (CPU rows: speedup / ``threads_used``, the team that ran),
    ``ratio_cusparse``, ``max_rel_err``, ``verified``,
    ``error`` (for a combination that failed) and ``auto_kernel`` (the row of
    ``auto``: the kernel it chose). ``raw`` is the daemon's whole table;
    ``matrix``, ``rows``, ``cols``, ``nnz``, ``dtype``, ``seed``, ``stat``
    (``"median"`` or ``"mean"``: the statistic of the rates, speedups,
    efficiencies and ``best``), ``skipped`` and ``best`` are copied from it.
    """

    def __init__(self, table: Dict[str, Any]) -> None:
        super().__init__(_flatten(r) for r in table.get("results", []))
        self.raw: Dict[str, Any] = table
        self.matrix: str = table.get("matrix", "")
        self.rows: int = int(table.get("rows", 0))
        self.cols: int = int(table.get("cols", 0))
        self.nnz: int = int(table.get("nnz", 0))
        self.dtype: str = table.get("dtype", "")
        self.seed: Optional[int] = table.get("seed")
        self.stat: str = table.get("stat", "median")
        self.skipped: List[Dict[str, Any]] = list(table.get("skipped", []))
        self.best: Optional[Dict[str, Any]] = table.get("best")


_STAT_KEYS = ("median_ms", "mean_ms", "min_ms", "max_ms", "stddev_ms", "gflops", "gbps", "runs", "warmup", "stat")


def _number(v: Any) -> Any:
    """The daemon writes NaN and infinities as strings; numbers come back as floats."""
    if isinstance(v, str) and v in ("NaN", "Infinity", "-Infinity"):
        return float(v.replace("Infinity", "inf"))
    return v


def _flatten(r: Mapping[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {"kernel": r.get("kernel"), "device": r.get("device"), "params": dict(r.get("params", {}))}
    out.update(out["params"])
    st = r.get("stats") or {}
    for k in _STAT_KEYS:
        out[k] = _number(st.get(k, math.nan))
    for k in ("speedup", "efficiency", "ratio_cusparse", "max_rel_err"):
        out[k] = _number(r.get(k, math.nan))
    out["threads_used"] = r.get("threads_used")
    out["verified"] = r.get("verified")
    out["error"] = r.get("error")
    out["auto_kernel"] = (r.get("auto") or {}).get("kernel")
    return out


@dataclass(repr=False)
class SolveResult:
    """The answer of ``POST /v1/matrices/{id}/solve``.

    ``x`` is the solution (``None`` when it went into a resident vector with
    ``x_out``; ``(n, k)`` for k right-hand sides); ``raw`` the daemon's
    report (times, kernel, device...). With k columns, ``columns`` holds one
    SolveResult per column (``x`` a column of the whole's), ``converged`` is
    true when all did, ``iterations`` is their sum, ``relres`` the largest,
    and ``stop`` and ``residual_history`` are the columns' own. ``repr``
    is one short line (``residual_history`` is summarised, never printed
    whole).
    """

    x: Optional[np.ndarray]
    converged: bool
    stop: Dict[str, Any]
    iterations: int
    relres: float
    residual_history: List[float] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict)
    columns: List["SolveResult"] = field(default_factory=list)

    def __repr__(self) -> str:
        x = "None" if self.x is None else f"<{self.x.dtype} array {self.x.shape}>"
        more = f", columns={len(self.columns)}" if self.columns else ""
        reason = self.stop.get("reason", "converged" if self.converged else "?") if not self.columns else \
            ("converged" if self.converged else "not all converged")
        return (f"SolveResult(converged={self.converged}, stop={reason!r}, iterations={self.iterations}, "
                f"relres={self.relres:.3g}, x={x}, residual_history=<{len(self.residual_history)} values>{more})")

    __str__ = __repr__

    @classmethod
    def from_report(cls, rep: Mapping[str, Any], x: Optional[np.ndarray],
                    history: Optional[Sequence[float]] = None) -> "SolveResult":
        """From a report (a column's or the whole's) and x; ``history`` overrides ``residual_history``."""
        hist = rep.get("residual_history", []) if history is None else history
        return cls(x, bool(rep.get("converged")), dict(rep.get("stop", {})), int(rep.get("iterations", 0)),
                   float(_number(rep.get("relres", math.nan))), [float(_number(v)) for v in hist], dict(rep))


def _retry_after(value: Optional[str]) -> Optional[float]:
    """Seconds from a Retry-After header: an integer or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _progress_display(progress: Union[None, bool, str, ProgressFn], job_id: str) -> Tuple[Optional[ProgressFn], Any]:
    """(callback, tqdm bar) for :meth:`Client.wait`'s ``progress`` argument."""
    if callable(progress):
        return progress, None
    if progress is True or (progress == "auto" and sys.stderr.isatty()):
        try:
            from tqdm import tqdm  # type: ignore[import-untyped]
            return None, tqdm(total=1.0, desc=f"job {job_id[:8]}", unit="job",
                              bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}<{remaining}")
        except ImportError:
            if progress is True:
                raise
    return None, None


def _json_values(a: np.ndarray) -> Any:
    """A float array as JSON-ready lists, NaN and infinities as the daemon's strings."""
    def conv(v: float) -> Any:
        if math.isfinite(v):
            return v
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    if a.ndim == 1:
        return [conv(float(v)) for v in a]
    return [[conv(float(v)) for v in col] for col in a.T]


class Client:
    """A connection to one spmvd daemon.

    Args:
        url: the daemon's base URL, e.g. ``"http://127.0.0.1:8080"``; by
            default ``$SPMVD_URL`` (``$SPMV_URL`` is accepted as an alias),
            else ``http://127.0.0.1:8080`` (:func:`default_url`).
        token: the bearer token when the daemon has ``auth_token_file``.
        timeout: seconds to wait for a connection and for each answer
            (a float, or ``(connect, read)``). Long products need a larger one.
        retries: how many times a 503 answer is retried after its ``Retry-After``.
        max_retry_wait: the longest ``Retry-After`` honoured, in seconds.
        job_timeout: default bound, in seconds, of :meth:`wait` (``None``: none).

    A Client holds one keep-alive connection and is safe to use from one
    thread at a time; use one Client per thread otherwise. It is a context
    manager that closes its connection.
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None,
                 timeout: Union[float, Tuple[float, float]] = 60.0, retries: int = 3, max_retry_wait: float = 30.0,
                 job_timeout: Optional[float] = 3600.0) -> None:
        self.url = (url or default_url()).rstrip("/")
        self.timeout = timeout
        self.retries = int(retries)
        self.max_retry_wait = float(max_retry_wait)
        self.job_timeout = job_timeout
        self.headers: Dict[str, str] = {"User-Agent": f"spmvd-python/{__version__}"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.connection = _http.Connection(self.url)
        self._kernels: Optional[Dict[str, Dict[str, Any]]] = None
        self._no_k: set = set()       # (op, kernel) the daemon took no k > 1 for
        self._no_trans: set = set()   # kernels the daemon took no op=t for

    # ------------------------------------------------------------ plumbing

    def close(self) -> None:
        """Closes the connection (the next request opens a new one)."""
        self.connection.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"spmvd.Client({self.url!r})"

    def _timeouts(self, timeout: Any) -> Tuple[Optional[float], Optional[float]]:
        t = self.timeout if timeout is None else timeout
        return (t[0], t[1]) if isinstance(t, tuple) else (t, t)

    def request(self, method: str, path: str, *, params: Optional[Mapping[str, Any]] = None, json_body: Any = None,
                data: Any = None, headers: Optional[Mapping[str, str]] = None,
                ok: Sequence[int] = (200,), timeout: Any = None,
                into: Optional[_http.IntoFn] = None) -> _http.Response:
        """One request with the client's retry and error rules; the answer when its status is in ``ok``.

        ``data`` is bytes or any buffer (a ``memoryview`` of an array: sent
        without a copy), or a callable returning a fresh body (a file object
        to stream) for each attempt. ``into(status, headers)`` may return
        buffers the body is read into (see :mod:`spmvd._http`). Raises
        :class:`~spmvd.errors.ApiError`, :class:`~spmvd.errors.ConnectionFailed`
        or :class:`~spmvd.errors.Timeout`.
        """
        target = path + _http.encode_query(params)
        hdrs = dict(self.headers)
        hdrs.update(headers or {})
        body: Any = None
        if json_body is not None:
            body = json.dumps(json_body, allow_nan=False).encode()
            hdrs.setdefault("Content-Type", "application/json")
        attempt = 0
        while True:
            opened = None
            if callable(data):
                opened = body = data()
            elif data is not None:
                body = data
            try:
                r = self.connection.request(method, target, body=body, headers=hdrs, timeout=self._timeouts(timeout),
                                            into=into, reopen=data if callable(data) else None)
            except _http.TIMEOUT_ERRORS as e:
                raise errors.Timeout("timeout", f"{method} {self.url}{target}: no answer within "
                                     f"{self._timeouts(timeout)[1]} s ({e})") from e
            except _http.TRANSPORT_ERRORS as e:
                raise errors.ConnectionFailed("connection_failed", f"{method} {self.url}{target}: cannot reach "
                                              f"spmvd at {self.url} ({e})") from e
            finally:
                if opened is not None and hasattr(opened, "close"):
                    opened.close()
            if r.status_code in ok:
                return r
            if r.status_code == 503 and attempt < self.retries:
                wait = _retry_after(r.headers.get("Retry-After"))
                time.sleep(min(self.max_retry_wait, 1.0 if wait is None else wait))  # the daemon asked for it
                attempt += 1
                continue
            raise self._error(r)

    @staticmethod
    def _error(r: _http.Response) -> errors.ApiError:
        code, message, body = f"http_{r.status_code}", (r.text or r.reason or "")[:300], None
        try:
            body = r.json()
            err = body["error"]
            code, message = str(err["code"]), str(err["message"])
        except (ValueError, KeyError, TypeError):
            pass
        if not message:
            message = f"HTTP {r.status_code} from {r.method} {r.url}"
        return errors.error_for(r.status_code, code, message, _retry_after(r.headers.get("Retry-After")), body)

    def _json(self, method: str, path: str, **kw: Any) -> Any:
        r = self.request(method, path, **kw)
        return r.json() if r.content else None

    # -------------------------------------------------------- information

    def health(self) -> Dict[str, Any]:
        """``GET /v1/health``: ``{"status": "ok", "version", "uptime_s"}`` (never needs the token)."""
        return self._json("GET", "/v1/health")

    def ready(self) -> bool:
        """Whether ``GET /v1/ready`` answers 200 (the store is reloaded, the workers are up)."""
        try:
            self.request("GET", "/v1/ready", params=None)
            return True
        except errors.Unavailable:
            return False

    def info(self) -> Dict[str, Any]:
        """``GET /v1/info``: version, build, devices, limits."""
        return self._json("GET", "/v1/info")

    def kernels(self) -> List[Dict[str, Any]]:
        """``GET /v1/kernels``: the catalogue (name, op, device, format, params, available, max_k)."""
        ks = self._json("GET", "/v1/kernels")["kernels"]
        self._kernels = {k["name"]: k for k in ks}
        return ks

    def kernel(self, name: str) -> Optional[Dict[str, Any]]:
        """One catalogue entry by name (the catalogue is fetched once and kept), or ``None``."""
        if self._kernels is None:
            self.kernels()
        assert self._kernels is not None
        return self._kernels.get(name)

    def metrics(self) -> str:
        """``GET /metrics``: the Prometheus text."""
        return self.request("GET", "/metrics").text

    # ---------------------------------------------------------- matrices

    def list(self) -> "List[RemoteMatrix]":
        """``GET /v1/matrices``: every stored matrix, oldest first, as :class:`RemoteMatrix` objects."""
        from .matrix import RemoteMatrix
        return [RemoteMatrix(self, d) for d in self._json("GET", "/v1/matrices")["matrices"]]

    def get(self, matrix: MatrixRef) -> "RemoteMatrix":
        """``GET /v1/matrices/{id}``: a fresh descriptor, as a :class:`RemoteMatrix`; a matrix's
        unique name works as its id (``c.get("bcsstk13.mtx")``; a name two matrices have is
        :class:`~spmvd.errors.Conflict` listing their ids)."""
        from .matrix import RemoteMatrix
        return RemoteMatrix(self, self._json("GET", f"/v1/matrices/{urllib.parse.quote(_id(matrix), safe='')}"))

    def delete(self, matrix: MatrixRef) -> None:
        """``DELETE /v1/matrices/{id}``."""
        self.request("DELETE", f"/v1/matrices/{_id(matrix)}", ok=(204, 200))

    def upload(self, source: Any, *, name: Optional[str] = None, dtype: Optional[str] = None,
               formats: Optional[Sequence[str]] = None, hack_size: Optional[int] = None,
               device: Optional[str] = None, shape: Optional[Tuple[int, int]] = None,
               kernel: Optional[str] = None, if_exists: Optional[str] = None) -> "RemoteMatrix":
        """Stores a matrix on the daemon and returns it as a :class:`RemoteMatrix`.

        ``source`` is one of:

        - a path (``str`` or ``os.PathLike``) to a Matrix Market file, plain or
          gzip-compressed (``.mtx``, ``.mtx.gz``): streamed as it is;
        - a path to a SciPy ``.npz`` file (``scipy.sparse.save_npz``):
          streamed as it is (the daemon reads CSR, CSC and COO archives);
        - a ``scipy.sparse`` matrix or array: written here as an uncompressed
          ``.npz`` (CSR, binary values: they arrive exactly) and streamed;
        - COO arrays ``(row, col, val)`` (0-based) with ``shape=(rows, cols)``.

        ``dtype`` defaults to the source's when it is float32 or float64, else
        the daemon's ``default_dtype``. Complex values raise ``TypeError``.
        The other options are the upload route's (``docs/api.md``;
        ``if_exists="reuse"`` answers the stored matrix of the same name and
        content instead of storing another copy);
        ``kernel`` is the :class:`RemoteMatrix`'s kernel for its products.
        """
        from .matrix import RemoteMatrix
        params: Dict[str, Any] = {}
        if isinstance(source, (str, os.PathLike)):
            path = os.fspath(source)
            with open(path, "rb") as f:
                magic = f.read(4)
            if magic[:2] == b"PK" or path.endswith(".npz"):
                body, sdtype = (lambda: open(path, "rb")), _npz_dtype(path)
                src: Any = path
            else:
                body, sdtype = (lambda: open(path, "rb")), None
                src = path
            params["name"] = name or os.path.basename(path)
        elif isinstance(source, tuple):
            if shape is None or len(source) != 3:
                raise ValueError("COO arrays are uploaded as (row, col, val) with shape=(rows, cols)")
            coo = _coo_from_arrays(source[0], source[1], source[2], shape)
            body, sdtype = _npz_body(coo)
            src = coo
        elif hasattr(source, "tocoo") and hasattr(source, "shape"):
            body, sdtype = _npz_body(source.tocoo())
            src = source
        else:
            raise TypeError(f"cannot upload a {type(source).__name__}: pass a path (.mtx, .mtx.gz, .npz), a "
                            "scipy.sparse matrix, or COO arrays (row, col, val) with shape=")
        if name and "name" not in params:
            params["name"] = name
        if dtype or sdtype:
            params["dtype"] = dtype or sdtype
        if formats:
            params["formats"] = ",".join(formats)
        if hack_size is not None:
            params["hack_size"] = int(hack_size)
        if device is not None:
            params["device"] = str(device)
        if if_exists is not None:
            params["if_exists"] = if_exists
        r = self.request("POST", "/v1/matrices", params=params, data=body,
                         headers={"Content-Type": "application/octet-stream"}, ok=(200, 201))
        m = RemoteMatrix(self, r.json(), kernel=kernel)
        m._source = src
        return m

    def generate(self, kind: str, n: int, *, per_row: Optional[int] = None, dense_len: Optional[int] = None,
                 seed: Optional[int] = None, name: Optional[str] = None, dtype: Optional[str] = None,
                 device: Optional[str] = None, offsets: Optional[int] = None,
                 kernel: Optional[str] = None) -> "RemoteMatrix":
        """A matrix the daemon builds itself by formula (``generate=<kind>``): nothing is sent.

        ``kind`` is one of the daemon's generators (``poisson2d``,
        ``poisson3d``, ``stencil27``, ``uniform``, ``powerlaw``,
        ``graph_uniform``, ``graph_powerlaw``, ``banded_dense_row``, ``lp``,
        ``band``); ``n``, ``per_row``, ``dense_len`` and ``seed`` are its
        numbers, as ``spmv-gen`` takes them. ``band`` has entry (i, j) =
        1 + ((i + 3j) mod 7) / 8 for |i - j| <= per_row // 2: the way to
        matrices of billions of entries (``offsets=64`` past 2**31 is
        automatic). The daemon stores the recipe, not the arrays.
        """
        from .matrix import RemoteMatrix
        params: Dict[str, Any] = {"generate": kind, "n": int(n)}
        for key, v in (("per_row", per_row), ("dense_len", dense_len), ("seed", seed), ("offsets", offsets)):
            if v is not None:
                params[key] = int(v)
        for key, v in (("name", name), ("dtype", dtype), ("device", device)):
            if v is not None:
                params[key] = str(v)
        r = self.request("POST", "/v1/matrices", params=params, ok=(201,))
        return RemoteMatrix(self, r.json(), kernel=kernel)

    def spy(self, matrix: MatrixRef, size: int = 512) -> bytes:
        """``GET /v1/matrices/{id}/spy.png``: the PNG bytes of the pattern picture."""
        return self.request("GET", f"/v1/matrices/{_id(matrix)}/spy.png", params={"size": int(size)}).content

    def tune(self, matrix: MatrixRef) -> Dict[str, Any]:
        """``POST /v1/matrices/{id}/tune``: tunes ``auto`` again; the answer (``auto`` holds the choice)."""
        return self._json("POST", f"/v1/matrices/{_id(matrix)}/tune")

    # ---------------------------------------------------------- products

    def spmv(self, matrix: MatrixRef, x: Any, *, kernel: Optional[str] = None, runs: int = 1, warmup: int = 0,
             verify: bool = False, op: str = "n", alpha: Optional[float] = None, beta: Optional[float] = None,
             y: Any = None, k: Optional[int] = None, out: Optional[np.ndarray] = None, stat: Optional[str] = None,
             **params: int) -> SpmvResult:
        """y = A·x (``op="t"``: Aᵀ·x) over the binary path; an :class:`SpmvResult`.

        ``x`` is a 1-D array (one vector) or a 2-D ``(n, k)`` array (k
        columns in one request, the daemon's ``?k=``), converted to the
        matrix dtype by the rules of :func:`as_values` and copied when it is
        not contiguous; or a resident :class:`~spmvd.Vector`. ``y`` may be a
        resident Vector to write into (then ``result.y`` is ``None``; ``beta``
        needs it). ``params`` are kernel parameters (``block_size``, ``threads``...).
        ``stat="mean"`` puts GFLOP/s and GB/s at the mean time of the runs
        (default: the daemon's, the median); ``stats["stats"]["stat"]`` says which.

        Shared memory (:mod:`spmvd.shm`): ``x`` and/or ``y`` may be in a
        registered region, as a :class:`~spmvd.ShmOperand` or a ``(region,
        byte_offset)`` tuple whose region is a name, a ``SharedMemory`` or a
        :class:`~spmvd.SharedArrays`; ``x`` may be a SharedArrays itself
        (then y defaults to its ``y``). With y in a region, ``result.y`` is a
        NumPy view onto the region, written by the daemon before it answered.
        ``k`` gives the columns of an x in a region (default: the
        SharedArrays', else 1).

        x is sent from its own buffer (no copy when it is contiguous in the
        matrix dtype) and y read from the socket straight into a new array,
        or into ``out`` (an array of y's shape, in the matrix's little-endian
        dtype, C- or, for k columns, Fortran-contiguous), which a loop of
        products can reuse: no allocation, no page faults on fresh memory.

        With ``op="t"`` or k > 1 on a daemon that does not take them, this
        raises (:class:`~spmvd.errors.Unsupported` when the daemon ignored
        ``op``, its 400 otherwise); :class:`RemoteMatrix` falls back instead.
        """
        from .shm import SharedArrays, as_operand
        from .vector import Vector
        m = matrix if hasattr(matrix, "descriptor") else self.get(matrix)
        rows, cols, dt = int(m.descriptor["rows"]), int(m.descriptor["cols"]), dtype_of(m.descriptor["dtype"])
        if isinstance(x, SharedArrays):
            if y is None:
                y = x
            if k is None:
                k = x.k
        xs, ys = as_operand(x, "x"), as_operand(y, "y")
        n_in, n_out = (cols, rows) if op == "n" else (rows, cols)
        if op not in ("n", "t"):
            raise ValueError(f"op must be 'n' or 't', not {op!r}")
        q: Dict[str, Any] = {"runs": int(runs), "warmup": int(warmup)}
        if stat is not None:
            q["stat"] = str(stat)
        if kernel:
            q["kernel"] = kernel
        if verify:
            q["verify"] = "true"
        if op == "t":
            q["op"] = "t"
        if alpha is not None:
            q["alpha"] = repr(float(alpha))
        if beta is not None:
            q["beta"] = repr(float(beta))
        q.update({k: int(v) for k, v in params.items()})
        if xs is not None:
            k = 1 if k is None else int(k)
            if k < 1:
                raise ValueError(f"k must be 1 or more, not {k}")
            q["x_shm"], q["x_offset"] = xs.name, xs.offset
            body = b""
        elif isinstance(x, Vector):
            k = x.k
            q["x"] = x.id
            body = b""
        else:
            xa = as_values(x, dt)
            if xa.ndim not in (1, 2):
                raise ValueError(f"x must be 1-D (n,) or 2-D (n, k), not {xa.ndim}-D {xa.shape}")
            if xa.shape[0] != n_in:
                raise ValueError(f"x has {xa.shape[0]} rows; {'A' if op == 'n' else 'A^T'} of matrix {m.id} "
                                 f"({rows} x {cols}) needs {n_in}")
            if k is not None and k != (1 if xa.ndim == 1 else xa.shape[1]):
                raise ValueError(f"k={k} but x has {1 if xa.ndim == 1 else xa.shape[1]} columns")
            k = 1 if xa.ndim == 1 else xa.shape[1]
            if k < 1:
                raise ValueError("x has no columns")
            body = _http.as_buffer(np.asfortranarray(xa) if xa.ndim == 2 else np.ascontiguousarray(xa))
        if k > 1:
            q["k"] = k
        if ys is not None:
            q["y_shm"], q["y_offset"] = ys.name, ys.offset
        elif y is not None:
            if not isinstance(y, Vector):
                raise TypeError("y must be a resident spmvd.Vector or in a shared-memory region (the answer "
                                "carries y otherwise)")
            q["y"] = y.id
        if beta not in (None, 0, 0.0) and (y is None or ys is not None):
            raise ValueError("beta != 0 needs y as a resident Vector")
        if out is not None and (ys is not None or y is not None):
            raise ValueError("out= receives y from the answer; y is going into a vector or a region here")
        if out is not None:
            want = (n_out,) if k == 1 else (n_out, k)
            if out.shape != want or out.dtype != dt or not (out.flags.c_contiguous if k == 1 else out.flags.f_contiguous):
                raise ValueError(f"out must be a {'C' if k == 1 else 'Fortran'}-contiguous {dt} array of shape {want}, "
                                 f"not {out.dtype} {out.shape}")
        dest = out
        out = None if ys is not None or y is not None else \
            (np.empty(n_out * k, dtype=dt) if dest is None else dest.reshape(-1, order="F"))

        def into(status: int, headers: Any) -> Optional[List[memoryview]]:
            return [memoryview(out).cast("B")] if out is not None and status == 200 else None
        r = self.request("POST", f"/v1/matrices/{m.id}/spmv", params=q, data=body,
                         headers={"Content-Type": "application/octet-stream"}, into=into)
        if "X-SpMV-Stats" in r.headers or ys is None:
            stats = json.loads(r.headers.get("X-SpMV-Stats", "{}"))
        else:
            stats = r.json() if r.content else {}  # y in a region: the statistics may come as the JSON body
        if op == "t" and stats.get("op", "t") != "t":
            raise errors.Unsupported("op_ignored", "this daemon ignored op=t (it predates transposed products): "
                                     "the answer is A*x, not A^T*x, and was dropped")
        if ys is not None:
            if isinstance(y, SharedArrays):
                return SpmvResult(y.y, stats)
            return SpmvResult(ys.view(dt.newbyteorder("="), (n_out,) if k == 1 else (n_out, k)), stats)
        if y is not None:
            return SpmvResult(None, stats)
        if not r.received_into:  # y went straight into `out`, unless the length was not the expected one
            raise errors.SpmvdError("bad_answer", f"the daemon answered {len(r.content)} bytes; expected {k} x "
                                    f"{n_out} values of {dt.name}", r.status_code)
        assert out is not None
        if dest is not None:
            return SpmvResult(dest, stats)
        out = out.astype(dt.newbyteorder("="), copy=False)  # a no-op on a little-endian host
        return SpmvResult(out if k == 1 else out.reshape((n_out, k), order="F"), stats)

    def bench(self, matrix: MatrixRef, *, kernels: Optional[Sequence[str]] = None, runs: Optional[int] = None,
              warmup: Optional[int] = None, block_sizes: Optional[Sequence[int]] = None,
              hack_sizes: Optional[Sequence[int]] = None, verify: Optional[bool] = None,
              seed: Optional[int] = None, progress: Union[None, bool, str, ProgressFn] = "auto",
              timeout: Optional[float] = None, threads: Union[None, str, Sequence[int]] = None,
              stat: Optional[str] = None) -> BenchResult:
        """``POST /v1/matrices/{id}/bench`` and :meth:`wait` for it; the table as a :class:`BenchResult`.

        Options left ``None`` take the daemon's defaults. ``threads`` sweeps
        the CPU kernels' thread counts (a list, or ``"sweep"``: 1..the
        daemon's threads); ``stat`` (``"median"`` or ``"mean"``) is the
        statistic of the rates, speedups, efficiencies and ``best``.
        ``progress`` is as in :meth:`wait`.
        """
        body: Dict[str, Any] = {}
        for key, v in (("kernels", kernels), ("runs", runs), ("warmup", warmup), ("block_sizes", block_sizes),
                       ("hack_sizes", hack_sizes), ("threads", threads), ("stat", stat), ("verify", verify),
                       ("seed", seed)):
            if v is not None:
                body[key] = list(v) if isinstance(v, (list, tuple)) else v
        job = self._json("POST", f"/v1/matrices/{_id(matrix)}/bench", json_body=body, ok=(202,))
        done = self.wait(job["id"], progress=progress, timeout=timeout)
        return BenchResult(done["result"])

    # ------------------------------------------------------ shared memory

    def register_shm(self, shm_or_name: Any, size: Optional[int] = None, offset: int = 0) -> Dict[str, Any]:
        """``POST /v1/shm``: registers ``size`` bytes of a shared-memory object from byte ``offset``; the descriptor.

        ``shm_or_name`` is a ``multiprocessing.shared_memory.SharedMemory``
        (its ``.name``) or the object's name as ``shm_open`` takes it, with
        or without the leading ``/``. ``size`` defaults to the rest of the
        object after ``offset`` (``SharedMemory.size``, or the size of
        ``/dev/shm/NAME``). The descriptor holds ``name``, ``offset``,
        ``size``, ``object_bytes``, ``pinned``, ``state``, ``uses``,
        ``created``. Raises :class:`~spmvd.errors.Forbidden` (403:
        ``shm_disabled``, or ``shm_forbidden`` when the object's mode does not
        grant the daemon read and write), :class:`~spmvd.errors.NotFound`
        (``shm_not_found``), :class:`~spmvd.errors.BadRequest`
        (``out_of_range``, a bad name), :class:`~spmvd.errors.Conflict`
        (``shm_exists``).
        """
        from multiprocessing import shared_memory
        from .shm import shm_name
        name = shm_name(shm_or_name)
        if isinstance(offset, bool) or int(offset) < 0:
            raise ValueError(f"offset must be a byte offset >= 0, not {offset!r}")
        if size is None:
            if isinstance(shm_or_name, shared_memory.SharedMemory):
                total = shm_or_name.size
            else:
                try:
                    total = os.stat(os.path.join("/dev/shm", name)).st_size
                except OSError as e:
                    raise ValueError(f"size not given and /dev/shm/{name} cannot be read ({e.strerror}): "
                                     "pass size=") from e
            size = total - int(offset)
            if size <= 0:
                raise ValueError(f"offset {offset} leaves nothing of the {total}-byte object {name!r}")
        body = {"name": name, "offset": int(offset), "size": int(size)}
        return self._json("POST", "/v1/shm", json_body=body, ok=(201, 200))

    def register_cuda_shm(self, name: str, handle: Any, device: Union[str, int], size: int,
                          offset: int = 0) -> Dict[str, Any]:
        """``POST /v1/shm`` with ``cuda_ipc``: ``size`` bytes from ``offset`` of this process's GPU allocation.

        ``handle`` is the 64-byte ``cudaIpcMemHandle_t`` of the allocation
        (``bytes(cupy.cuda.runtime.ipcGetMemHandle(a.data.ptr))`` with CuPy's
        own allocator: ``cupy.cuda.set_allocator(None)``); ``device`` the
        daemon's GPU (``"gpu0"`` or 0), the same card. ``name`` is only the
        region's handle. A product whose matrix is on that GPU reads x and
        writes y there in place; others are a 409 ``wrong_device``. Unregister
        before freeing the memory. A daemon without that GPU answers
        :class:`~spmvd.errors.Conflict`, a handle the driver refuses
        :class:`~spmvd.errors.BadRequest`.
        """
        from .shm import shm_name
        h = bytes(handle)
        if len(h) != 64:
            raise ValueError(f"a cudaIpcMemHandle_t is 64 bytes, not {len(h)}")
        if isinstance(offset, bool) or int(offset) < 0 or int(size) <= 0:
            raise ValueError(f"offset must be >= 0 and size > 0, not {offset!r} and {size!r}")
        body = {"name": shm_name(name), "cuda_ipc": h.hex(), "device": device, "offset": int(offset),
                "size": int(size)}
        return self._json("POST", "/v1/shm", json_body=body, ok=(201, 200))

    def shm_regions(self) -> List[Dict[str, Any]]:
        """``GET /v1/shm``: every registered region's descriptor, oldest first, ``state`` checked now."""
        d = self._json("GET", "/v1/shm")
        if isinstance(d, list):
            return d
        return list(d.get("regions", d.get("shm", [])))

    def shm_region(self, shm_or_name: Any) -> Dict[str, Any]:
        """``GET /v1/shm/{name}``: one region's descriptor (``state``: ``ok``, ``shrunk``, ``unlinked``)."""
        from .shm import shm_name
        return self._json("GET", f"/v1/shm/{shm_name(shm_or_name)}")

    def unregister_shm(self, shm_or_name: Any) -> None:
        """``DELETE /v1/shm/{name}``: the region goes; the object stays (unlink it yourself)."""
        from .shm import shm_name
        self.request("DELETE", f"/v1/shm/{shm_name(shm_or_name)}", ok=(204, 200))

    def shared_arrays(self, matrix: MatrixRef, *, k: int = 1, op: str = "n", name: Optional[str] = None,
                      group: Union[None, str, int] = None) -> "SharedArrays":
        """A :class:`~spmvd.SharedArrays` for ``matrix``: a registered object with x and y views (a context manager)."""
        from .shm import SharedArrays
        return SharedArrays(self, matrix, k=k, op=op, name=name, group=group)

    # --------------------------------------------------------------- jobs

    def job(self, job_id: str, wait: Optional[float] = None) -> Dict[str, Any]:
        """``GET /v1/jobs/{id}``; with ``wait`` (seconds, at most 60) a long poll: the daemon answers when
        the job ends or ``wait`` seconds pass, whichever is first."""
        if wait is None or wait <= 0:
            return self._json("GET", f"/v1/jobs/{job_id}")
        wait = min(float(wait), JOB_WAIT_MAX_S)
        connect, read = self._timeouts(None)
        return self._json("GET", f"/v1/jobs/{job_id}", params={"wait": f"{wait:.3f}"},
                          timeout=(connect, None if read is None else read + wait))

    def cancel(self, job_id: str) -> Optional[Dict[str, Any]]:
        """``DELETE /v1/jobs/{id}``: cancels a queued or running job (drops a finished one's record)."""
        r = self.request("DELETE", f"/v1/jobs/{job_id}", ok=(200, 202, 204))
        return r.json() if r.content else None

    def wait(self, job_id: str, *, progress: Union[None, bool, str, ProgressFn] = "auto",
             timeout: Optional[float] = None, poll: Optional[float] = None) -> Dict[str, Any]:
        """Waits for a job to be ``done`` with long polls; its last JSON (``result`` holds the answer).

        Each ``GET /v1/jobs/{id}?wait=S`` returns the moment the job ends,
        so nothing sleeps and the end is seen at once. ``progress``: a
        callable ``fn(fraction, job)`` called after every poll; ``True`` for a
        tqdm bar (``ImportError`` without tqdm); ``"auto"`` (default) for a
        tqdm bar when tqdm is installed and stderr is a terminal;
        ``None``/``False`` for nothing. ``poll`` is the longest single long
        poll in seconds (default 1 with a progress display, to update it
        every second, else 60, the daemon's most). ``timeout`` (default the
        client's ``job_timeout``) bounds the wait: :class:`~spmvd.errors.Timeout`
        after it, naming the job (which keeps running). A failed job raises
        :class:`~spmvd.errors.JobFailed`.
        """
        limit = self.job_timeout if timeout is None else timeout
        deadline = None if limit is None else time.monotonic() + limit
        fn, bar = _progress_display(progress, job_id)
        step = float(poll) if poll is not None else (1.0 if fn or bar is not None else JOB_WAIT_MAX_S)
        try:
            j = self.job(job_id)
            while True:
                frac = float(j.get("progress", 0.0) or 0.0)
                if fn:
                    fn(frac, j)
                if bar is not None:
                    bar.n = frac
                    bar.refresh()
                if j.get("state") == "done":
                    return j
                if j.get("state") == "failed":
                    err = j.get("error") or {}
                    raise errors.JobFailed(str(err.get("code", "job_failed")),
                                           str(err.get("message", f"job {job_id} failed")),
                                           int(j.get("status", 500) or 500), j)
                left = math.inf if deadline is None else deadline - time.monotonic()
                if left <= 0:
                    raise errors.Timeout("timeout", f"job {job_id} was still {j.get('state')} after {limit} s "
                                         f"(progress {frac:.0%}); it keeps running: Client.wait() it again or "
                                         "Client.cancel() it")
                wait = max(0.001, min(step, left))
                t0 = time.monotonic()
                j = self.job(job_id, wait=wait)
                if j.get("state") not in ("done", "failed") and time.monotonic() - t0 < wait / 2:
                    # a daemon that predates long polls answered at once: pace the polls instead
                    time.sleep(min(wait, 0.25))
        finally:
            if bar is not None:
                bar.close()

    # ------------------------------------------------------------ vectors

    def vector(self, values: Any = None, *, n: Optional[int] = None, k: Optional[int] = None,
               fill: Union[None, float, str] = None, seed: Optional[int] = None, dtype: Optional[str] = None,
               like: Optional[MatrixRef] = None, side: Optional[str] = None,
               device: Union[None, str, int] = None) -> "Vector":
        """``POST /v1/vectors``: a resident :class:`~spmvd.Vector`.

        Either ``values`` (a 1-D array, or ``(n, k)`` for a block; sent binary
        in ``dtype``, default the ``like`` matrix's, else float64 for float64
        input and float32 for float32), or ``fill`` (a number or
        ``"random"`` with ``seed``) with ``n`` (or ``like``) and ``k``.
        ``values`` may also be a shared-memory region operand (``(region,
        byte_offset)``, a :class:`~spmvd.ShmOperand`) holding n·k values of
        ``dtype`` (``n`` given, or from ``like``): the daemon reads them there.
        """
        from .shm import as_operand
        from .vector import Vector
        opts: Dict[str, Any] = {}
        if like is not None:
            opts["like"] = _id(like)
        if side is not None:
            opts["side"] = side
        if device is not None:
            opts["device"] = device
        so = as_operand(values, "x") if values is not None else None
        if so is not None:
            if fill is not None:
                raise ValueError("give values or fill, not both")
            obj = dict(opts, values={"shm": so.name, "offset": so.offset})
            for key, v in (("n", n), ("k", k), ("dtype", dtype)):
                if v is not None:
                    obj[key] = v
            r = self.request("POST", "/v1/vectors", json_body=obj, ok=(201,))
        elif values is not None:
            if fill is not None:
                raise ValueError("give values or fill, not both")
            a = np.asarray(values)
            if dtype is None:
                if like is not None and hasattr(like, "descriptor"):
                    dtype = "float64" if like.descriptor["dtype"] == "mixed" else like.descriptor["dtype"]
                else:
                    dtype = "float32" if a.dtype == np.float32 else "float64"
            a = as_values(a, dtype_of(dtype), "values")
            if a.ndim not in (1, 2) or a.size == 0:
                raise ValueError(f"values must be a non-empty 1-D (n,) or 2-D (n, k) array, not {a.shape}")
            if n is not None and n != a.shape[0]:
                raise ValueError(f"n={n} but values has {a.shape[0]} rows")
            kk = 1 if a.ndim == 1 else a.shape[1]
            q = dict(opts, dtype=dtype, k=kk)
            body = _http.as_buffer(np.asfortranarray(a))
            r = self.request("POST", "/v1/vectors", params=q, data=body,
                             headers={"Content-Type": "application/octet-stream"}, ok=(201,))
        else:
            obj = dict(opts)
            if n is not None:
                obj["n"] = int(n)
            if k is not None:
                obj["k"] = int(k)
            obj["fill"] = 0.0 if fill is None else fill
            if seed is not None:
                obj["seed"] = int(seed)
            if dtype is not None:
                obj["dtype"] = dtype
            r = self.request("POST", "/v1/vectors", json_body=obj, ok=(201,))
        return Vector(self, r.json())

    def vectors(self) -> "List[Vector]":
        """``GET /v1/vectors``: every resident vector."""
        from .vector import Vector
        return [Vector(self, d) for d in self._json("GET", "/v1/vectors")["vectors"]]

    def get_vector(self, vector_id: str) -> "Vector":
        """``GET /v1/vectors/{id}``: its descriptor, as a :class:`~spmvd.Vector`."""
        from .vector import Vector
        return Vector(self, self._json("GET", f"/v1/vectors/{_id(vector_id)}"))

    def ops(self, steps: Optional[Sequence[Mapping[str, Any]]] = None) -> Any:
        """``POST /v1/ops`` with ``steps`` (dicts, ids or Vectors as operands): the answer.

        Without ``steps``, a :class:`~spmvd.vector.Batch` to build them with
        methods and ``run()``.
        """
        from .vector import Batch
        if steps is None:
            return Batch(self)
        return self._json("POST", "/v1/ops", json_body={"steps": [_step(s) for s in steps]})

    def preconditioner(self, matrix: MatrixRef, type: str, *, device: Optional[str] = None,
                       **options: Any) -> Dict[str, Any]:
        """``POST /v1/matrices/{id}/preconditioners``: a preconditioner resident with the matrix.

        ``type`` is ``jacobi``, ``block_jacobi``, ``chebyshev``, ``amg``,
        ``ic0`` or ``ilu0``; ``options`` are the route's (``block_size``,
        ``degree``, ``precision``, AMG's ``max_levels``, ``strength``,
        ``smoother``, ``near_nullspace``, ``coordinates``...: docs/api.md,
        "Preconditioners"); ``device`` where it is built (default the
        matrix's). Returns its descriptor; pass it (or its ``id``) as
        :meth:`solve`'s ``preconditioner`` to use it.
        """
        body = dict(options, type=type)
        for key, v in list(body.items()):
            if isinstance(v, np.ndarray):
                body[key] = v.tolist()
        if device is not None:
            body["device"] = device
        return self._json("POST", f"/v1/matrices/{_id(matrix)}/preconditioners", json_body=body, ok=(201,))

    def preconditioners(self, matrix: MatrixRef) -> List[Dict[str, Any]]:
        """``GET /v1/matrices/{id}/preconditioners``: the matrix's resident ones (named and cached)."""
        return self._json("GET", f"/v1/matrices/{_id(matrix)}/preconditioners")["preconditioners"]

    def delete_preconditioner(self, pc: Any) -> None:
        """``DELETE /v1/preconditioners/{id}`` (a descriptor or an id)."""
        pid = pc["id"] if isinstance(pc, dict) else str(pc)
        self.request("DELETE", f"/v1/preconditioners/{pid}", ok=(204,))

    def solve(self, matrix: MatrixRef, b: Any, *, method: str = "cg", tol: Optional[float] = None,
              maxit: Optional[int] = None, restart: Optional[int] = None, x0: Any = None,
              preconditioner: Any = None, kernel: Optional[str] = None, x_out: Any = None,
              wait: bool = True, progress: Union[None, bool, str, ProgressFn] = None,
              timeout: Optional[float] = None, k: Optional[int] = None) -> Any:
        """``POST /v1/matrices/{id}/solve``: Ax = b on the daemon; a :class:`SolveResult`.

        ``b`` is a 1-D array, or ``(n, k)`` for k right-hand sides (CG
        solves them in lockstep, one product of the k directions an
        iteration; each has its own report in ``columns``), sent in binary
        from the array's own buffer; or a resident Vector. ``x0`` likewise
        (an array of b's shape, or a Vector); ``x_out`` a Vector to write x
        into. ``method`` is ``cg``, ``bicgstab``, ``gmres`` (``restart``) or
        ``minres``; ``preconditioner`` ``none``, ``jacobi``, another type's
        name (``amg``, ``ic0``...: built on the daemon and cached with the
        matrix), or a resident one from :meth:`preconditioner` (its
        descriptor or id). By default the request waits for the answer: x comes
        back in binary straight into a new array, the residual history after
        it, the report in a header. With ``progress`` (see :meth:`wait`) the
        solve runs as a job (``"async": true``) waited for with long polls
        that report its iteration, and x comes back as the job's JSON; with
        ``wait=False`` the job is started and its id returned. A daemon
        without the route raises :class:`~spmvd.errors.Unsupported` (use
        ``scipy.sparse.linalg.cg(RemoteMatrix)`` there).

        Shared memory (:mod:`spmvd.shm`, a daemon on this host with
        ``allow_shm``): ``b`` may be in a registered region (a
        :class:`~spmvd.ShmOperand`, a ``(region, byte_offset)`` tuple, or a
        :class:`~spmvd.SharedArrays`, whose ``x`` holds b) with ``k``
        columns (default: the SharedArrays', else 1), and ``x_out`` too (a
        SharedArrays' ``y`` by default when b is one): the daemon reads b
        from the pages and writes x into them, and ``result.x`` is a NumPy
        view onto the region. No vector crosses the socket.
        """
        from .shm import SharedArrays, as_operand
        from .vector import Vector
        m = matrix if hasattr(matrix, "descriptor") else self.get(matrix)
        n, dt = int(m.descriptor["rows"]), dtype_of(m.descriptor["dtype"])
        as_job = not wait or progress not in (None, False)
        if isinstance(b, SharedArrays):
            x_out = b if x_out is None else x_out
            k = b.k if k is None else k
        bs = as_operand(b, "x")
        xs = as_operand(x_out, "y") if x_out is not None and not isinstance(x_out, (Vector, str)) else None
        if isinstance(preconditioner, dict):  # a resident one's descriptor: its id
            if "id" not in preconditioner:
                raise ValueError("preconditioner: a type's name, or a resident one (Client.preconditioner) or its id")
            preconditioner = preconditioner["id"]
        q: Dict[str, Any] = {"method": method, "tol": None if tol is None else repr(float(tol)), "maxit": maxit,
                             "restart": restart, "preconditioner": preconditioner, "kernel": kernel}
        if xs is not None:
            q["x_shm"], q["x_offset"] = xs.name, xs.offset
        elif x_out is not None:
            q["x_out"] = x_out.id if isinstance(x_out, Vector) else str(x_out)
        if isinstance(x0, Vector):
            q["x0"] = x0.id
        path = f"/v1/matrices/{m.id}/solve"
        if isinstance(b, Vector):  # b stays on the daemon: the JSON route, x still binary
            if xs is not None:
                raise TypeError("with x in a region, b is an array or in a region, not a resident Vector")
            return self._solve_send(path, n, 1, dt, as_job, wait, progress, timeout,
                                    json_body=_solve_json(b, x0, q, as_job),
                                    headers={"Accept": "application/octet-stream"})
        parts = []
        if bs is not None:  # b's k columns in a region: the body is x0 alone, or empty
            k = 1 if k is None else int(k)
            if not 1 <= k <= 64:
                raise ValueError(f"k must be in 1..64, not {k}")
            q["b_shm"], q["b_offset"] = bs.name, bs.offset
        else:
            bv = as_values(b, dt, "b")
            if bv.ndim not in (1, 2) or bv.shape[0] != n or (bv.ndim == 2 and not 1 <= bv.shape[1] <= 64):
                raise ValueError(f"b must be 1-D of length {n} or (n, k) with k in 1..64, not {bv.shape}")
            if k is not None and k != (1 if bv.ndim == 1 else bv.shape[1]):
                raise ValueError(f"k={k} but b has {1 if bv.ndim == 1 else bv.shape[1]} columns")
            k = 1 if bv.ndim == 1 else bv.shape[1]
            parts.append(np.asfortranarray(bv))
        shape = (n,) if k == 1 else (n, k)
        if x0 is not None and not isinstance(x0, Vector):
            xa = as_values(x0, dt, "x0")
            if xa.shape != shape:
                raise ValueError(f"x0 must have b's shape {shape}, not {xa.shape}")
            parts.append(np.asfortranarray(xa))
            q["x0"] = "body"
        body = b"" if not parts else _http.as_buffer(
            parts[0] if len(parts) == 1 else np.concatenate([p.reshape(-1, order="F") for p in parts]))
        q.update({"k": k if k > 1 else None, "async": True if as_job else None,
                  "history": None if as_job or xs is not None else True})  # x in a region: a JSON answer
        res = self._solve_send(path, n, k, dt, as_job, wait, progress, timeout, params=q, data=body,
                               headers={"Content-Type": "application/octet-stream"})
        if xs is not None and isinstance(res, SolveResult):  # x where the daemon wrote it
            res.x = xs.view(dt.newbyteorder("="), shape)
            for c, col in enumerate(res.columns):
                col.x = res.x[:, c]
        return res

    def _solve_post(self, path: str, **kw: Any) -> _http.Response:
        try:
            return self.request("POST", path, **kw)
        except errors.NotFound as e:
            if "no route" in e.message:
                raise errors.Unsupported("no_solve", "this daemon has no /solve route (it predates resident "
                                         "vectors and solvers): use scipy.sparse.linalg.cg(RemoteMatrix, b)") from e
            raise

    def _solve_send(self, path: str, n: int, k: int, dt: np.dtype, as_job: bool, wait: bool, progress: Any,
                    timeout: Optional[float], **post: Any) -> Any:
        """Posts the solve; a binary answer's x (n, k) and residual histories go straight into new arrays."""
        got: Dict[str, Any] = {}

        def into(status: int, headers: Any) -> Optional[List[memoryview]]:
            rep = headers.get("X-SpMV-Solve")
            if status != 200 or not rep:
                return None
            got["report"] = report = json.loads(rep)
            cols = report.get("columns") or [report]
            got["x"] = np.empty((n, k), dtype=dt, order="F")
            got["hist"] = np.empty(sum(int(c.get("residual_history_len", 0)) for c in cols), dtype="<f8")
            return [memoryview(got["x"].reshape(-1, order="F")).cast("B"), memoryview(got["hist"]).cast("B")]
        r = self._solve_post(path, ok=(202,) if as_job else (200,), into=None if as_job else into, **post)
        if as_job or not r.received_into:
            return self._solve_answer(r, n, dt, as_job, wait, progress, timeout)
        x = got["x"].astype(dt.newbyteorder("="), copy=False)
        return _solve_result(got["report"], x if k > 1 else x[:, 0], got["hist"])

    def _solve_answer(self, r: _http.Response, n: int, dt: np.dtype, as_job: bool, wait: bool, progress: Any,
                      timeout: Optional[float]) -> Any:
        """A JSON answer, or the job's (waited for unless wait=False), as a SolveResult."""
        if as_job:
            job_id = r.json()["id"]
            if not wait:
                return job_id
            res = self.wait(job_id, progress=progress, timeout=timeout)["result"]
        else:
            res = r.json()
        rx = res.get("x")  # numbers, k lists of numbers, or {"vector": id} when x went into x_out
        x = None
        if isinstance(rx, list):
            cols = rx if rx and isinstance(rx[0], list) else [rx]
            x = np.asarray([[_number(v) for v in c] for c in cols], dtype=np.float64).T.astype(dt.newbyteorder("="))
            x = x[:, 0] if not (rx and isinstance(rx[0], list)) else np.asfortranarray(x)
        return _solve_result(res, x, None)


def _solve_json(b: Any, x0: Any, q: Mapping[str, Any], as_job: bool) -> Dict[str, Any]:
    """The JSON body of a solve whose b is a resident Vector (x0 a Vector or values)."""
    body: Dict[str, Any] = {k: v for k, v in q.items() if v is not None and k not in ("x_out", "x0", "tol")}
    if q.get("tol") is not None:
        body["tol"] = float(q["tol"])
    body["b"] = {"vector": b.id}
    if q.get("x_out"):
        body["x_out"] = {"vector": q["x_out"]}
    if q.get("x0"):
        body["x0"] = {"vector": q["x0"]}
    elif x0 is not None:
        body["x0"] = _json_values(as_values(x0, np.dtype("<f8"), "x0"))
    body["async" if as_job else "history"] = True
    return body


def _solve_result(rep: Mapping[str, Any], x: Optional[np.ndarray], hist: Optional[np.ndarray]) -> SolveResult:
    """A SolveResult from a report, x and (binary answers) the histories that followed x."""
    cols = rep.get("columns")
    if not cols:
        return SolveResult.from_report(rep, x, None if hist is None else hist.tolist())
    results, at = [], 0
    for c, col in enumerate(cols):
        h = None
        if hist is not None:
            h = hist[at:at + int(col.get("residual_history_len", 0))].tolist()
            at += len(h)
        results.append(SolveResult.from_report(col, None if x is None else x[:, c], h))
    whole = SolveResult.from_report(rep, x, [])
    whole.columns = results
    return whole


# ---------------------------------------------------------------- helpers

def _id(ref: Any) -> str:
    """The id of a matrix, vector or job reference (object with ``id``, descriptor dict, or string)."""
    if isinstance(ref, str):
        return ref
    if isinstance(ref, Mapping):
        return str(ref["id"])
    if hasattr(ref, "id"):
        return str(ref.id)
    raise TypeError(f"expected an id, a descriptor or an object with .id, not {type(ref).__name__}")


def _step(s: Mapping[str, Any]) -> Dict[str, Any]:
    """An ops step with Vector / RemoteMatrix operands replaced by their ids."""
    out: Dict[str, Any] = {}
    for k, v in s.items():
        out[k] = v if isinstance(v, (int, float, str, bool)) or v is None else _id(v)
    return out


def _coo_from_arrays(row: Any, col: Any, val: Any, shape: Tuple[int, int]) -> Any:
    """Checks COO arrays and returns a light object with row, col, data, shape (no SciPy needed)."""
    r, c, v = np.asarray(row), np.asarray(col), np.asarray(val)
    if r.ndim != 1 or c.ndim != 1 or v.ndim != 1 or not (len(r) == len(c) == len(v)):
        raise ValueError(f"row, col and val must be 1-D of one length, not {r.shape}, {c.shape}, {v.shape}")
    if r.dtype.kind not in "iu" or c.dtype.kind not in "iu":
        raise TypeError(f"row and col must be integer arrays, not {r.dtype} and {c.dtype}")
    nr, nc = int(shape[0]), int(shape[1])
    if nr < 1 or nc < 1:
        raise ValueError(f"shape {shape} must be positive")
    if len(r) and (r.min() < 0 or r.max() >= nr or c.min() < 0 or c.max() >= nc):
        raise ValueError(f"an index is out of range for shape {shape} (indices are 0-based)")
    as_values(v, np.dtype("<f8"), "val")  # the dtype rules, raising on complex or objects

    class _Coo:
        pass
    coo = _Coo()
    coo.row, coo.col, coo.data, coo.shape = r, c, v, (nr, nc)  # type: ignore[attr-defined]
    return coo


def _dtype_name(dtype: Any) -> Optional[str]:
    """float64/float32 for those dtypes, None for others (the daemon's default applies)."""
    if dtype.kind == "c":
        raise TypeError(f"the matrix is complex ({dtype}); spmvd holds real float64/float32 values")
    if dtype.kind not in "fiub":
        raise TypeError(f"the matrix has dtype {dtype}; spmvd takes real numbers")
    return {"f8": "float64", "f4": "float32"}.get(f"{dtype.kind}{dtype.itemsize}")


def _npz_dtype(path: str) -> Optional[str]:
    """The value dtype of a .npz file, from its data.npy header alone (nothing else is read)."""
    import zipfile
    try:
        with zipfile.ZipFile(path) as z, z.open("data.npy") as f:
            read = {(1, 0): np.lib.format.read_array_header_1_0,
                    (2, 0): np.lib.format.read_array_header_2_0}.get(np.lib.format.read_magic(f))
            if read is None:
                return None  # a newer .npy version: the daemon reads it and the dtype defaults
            dtype = read(f)[2]
    except (KeyError, ValueError, OSError, zipfile.BadZipFile):
        return None  # the daemon reads it and says what is wrong
    return _dtype_name(dtype)


def _npz_body(coo: Any) -> Tuple[Callable[[], IO[bytes]], Optional[str]]:
    """An uncompressed .npz (CSR) of a COO matrix in a temporary file: (opener, dtype name or None)."""
    import scipy.sparse
    sdtype = _dtype_name(np.asarray(coo.data).dtype)
    a = scipy.sparse.csr_matrix((np.asarray(coo.data), (np.asarray(coo.row), np.asarray(coo.col))),
                                shape=(int(coo.shape[0]), int(coo.shape[1])))
    tmp = tempfile.TemporaryFile()
    scipy.sparse.save_npz(tmp, a, compressed=False)
    tmp.flush()
    fd = tmp.fileno()

    def reopen() -> IO[bytes]:
        # a new descriptor per attempt (the client closes it after the
        # attempt): the temporary file lives as long as this closure
        f = os.fdopen(os.dup(fd), "rb")
        f.seek(0)
        return f
    reopen._tmp = tmp  # type: ignore[attr-defined]
    return reopen, sdtype


if TYPE_CHECKING:  # pragma: no cover - names for type checkers only
    from .matrix import RemoteMatrix  # noqa: F401
    from .shm import SharedArrays  # noqa: F401
    from .vector import Vector  # noqa: F401
