"""A job's own threads (jobs/tasks.py): each started through the job, all joined at its end."""

from __future__ import annotations

import threading

from subagents.jobs.tasks import Tasks


def test_join_waits_for_every_thread_even_those_started_meanwhile() -> None:
    tasks = Tasks("t")
    done: list[str] = []
    go = threading.Event()

    def second() -> None:
        done.append("second")

    def first() -> None:
        go.wait(30)
        tasks.submit(second)  # started while the job's end is already waiting
        done.append("first")

    thread = tasks.submit(first)
    assert thread.daemon and thread.name == "t-first"
    go.set()
    assert tasks.join() == []
    assert sorted(done) == ["first", "second"]


def test_join_is_bounded_and_names_what_still_runs() -> None:
    tasks = Tasks("t")
    release = threading.Event()
    stuck = tasks.submit(release.wait, 30)
    assert tasks.join(within=0.01) == [stuck]
    release.set()
    assert tasks.join() == []


def test_a_task_joining_the_job_does_not_wait_for_itself() -> None:
    tasks = Tasks("t")
    left: list[list[threading.Thread]] = []
    tasks.submit(lambda: left.append(tasks.join(within=5)))
    assert tasks.join() == []
    assert left == [[]]
