"LiveView's contract with a paper: snapshots never None, view bounds, actions through the trainer, end reasons."
import pytest

from iclr25_nb import live
from iclr25_nb.core import RegressionConfig


def _view(render=None, steps=10_000, delay=0.002, **kw):
    pn = live.panel()
    seen = []
    def draw(snap, history, t=0):
        seen.append((snap, t))
        return {'curve': live.curves_figure(history, ['loss'])}
    make = lambda lr=0.01: live.DemoExperiment(RegressionConfig(steps=steps, delay=delay, lr=lr, n=30))
    view = live.LiveView(make, render or draw, {'lr': pn.widgets.FloatSlider(start=0.001, end=0.1, value=0.01)},
                         view_controls={'t': pn.widgets.IntSlider(start=0, end=100, value=100)},
                         view_bounds={'t': lambda snap: (0, len(snap['x']) - 1)}, **kw)
    return view, seen


def test_render_never_sees_none_and_bounds_follow_the_snapshot():
    view, seen = _view()
    try:
        assert seen and all(s is not None for s, _ in seen)
        w = view.view_controls['t']
        assert (w.start, w.end, w.value) == (0, 29, 29)          # at its end: follows the end
        w.value = 5; view.new_run()
        assert view.trainer.status == 'running'                  # New run starts
        view.refresh(force=True)
        assert seen[-1][1] == 5 and all(s is not None for s, _ in seen)
    finally:
        view.close()


def test_action_runs_between_steps_and_redraws_when_done():
    view, seen = _view(delay=0.01)
    try:
        view.start(); view.trainer.wait(3, timeout=30)
        steps = []
        fut = view.act('record', lambda exp: steps.append(exp.step_count) or 'ok')
        assert fut.result(timeout=30) == 'ok' and steps
        before = len(seen)
        assert view.refresh() and len(seen) == before + 1          # the finished action forces a redraw
    finally:
        view.close()


def test_failed_action_and_error_and_done_reasons_in_the_status():
    view, _ = _view(steps=5, delay=0.0)
    try:
        view.act('boom', lambda exp: 1 / 0).exception(timeout=10)
        view.refresh()
        assert "action 'boom' failed: ZeroDivisionError" in view.status.object
        view.start(); view.trainer.join(30); view.refresh()
        assert '**done**: reached steps=5' in view.status.object
    finally:
        view.close()
    view, _ = _view()
    try:
        def explode(exp): raise FloatingPointError('nan in the weights')
        view.trainer.experiment.step = lambda: explode(None)
        view.start(); view.trainer.join(30); view._update_status()
        assert '**error**: FloatingPointError: nan in the weights' in view.status.object
    finally:
        view.close()


def test_bad_view_bounds_are_rejected():
    pn = live.panel()
    make = lambda: live.DemoExperiment(RegressionConfig(steps=5))
    with pytest.raises(ValueError, match='not a view control'):
        live.LiveView(make, live.demo_render, view_bounds={'nope': lambda s: (0, 1)})
    with pytest.raises(TypeError, match='no start/end'):
        live.LiveView(make, live.demo_render, view_controls={'points': pn.widgets.Select(options=[1, 2], value=1)},
                      view_bounds={'points': lambda s: (0, 1)})


def test_replay_frames_follow_the_run():
    fig = live.replay(live.demo_explorer(delay=0.0), 'loss', steps=20, frames=4)
    assert [f.name for f in fig.frames] == ['0', '5', '10', '15', '20']
    assert [len(f.data[0].x or ()) for f in fig.frames] == [0, 5, 10, 15, 20]
    assert fig.layout.xaxis.range[1] > 20 and fig.layout.sliders[0].steps[-1].label == '20'
