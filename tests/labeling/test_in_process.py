"""The embedded default's background thread (labeling.in_process), on real threads."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from labeling.in_process import InProcessRunner


@pytest.fixture
def runner():
    """A runner of its own, stopped at the end (no thread outlives its test)."""
    made = InProcessRunner()
    yield made
    made.stop()
    assert not made.started()


def _wait(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not done in time"
        time.sleep(0.01)


def test_work_runs_on_another_thread_in_order_of_due_time(runner):
    done: list[tuple[str, str]] = []
    began = time.monotonic()
    runner.submit("late", lambda: done.append(("late", threading.current_thread().name)), delay=0.3)
    runner.submit("soon", lambda: done.append(("soon", threading.current_thread().name)))
    _wait(lambda: len(done) == 2)
    assert [name for name, _ in done] == ["soon", "late"]
    assert {thread for _, thread in done} == {"certlabel-in-process"}
    assert time.monotonic() - began >= 0.3
    assert runner.pending() == 0


def test_a_failure_is_logged_and_the_thread_goes_on(runner, caplog):
    done = threading.Event()

    def fail() -> None:
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR, logger="labeling.in_process"):
        runner.submit("failing", fail)
        runner.submit("next", done.set)
        assert done.wait(10)
    failed = [r for r in caplog.records if r.getMessage() == "in_process.failed"]
    assert [r.work for r in failed] == ["failing"]
    assert failed[0].exc_info[1].args == ("boom",)


def test_periodic_work_repeats_once_per_name_and_survives_failures(runner):
    runs: list[float] = []

    def tick() -> None:
        runs.append(time.monotonic())
        if len(runs) == 1:
            raise RuntimeError("the first run fails")

    runner.every("tick", 0.05, tick)
    runner.every("tick", 0.05, tick)  # ignored: one periodic entry per name
    _wait(lambda: len(runs) >= 4)
    assert runner.pending() == 1
    gaps = [b - a for a, b in zip(runs, runs[1:], strict=False)]
    assert min(gaps) >= 0.045
    with pytest.raises(ValueError, match="period must be positive"):
        runner.every("never", 0, tick)


def test_a_stopped_runner_ends_its_thread_and_drops_what_waits(runner):
    runner.every("tick", 0.05, lambda: None)
    runner.submit("later", lambda: None, delay=60)
    assert runner.started() and runner.pending() == 2
    runner.stop()
    assert not runner.started() and runner.pending() == 0
    runner.submit("after", lambda: None)  # no thread starts again
    assert not runner.started()


def test_the_thread_of_the_embedded_default_runs_the_engines_recovery_pass(settings):
    # registered by LabelingConfig.ready: the engine's recovery pass, every
    # CERTLABEL_WORK_RECOVER_SECONDS (no beat runs without a broker); nothing else is periodic
    from labeling import in_process
    from labeling.apps import _recover_now

    assert set(in_process._periodic) == {"work-recover"}
    period, work = in_process._periodic["work-recover"]
    assert period == float(settings.CERTLABEL_WORK_RECOVER_SECONDS)
    assert work is _recover_now


@pytest.mark.django_db(transaction=True)
def test_a_web_process_of_the_embedded_default_runs_a_calibration_run_on_its_thread(
    project, monkeypatch, request
):
    # A web process without a broker (labeling.wsgi starts the thread): background work of the
    # engine is sent to the thread, not run inside the request that asked for it.
    from certification.certificates import compute as compute_module
    from certification.models import RunStatus
    from certification.services import calibration_run_start
    from labeling import in_process
    from labeling.models import Role
    from labeling.services import membership_set
    from tests.factories import UserFactory, calibration_project, make_spec
    from tests.factories import calibration_candidate as cand
    from tests.factories import calibration_record as rec

    records = [
        rec(f"c{i}", [cand("a", answer="x", score=1.0, label="admissible", selected=True)])
        for i in range(20)
    ]
    calibration_project(project, {"calibration": records})
    manager = UserFactory()
    membership_set(project=project, user=manager, role=Role.MANAGER)
    runner = in_process.InProcessRunner()
    monkeypatch.setattr(in_process, "_runner", runner)
    in_process.start()
    request.addfinalizer(runner.stop)
    threads: list[str] = []
    real = compute_module.calibration_result_compute

    def recorded(**kwargs):
        threads.append(threading.current_thread().name)
        return real(**kwargs)

    monkeypatch.setattr(compute_module, "calibration_result_compute", recorded)
    spec = make_spec(project, actor=manager)
    run = calibration_run_start(spec=spec, actor=manager)
    # the callers returned; every computation ran on the thread, none on the caller's
    _wait(lambda: run.__class__.objects.get(pk=run.pk).status == RunStatus.DONE, 30)
    assert threads and set(threads) == {"certlabel-in-process"}
