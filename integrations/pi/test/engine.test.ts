/**
 * The pi package's pure functions (engine.ts), under node's own test runner: node runs the
 * TypeScript as it is (type stripping), as pi loads it, without a build.
 * `node --test integrations/pi/test/` (scripts/test runs it).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import {
	applyRecord, applyResult, asJob, cliFailure, firstLine, modeOf, newView, outcome, parseJson, piUsage, receiptLine, refusalOf,
	summaryOf, waitingNotice,
} from "../engine.ts";

test("the engine's usage as pi's, cost a number or none", () => {
	const u = piUsage({ input: 3, output: 4, totalTokens: 7, cost: 0.5 });
	assert.deepEqual([u.input, u.output, u.cacheRead, u.totalTokens, u.cost.total], [3, 4, 0, 7, 0.5]);
	assert.equal(piUsage({ cost: null }).cost.total, 0);
	assert.equal(piUsage(undefined).totalTokens, 0);
});

test("a call's mode from its arguments", () => {
	assert.equal(modeOf({ chain: [{}] }), "chain");
	assert.equal(modeOf({ tasks: [{}] }), "parallel");
	assert.equal(modeOf({ council: ["pi"] }), "council");
	assert.equal(modeOf({}), "single");
});

test("text helpers: JSON that may not be, a task's first line", () => {
	assert.equal(parseJson("{"), undefined);
	assert.deepEqual(parseJson('{"a":1}'), { a: 1 });
	assert.equal(firstLine("\n  \n  do this \nthen that"), "do this");
	assert.equal(firstLine(""), "");
});

test("run --json's result.json is read as a job of one run", () => {
	const job = asJob({ runId: "r1", jobId: "j1", status: "completed", finalText: "hi" }, "single");
	assert.equal(job?.jobId, "j1");
	assert.equal(job?.runs?.[0].runId, "r1");
	assert.equal(job?.finalText, "hi");
	assert.equal(asJob({ jobId: "j2", mode: "parallel", status: "failed", runs: [] }, "single")?.mode, "parallel");
	assert.equal(asJob("nope", "single"), undefined);
});

test("a CLI failure: bad input is its own words, else how it ended", () => {
	assert.equal(cliFailure({ code: 2, signal: null, stdout: "", stderrTail: ["subagents: bad"] }), "subagents: bad");
	assert.equal(cliFailure({ code: null, signal: "SIGKILL", stdout: "", stderrTail: [] }), "subagents was killed by SIGKILL");
	assert.equal(cliFailure({ code: 1, signal: null, stdout: "", stderrTail: ["x"] }), "subagents exited with code 1:\nx");
});

test("progress records fill the view in: the job, then each run's progress", () => {
	const view = newView("parallel", [{ task: "a\nmore" }, { task: "b" }]);
	assert.deepEqual(view.runs.map((r) => r.task), ["a", "b"]);
	applyRecord(view, { type: "job", jobId: "j", mode: "parallel", startedAt: "2026-01-01T00:00:00.000Z", steps: [] });
	assert.equal(view.status, "running");
	assert.equal(view.jobId, "j");
	applyRecord(view, { type: "progress", index: 1, runId: "r2", text: "$ ls", status: "running", toolCount: 1, usage: { totalTokens: 5, cost: 0.1 } });
	assert.deepEqual(view.runIds, ["r2"]);
	assert.deepEqual(view.runs[1].lines, ["$ ls"]);
	assert.equal(view.usage.totalTokens, 5);
	applyRecord(view, { type: "progress", index: 0, runId: "r1", text: "x", usage: { totalTokens: 2 } });
	assert.equal(view.usage.totalTokens, 7); // summed over the runs
});

test("the parent's answer is the engine's last record, not rebuilt", () => {
	const view = newView("chain", [{ task: "a" }, { task: "b" }]);
	applyRecord(view, { type: "answer", jobId: "j", status: "failed", text: "1 of 2 tasks did not complete", isError: false });
	assert.deepEqual(outcome(view), { text: "1 of 2 tasks did not complete", isError: false });
	// Without one (the CLI ended before the job did), the status says it.
	const bare = newView("single", [{ task: "x" }], "j9");
	bare.status = "failed";
	assert.deepEqual(outcome(bare), { text: "subagent job j9 ended failed", isError: true });
});

test("the engine names each run and words its end: roles, a budget's mark, plain reasons, one duration", () => {
	const view = newView("council", [{ task: "say hi" }]);
	const steps = [{ task: "say hi", role: "A" }, { task: "say hi", role: "B" }, { task: "judge the answers", role: "judge" }];
	applyRecord(view, { type: "job", jobId: "j", mode: "council", steps });
	assert.deepEqual(view.runs.map((r) => r.role), ["A", "B", "judge"]);
	applyRecord(view, {
		type: "answer", jobId: "j", status: "completed", text: "merged", isError: false, durationMs: 14300,
		runs: [{ mark: "⏹ turn limit 3 · wrapped up", used: "4 turns used" }, { why: "stopped by you" }, {}],
		verdict: ["best A · agreement full"],
	});
	assert.equal(view.runs[0].mark, "⏹ turn limit 3 · wrapped up");
	assert.equal(view.durationMs, 14300);
	assert.deepEqual(view.verdict, ["best A · agreement full"]);
	// The job result after it keeps the plain words and the engine's one duration.
	applyResult(view, {
		jobId: "j", mode: "council", status: "completed", durationMs: 14300,
		runs: [{ status: "completed" }, { status: "aborted", errorMessage: "aborted: the supervisor received SIGTERM" }, { status: "completed" }],
	});
	assert.equal(view.runs[1].error, "stopped by you");
	assert.equal(view.durationMs, 14300);
	// Its entry counts the members, not the judge, and says the verdict.
	assert.match(summaryOf(view), /^council 1\/2 members answered; verdict: best A · agreement full; merged/);
});

test("the job result ends each run; steps never reached are not run", () => {
	const view = newView("chain", [{ task: "one" }, { task: "two" }]);
	applyResult(view, {
		jobId: "j", mode: "chain", status: "failed",
		runs: [{ runId: "r1", status: "failed", errorMessage: "boom", diagnostics: "## Error\nboom", toolCalls: 2, durationMs: 10 }],
	});
	assert.equal(view.runs[0].error, "boom");
	assert.equal(view.runs[0].text, "## Error\nboom");
	assert.equal(view.runs[0].toolCount, 2);
	assert.equal(view.runs[1].status, "not run");
	assert.match(summaryOf(view), /^chain 0\/2 completed; "one" failed: boom; "two" not run/);
});

test("a receipt in words", () => {
	assert.equal(receiptLine({ runId: "r", id: "m1", mode: "steer", receipt: "queued" }), "queued: steer m1 to run r");
	assert.equal(receiptLine({ runId: "r", id: "m1", mode: "steer", receipt: "refused", reason: "ended" }), "refused: steer m1 to run r (ended)");
});

test("a refusal names the place as the tool's caller wrote it, not as the command line did", () => {
	const flags = { maxTurns: "--max-turns", acpCommand: "--acp-command", jobMaxCost: "--job-max-cost", quorum: "--quorum" };
	const refused = (loc: (string | number)[], flag: string | null) => JSON.stringify({ refused: { loc, problem: "the problem", flag } });
	assert.equal(refusalOf(refused(["steps", 0, "acp_command"], "--acp-command"), "single", flags), "acpCommand: the problem");
	assert.equal(refusalOf(refused(["steps", 1, "max_turns"], "--max-turns"), "chain", flags), "chain.1.maxTurns: the problem");
	assert.equal(refusalOf(refused(["tasks", 2, "max_turns"], "--max-turns"), "parallel", flags), "tasks.2.maxTurns: the problem");
	// A job option: its own parameter (the job's max_cost is jobMaxCost, not a step's maxCost).
	assert.equal(refusalOf(refused(["max_cost"], "--job-max-cost"), "parallel", flags), "jobMaxCost: the problem");
	// No flag (the task, the backend): the engine's name, in the tool's spelling.
	assert.equal(refusalOf(refused(["steps", 0, "output_schema"], null), "single", flags), "outputSchema: the problem");
	assert.equal(refusalOf(refused([], null), "single", flags), "the problem");
	assert.equal(refusalOf("not json", "single", flags), undefined);
	assert.equal(refusalOf(JSON.stringify({ status: "failed" }), "single", flags), undefined);
});

test("a map is counted from its records, never a run per row", () => {
	const view = newView(modeOf({ map: { input: "rows.csv" } }), []);
	assert.equal(view.mode, "map");
	applyRecord(view, { type: "map", jobId: "j1", total: 4, done: 0, completed: 0, failed: 0, running: 2, etaSeconds: null, cost: null, maxCost: 5, failures: [] });
	assert.equal(view.jobId, "j1");
	assert.equal(view.status, "running");
	assert.ok(view.startedAt);
	applyRecord(view, { type: "row", index: 2, status: "failed" });
	applyRecord(view, { type: "map", jobId: "j1", total: 4, done: 3, completed: 2, failed: 1, running: 1, etaSeconds: 4.5, cost: 0.02, maxCost: 5, failures: [{ reason: "timeout", rows: 1 }] });
	assert.deepEqual([view.map?.done, view.map?.running, view.map?.etaSeconds, view.map?.maxCost], [3, 1, 4.5, 5]);
	assert.deepEqual(view.map?.failures, [{ reason: "timeout", rows: 1 }]);
	assert.equal(view.usage.cost.total, 0.02);
	assert.equal(view.runs.length, 0);
	const map = { total: 4, completed: 3, failed: 1, failures: [{ reason: "timeout", rows: 1 }], out: "r.csv" };
	applyRecord(view, { type: "answer", status: "failed", text: "map j1: 3/4 rows completed (1 row: timeout)", isError: false, durationMs: 900, map });
	assert.deepEqual([view.map?.done, view.map?.running, view.map?.out, view.durationMs], [4, 0, "r.csv", 900]);
	assert.deepEqual(outcome(view), { text: "map j1: 3/4 rows completed (1 row: timeout)", isError: false });
	applyResult(view, { jobId: "j1", mode: "map", status: "failed", runs: [{ runId: "r1" }, { runId: "r2" }], usage: { totalTokens: 90, cost: 0.03 }, map });
	assert.equal(view.runs.length, 0);
	assert.deepEqual([view.status, view.usage.totalTokens, view.map?.completed], ["failed", 90, 3]);
});

test("a chain step shows its template as the engine words it, then its task filled", () => {
	const view = newView("chain", [{ task: "find the TODOs" }, { task: "fix: {previous}" }]);
	applyRecord(view, { type: "job", jobId: "j", mode: "chain", steps: [{ task: "find the TODOs", role: "step 1/2" }, { task: "fix: ⟨step 1's answer⟩", role: "step 2/2" }] });
	assert.deepEqual(view.runs.map((r) => [r.role, r.task]), [["step 1/2", "find the TODOs"], ["step 2/2", "fix: ⟨step 1's answer⟩"]]);
	applyRecord(view, { type: "progress", index: 1, runId: "r2", text: "Started pi", task: "fix: TODO in main.py" });
	assert.equal(view.runs[1].task, "fix: TODO in main.py");
	applyRecord(view, { type: "progress", index: 1, runId: "r2", text: "$ ls" });
	assert.equal(view.runs[1].task, "fix: TODO in main.py");
});

test("a run that waits on a person is a notice; one waiting on the parent, or decided, is not", () => {
	const view = newView("single", [{ task: "edit" }], "j1");
	const asked = (state: string, waitsFor: string | null) => ({ type: "progress", index: 0, text: "⏸", approval: { item: "i1", state, summary: "Edit a.txt", waitsFor } });
	assert.equal(waitingNotice(view, asked("requested", "person")), "⏸ subagent job j1 waits for your decision: Edit a.txt (item i1; /subagents inbox: approve or deny)");
	assert.equal(waitingNotice(view, asked("requested", "parent")), undefined);
	assert.equal(waitingNotice(view, asked("decided", "person")), undefined);
	assert.equal(waitingNotice(view, { type: "progress", index: 0, text: "$ ls" }), undefined);
});
