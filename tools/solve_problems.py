"""solve_problems.py — the matrices `make bench-solve` solves, built here, seeded.

Three problems people really solve (issue 29's benchmark):

  poisson3d(n)        the 7-point Laplacian on an n^3 grid, Dirichlet
                      boundary (n^3 rows);
  fv_diffusion(n)     cell-centred finite volumes for -div(k grad u) = f on
                      an n^3 grid, k log-normal (exp of a Gaussian field of
                      standard deviation sigma, smoothed over `corr` cells so
                      it has structure), harmonic-mean face
                      transmissibilities, Dirichlet faces at x = 0 and x = 1;
                      every value distinct (n^3 rows, 7 entries a row);
  elasticity_p2(n)    3-D linear elasticity of a 2 x 1 x 1 beam with P2
                      tetrahedra, assembled by scikit-fem, clamped at x = 0;
                      returns the matrix and the coordinates of each node's
                      three dofs (interleaved: x y z of node i at rows 3i..3i+2),
                      from which the rigid-body modes follow.

And for issue 30's realistic benchmark set (tools/bench_realistic.py):

  p1_poisson_disk(r)  P1 Poisson on scikit-fem's unstructured triangulation
                      of the unit disk refined r times (its own node order),
                      Dirichlet boundary kept as identity rows;
  convection_diffusion(n, peclet)  the 7-point upwind discretisation of
                      -lap u + v . grad u on an n^3 grid with a rotating
                      velocity field v (non-symmetric), Dirichlet boundary.

Each returns a scipy.sparse CSR (float64) with sorted indices. NumPy and
SciPy only, but elasticity_p2 (scikit-fem, a PyPI package carried as a
wheel to the GPU host).
"""
import numpy as np
import scipy.sparse as sp


def poisson3d(n):
    one = sp.diags([-np.ones(n - 1), 2 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1], format="csr")
    eye = sp.identity(n, format="csr")
    a = sp.kron(sp.kron(one, eye), eye) + sp.kron(sp.kron(eye, one), eye) + sp.kron(sp.kron(eye, eye), one)
    a = a.tocsr()
    a.sort_indices()
    return a


def _smooth(g, corr):
    """A box filter of width corr along each axis (periodic), renormalised."""
    for ax in range(3):
        acc = np.zeros_like(g)
        for s in range(-(corr // 2), corr - corr // 2):
            acc += np.roll(g, s, axis=ax)
        g = acc / corr
    return g / g.std()


def permeability(n, sigma=2.0, corr=3, seed=1):
    g = np.random.default_rng(seed).standard_normal((n, n, n))
    if corr > 1:
        g = _smooth(g, corr)
    return np.exp(sigma * g)


def fv_diffusion(n, sigma=2.0, corr=3, seed=1):
    k = permeability(n, sigma, corr, seed)
    N = n ** 3
    idx = np.arange(N, dtype=np.int64).reshape(n, n, n)
    rows, cols, vals = [], [], []
    diag = np.zeros(N)
    for ax in range(3):
        lo = [slice(None)] * 3
        hi = [slice(None)] * 3
        lo[ax] = slice(0, n - 1)
        hi[ax] = slice(1, n)
        k1, k2 = k[tuple(lo)].ravel(), k[tuple(hi)].ravel()
        t = 2 * k1 * k2 / (k1 + k2)
        i1, i2 = idx[tuple(lo)].ravel(), idx[tuple(hi)].ravel()
        rows += [i1, i2]
        cols += [i2, i1]
        vals += [-t, -t]
        np.add.at(diag, i1, t)
        np.add.at(diag, i2, t)
    for face in (0, -1):  # Dirichlet at x = 0 and x = 1: half a cell to the boundary
        cells = idx[face, :, :].ravel()
        np.add.at(diag, cells, 2 * k[face, :, :].ravel())
    rows.append(np.arange(N))
    cols.append(np.arange(N))
    vals.append(diag)
    a = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(N, N))
    a.sum_duplicates()
    a.sort_indices()
    return a


def elasticity_p2(n, young=1e3, poisson=0.3):
    import skfem
    from skfem.models.elasticity import lame_parameters, linear_elasticity
    m = skfem.MeshTet.init_tensor(np.linspace(0, 2, 2 * n + 1), np.linspace(0, 1, n + 1), np.linspace(0, 1, n + 1))
    basis = skfem.Basis(m, skfem.ElementVector(skfem.ElementTetP2()))
    k = skfem.asm(linear_elasticity(*lame_parameters(young, poisson)), basis)
    clamped = basis.get_dofs(lambda x: np.isclose(x[0], 0.0)).all()
    keep = basis.complement_dofs(clamped)
    a = k[keep][:, keep].tocsr()
    a.sort_indices()
    xyz = basis.doflocs[:, keep].T[0::3]  # the dofs come in x, y, z triples per node
    return a, np.ascontiguousarray(xyz)


def p1_poisson_disk(r):
    import skfem
    from skfem.models.poisson import laplace
    m = skfem.MeshTri.init_circle(r)
    basis = skfem.Basis(m, skfem.ElementTriP1())
    a = skfem.asm(laplace, basis).tocsr()
    bnd = basis.get_dofs().all()
    keep = np.ones(a.shape[0], bool)
    keep[bnd] = False
    d = sp.diags(keep.astype(float))
    a = (d @ a @ d + sp.diags((~keep).astype(float))).tocsr()  # boundary rows and columns: identity
    a.eliminate_zeros()
    a.sort_indices()
    return a


def convection_diffusion(n, peclet=50.0):
    N = n ** 3
    h = 1.0 / (n + 1)
    c = (np.arange(n) + 1) * h - 0.5
    x, y, _ = np.meshgrid(c, c, c, indexing="ij")
    vel = [-peclet * y, peclet * x, np.full_like(x, 0.2 * peclet)]  # a rotation about z, and a drift along it
    idx = np.arange(N, dtype=np.int64).reshape(n, n, n)
    diag = np.full(N, 6.0 / h ** 2)
    rows, cols, vals = [], [], []
    for ax in range(3):
        v = vel[ax].ravel()
        up = np.maximum(v, 0) / h  # upwind: the neighbour the flow comes from
        dn = np.maximum(-v, 0) / h
        diag += up + dn
        for shift, w in ((-1, up), (1, dn)):
            src = [slice(None)] * 3
            dst = [slice(None)] * 3
            src[ax] = slice(1, n) if shift == -1 else slice(0, n - 1)
            dst[ax] = slice(0, n - 1) if shift == -1 else slice(1, n)
            i, j = idx[tuple(src)].ravel(), idx[tuple(dst)].ravel()
            rows.append(i)
            cols.append(j)
            vals.append(-1.0 / h ** 2 - w[i])
    rows.append(np.arange(N))
    cols.append(np.arange(N))
    vals.append(diag)
    a = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(N, N))
    a.sort_indices()
    return a


def rigid_body_modes(xyz):
    """The six rigid-body modes at nodes xyz (n x 3): 3n x 6, column-major
    order of engine/amg.c spmv_amg_rigid_body."""
    n = xyz.shape[0]
    b = np.zeros((3 * n, 6))
    b[0::3, 0] = b[1::3, 1] = b[2::3, 2] = 1.0
    x, y, z = xyz[:, 0], xyz[:, 1], xyz[:, 2]
    b[0::3, 3], b[1::3, 3] = -y, x
    b[1::3, 4], b[2::3, 4] = -z, y
    b[0::3, 5], b[2::3, 5] = z, -x
    return b


def save_npz(path, a):
    sp.save_npz(path, a.tocsr(), compressed=False)
