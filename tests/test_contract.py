"Every implemented paper follows the contract: experiment, trainer, checkpoint, snapshot, explorer."
import pickle

import pytest

from iclr25_nb.core import BackgroundTrainer, Experiment, implemented_papers

PAPERS = [p.name for p in implemented_papers()]


@pytest.fixture(params=PAPERS)
def module(request):
    from iclr25_nb.core import get_paper
    return get_paper(request.param).load()


@pytest.mark.skipif(not PAPERS, reason='no paper implemented yet')
def test_experiment_trains_checkpoints_and_resumes(module, tmp_path):
    exp = module.make_experiment('quick', seed=0)
    assert isinstance(exp, Experiment) and exp.max_steps and exp.max_steps > 3
    tr = BackgroundTrainer(exp, checkpoint_dir=tmp_path, max_steps=3).start().join(300)
    assert tr.error is None, tr.error
    assert tr.status == 'done' and tr.step == 3 and len(tr.history) == 3
    pickle.dumps(tr.latest)                                    # snapshots are cheap, picklable views
    exp2 = module.make_experiment('quick', seed=0)
    tr2 = BackgroundTrainer(exp2, checkpoint_dir=tmp_path, resume=True, max_steps=4)
    assert tr2.resumed_from == 3
    tr2.start().join(300)
    assert tr2.error is None and tr2.step == 4


@pytest.mark.skipif(not PAPERS, reason='no paper implemented yet')
def test_config_validation_and_presets(module):
    exp = module.make_experiment('quick', seed=0)
    cfg = type(exp.config)
    assert cfg.full() != cfg.quick()
    with pytest.raises(ValueError): module.make_experiment('quick', seed=0, steps=0)
    with pytest.raises(ValueError, match='no field'): module.make_experiment('quick', seed=0, no_such_field=1)


@pytest.mark.skipif(not PAPERS, reason='no paper implemented yet')
def test_explorer_builds_and_refreshes(module):
    view = module.explorer()
    try:
        assert view.trainer is not None and view.trainer.status == 'idle'   # never starts by itself
        assert view.panes, 'an explorer shows at least one figure'
        view.start(); view.trainer.wait(2, timeout=120); view.trainer.pause()
        assert view.trainer.error is None, view.trainer.error
        assert view.refresh(force=True)
    finally:
        view.close()
    assert not view.trainer.alive
