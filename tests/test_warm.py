"""The warm command server (cli/warmserver.py, cli/warmclient.py): ``subagents run`` and
``continue`` handed to a forked worker of an already-imported process behave exactly as
when run in-process: the same output, exit codes, environment, working directory and stop
semantics; and a server that is stale, idle or unwanted is never used or left behind.

A test that stops, kills, replaces or idles a server has a runtime dir and servers of its
own (support/warm.py), stopped at its end; one that only needs a server serving (counting
what it served from where it starts) shares the module's, started once. The rest of the
suite runs with ``SUBAGENTS_WARM=0`` (conftest.py), so no other test's command ever meets
a server."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.checks import eventually
from support.cli import CLI
from support.pistream import shell_pi
from support.warm import Servers, alive, warm_servers

from subagents.cli import warmclient

# One after another, on one xdist worker: the stale test changes a module file's time, which
# every server running at that moment would take for an upgrade.
pytestmark = [pytest.mark.process, pytest.mark.xdist_group("warm")]

PI_HEAD = '#!/bin/sh\ncase "$1" in --version) echo 0.73.1; exit 0;; esac\n'
# A pi stand-in whose answer is the mask of the signals it was started with ignored.
IGNORED = (
    """printf '{"type":"message_end","message":{"role":"assistant","content":"""
    """[{"type":"text","text":"%s"}],"stopReason":"stop","model":"m"}}\\n' """
    """"$(sed -n 's/^SigIgn:[[:space:]]*//p' /proc/self/status)"\n"""
)
# A pi stand-in whose answer is what it was given: an environment variable, cwd, umask.
SAYS = (
    """printf '{"type":"message_end","message":{"role":"assistant","content":"""
    """[{"type":"text","text":"%s %s %s"}],"stopReason":"stop","model":"m"}}\\n' """
    """"$WARM_TEST" "$(pwd)" "$(umask)"\n"""
)


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Servers]:
    with warm_servers() as found:
        monkeypatch.setenv("SUBAGENTS_WARM", "1")
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(found.runtime))
        yield found


@pytest.fixture(scope="module")
def module_servers() -> Iterator[Servers]:
    with warm_servers() as found:
        yield found


@pytest.fixture
def shared(module_servers: Servers, monkeypatch: pytest.MonkeyPatch) -> Servers:
    """The module's servers: for a test that leaves its server as it found it (serving)."""
    monkeypatch.setenv("SUBAGENTS_WARM", "1")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(module_servers.runtime))
    return module_servers


def run(
    args: list[str], env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **env},
        cwd=cwd,
    )


def warmed(servers: Servers, env: dict[str, str]) -> int:
    """A first command run (in-process, starting the server as it exits, unless one serves
    already), and the server then serving; the number of commands it has served."""
    first = run(["run", "-q", "hi"], env)
    assert first.returncode == 0, first.stderr
    return servers.one()[2]


def served(servers: Servers) -> int:
    return servers.one()[2]


def script(path: Path, body: str) -> dict[str, str]:
    path.write_text(PI_HEAD + body)
    path.chmod(0o755)
    return {"SUBAGENTS_PI_BIN": str(path)}


def ids_out(text: str) -> str:
    return re.sub(r"[0-9a-z]{10}-[0-9a-z]{8}", "ID", text)


CASES = {
    "completed": (["run", "-q", "hi"], "ok"),
    "failed": (["run", "-q", "hi"], "fail"),
    "bad input": (["run", "--timeout", "nope", "hi"], "ok"),
    "bad plan": (["run", "--plan", "/nonexistent/plan.yaml"], "ok"),
    "background": (["run", "--bg", "hi"], "ok"),
    "help": (["run", "--help"], "ok"),
}


@pytest.mark.parametrize("case", CASES)
def test_the_same_output_and_exit_code_as_in_process(
    shared: Servers, tmp_path: Path, case: str
) -> None:
    args, child = CASES[case]
    env = shell_pi(tmp_path / "pi")
    before = warmed(shared, env)
    if child == "fail":
        env = script(tmp_path / "failing", "echo 'no such model' >&2\nexit 3\n")
    warm = run(args, env)
    assert served(shared) == before + 1  # this one was the server's
    cold = run(args, {**env, "SUBAGENTS_WARM": "0"})
    assert served(shared) == before + 1  # that one was not
    assert (warm.returncode, ids_out(warm.stdout), ids_out(warm.stderr)) == (
        cold.returncode,
        ids_out(cold.stdout),
        ids_out(cold.stderr),
    )
    expected = {
        "completed": 0,
        "failed": 1,
        "bad input": 2,
        "bad plan": 2,
        "background": 0,
        "help": 0,
    }
    assert warm.returncode == expected[case], warm.stderr
    if case == "bad plan":
        assert len(warm.stderr.strip().splitlines()) == 1, warm.stderr
    if case == "background":
        job = warm.stdout.split()[0]
        shown = run(["wait", job], env)
        assert shown.returncode == 0, shown.stderr


def test_the_run_sees_the_callers_environment_cwd_and_umask(
    shared: Servers, tmp_path: Path
) -> None:
    env = shell_pi(tmp_path / "pi")
    before = warmed(shared, env)
    says = script(tmp_path / "says", SAYS)
    here = tmp_path / "somewhere"
    here.mkdir()
    old = os.umask(0o027)
    try:
        done = run(["run", "-q", "hi"], {**says, "WARM_TEST": "from-the-caller"}, cwd=here)
    finally:
        os.umask(old)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["from-the-caller", str(here), "0027"]
    assert served(shared) == before + 1


def test_signals_ignored_by_the_caller_stay_ignored_for_the_run(
    shared: Servers, tmp_path: Path
) -> None:
    """A command started with SIGINT and SIGUSR1 ignored (``trap "" ...``, as a shell does for
    a background job) gives its run the same dispositions warm as in-process: the child's
    ignored signals are the same."""
    env = shell_pi(tmp_path / "pi")
    before = warmed(shared, env)
    says = script(tmp_path / "says", IGNORED)
    line = " ".join([*CLI, "run", "-q", "hi"])
    argv = ["sh", "-c", f'trap "" INT USR1; exec {line}']

    def ignored(extra: dict[str, str]) -> str:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **says, **extra},
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    warm, cold = ignored({}), ignored({"SUBAGENTS_WARM": "0"})
    assert served(shared) == before + 1
    mask = int(warm, 16)
    assert mask & (1 << (signal.SIGUSR1 - 1)), warm  # the caller's, kept
    assert warm == cold


# A pi stand-in that writes down how it was started: what a process inherits.
PROBE = """{ grep -E "^(SigIgn|SigBlk|NoNewPrivs|Seccomp|Cpus_allowed_list|Groups)" \\
    /proc/self/status; ulimit -a; id; cat /proc/self/cgroup; cut -d' ' -f19 /proc/self/stat
  umask; pwd; cat /proc/self/oom_score_adj; ls /proc/self/fd | sort -n | tr '\\n' ' '; echo
  env | sort | grep -v -e '^_=' -e '^SUBAGENTS_RUN_ID=' -e '^PROBE_OUT=' -e '^SUBAGENTS_WARM='
} > "$PROBE_OUT"
echo '{"type":"message_end","message":{"role":"assistant","content":[{"type":"text",\
"text":"ok"}],"stopReason":"stop","model":"m"}}'
"""


def test_the_child_is_started_as_in_process(shared: Servers, tmp_path: Path) -> None:
    """Everything a run's child inherits (signal dispositions and mask, limits, ids, cgroup,
    nice, umask, cwd, open descriptors, environment) is the same warm as in-process."""
    env = shell_pi(tmp_path / "pi")
    before = warmed(shared, env)
    probe = script(tmp_path / "probe", PROBE)
    warm, cold = tmp_path / "warm.txt", tmp_path / "cold.txt"
    done = run(["run", "-q", "hi"], {**probe, "PROBE_OUT": str(warm)})
    assert (done.returncode, served(shared)) == (0, before + 1), done.stderr
    done = run(["run", "-q", "hi"], {**probe, "PROBE_OUT": str(cold), "SUBAGENTS_WARM": "0"})
    assert done.returncode == 0, done.stderr
    assert "SigIgn" in warm.read_text()
    assert warm.read_text() == cold.read_text()


def sleeper(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A pi stand-in that says its pid, then sleeps (a run that goes on until stopped)."""
    pids = tmp_path / "child.pid"
    return script(tmp_path / "sleeper", f"echo $$ > {pids}\nexec sleep 300\n"), pids


def started(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )


def child_running(pids: Path) -> int:
    assert eventually(lambda: pids.exists() and pids.read_text().strip()), "no child started"
    return int(pids.read_text())


def stopped_by_sigterm(tmp_path: Path, env: dict[str, str]) -> tuple[int, str, str, bytes]:
    """A run stopped by SIGTERM to its command: how the command ended, and its supervisor's
    command line."""
    child_env, pids = sleeper(tmp_path)
    pids.unlink(missing_ok=True)
    proc = started(["run", "-q", "hi"], {**env, **child_env})
    child = child_running(pids)
    runs = tmp_path / "state" / "runs"
    run = max(runs.iterdir(), key=lambda d: d.stat().st_mtime)
    supervisor = json.loads((run / "supervisor.json").read_text())["pid"]
    cmdline = Path(f"/proc/{supervisor}/cmdline").read_bytes()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert eventually(lambda: not alive(child)), "the child outlived its stopped run"
    assert eventually(lambda: not alive(supervisor)), "the supervisor outlived its run"
    return proc.returncode, out, err, cmdline


def test_sigterm_to_the_caller_stops_the_run_as_in_process(
    servers: Servers, tmp_path: Path
) -> None:
    env = shell_pi(tmp_path / "pi")
    before = warmed(servers, env)
    warm = stopped_by_sigterm(tmp_path, {})
    assert served(servers) == before + 1
    cold = stopped_by_sigterm(tmp_path, {"SUBAGENTS_WARM": "0"})
    assert (warm[0], ids_out(warm[1]), ids_out(warm[2])) == (
        cold[0],
        ids_out(cold[1]),
        ids_out(cold[2]),
    )
    assert warm[0] == 130, warm
    # The warm run's supervisor was forked from its worker (no interpreter started), the
    # in-process run's started anew; both stopped the same way.
    assert b"subagents.cli.warmserver" in warm[3], warm[3]
    assert b"subagents.supervisor" in cold[3] and b"warmserver" not in cold[3], cold[3]


def supervisors_gone(tmp_path: Path) -> bool:
    """Every run under this test's state dir has its result (its supervisor is done)."""
    runs = list((tmp_path / "state" / "runs").iterdir())
    return all((run / "result.json").exists() for run in runs)


def sleeping_run(servers: Servers, tmp_path: Path) -> tuple[int, subprocess.Popen[str], int]:
    """A server (started by a first command), and a command it serves whose run goes on
    until stopped: the server's pid, the command, its child's pid."""
    warmed(servers, shell_pi(tmp_path / "pi"))
    child_env, pids = sleeper(tmp_path)
    proc = started(["run", "-q", "hi"], child_env)
    child = child_running(pids)
    return servers.one()[0], proc, child


def children(pid: int) -> list[int]:
    out = []
    with contextlib.suppress(FileNotFoundError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(FileNotFoundError):
                out += [int(p) for p in (task / "children").read_text().split()]
    return out


def leads_its_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except ProcessLookupError:
        return False


def workers(server: int) -> list[int]:
    """The server's workers: its children that lead their own process group (a command's
    worker; not the standby forked ahead for the next request, in the server's group)."""
    return [pid for pid in children(server) if leads_its_group(pid)]


def test_a_run_is_handed_to_the_supervisor_its_standby_worker_forked_ahead(
    shared: Servers, tmp_path: Path
) -> None:
    """Between commands the server keeps a standby worker, which has forked the supervisor
    its run will need before any command came: a command costs neither fork. (That the
    supervisor then has the command's environment, cwd, umask and signals, as one forked for
    it would: the tests above and test_the_child_is_started_as_in_process.)"""
    env = shell_pi(tmp_path / "pi")
    warmed(shared, env)
    server = shared.one()[0]

    def forked_ahead() -> int | None:
        standbys = [pid for pid in children(server) if not leads_its_group(pid)]
        spares = [pid for standby in standbys for pid in children(standby)]
        return spares[0] if len(standbys) == 1 and len(spares) == 1 else None

    assert eventually(lambda: forked_ahead() is not None), "no standby with its supervisor"
    ahead = forked_ahead()
    done = run(["run", "-q", "hi"], env)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr
    runs = tmp_path / "state" / "runs"
    newest = max(runs.iterdir(), key=lambda d: d.name)
    assert json.loads((newest / "supervisor.json").read_text())["pid"] == ahead


def test_a_killed_caller_takes_its_worker_with_it(servers: Servers, tmp_path: Path) -> None:
    server, proc, child = sleeping_run(servers, tmp_path)
    assert len(workers(server)) == 1
    proc.kill()
    proc.communicate(timeout=60)
    assert eventually(lambda: not workers(server)), "the worker outlived its caller"
    assert servers.serving(), "the server goes on"
    # Its run goes on, as when an in-process command is killed: ended here, by its child.
    os.kill(child, signal.SIGKILL)
    assert eventually(lambda: supervisors_gone(tmp_path))


def test_a_stale_server_is_replaced_and_the_command_runs_in_process(
    servers: Servers, tmp_path: Path
) -> None:
    """A module file changed since the server imported it: the answer is "stale", the
    command runs in-process, and a new server takes the old one's place."""
    env = shell_pi(tmp_path / "pi")
    warmed(servers, env)
    old = servers.one()[0]
    module = Path(warmclient.__file__)
    st = module.stat()
    os.utime(module, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000))
    try:
        done = run(["run", "-q", "hi"], env)
        assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr
        assert eventually(lambda: not alive(old)), "the stale server stayed"
    finally:
        os.utime(module, ns=(st.st_atime_ns, st.st_mtime_ns))
    new, _, count = servers.one()
    assert new != old and count == 0
    assert run(["run", "-q", "hi"], env).stdout == "ok\n"
    assert served(servers) == 1


@contextlib.contextmanager
def in_its_place(servers: Servers, env: dict[str, str], reply: bytes | None) -> Iterator[None]:
    """The real server (started by a first command) replaced at its socket by a fake that
    takes one request and answers ``reply``, or (None) keeps the connection and says
    nothing."""
    warmed(servers, env)
    [sock] = servers.sockets()
    servers.stop()
    fake = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    fake.bind(str(sock))
    fake.listen(1)
    held: list[socket.socket] = []

    def take() -> None:
        conn, _ = fake.accept()
        held.append(conn)
        _, fds, _, _ = socket.recv_fds(conn, 16, 3)
        for fd in fds:  # the caller's streams: held here, its output would never end
            os.close(fd)
        if reply is not None:
            conn.sendall(reply)

    taking = threading.Thread(target=take, daemon=True)
    taking.start()
    try:
        yield
        taking.join(60)
    finally:
        for conn in held:
            conn.close()
        fake.close()


def test_an_answer_of_stale_means_in_process(servers: Servers, tmp_path: Path) -> None:
    """Whatever says "stale" at the socket (here a fake), the command runs in-process and
    a real server is started in its place."""
    env = shell_pi(tmp_path / "pi")
    with in_its_place(servers, env, b"stale\n"):
        done = run(["run", "-q", "hi"], env)
    assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr
    assert servers.one()[2] == 0  # the real one, started by that command


def test_a_server_that_does_not_answer_costs_a_bounded_wait(
    servers: Servers, tmp_path: Path
) -> None:
    """A server that takes the request and says nothing (stopped, wedged): the command gives
    up after a bounded wait and runs in-process; it never runs twice."""
    env = shell_pi(tmp_path / "pi")
    with in_its_place(servers, env, None):
        done = run(["run", "-q", "hi"], env)
    assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr
    runs = list((tmp_path / "state" / "runs").iterdir())
    assert len(runs) == 2  # the first command's and this one's: once


def test_an_idle_server_exits_and_removes_its_socket(
    servers: Servers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Long enough for this test to find the server serving on a loaded machine (its first
    # ping must come within the idle time), short enough not to wait long for its exit.
    monkeypatch.setenv("SUBAGENTS_WARM_IDLE", "5")
    env = shell_pi(tmp_path / "pi")
    warmed(servers, env)
    pid = servers.one()[0]
    assert eventually(lambda: not alive(pid)), "the idle server stayed"
    assert not servers.sockets()


def test_a_server_whose_socket_is_removed_exits(servers: Servers, tmp_path: Path) -> None:
    env = shell_pi(tmp_path / "pi")
    warmed(servers, env)
    pid = servers.one()[0]
    for sock in servers.sockets():
        sock.unlink()
    assert eventually(lambda: not alive(pid)), "the server outlived its socket"


def test_off_and_on_a_terminal_commands_run_in_process(servers: Servers, tmp_path: Path) -> None:
    """``SUBAGENTS_WARM=0``, or a terminal on stdin (a person: job control as always)."""
    env = shell_pi(tmp_path / "pi")
    before = warmed(servers, env)
    assert run(["run", "-q", "hi"], {**env, "SUBAGENTS_WARM": "0"}).stdout == "ok\n"
    line = " ".join([*CLI, "run", "-q", "hi"])
    typed = subprocess.run(
        ["script", "-qec", line, "/dev/null"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )
    assert typed.returncode == 0 and "ok" in typed.stdout, typed.stderr
    assert served(servers) == before


def test_continue_is_served_too(servers: Servers, tmp_path: Path) -> None:
    env = shell_pi(tmp_path / "pi")
    before = warmed(servers, env)
    first = run(["run", "--json", "hi"], env)
    run_id = json.loads(first.stdout)["runId"]
    again = run(["continue", run_id, "more", "-q"], env)
    cold = run(["continue", run_id, "more", "-q"], {**env, "SUBAGENTS_WARM": "0"})
    # The stand-in keeps no session: either way, the same one line and exit 2.
    assert (again.returncode, again.stdout, again.stderr) == (
        cold.returncode,
        cold.stdout,
        cold.stderr,
    )
    assert again.returncode == 2 and len(again.stderr.splitlines()) == 1, again.stderr
    assert served(servers) == before + 2


def test_the_server_waits_for_its_workers_when_told_to_stop(
    servers: Servers, tmp_path: Path
) -> None:
    """SIGTERM to the server: no new requests, but a command already running ends as it
    would, and its caller hears how."""
    server, proc, child = sleeping_run(servers, tmp_path)
    os.kill(server, signal.SIGTERM)
    assert eventually(lambda: not servers.sockets()), "still listening"
    assert alive(server)  # its worker runs
    os.kill(child, signal.SIGKILL)  # the run fails: the child died
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert eventually(lambda: not alive(server))


def test_a_command_whose_server_dies_ends_with_its_own_exit_code(
    servers: Servers, tmp_path: Path
) -> None:
    """The server SIGKILLed while its worker runs a command: the command still ends as its
    worker did (the worker tells its caller itself), with the run's answer."""
    warmed(servers, shell_pi(tmp_path / "pi"))
    pids, go = tmp_path / "child.pid", tmp_path / "go"
    answer = shell_pi(tmp_path / "answer", "after the server")["SUBAGENTS_PI_BIN"]
    env = script(
        tmp_path / "waiter",
        f"echo $$ > {pids}\nwhile [ ! -e {go} ]; do sleep 0.05; done\nexec {answer}\n",
    )
    proc = started(["run", "-q", "hi"], env)
    child_running(pids)
    server = servers.one()[0]
    os.kill(server, signal.SIGKILL)
    assert eventually(lambda: not alive(server))
    go.touch()
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out.strip()) == (0, "after the server"), err


def test_the_server_has_imported_the_whole_run_path() -> None:
    """Every module a ``run -q`` imports (test_layout.py's list) is imported by the server
    before it serves: none is left to a worker, on every command's way."""
    shown = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from subagents.cli.warmserver import _warm; _warm();"
            " print(' '.join(sorted(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    loaded = set(shown.stdout.split())
    run_path = set(
        (Path(__file__).with_name("test_layout.py").read_text())
        .split("RUN_PATH = _words(\n", 1)[1]
        .split('"""', 2)[1]
        .split()
    )
    assert "subagents.jobs.orchestrator" in run_path  # the list was read
    assert run_path <= loaded, sorted(run_path - loaded)


def test_help_options_made_ahead_are_made_again_in_another_locale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server makes each served command's help option once (its text from gettext, in
    the server's locale); a worker whose caller's locale differs drops them, to be made as
    in-process."""
    from subagents.cli import app, warmserver

    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.delenv("LANGUAGE", raising=False)
    warmserver._click_made()
    made = app.main.commands["run"]._help_option
    assert made is not None and app.main._help_option is not None
    warmserver._forget_click()  # the same locale: kept
    assert app.main.commands["run"]._help_option is made
    monkeypatch.setenv("LANGUAGE", "de")
    warmserver._forget_click()
    assert app.main.commands["run"]._help_option is None and app.main._help_option is None


def test_a_spare_s_rehearsal_leaves_nothing_and_never_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spare forked from a warm worker rehearses its run's steps on a run of its own in a
    private temporary directory (supervisor/rehearsal.py): it is gone after, and a place it
    cannot write to only means no rehearsal."""
    from subagents.supervisor import rehearsal

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    rehearsal._rehearse()
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv("TMPDIR", str(tmp_path / "missing"))
    rehearsal.rehearse()
    with pytest.raises(FileNotFoundError):
        rehearsal._rehearse()
