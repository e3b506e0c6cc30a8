"""``subagents web`` over plain HTTP: who is refused (no token, a bad Host, a foreign Origin,
a cross-site action), the served command line, the cost page's numbers against
``subagents cost --json``, the fleet's repositories; Markdown without raw HTML, and a
transcript rendered piece by piece as it grows."""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from html import unescape
from pathlib import Path
from typing import Any

import httpx2
import pytest
from support import pistream as pi
from support.checks import eventually
from support.cli import invoke
from support.fake import Fake, script_launcher
from support.git import git_repo
from support.webserver import TOKEN, Web, cost_rows, cost_tables, web_command

import subagents
from subagents.jobs import JobStore

TIMEOUT = 60


@pytest.fixture
def finished(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> Callable[..., dict[str, Any]]:
    """``finished(steps, spec, cwd)``: a background job of the fake pi, waited for."""
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))

    def run(
        steps: list[dict[str, Any]], spec: Any = "do it", cwd: Path | None = None
    ) -> dict[str, Any]:
        job = subagents.start(spec, cwd=cwd, env=fake.env(steps))
        result = job.wait(TIMEOUT)
        assert result is not None
        return result

    return run


@contextmanager
def browser_client(web: Web) -> Iterator[httpx2.Client]:
    """A client signed in as a browser is: the cookie the token's address sets."""
    with httpx2.Client(base_url=web.base, timeout=30) as client:
        signed = client.get(f"/?token={TOKEN}")
        assert signed.status_code == 303 and signed.headers["location"] == "/"
        cookie = signed.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        yield client


def csrf_of(page: str) -> str:
    found = re.search(r'<meta name="csrf-token" content="([0-9a-f]+)">', page)
    assert found
    return found.group(1)


def test_requests_without_the_token_or_from_elsewhere_are_refused(web: Web) -> None:
    with httpx2.Client(base_url=web.base, timeout=30) as anon:
        for path in ("/", "/cost", "/job/x", "/events/fleet", "/api/jobs", "/static/app.js"):
            assert anon.get(path).status_code == 401, path
        assert anon.get("/?token=wrong-token-wrong-token").status_code == 401
        assert anon.get("/api/jobs", headers={"Authorization": "Bearer nope"}).status_code == 401
        assert anon.post("/api/jobs/x/stop").status_code == 401
    with web.client() as program:
        assert program.get("/api/jobs").json() == []
        assert program.get("/", headers={"Host": "evil.example"}).status_code == 421
        assert program.get("/", headers={"Host": f"evil.example:{web.port}"}).status_code == 421
        assert program.get("/", headers={"Origin": "http://evil.example"}).status_code == 403
        assert (
            program.get("/", headers={"Origin": f"http://127.0.0.1:{web.port + 1}"}).status_code
            == 403
        )
        assert program.request("OPTIONS", "/api/jobs").status_code == 405
        page = program.get("/")
        assert page.status_code == 200
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert "default-src 'none'" in page.headers["content-security-policy"]
        assert not any(h.startswith("access-control-") for h in page.headers)
    with browser_client(web) as browser:
        page = browser.get("/")
        assert page.status_code == 200 and "<h1>Fleet</h1>" in page.text
        csrf = csrf_of(page.text)
        origin = {"Origin": web.base}
        # A cross-site form or fetch carries the cookie at most, never the page's CSRF token.
        assert browser.post("/api/jobs/x/stop", headers=origin).status_code == 403
        assert (
            browser.post(
                "/api/jobs/x/stop", headers={**origin, "X-CSRF-Token": "0" * 64}
            ).status_code
            == 403
        )
        assert (
            browser.post("/api/jobs/x/stop", headers={"X-CSRF-Token": csrf}).status_code == 403
        )  # no Origin
        bad_origin = {"Origin": "http://evil.example", "X-CSRF-Token": csrf}
        assert browser.post("/api/jobs/x/stop", headers=bad_origin).status_code == 403
        ok = browser.post("/api/jobs/x/stop", headers={**origin, "X-CSRF-Token": csrf})
        assert ok.status_code == 404 and "no job or run" in ok.json()["error"]  # past every check


@pytest.mark.process
def test_the_command_prints_its_address_once_and_stops_on_a_signal(isolated_state: Path) -> None:
    with web_command({"SUBAGENTS_WEB_TOKEN": ""}) as (proc, base, line):
        found = re.search(r"/\?token=(\S+)", line)
        assert found, line
        token = found.group(1)
        assert len(token) >= 32 and "SUBAGENTS_WEB_TOKEN" in line
        with httpx2.Client(base_url=base, timeout=30) as client:
            assert client.get("/").status_code == 401
            assert client.get(f"/?token={token}").status_code == 303
            assert client.get("/").status_code == 200  # the cookie
            # An open live stream does not hold up the stop.
            with client.stream("GET", "/events/fleet") as events:
                first = next(events.iter_lines())
                assert first.startswith("retry:")
                proc.send_signal(signal.SIGTERM)
                assert proc.wait(15) == 0
        assert proc.stderr is not None and proc.stderr.read() == ""


def test_a_short_token_is_refused(isolated_state: Path) -> None:
    p = invoke(["web", "--port", "0"], {"SUBAGENTS_WEB_TOKEN": "x" * 15})
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and "$SUBAGENTS_WEB_TOKEN" in p.stderr
    assert "use at least 16" in p.stderr


@pytest.mark.process
def test_the_cost_page_shows_the_numbers_of_cost_json(
    web: Web, finished: Callable[..., dict[str, Any]], tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo", {"a.txt": "a\n"})
    finished(pi.answer("one"), cwd=repo)
    finished(
        pi.answer("two"), {"mode": "parallel", "tasks": [{"task": "x"}, {"task": "y"}]}, tmp_path
    )
    with web.client() as client:
        page = client.get("/cost").text
    tables = cost_tables(page)
    assert set(tables) == {"day", "backend", "model", "agent", "repo"}
    assert page.count("<svg") == 5
    for by, rows in tables.items():
        report = json.loads(invoke(["cost", "--json", "--by", by]).stdout)
        expected = cost_rows(report)
        assert rows == expected, by
    repos = json.loads(invoke(["cost", "--json", "--by", "repo"]).stdout)
    assert {r["key"] for r in repos["rows"]} == {str(repo), "unknown"}  # tmp_path is no repository
    assert json.loads(invoke(["cost", "--json"]).stdout)["summary"] in unescape(page)


@pytest.mark.process
def test_the_fleet_groups_jobs_by_repository_and_session(
    web: Web, finished: Callable[..., dict[str, Any]], tmp_path: Path
) -> None:
    one = git_repo(tmp_path / "one", {"a": "a\n"})
    two = git_repo(tmp_path / "two", {"b": "b\n"})
    (one / "sub").mkdir()
    a = finished(pi.answer("in one"), cwd=one / "sub")["jobId"]
    b = finished(pi.answer("in two"), cwd=two)["jobId"]
    c = finished(
        pi.answer("isolated"),
        {"mode": "single", "steps": [{"task": "t", "isolate": "worktree"}]},
        one,
    )
    with web.client() as client:
        page = client.get("/").text
        sections = dict(
            re.findall(r'<section class="repo" data-repo="([^"]+)">(.*?)</section>', page, re.S)
        )
        assert set(sections) == {str(one), str(two)}
        assert (
            a in sections[str(one)] and c["jobId"] in sections[str(one)] and b in sections[str(two)]
        )
        only_two = client.get("/", params={"repo": str(two)}).text
        assert b in only_two and a not in only_two
        bad = client.get("/", params={"since": "yesterday-ish"}).text
        assert "since: invalid time" in bad and a in bad  # said, and left out
        job = client.get(f"/api/jobs/{a}").json()
        assert job["status"] == "completed" and job["runs"][0]["finalText"] == "in one"


@pytest.mark.process
def test_a_parallel_job_page_has_a_timeline_and_its_runs(
    web: Web, finished: Callable[..., dict[str, Any]], tmp_path: Path
) -> None:
    job = finished(
        pi.answer("x"),
        {"mode": "parallel", "tasks": [{"task": "a"}, {"task": "b"}, {"task": "c"}]},
        tmp_path,
    )
    with web.client() as client:
        page = client.get(f"/job/{job['jobId'][:12]}").text
        assert 'class="chart gantt"' in page and page.count('class="bar st-completed"') == 3
        second = job["runs"][1]["runId"]
        chosen = client.get(f"/job/{job['jobId']}", params={"run": second}).text
        assert f'<tr data-run="{second}" class="chosen">' in chosen
        assert client.get("/job/zzzz").status_code == 404


@pytest.mark.process
def test_a_failed_runs_diagnostics_are_on_its_page(
    web: Web, finished: Callable[..., dict[str, Any]]
) -> None:
    job = finished([*pi.start(), {"stderr": "boom <b>not bold</b>\n"}, {"exit": 3}])
    assert job["status"] == "failed"
    with web.client() as client:
        page = client.get(f"/job/{job['jobId']}").text
    assert '<section class="diagnostics">' in page
    assert "boom &lt;b&gt;not bold&lt;/b&gt;" in page and "<b>not bold</b>" not in page


@pytest.mark.process
def test_a_council_job_page_shows_its_members_side_by_side_and_the_verdict(
    web: Web, fake: Fake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fake pis: member B answers with a script tag, the judge returns a verdict as JSON;
    the page has the members' table and the verdict, the child's text as text."""
    verdict = {"best": "A", "agreement": "none", "reasons": ["<i>A</i> is safe"], "merged": "a & b"}
    env = script_launcher(
        fake,
        "council-pi",
        f"if 'Judge their answers' in task:\n    answer(json.dumps({verdict!r}))\n"
        "else:\n    answer('<script>alert(1)</script>' if 'm2' in sys.argv else 'alpha')\n",
    )
    monkeypatch.setenv("SUBAGENTS_PI_BIN", env["SUBAGENTS_PI_BIN"])
    spec = {"mode": "council", "steps": [{"task": "name it"}, {"task": "name it", "model": "m2"}]}
    job = subagents.start({**spec, "judge": "pi"}, cwd=tmp_path).wait(TIMEOUT)
    assert job is not None and job["status"] == "completed", job
    with web.client() as client:
        page = client.get(f"/job/{job['jobId']}").text
    section = page[page.index('<section class="council">') :]
    section = section[: section.index("</section>")]
    rows = re.findall(r'<tr data-member="([AB])">(.*?)</tr>', section)
    assert [label for label, _ in rows] == ["A", "B"]
    cells = {label: re.findall(r"<td[^>]*>(.*?)</td>", row) for label, row in rows}
    assert (
        "completed" in cells["A"][2] and cells["A"][6] == '<pre class="member-answer">alpha</pre>'
    )
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in cells["B"][6]
    assert "<script>alert" not in page and "<i>A</i>" not in page
    assert "2 answered (quorum 1)" in section and "best A, agreement none" in section
    assert "<li>&lt;i&gt;A&lt;/i&gt; is safe</li>" in section
    assert '<pre class="merged">a &amp; b</pre>' in section


@pytest.mark.process
def test_the_job_stream_sends_the_transcript_as_it_grows(
    web: Web, fake: Fake, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    gate = tmp_path / "gate"
    steps = [*pi.start(), *pi.tool_use(command="make"), {"wait_for": str(gate)}]
    job_id = subagents.start(
        "t", env=fake.env([*steps, *pi.tool_end(), pi.text_end("done"), *pi.end()])
    ).job_id
    assert eventually(lambda: JobStore().load(job_id)["runIds"])
    run_id = JobStore().load(job_id)["runIds"][0]
    seen: list[tuple[str, dict[str, Any]]] = []
    with (
        web.client() as client,
        client.stream("GET", f"/events/job/{job_id}", params={"run": run_id}) as events,
    ):
        name = ""
        for line in events.iter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                seen.append((name, json.loads(line[6:])))
                if name == "transcript" and "$ make" in seen[-1][1]["html"]:
                    assert "done" not in json.dumps(seen)  # live: the run is still waiting
                    gate.touch()
                if name == "end":
                    break
    names = [n for n, _ in seen]
    assert names[-1] == "end" and names.count("run") == 1 and "job" in names
    transcript = "".join(d["html"] for n, d in seen if n == "transcript")
    assert (
        transcript.index("$ make")
        < transcript.index("done")
        < transcript.index("Finished: completed")
    )


@pytest.mark.process
def test_a_long_transcript_shows_its_end_and_links_to_all_of_it(
    web: Web, finished: Callable[..., dict[str, Any]]
) -> None:
    from subagents.web.transcript import FIRST_LOOK

    calls = []
    for i in range(1400):  # ~300 KiB of transcript: tool calls with long commands
        calls += pi.tool_use(f"c{i}", command=f"echo {'x' * 200} <b>{i}</b>")
        calls += pi.tool_end(f"c{i}")
    job = finished([*pi.start(), *calls, pi.text_end("the end"), *pi.end()])
    run_id = job["runs"][0]["runId"]
    transcript = Path(job["runs"][0]["paths"]["transcript"])
    assert transcript.stat().st_size > FIRST_LOOK
    with web.client() as client:
        page = client.get(f"/job/{job['jobId']}").text
        assert "&lt;b&gt;1399&lt;/b&gt;" in page and "&lt;b&gt;0&lt;/b&gt;" not in page
        assert f'href="/runs/{run_id}/transcript.md"' in page
        whole = client.get(f"/runs/{run_id}/transcript.md")
        assert whole.headers["content-type"].startswith("text/plain")
        assert whole.headers["x-content-type-options"] == "nosniff"
        assert whole.text == transcript.read_text()


# ---- parts ---------------------------------------------------------------------------


def test_markdown_keeps_no_html_of_the_child() -> None:
    from subagents.web.markdown import render

    html = render(
        "<script>alert(1)</script>\n\n**b** <img src=x onerror=alert(1)> [a](javascript:alert(1)) "
        "[b](https://example.com) ![p](https://example.com/p.png)"
    )
    assert "<script" not in html and "<img" not in html and 'href="javascript' not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<strong>b</strong>" in html
    assert 'href="https://example.com" rel="noopener noreferrer" target="_blank"' in html
    assert (
        '<a href="https://example.com/p.png" rel="noopener noreferrer" target="_blank">[p]</a>'
        in html
    )


def test_a_council_without_a_verdict_says_why_and_escapes_every_value() -> None:
    from subagents.types import CouncilMember, CouncilRecord
    from subagents.web.council import render_council

    bad = "<script>x()</script>"

    def member(label: str, agent: str, status: Any, **more: Any) -> CouncilMember:
        return CouncilMember(
            label=label, runId=None, agent=agent, backend="pi", model=None, status=status,
            durationMs=1500, tokens=1200, cost=0.5, answer="", **more,
        )  # fmt: skip

    record = CouncilRecord(
        members=[
            member("A", bad, "failed", errorMessage=bad),
            member("B", "pi", "completed", structured={"name": bad}),
        ],
        quorum=2,
        answered=1,
        agreement={"agree": [], "differ": {"/name": {"A": None, "B": bad}}},
        judgeError=bad,
    )
    html = render_council(record)
    # the agent, why A failed, B's structured answer, what differs, why no verdict
    assert "<script" not in html and html.count("&lt;script&gt;x()&lt;/script&gt;") == 5
    assert "1.5s" in html and "1.2k" in html and "$0.50" in html
    assert "1 answered (quorum 2)" in html and "judge: no verdict: &lt;script&gt;" in html
    assert 'class="verdict"' not in html and "<code>/name</code>" in html


def test_a_transcript_read_in_pieces_renders_as_a_whole(tmp_path: Path) -> None:
    from subagents.web.markdown import render_transcript
    from subagents.web.transcript import read_piece

    chunks = [
        "\n## Started pi\n\n", "- $ ls\n", "- Command finished\n", "\nSome text\n\n",
        "- ✗ $ make\n\n  ```\n  error: x\n\n  more\n  ```\n\n", "\n```python\nprint(1)\n\n", "x = 2\n```\n\n",
        "\n## Finished: completed in 1s\n\n",
    ]  # fmt: skip
    path = tmp_path / "transcript.md"
    path.write_text("")
    offset, pieces = 0, []
    for i, chunk in enumerate(chunks):
        with open(path, "a") as f:
            f.write(chunk)
        piece = read_piece(path, offset, final=i == len(chunks) - 1)
        offset = piece.offset
        pieces.append(piece.html)
    assert offset == path.stat().st_size
    # The open fence waited for its end; nothing was rendered twice or lost.
    assert pieces[5] == "" and "print(1)\n\nx = 2" in pieces[6]
    whole = "".join(pieces)
    squeeze = lambda s: re.sub(r"</ul><ul>", "", re.sub(r">\s+<", "><", s))  # noqa: E731 (lists may arrive in pieces)
    assert squeeze(whole) == squeeze(render_transcript("".join(chunks)))


@pytest.mark.process
def test_a_running_job_shows_how_much_of_its_budgets_is_used(
    web: Web, fake: Fake, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))
    gate = tmp_path / "gate"
    steps = [*pi.start(), *pi.tool_use(command="make"), {"wait_for": str(gate)}]
    spec = {
        "mode": "single",
        "steps": [{"task": "t", "max_tokens": 50_000, "max_cost": 2.5}],
        "max_tokens": 200_000,
    }
    job = subagents.start(spec, env=fake.env([*steps, *pi.tool_end(), *pi.answer("ok")]))
    try:
        assert eventually(lambda: JobStore().load(job.job_id)["runIds"])
        with web.client() as client:
            page = client.get(f"/job/{job.job_id}").text
        meters = dict(re.findall(r'<label data-key="meter-([a-z ]+)">.*?max="([0-9.]+)"', page))
        assert meters == {
            "job tokens": "200000.0",
            "run tokens": "50000.0",
            "run cost": "2.5",
        }, meters
        assert "of 200k" in page and "of $2.50" in page
    finally:
        gate.touch()
        assert job.wait(TIMEOUT) is not None
    with web.client() as client:
        assert 'class="budget"' not in client.get(f"/job/{job.job_id}").text  # ended


@pytest.mark.process
def test_runs_are_labelled_by_their_task_and_model(
    web: Web, finished: Callable[..., dict[str, Any]], tmp_path: Path
) -> None:
    spec = {
        "mode": "parallel",
        "tasks": [{"task": "Review the <cart>\nin depth", "model": "m-fast"}, {"task": "Fix it"}],
    }
    job = finished(pi.answer("x"), spec, tmp_path)
    with web.client() as client:
        page = client.get(f"/job/{job['jobId']}").text
    cells = re.findall(r'<td class="task" data-label="task">(.*?)</td>', page)
    assert cells == ["Review the &lt;cart&gt; (pi · m-fast)", "Fix it (pi)"], cells
    assert "1. Review the &lt;cart&gt; (pi · m-fast)" in page  # the timeline's label


def test_a_transcripts_commands_are_verbatim_and_tool_output_collapsed() -> None:
    from subagents.web.markdown import render_transcript

    html = render_transcript(
        "- $ rm -f *.pyc && grep __init__ x.py https://example.com `q`\n- Command finished\n"
        "- ✗ $ make\n\n  ```\n  error: <b>x</b>\n  ```\n\n\nThe **child** says\n\n```py\nx = 1\n```\n"
    )
    assert (
        "<code>$ rm -f *.pyc &amp;&amp; grep __init__ x.py https://example.com `q`</code>" in html
    )
    assert "<strong>init</strong>" not in html and "<a " not in html
    assert '<details class="output"><summary>output (1 line)</summary><pre><code>' in html
    assert "error: &lt;b&gt;x&lt;/b&gt;" in html and "<b>" not in html
    assert "<strong>child</strong>" in html  # the child's own Markdown is still Markdown
    assert html.count("<details") == 1  # its own code block is not a tool's output


def test_a_successful_tools_output_is_in_the_transcript_collapsed_as_a_failures() -> None:
    from subagents.core import events as ev
    from subagents.present.progress import ProgressFormatter, transcript_entry
    from subagents.web.markdown import render_transcript

    f = ProgressFormatter()
    events = [
        ev.tool_call("1", "bash", {"command": "pytest -q"}),
        ev.tool_result("1", "bash", False, "12 passed\n<b>in 0.4s</b>\n"),
        ev.tool_call("2", "bash", {"command": "make"}),
        ev.tool_result("2", "bash", True, "error: x"),
        ev.tool_call("3", "bash", {"command": "true"}),
        ev.tool_result("3", "bash", False, ""),
    ]
    text = "".join(transcript_entry(e, f) or "" for e in events)
    html = str(render_transcript(text))
    outputs = re.findall(r'<details class="output"><summary>output \((\d+) lines?\)', html)
    assert outputs == ["2", "1"]  # the success's and the failure's; none for no output
    assert "12 passed" in html and "&lt;b&gt;in 0.4s&lt;/b&gt;" in html
    assert html.count("<li>") == 6  # each call and each result its own item
    # A transcript written before successes had their output (a line alone) reads as it did.
    old = render_transcript("- $ pytest -q\n- Command finished\n- $ make\n- Command finished\n")
    assert str(old).count("<li>") == 4 and "<details" not in str(old)
