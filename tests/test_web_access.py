"""``subagents web`` refuses what names nothing of its own: every id a request carries, on
every route, is resolved against the store (a run only as one of its job's runs), so no
path, traversal or other job's run reaches a file; sessions are random, in memory, expire
and end at sign-out; ``--open``'s one-time code signs in once; a bad parameter is a page
with the reason, never a 500; and no markup is built outside the templates."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
from support import pistream as pi
from support.fake import Fake
from support.webserver import TOKEN, Web, web_command

import subagents

TIMEOUT = 60
SECRET = "the-secret-outside-the-store"
WEB = Path(subagents.__file__).parent / "web"


@pytest.fixture
def finished(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> Callable[..., dict[str, Any]]:
    monkeypatch.setenv("SUBAGENTS_PI_BIN", str(fake.launcher))

    def run(steps: list[dict[str, Any]], spec: Any = "do it") -> dict[str, Any]:
        result = subagents.start(spec, env=fake.env(steps)).wait(TIMEOUT)
        assert result is not None
        return result

    return run


def _plant(where: Path) -> None:
    """A run directory's files outside the store, each holding the secret."""
    where.mkdir(parents=True)
    for name in ("transcript.md", "changes.patch", "meta.json", "answer.txt"):
        (where / name).write_text(SECRET + "\n")
    result = {"runId": "x", "status": "completed", "finalText": SECRET}
    (where / "result.json").write_text(json.dumps(result))


@pytest.mark.process
def test_no_id_from_a_request_reaches_a_file_outside_its_job(
    web: Web, finished: Callable[..., dict[str, Any]], tmp_path: Path, isolated_state: Path
) -> None:
    mine = finished(pi.answer("mine"))
    other = finished(pi.answer("theirs"))
    job = mine["jobId"]
    other_run = other["runs"][0]["runId"]
    _plant(tmp_path / "secret")
    _plant(isolated_state / "secret")  # beside runs/: one ".." away
    bad = [
        "../secret", "../../secret", "..%2F..%2Fsecret", "%2e%2e%2fsecret", "..",
        str(tmp_path / "secret"), "..\\secret", "%5c..%5csecret", "x/../../secret",
        "*", " ", "%00", "é",
    ]  # fmt: skip
    with web.client() as client:
        seen: list[tuple[str, int]] = []

        def check(method: str, path: str, **kw: Any) -> None:
            answer = client.request(method, path, **kw)
            seen.append((path, answer.status_code))
            # (a client takes "/job/.." to "/": another page of the app, that is all)
            moved = answer.request.url.path.rstrip("/") != path.rstrip("/").replace(" ", "%20")
            assert answer.status_code in (400, 404, 405) or (moved and answer.status_code < 500), (
                method,
                path,
                answer.status_code,
            )
            assert SECRET not in answer.text, (method, path)
            assert moved or "theirs" not in answer.text, (method, path)

        for value in bad:
            check("GET", f"/job/{job}", params={"run": value})
            check("GET", f"/events/job/{job}", params={"run": value})
            check("GET", f"/job/{value}")
            check("GET", f"/api/jobs/{value}")
            check("POST", f"/api/jobs/{value}/stop")
            check("POST", f"/api/runs/{value}/apply")
            check("POST", f"/api/runs/{value}/send", json={"text": "hi"})
            for name in ("transcript.md", "changes.patch", "answer.txt"):
                check("GET", f"/runs/{value}/{name}")
            check("GET", f"/static/{value}")
        # Another job's run, named on this job's routes: not one of its runs.
        check("GET", f"/job/{job}", params={"run": other_run})
        check("GET", f"/events/job/{job}", params={"run": other_run})
        assert len(seen) == len(bad) * 11 + 2
        # What is this job's is served, so the refusals above were no accident.
        own = mine["runs"][0]["runId"]
        assert client.get(f"/job/{job}", params={"run": own}).status_code == 200
        assert "mine" in client.get(f"/runs/{own}/answer.txt").text
        assert client.get(f"/runs/{own}/transcript.md").status_code == 200


@pytest.mark.process
def test_a_planted_patch_path_is_not_followed(
    web: Web, finished: Callable[..., dict[str, Any]], tmp_path: Path
) -> None:
    """result.json names its patch; the page reads the run directory's own, whatever it says."""
    job = finished(pi.answer("done"))
    result_path = Path(job["runs"][0]["paths"]["transcript"]).with_name("result.json")
    _plant(tmp_path / "elsewhere")
    result = json.loads(result_path.read_text())
    result["worktree"] = {
        "repo": str(tmp_path), "branch": "b", "base": "1", "commit": "2", "filesChanged": 1,
        "patch": str(tmp_path / "elsewhere" / "changes.patch"),
    }  # fmt: skip
    result_path.write_text(json.dumps(result))
    with web.client() as client:
        page = client.get(f"/job/{job['jobId']}")
    assert page.status_code == 200 and '<section class="diff">' in page.text
    assert SECRET not in page.text


def test_sessions_are_random_expire_and_end_at_sign_out(web: Web) -> None:
    with (
        httpx2.Client(base_url=web.base, timeout=30) as one,
        httpx2.Client(base_url=web.base, timeout=30) as two,
    ):
        a = one.get(f"/?token={TOKEN}")
        b = two.get(f"/?token={TOKEN}")
        cookie = a.headers["set-cookie"]
        assert f"subagents_web_{web.port}=" in cookie and "Max-Age=" in cookie
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        value = one.cookies[f"subagents_web_{web.port}"]
        assert value != two.cookies[f"subagents_web_{web.port}"] and TOKEN not in value
        assert b.status_code == 303
        page = one.get("/")
        assert page.status_code == 200
        csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', page.text)
        assert csrf
        # Sign-out is an action like the others: the page's CSRF token and Origin.
        assert one.post("/signout", headers={"Origin": web.base}).status_code == 403
        out = one.post("/signout", headers={"Origin": web.base, "X-CSRF-Token": csrf.group(1)})
        assert out.status_code == 200 and "Max-Age=0" in out.headers["set-cookie"]
        one.cookies.set(f"subagents_web_{web.port}", value)  # kept by a thief: no longer valid
        assert one.get("/").status_code == 401
        assert two.get("/").status_code == 200  # the other session goes on


def test_a_one_time_code_signs_in_once(web: Web) -> None:
    """What ``--open`` hands the browser: a code, not the token, good for one sign-in."""
    code = web.app.one_time_code()
    assert TOKEN not in code
    with httpx2.Client(base_url=web.base, timeout=30) as client:
        signed = client.get("/job/x", params={"code": code})
        assert signed.status_code == 303 and signed.headers["location"] == "/job/x"
        assert client.get("/").status_code == 200
    with httpx2.Client(base_url=web.base, timeout=30) as again:
        assert again.get("/", params={"code": code}).status_code == 401


@pytest.mark.process
def test_the_address_carries_the_token_only_when_the_server_made_it(
    isolated_state: Path,
) -> None:
    chosen = "my-own-chosen-token-1234"
    with web_command({"SUBAGENTS_WEB_TOKEN": chosen}) as (_proc, base, line):
        assert chosen not in line and "?token=YOUR-TOKEN" in line, line
        with httpx2.Client(base_url=base, timeout=30) as client:
            assert client.get("/\\evil.example/").status_code == 400
            assert client.get("/%5Cevil.example/", params={"token": chosen}).status_code == 400
            signed = client.get("/", params={"token": chosen})
            assert signed.status_code == 303 and signed.headers["location"] == "/"


@pytest.mark.process
def test_bad_parameters_are_a_page_with_the_reason(
    web: Web, finished: Callable[..., dict[str, Any]]
) -> None:
    job = finished(pi.answer("x"))["jobId"]
    with web.client() as client:
        for path, params, words in [
            ("/cost", {"session": "x/y"}, "session"),
            ("/cost", {"since": "whenever"}, "invalid time"),
            ("/job/zzzz", {}, "zzzz"),
            (f"/job/{job}", {"run": "nope"}, "no run"),
            ("/", {"since": "yesterday-ish", "status": "sleepy"}, "sleepy"),
        ]:
            answer = client.get(path, params=params)
            assert answer.status_code < 500, (path, params)
            assert answer.headers["content-type"].startswith("text/html")
            assert words in answer.text and 'class="problem"' in answer.text, (path, params)


def test_no_markup_is_built_outside_the_templates() -> None:
    """Every page comes from web/templates/ (autoescape): no f-string in web/ holds a tag."""
    tag = re.compile(r"""\bf(["']{1,3})[^"'\n]*<[a-zA-Z/!]""")
    found = [
        f"{path.name}:{n}"
        for path in sorted(WEB.glob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if tag.search(line)
    ]
    assert found == []
    assert not (WEB / "layout.py").exists()
