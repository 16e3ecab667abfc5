"""sparse_util.py — what the e2e checks written with NumPy and SciPy share
(names_check.py, values_check.py): a matrix as the bytes of an .npz
upload, and the content hash docs/api.md defines."""
import hashlib
import io

import numpy as np
import scipy.sparse as sp


def npz(A):
    """The bytes of scipy.sparse.save_npz(A as CSR), uncompressed."""
    f = io.BytesIO()
    sp.save_npz(f, A.tocsr(), compressed=False)
    return f.getvalue()


def sha256(A, dtype):
    """docs/api.md's definition: rows, cols (int64), indptr (int64), indices (int32), data (dtype), canonical CSR."""
    A = A.tocsr()
    A.sum_duplicates()
    A.sort_indices()
    h = hashlib.sha256(np.array(A.shape, "<i8").tobytes())
    for a in (A.indptr.astype("<i8"), A.indices.astype("<i4"), A.data.astype(dtype)):
        h.update(a.tobytes())
    return h.hexdigest()
