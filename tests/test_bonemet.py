"BoneMet: Radon/FBP against scikit-image, adjointness, closed forms, registration, morphometry, data API, bad input."
import numpy as np
import pytest
import torch

from iclr25_nb.core import overlap_count
from iclr25_nb.bonemet import (COMPONENTS, PAPER_ANGLES, RECORDS, BoneMetDataset, CTRegistration, ReconCTSegmentation,
                               RoICompositeCropper, angle_weights, bone_volume, compose_rigid, cortical_thickness,
                               download, find_tf_junction, fbp, load_records, make_composite, mkcomposite, pmoi, psnr,
                               radon, radon_adjoint, read_png, read_stack, rigid_register, rigid_warp, sart,
                               simulate_cohort, sparse_angles, trabecular_number, write_dataset, write_stack,
                               make_mouse, make_experiment, stump_accuracy, logistic_fit, logistic_predict,
                               prognosis_cv, mouse_ids)


@pytest.fixture(scope='module')
def cohort():
    return simulate_cohort(2, 2, weeks=4, seed=1)


@pytest.fixture(scope='module')
def tree(tmp_path_factory, cohort):
    root = tmp_path_factory.mktemp('bonemet')
    return write_dataset(cohort, root, mice=[0, 2], weeks=[0, 1, 3], n_proj=3)


def _disk_image(n=64):
    y, x = np.mgrid[:n, :n] - n // 2
    img = np.zeros((n, n))
    img[(y - 5) ** 2 + (x + 8) ** 2 <= 100] = 1.0
    img[(y + 10) ** 2 + x ** 2 <= 30] = 0.5
    img[y ** 2 + x ** 2 > (n // 2) ** 2] = 0
    return img


def test_radon_and_fbp_match_scikit_image():
    sk = pytest.importorskip('skimage.transform')
    img = _disk_image()
    for theta in (np.linspace(0, 180, 90, endpoint=False), np.linspace(0, 180, 17, endpoint=False)):
        s_sk = sk.radon(img, theta, circle=True)
        s = radon(torch.tensor(img), theta).numpy()
        assert np.linalg.norm(s - s_sk) / np.linalg.norm(s_sk) < 1e-10
        for filt in ('ramp', 'shepp-logan', 'hann'):
            r_sk = sk.iradon(s_sk, theta, circle=True, filter_name=filt)
            r = fbp(torch.tensor(s_sk), theta, filt).numpy()
            assert np.linalg.norm(r - r_sk) / np.linalg.norm(r_sk) < 1e-2


def test_radon_adjoint_and_linearity():
    th = np.linspace(0, 180, 31, endpoint=False)
    f, g = torch.randn(3, 32, 32, dtype=torch.float64), torch.randn(3, 32, 31, dtype=torch.float64)
    lhs, rhs = float((radon(f, th) * g).sum()), float((f * radon_adjoint(g, th)).sum())
    assert abs(lhs - rhs) < 1e-9 * abs(lhs) + 1e-9
    h = torch.randn(3, 32, 32, dtype=torch.float64)
    torch.testing.assert_close(radon(2 * f - 3 * h, th), 2 * radon(f, th) - 3 * radon(h, th))


def test_disk_projection_closed_form_and_mass():
    n, r = 129, 30.0
    y, x = np.mgrid[:n, :n] - n // 2
    fine = 4                                                    # supersampled disk: pixel = area fraction
    yy, xx = np.mgrid[:n * fine, :n * fine] / fine - n // 2 + (1 / fine - 1) / 2
    disk = ((yy ** 2 + xx ** 2) <= r ** 2).reshape(n, fine, n, fine).mean((1, 3))
    s = radon(torch.tensor(disk), [0.0, 37.0, 90.0]).numpy()
    t = np.arange(n) - n // 2
    expected = 2 * np.sqrt(np.clip(r ** 2 - t ** 2, 0, None))
    inner = np.abs(t) < r - 2
    assert np.abs(s[inner] - expected[inner, None]).max() < 0.6
    np.testing.assert_allclose(s.sum(0), disk.sum(), rtol=1e-3)


def test_point_traces_a_sinusoid():
    n = 65
    img = np.zeros((n, n)); img[32 - 10, 32 + 6] = 1.0          # row offset -10, column offset +6
    th = np.arange(0, 180, 15.0)
    s = radon(torch.tensor(img), th).numpy()
    peak = (s * np.arange(n)[:, None]).sum(0) / s.sum(0) - n // 2
    # scikit-image's convention: a point at column offset X and row offset Y projects to s = X cos(theta) - Y sin(theta)
    expected = 6 * np.cos(np.deg2rad(th)) - (-10) * np.sin(np.deg2rad(th))
    assert np.abs(peak - expected).max() < 0.3


def test_fourier_slice_theorem():
    img = _disk_image(64)
    p = radon(torch.tensor(img), [0.0]).numpy()[:, 0]
    # angle 0: the projection sums over rows, so its 1D FFT is the k_y = 0 line of the 2D FFT
    np.testing.assert_allclose(np.fft.fft(p), np.fft.fft2(img)[0], atol=1e-9)


def test_fbp_full_angles_accurate_and_short_scan_weights(cohort):
    w = angle_weights(PAPER_ANGLES)
    assert np.isclose(w.sum(), np.pi, rtol=1e-3)                 # every direction once over the 207.2 degree arc
    assert np.isclose(angle_weights(np.linspace(0, 180, 30, endpoint=False)).sum(), np.pi)
    gt = torch.tensor(cohort.mice[0].mu(0)[15])
    a13 = sparse_angles(20)
    assert psnr(fbp(radon(gt, PAPER_ANGLES), PAPER_ANGLES), gt) > psnr(fbp(radon(gt, a13), a13), gt) + 3


def test_sart_tv_improves_on_sparse_fbp(cohort):
    gt = torch.tensor(cohort.mice[1].mu(3)[14])
    a = sparse_angles(20)
    s = radon(gt, a)
    assert psnr(sart(s, a), gt) > psnr(fbp(s, a), gt) + 1.0


def test_fbp_is_differentiable():
    s = torch.rand(32, 13, dtype=torch.float64, requires_grad=True)
    a = sparse_angles(20)
    assert torch.autograd.gradcheck(lambda x: fbp(x, a)[10:14, 10:14], (s,), eps=1e-6, atol=1e-6)


def test_registration_recovers_rigid_transforms(cohort):
    fixed = torch.tensor(np.pad(cohort.mice[2].mu(0)[4:28], ((0, 0), (6, 6), (6, 6))))
    rng = np.random.default_rng(0)
    for _ in range(1):
        truth = {'angle': float(np.deg2rad(rng.uniform(-8, 8))), 'shift': rng.uniform(-2, 2, 3).tolist()}
        moving = rigid_warp(fixed, truth['angle'], torch.tensor(truth['shift']))
        fit = rigid_register(moving, fixed)
        ident = compose_rigid(truth, fit)
        assert abs(np.rad2deg(ident['angle'])) < 1 and np.abs(ident['shift']).max() < 1
    same = rigid_register(fixed, fixed)                         # identity in, identity out
    assert abs(same['angle']) < np.deg2rad(0.5) and np.abs(same['shift']).max() < 0.5


def test_registration_inverse_composes_to_identity(cohort):
    a = torch.tensor(np.pad(cohort.mice[3].mu(0)[4:28], ((0, 0), (6, 6), (6, 6))))
    b = rigid_warp(a, np.deg2rad(5.0), torch.tensor([0.5, 1.5, -1.0]))
    ab, ba = rigid_register(a, b), rigid_register(b, a)
    ident = compose_rigid(ab, ba)
    assert abs(np.rad2deg(ident['angle'])) < 1 and np.abs(ident['shift']).max() < 1


def test_morphometry_closed_forms():
    z, y, x = np.mgrid[:8, :81, :81] - np.array([0, 40, 40])[:, None, None, None]
    r = np.sqrt(y ** 2 + x ** 2)
    v = 0.02
    assert abs(bone_volume(r <= 20, v) / (np.pi * 400 * 8 * v ** 3) - 1) < 0.02
    for wall in (3, 4, 6):
        assert abs(cortical_thickness((r <= 25) & (r > 25 - wall), 1.0) - wall) <= 1.0
    ann = (r <= 30.5) & (r > 20.5)
    assert abs(pmoi(ann, v) / (np.pi / 2 * ((30.5 * v) ** 4 - (20.5 * v) ** 4)) - 1) < 0.02
    plates = np.zeros((30, 10, 10), bool); plates[::6] = True
    assert np.isclose(trabecular_number(plates, v, axes=(0,)), 1 / (6 * v))


def test_composite_counts_and_identity(cohort):
    m = cohort.mice[0]
    a, b = m.bone[0], m.bone[3]
    c = make_composite(a, b)
    assert ((c == 1) | (c == 3)).sum() == a.sum() and ((c == 1) | (c == 2)).sum() == b.sum()
    assert not ((c == 2) & (c == 3)).any()
    c0 = make_composite(a, a)
    assert not np.isin(c0, (2, 3)).any()
    with pytest.raises(ValueError, match='shapes'): make_composite(a, b[:-1])


def test_junction_detection_and_roi_crop(cohort, tmp_path):
    for m in cohort.mice: assert abs(find_tf_junction(m.bone[0]) - m.tf_z) <= 1
    m = cohort.mice[0]
    lut = np.array([0, 170, 255, 85], np.uint8)
    write_stack(tmp_path / 'comp', 'composite_', lut[make_composite(m.bone[0], m.bone[3])])
    crop = RoICompositeCropper({'foldername': str(tmp_path / 'comp'), 'n_roi': 12})
    tf, roi = crop.crop_roi(tmp_path / 'comp', tmp_path / 'roi')
    assert abs(tf - m.tf_z) <= 1 and roi.shape[0] == 12
    assert len(read_stack(tmp_path / 'roi', 'ROI_ct_')) == 12


def test_phantom_longitudinal_and_reproducible(cohort):
    roi = [cohort.mice[i].bone[:, cohort.roi(i)].sum((1, 2, 3)) for i in range(4)]
    assert np.all(np.diff(roi[0]) <= 0.01 * roi[0][0]) and roi[0][-1] < roi[0][0]     # tumour: bone lost
    assert abs(roi[2][-1] / roi[2][0] - 1) < 0.05                                       # control: about flat
    again = simulate_cohort(2, 2, weeks=4, seed=1)
    assert all(np.array_equal(a.bone, b.bone) for a, b in zip(again.mice, cohort.mice))
    ablated = simulate_cohort(2, 2, weeks=4, seed=1, lesions=False)
    assert ablated.mice[0].lesion is None


def test_time_frame_filter_every_component(tree, cohort):
    for comp in COMPONENTS:
        for weeks in ([0], [1, 3], [0, 1, 3], [2]):
            ds = BoneMetDataset(tree, comp, weeks=weeks, side=None)
            assert {it[2] for it in ds.items} == set(weeks) - {2}
        m2 = cohort.mice[2].id
        ds = BoneMetDataset(tree, comp, mice=[m2], side='left')
        assert ds.mice == [m2] and all(it[1] in ('left', None) for it in ds.items)


def test_dataset_items_and_records(tree, cohort):
    ds = BoneMetDataset(tree, 'roi_ct', weeks=[3])
    item = ds[0]
    assert item['image'].shape == (cohort.n_roi, 48, 48) and set(np.unique(item['image'].numpy())) <= {0, 1, 2, 3}
    ids = {cohort.mice[i].id: cohort.mice[i].tumor for i in (0, 2)}
    assert [it['label'] for it in (ds[0], ds[1])] == [int(ids[m]) for m in sorted(ids)]
    rows = load_records(tree / RECORDS)
    assert {(r['mouse_id'], r['week']) for r in rows} == {(m, w) for m in ids for w in (0, 1, 3)}


def test_segmentation_and_registration_apis(tree, cohort):
    seg = ReconCTSegmentation({'week': 1, 'masterfolder': tree / 'Imagery_Dataset' / COMPONENTS['recon_ct'][0],
                               'masterout': tree / 'seg_out'})
    m0 = cohort.mice[0].id
    assert seg.run() == sorted(str(cohort.mice[i].id) for i in (0, 2))
    assert len(read_stack(tree / 'seg_out' / f'{m0} left tibia' / 'week 1', 'segmented_ct_')) >= 38
    reg = CTRegistration({'workspace': str(tree), 'outputdir': str(tree / 'reg_out'), 'img_z_range': (8, 32),
                          'ref_z_range': (8, 32)})
    src = tree / 'Imagery_Dataset' / COMPONENTS['seg_ct'][0]
    assert len(reg.config['initial_transform_angles']) == 26          # the README's sweep pi i / 16, i in [-16, 10)
    res = reg.batch_register(src, [f'{m0} left tibia'], 1, tree / 'reg_out')
    assert res[f'{m0} left tibia']['ncc'] > 0.8
    assert (tree / 'reg_out' / f'{m0} left tibia' / 'week 1' / 'transform.json').is_file()
    comp = mkcomposite(tree / 'reg_out' / f'{m0} left tibia' / 'week 1',
                       tree / 'Imagery_Dataset' / COMPONENTS['regist_ct'][0] / f'{m0} left tibia' / 'week 1')
    assert np.isin(comp, (1, 2, 3)).any()


def test_bad_input_raises_value_error(tmp_path, tree):
    with pytest.raises(ValueError, match='component'): BoneMetDataset(tree, 'mri')
    with pytest.raises(ValueError, match='is missing'): BoneMetDataset(tmp_path, 'recon_ct')
    bad = tmp_path / 'bad'; bad.mkdir()
    (bad / 'ct_slice_0.PNG').write_bytes(b'\x89PNG\r\n\x1a\n broken')
    with pytest.raises(ValueError, match='ct_slice_0.PNG'): read_png(bad / 'ct_slice_0.PNG')
    with pytest.raises(ValueError, match='no ct_slice_'): read_stack(tmp_path, 'ct_slice_')
    mixed = tmp_path / 'mixed'
    write_stack(mixed, 'ct_slice_', np.zeros((2, 8, 8)))
    from PIL import Image
    Image.fromarray(np.zeros((9, 8), np.uint8)).save(mixed / 'ct_slice_2.PNG')
    with pytest.raises(ValueError, match='differs'): read_stack(mixed, 'ct_slice_')
    rec = tmp_path / 'record.csv'
    rec.write_text('mouse_id,week,group\n1,0,tumor\n2,x,control\n')
    with pytest.raises(ValueError, match='line 3'): load_records(rec)
    rec.write_text('mouse_id,group\n1,tumor\n')
    with pytest.raises(ValueError, match='missing column'): load_records(rec)
    rec.write_text('mouse_id,week,group,bone_volume_mm3\n1,0,tumor,nan\n')
    with pytest.raises(ValueError, match='not finite'): load_records(rec)
    for junk in (bytes(range(128, 256)), b'mouse_id,week,group\n1,0,\xff\xfe\n', b'\x00' * 50):   # issue 48
        rec.write_bytes(junk)
        with pytest.raises(ValueError, match='record.csv'): load_records(rec)
    with pytest.raises(ValueError, match='square'): radon(torch.zeros(4, 5), [0.0])
    with pytest.raises(ValueError, match='angles'): fbp(torch.zeros(8, 3), [0.0, 1.0])
    with pytest.raises(ValueError, match='at least one mouse'): simulate_cohort(0, 0)
    roi = tmp_path / 'roi_bad' / 'Imagery_Dataset' / COMPONENTS['roi_ct'][0] / '5L proximal tibia' / 'week 0'
    write_stack(roi, 'ROI_ct_', np.full((2, 4, 4), 7))
    with pytest.raises(ValueError, match='grey values'): BoneMetDataset(tmp_path / 'roi_bad', 'roi_ct')[0]


def test_downloader_fails_clearly_offline(tmp_path):
    try:
        download(tmp_path, 'roi_ct', mice=[851], weeks=[0], timeout=3)
    except RuntimeError as e:
        assert 'huggingface.co' in str(e) and 'phantom' in str(e)
    else:
        pytest.skip('the hub is reachable here')
    with pytest.raises(ValueError, match='component'): download(tmp_path, 'nope')


def test_registration_agrees_with_simpleitk(cohort):
    "Our rigid model is SimpleITK's Euler3D resampling; SimpleITK's registration, from a coarse start, lands on ours."
    sitk = pytest.importorskip('SimpleITK')
    fixed = torch.tensor(np.pad(cohort.mice[1].mu(0)[4:28], ((0, 0), (6, 6), (6, 6))))
    ang, sh = np.deg2rad(6.0), [0.5, 1.5, -1.0]
    moving = rigid_warp(fixed, ang, torch.tensor(sh))
    Z, Y, X = fixed.shape

    def euler(angle, shift):                    # ITK's (x, y, z) order; our angle turns the other way
        t = sitk.Euler3DTransform(); t.SetCenter(((X - 1) / 2, (Y - 1) / 2, 0.0))
        t.SetRotation(0, 0, -angle); t.SetTranslation((shift[2], shift[1], shift[0]))
        return t
    img = sitk.GetImageFromArray(fixed.numpy().astype(np.float32))
    out = sitk.GetArrayFromImage(sitk.Resample(img, img, euler(ang, sh), sitk.sitkLinear, 0.0))
    assert np.abs(out - moving.numpy())[2:-2, 8:-8, 8:-8].max() < 1e-4
    ours = rigid_register(moving, fixed)
    smooth = lambda a: sitk.SmoothingRecursiveGaussian(sitk.GetImageFromArray(a.numpy().astype(np.float32)), 1.0)
    R = sitk.ImageRegistrationMethod()
    R.SetMetricAsMeanSquares(); R.SetInterpolator(sitk.sitkLinear)
    R.SetOptimizerAsRegularStepGradientDescent(0.5, 1e-6, 500); R.SetOptimizerScalesFromPhysicalShift()
    R.SetInitialTransform(euler(np.deg2rad(np.round(np.rad2deg(ours['angle']) / 2) * 2), np.round(ours['shift'])),
                          inPlace=False)
    p = R.Execute(smooth(fixed), smooth(moving)).GetParameters()
    assert abs(-np.rad2deg(p[2]) - np.rad2deg(ours['angle'])) < 1
    assert np.abs(np.array([p[5], p[4], p[3]]) - ours['shift']).max() < 1


def test_ablation_leaves_no_group_difference():
    "lesions=False: a tumour mouse is the control mouse of the same id, voxel for voxel (no formation-count cue)."
    for i in (101, 102):
        a, b = make_mouse(i, True, 4, lesions=False), make_mouse(i, False, 4)
        assert np.array_equal(a.bone, b.bone) and a.lesion is None
    t = make_mouse(103, True, 6)                      # with lesions on, the tumour mouse loses bone in its lesion
    assert t.lesion_mask[-1].any() and (t.bone[0] & ~t.bone[-1] & t.lesion_mask[-1]).sum() > 20


def test_mouse_ids_say_nothing_about_the_group():
    ids = mouse_ids(48, 0)
    assert sorted(ids) == list(range(100, 148)) and not np.array_equal(ids, np.arange(100, 148))
    c = simulate_cohort(3, 3, weeks=2, seed=0)
    assert [m.id for m in c.mice] == list(mouse_ids(6, 0)) and c.labels.tolist() == [1, 1, 1, 0, 0, 0]


def test_held_out_mice_never_in_training():
    exp = make_experiment('quick', 0, n_tumor=4, n_control=4, size=32, slices=32, n_roi=8, steps=1)
    train, test = exp.train_mice, exp.test_mice
    assert overlap_count(exp.ids[train].tolist(), exp.ids[test].tolist()) == 0
    vols = lambda idx: [exp.cohort.mice[i].bone[0].tobytes() for i in idx]
    assert overlap_count(vols(train), vols(test)) == 0
    assert len(train) + len(test) == 8 and exp.cohort.labels[test].sum() == 2


def test_cheap_cues_and_baselines():
    assert stump_accuracy([1, 2, 3, 4], [0, 0, 1, 1], [0, 5, 2.4, 2.6], [0, 1, 0, 1]) == 1.0
    assert stump_accuracy([1, 2, 3, 4], [1, 1, 0, 0], [0, 5], [1, 0]) == 1.0
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3)); y = (X[:, 0] + 0.5 * X[:, 2] > 0).astype(int)
    assert np.mean(logistic_predict(logistic_fit(X[:60], y[:60]), X[60:]) == y[60:]) > 0.85
    morph = np.abs(rng.normal(1, 0.05, (16, 6, 4)))
    morph[:8, 3:, 0] *= np.linspace(0.9, 0.7, 3)                    # half the mice lose bone from week 3
    res = prognosis_cv(morph, 4, 5)
    assert np.isclose(res['last'], morph[:, 3, 0] / morph[:, 0, 0] - 1).all()
    assert np.sqrt(np.mean((res['scaled_last'] - res['truth']) ** 2)) < np.sqrt(np.mean((res['mean'] - res['truth']) ** 2))


def test_radon_matrix_is_radon_and_sart_uses_it():
    "SART's sparse projector is `radon` and its adjoint to float precision (issue 47: built once per call)."
    from iclr25_nb.bonemet import RadonMatrix, radon, radon_adjoint
    ang = np.linspace(0, 180, 9, endpoint=False)
    op = RadonMatrix(20, ang)
    x, g = torch.rand(3, 20, 20, dtype=torch.float64), torch.rand(3, 20, 9, dtype=torch.float64)
    assert torch.allclose(op.forward(x), radon(x, ang), rtol=0, atol=1e-12)
    assert torch.allclose(op.adjoint(g), radon_adjoint(g, ang), rtol=0, atol=1e-12)
    assert abs(float((op.forward(x) * g).sum() - (x * op.adjoint(g)).sum())) < 1e-9      # exact adjoint pair
    assert op.R.nnz == 4 * 20 * 20 * 9                                                   # 4 N entries per row
