"""BoneMet benchmarks: our batched torch Radon transform and FBP against scikit-image's `radon` / `iradon` on the same
slices and angles, at three sizes.

1. Radon: `bonemet.radon` on a batch of B slices (one call, all angles) vs a loop of `skimage.transform.radon` over
   the slices (`circle=True`); agreement = max relative L2 difference of the sinograms.
2. FBP: `bonemet.fbp` (ramp filter) on the B sinograms vs a loop of `skimage.transform.iradon(circle=True)`;
   agreement = the PSNR difference of the two reconstructions against the ground truth, and their relative L2
   difference.
3. FBP of one slice at a time (what a user reconstructing a volume calls), 90 angles over 180 degrees, N = 64, 128,
   256 in both modes: paired rounds (ours and iradon alternate), CPU seconds of this process, median and quartiles
   of the per-round ratios; agreement = max |ours - iradon| / max |iradon|.
4. SART: 10 sweeps of our `sart` (TV off; its projector a `RadonMatrix` built inside the call, so the timing
   includes building it) vs 10 calls of `skimage.transform.iradon_sart` (one sweep each) on one slice at every size,
   paired rounds; agreement = PSNR of each against the truth (the algorithms differ in ray model and relaxation).

Slices: phantom tibia slices (`simulate_cohort`) of N = 64, 128, 256 pixels, 180 angles over 180 degrees. Every
timing is in CPU seconds of this process (`clock='cpu'`): on a shared machine a call that loses its core for a time
slice would otherwise count the other jobs' time.
Run: python benchmarks/bonemet.py [--quick]   (--quick: N = 32, 64, 128 and fewer slices, about a minute)
"""
import argparse

import numpy as np
import torch

from _timing import Row, paired, spread, table, timed
from iclr25_nb import bonemet as B


def slices(n: int, batch: int) -> np.ndarray:
    "A batch of phantom tibia slices of side n (attenuation), zero outside the inscribed circle."
    c = B.simulate_cohort(1, 1, weeks=2, seed=0, shape=(24, n, n), n_roi=4)
    vols = [m.mu(w) for m in c.mice for w in range(2)]
    out = np.concatenate(vols)[np.linspace(4, 4 * 24 - 5, batch).astype(int)].astype(np.float64)
    y, x = np.mgrid[:n, :n] - n // 2
    out[:, y ** 2 + x ** 2 > (n // 2) ** 2] = 0
    return out


def main(quick: bool = False):
    torch.set_num_threads(1)
    try:
        from skimage.transform import iradon, iradon_sart, radon
    except ImportError as e:
        print(table([Row.skipped('radon', '-', float('nan'), 'scikit-image', e)]))
        return
    sizes = (32, 64, 128) if quick else (64, 128, 256)
    batch = 8 if quick else 16
    theta = np.linspace(0, 180, 180, endpoint=False)
    rows = []
    for n in sizes:
        imgs = slices(n, batch)
        t_ours, s_ours = timed(lambda: B.radon(torch.as_tensor(imgs), theta).numpy(), repeat=3, clock='cpu')
        t_sk, s_sk = timed(lambda: np.stack([radon(im, theta, circle=True) for im in imgs]), repeat=3, clock='cpu')
        rel = np.linalg.norm(s_ours - s_sk) / np.linalg.norm(s_sk)
        rows.append(Row('Radon, batch of slices', f'{batch} x {n}^2, 180 angles', t_ours, t_sk, float(rel),
                        'skimage.radon (loop)'))
        med, ts = paired({'ours': lambda: B.fbp(torch.as_tensor(s_sk), theta).numpy(),
                          'sk': lambda: np.stack([iradon(s, theta, circle=True) for s in s_sk])}, repeat=5, clock='cpu')
        t_ours, t_sk = med['ours'], med['sk']
        r_ours, r_sk = B.fbp(torch.as_tensor(s_sk), theta).numpy(), np.stack([iradon(s, theta, circle=True) for s in s_sk])
        mean_psnr = lambda rec: np.mean([B.psnr(a, g) for a, g in zip(rec, imgs)])
        d_psnr = abs(mean_psnr(r_ours) - mean_psnr(r_sk))
        rel = np.linalg.norm(r_ours - r_sk) / np.linalg.norm(r_sk)
        rows.append(Row('FBP (ramp), batch of slices', f'{batch} x {n}^2, 180 angles', t_ours, t_sk,
                        f'rel L2 {rel:.1e}, |dPSNR| {d_psnr:.1e} dB; ratio {spread(ts, "ours", "sk")}', 'skimage.iradon (loop)'))
    th90 = np.linspace(0, 180, 90, endpoint=False)
    for n in (64, 128, 256):
        sino = radon(slices(n, 1)[0], th90, circle=True)
        med, ts = paired({'ours': lambda: B.fbp(torch.as_tensor(sino), th90).numpy(),
                          'sk': lambda: iradon(sino, th90, circle=True)}, repeat=15, clock='cpu')
        r_ours, r_sk = B.fbp(torch.as_tensor(sino), th90).numpy(), iradon(sino, th90, circle=True)
        agree = float(np.abs(r_ours - r_sk).max() / np.abs(r_sk).max())
        rows.append(Row('FBP (ramp), one slice', f'1 x {n}^2, 90 angles', med['ours'], med['sk'],
                        f'max rel {agree:.1e}; ratio {spread(ts, "ours", "sk")}', 'skimage.iradon'))
    sparse = theta[::12]
    for n in sizes:
        img = slices(n, 1)[0]
        sino = radon(img, sparse, circle=True)

        def ours_sart():
            return B.sart(torch.as_tensor(sino), sparse, n_iter=10, tv_weight=0.0,
                          x0=torch.zeros(n, n, dtype=torch.float64)).numpy()

        def sk_sart():
            x = None
            for _ in range(10): x = iradon_sart(sino, sparse, image=x)
            return x
        med, ts = paired({'ours': ours_sart, 'sk': sk_sart}, repeat=7 if n < 256 else 3, clock='cpu')
        x_ours, x_sk = ours_sart(), sk_sart()
        rows.append(Row('SART, 10 sweeps, 15 angles', f'1 x {n}^2', med['ours'], med['sk'],
                        f'PSNR ours {B.psnr(x_ours, img):.1f} / skimage {B.psnr(x_sk, img):.1f} dB; '
                        f'ratio {spread(ts, "ours", "sk")}', 'skimage.iradon_sart'))
    print(table(rows, 'BoneMet: ours vs scikit-image (one torch thread, CPU seconds; ratio: median [quartiles] of paired rounds)'))


if __name__ == '__main__':
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--quick', action='store_true')
    main(p.parse_args().quick)
