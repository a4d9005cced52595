"""The faster kernels of issue 47 agree with the implementations they replaced (kept here as references), and with the
peers where the peers compute the same thing: bonemet's back-projection/FBP, fengbo's Clifford convolution,
noisy_trajectories' causal OT fit."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F


# ---- bonemet: the grid_sample back-projection and complex-FFT FBP before issue 47 ----
def _backproject_grid(q, angles, weights=None, size=None, chunk=64):
    q = torch.as_tensor(q)
    m, A = q.shape[-2], q.shape[-1]
    n = m if size is None else int(size)
    th = torch.deg2rad(torch.as_tensor(np.asarray(angles), dtype=q.dtype).reshape(-1))
    w = torch.ones(A, dtype=q.dtype) if weights is None else torch.as_tensor(weights, dtype=q.dtype)
    c = n // 2
    p = torch.arange(n, dtype=q.dtype) - c
    xr, yc = torch.meshgrid(p, p, indexing='ij')
    flat = q.reshape(-1, 1, m, A).transpose(-1, -2)
    out = torch.zeros(flat.shape[0], n * n, dtype=q.dtype)
    for a0 in range(0, A, chunk):
        a1 = min(a0 + chunk, A)
        cos, sin = torch.cos(th[a0:a1])[:, None], torch.sin(th[a0:a1])[:, None]
        pos = yc.reshape(1, -1) * cos - xr.reshape(1, -1) * sin + m // 2
        rows = torch.arange(a0, a1, dtype=q.dtype)[:, None].expand_as(pos)
        gx = 2 * pos / (m - 1) - 1
        gy = 2 * rows / (A - 1) - 1 if A > 1 else torch.zeros_like(pos)
        grid = torch.stack([gx, gy], -1)[None].expand(flat.shape[0], -1, -1, -1)
        vals = F.grid_sample(flat, grid, mode='bilinear', padding_mode='zeros', align_corners=True)[:, 0]
        inside = ((pos >= 0) & (pos <= m - 1)).to(q.dtype)
        out = out + (vals * (inside * w[a0:a1, None])[None]).sum(1)
    out = out.reshape(-1, n, n) * ((xr ** 2 + yc ** 2) <= c ** 2)
    return out.reshape(*q.shape[:-2], n, n)


def _fbp_before(g, angles, filter='ramp'):
    from iclr25_nb.bonemet import angle_weights, ramp_filter
    n = g.shape[-2]
    diag = int(np.ceil(np.sqrt(2) * n))
    before = diag // 2 - n // 2
    g = F.pad(g.transpose(-1, -2), (before, diag - n - before))
    size = max(64, int(2 ** math.ceil(math.log2(2 * diag))))
    G = torch.fft.fft(F.pad(g, (0, size - diag)), dim=-1)
    q = torch.fft.ifft(G * ramp_filter(size, filter, g.dtype), dim=-1).real[..., :diag]
    return _backproject_grid(q.transpose(-1, -2), angles, torch.as_tensor(angle_weights(angles) / 2, dtype=g.dtype), n)


def _rel(a, b): return float((a - b).abs().max() / b.abs().max())


@pytest.mark.parametrize('n', [31, 64, 97])
def test_bonemet_fbp_agrees_with_the_grid_sample_version(n):
    from iclr25_nb.bonemet import fbp
    g = torch.Generator().manual_seed(n)
    for A, filt in ((90, 'ramp'), (17, 'shepp-logan'), (40, 'hann'), (1, 'cosine')):
        th = np.linspace(0, 180, A, endpoint=False) + (3.3 if A == 1 else 0)
        s = torch.rand(2, 3, n, A, generator=g, dtype=torch.float64)            # a (2, 3) batch of sinograms
        assert _rel(fbp(s, th, filt), _fbp_before(s, th, filt)) < 1e-11
        assert _rel(fbp(s[0, 1], th, filt), _fbp_before(s[0, 1], th, filt)) < 1e-11
        s32 = s[0, 0].float()
        assert _rel(fbp(s32, th, filt), _fbp_before(s32, th, filt)) < 1e-4


def test_bonemet_backproject_general_path_and_gradient():
    "Pixels projecting outside [0, M-1] (size > M) read zero as before; the autograd path gives the same values."
    from iclr25_nb.bonemet import backproject
    q = torch.randn(3, 40, 25, dtype=torch.float64)
    th, w = np.sort(np.random.default_rng(0).uniform(0, 360, 25)), torch.rand(25, dtype=torch.float64)
    for size in (40, 41, 64, 80):
        assert _rel(backproject(q, th, w, size, chunk=1000), _backproject_grid(q, th, w, size)) < 1e-11
    qg = q.clone().requires_grad_(True)
    out = backproject(qg, th, w, 64)
    assert out.requires_grad and _rel(out.detach(), backproject(q, th, w, 64)) < 1e-13
    (gq,) = torch.autograd.grad((out * out.detach()).sum(), qg)
    qr = q.clone().requires_grad_(True)
    (gr,) = torch.autograd.grad((_backproject_grid(qr, th, w, 64) * out.detach()).sum(), qr)
    assert _rel(gq, gr) < 1e-9


def test_bonemet_fbp_matches_iradon_closely():
    "With uniform angles over 180 degrees and the ramp filter, the FBP is scikit-image's iradon to rounding."
    sk = pytest.importorskip('skimage.transform')
    from iclr25_nb.bonemet import fbp
    for n in (64, 65):
        s = np.random.default_rng(n).random((n, 90))
        th = np.linspace(0, 180, 90, endpoint=False)
        r_sk = sk.iradon(s, th, circle=True)
        assert np.abs(fbp(torch.as_tensor(s), th).numpy() - r_sk).max() / np.abs(r_sk).max() < 1e-11


# ---- noisy_trajectories: the numpy block products before issue 47 ----
def test_noisy_trajectories_block_products_agree_with_numpy():
    from iclr25_nb import noisy_trajectories as NT
    rng = np.random.default_rng(0)
    T, N = 6, 5
    def gp():
        W = rng.standard_normal((T * N, T * N)) / math.sqrt(T * N)
        return NT.GaussianProcessSummary(rng.standard_normal((T, N)), W @ W.T + 0.1 * np.eye(T * N), check=False)
    x, y = gp(), gp()
    for metric in ('causal', 'ssd', 'w2'):
        al = NT.AlternatingAligner(x, y, metric)
        Q = np.linalg.qr(rng.standard_normal((N, N)))[0]
        K = np.stack([(Q.T @ X_b).reshape(-1, al.nb).T @ Y_b.reshape(-1, al.nb) for X_b, Y_b in zip(al.X, al.Y)])
        U, S, Vt = np.linalg.svd(K)
        obj, _, P = al.evaluate(Q)
        np.testing.assert_allclose(np.sort(NT._block_nuclear(al.X, al.Y, al.nb, Q, compute_uv=False), -1), np.sort(S, -1),
                                   rtol=1e-12, atol=1e-12)
        M = sum(X_b @ (Y_b.reshape(-1, al.nb) @ P_b).reshape(Y_b.shape).T for X_b, Y_b, P_b in zip(al.X, al.Y, P))
        np.testing.assert_allclose(al.update(Q, P), NT._align(al.mm + M, 'orth'), rtol=1e-10, atol=1e-10)
        if metric == 'causal':                                   # N·T = 30: the padded stack; the block path agrees
            assert al._stack is not None
            blocks = NT.AlternatingAligner(x, y, metric); blocks._stack = None
            o2, _, P2 = blocks.evaluate(Q)
            assert abs(obj - o2) <= 1e-12 * max(1.0, o2)
            np.testing.assert_allclose(blocks.update(Q, P2), al.update(Q, P), rtol=1e-10, atol=1e-10)
            r1, r2 = al.fit(max_iter=300), blocks.fit(max_iter=300)
            assert abs(r1.squared - r2.squared) <= 1e-9 * max(1.0, r2.squared)
