"""Screenshots of ``subagents web`` for docs/web.md, made by the tests' headless chromium.

    .venv/bin/python scripts/web_screenshots.py docs/

Fills a fresh state directory with jobs of the fake agent (the tests' own: real supervisors,
a scripted child) in two throwaway git repositories (finished, failed, over its budget,
parallel, isolated with a diff, one still running), serves the dashboard over it and saves the fleet, a job,
an isolated run's diff and the cost page as PNG files in the given directory.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))


def main(out: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix="sa-shots-"))
    os.environ["SUBAGENTS_HOME"] = str(work / "state")
    os.environ["SUBAGENTS_CONFIG_DIR"] = str(work / "config")
    os.environ["SUBAGENTS_SESSION"] = "refactor-auth"

    from support import pistream as pi
    from support.git import git_repo
    from support.webserver import chromium, until, web_server

    import subagents
    from subagents.testing.fakeagent import SCRIPT_ENV, write_launcher, write_script

    fake = work / "fake"
    fake.mkdir()
    os.environ["SUBAGENTS_PI_BIN"] = str(write_launcher(fake))
    api_repo = git_repo(
        work / "src" / "billing-api", {"app.py": "def total(xs):\n    return sum(xs)\n"}
    )
    web_repo = git_repo(work / "src" / "storefront", {"README.md": "# storefront\n"})
    count = [0]

    def script(steps: list[dict[str, object]]) -> dict[str, str]:
        count[0] += 1
        return {SCRIPT_ENV: str(write_script(fake, steps, f"s{count[0]}.json"))}

    def work_then(
        answer: str, seconds: float, command: str = "pytest -q"
    ) -> list[dict[str, object]]:
        return [*pi.start(), *pi.tool_use(command=command), {"sleep": seconds}, *pi.tool_end(output="12 passed\n"), pi.text_end(answer), *pi.end()]  # fmt: skip

    done = subagents.start(
        "Summarize the billing module", cwd=api_repo,
        env=script(work_then("The billing module has **3** entry points:\n\n- `total`\n- `refund`\n- `invoice`", 0.4, "rg -n def")),
    )  # fmt: skip
    done.wait(60)
    failed = subagents.start("Run the migrations", cwd=web_repo, env=script([*pi.start(), {"stderr": "error: database is locked\n"}, {"exit": 3}]))  # fmt: skip
    failed.wait(60)
    turns = [step for i in range(3) for step in (*pi.tool_use(f"t{i}", command=f"rg -n logging src/part{i}"), *pi.tool_end(f"t{i}"))]  # fmt: skip
    over = subagents.start(
        {"mode": "single", "steps": [{"task": "Tidy the logging calls", "max_tokens": 20}]},
        cwd=api_repo, env=script([*pi.start(), *turns, pi.text_end("Tidied two of them."), *pi.end()]),
    )  # fmt: skip
    over.wait(60)
    iso = subagents.start(
        {"mode": "single", "steps": [{"task": "Handle an empty list in total()", "isolate": "worktree"}]},
        cwd=api_repo,
        env=script([{"write": "app.py", "text": "def total(xs):\n    if not xs:\n        return 0\n    return sum(xs)\n"},
                    {"write": "test_app.py", "text": "from app import total\n\n\ndef test_empty():\n    assert total([]) == 0\n"},
                    *work_then("Done: `total([])` is 0 now, with a test.", 0.3)]),
    )  # fmt: skip
    iso.wait(60)
    gate = work / "gate"
    parallel = subagents.start(
        {"mode": "parallel", "concurrency": 2, "tasks": [
            {"task": "Review the checkout flow for race conditions"},
            {"task": "Review the cart for input validation"},
            {"task": "Review the payment webhooks"},
        ]},
        cwd=web_repo,
        env=script([*pi.start(), *pi.tool_use(command="rg -n 'async def' src/"), {"sleep": 0.6}, *pi.tool_end(output="src/checkout.py:12\n"),
                    *pi.tool_use("c2", command="pytest tests/test_checkout.py -q"), {"wait_for": str(gate)}, *pi.tool_end("c2"),
                    pi.text_end("No race found."), *pi.end()]),
    )  # fmt: skip
    shots = [
        ("web-fleet", "/", "document.getElementById('live').classList.contains('on') && document.querySelector('tbody.job-rows')"),
        ("web-job", f"/job/{parallel.job_id}", "document.querySelector('svg.gantt') && document.querySelector('#transcript li')"),
        ("web-diff", f"/job/{iso.job_id}", "document.querySelector('section.diff table.files')"),
        ("web-cost", "/cost", "document.querySelector('table.cost')"),
    ]  # fmt: skip
    try:
        with web_server(Path(os.environ["SUBAGENTS_HOME"])) as web, chromium() as browser:
            browser.get(web.sign_in)
            for size, suffix in (({"width": 1400, "height": 900, "mobile": False}, ""), ({"width": 390, "height": 844, "mobile": True}, "-phone")):  # fmt: skip
                browser.execute_cdp_cmd(
                    "Emulation.setDeviceMetricsOverride", {**size, "deviceScaleFactor": 1}
                )
                for name, path, ready in shots:
                    browser.get(web.base + path)
                    until(browser, ready, 60)
                    browser.save_screenshot(str(out / f"{name}{suffix}.png"))
    finally:
        gate.touch()
        parallel.wait(60)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs").resolve())
