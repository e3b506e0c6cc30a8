/**
 * subagents for pi: the `subagent` tool, over the `subagents` CLI.
 *
 * Thin on purpose: the engine spawns the agents, decides how they ended, words the progress
 * (the same lines as transcript.md) and writes the diagnostics. This file builds an argv,
 * relays the engine's JSON progress records (`run --progress jsonl`), and records lifecycle
 * entries in pi's own session file. See docs/pi.md.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { dirname, join } from "node:path";
import type { Usage } from "@earendil-works/pi-ai";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { type Static, Type } from "typebox";

const BIN = () => process.env.SUBAGENTS_BIN || "subagents";
const ENTRY = "agent_event";
const MESSAGE = "subagent_result";
const SUMMARY_CHARS = 300;

const Step = Type.Object({
	task: Type.String({ description: "The task for this step ({previous} = the previous step's answer, in a chain)" }),
	agent: Type.Optional(Type.String({ description: "Agent for this step (see `subagents agents`)" })),
});
const Params = Type.Object({
	task: Type.Optional(Type.String({ description: "One task. Give exactly one of task, tasks, chain." })),
	tasks: Type.Optional(Type.Array(Step, { description: "Tasks run in parallel" })),
	chain: Type.Optional(Type.Array(Step, { description: "Steps run one after another" })),
	agent: Type.Optional(Type.String({ description: "Agent (see `subagents agents`)" })),
	model: Type.Optional(Type.String({ description: "Model, e.g. provider/id" })),
	backend: Type.Optional(Type.String({ description: "pi, claude, codex, gemini or opencode" })),
	cwd: Type.Optional(Type.String({ description: "Working directory for the child agent(s)" })),
	background: Type.Optional(Type.Boolean({ description: "Return at once with the job id; the result arrives later as a message" })),
});
type Params = Static<typeof Params>;

/** The engine's usage (result.json); cost is a number or null. */
interface EngineUsage { input?: number; output?: number; cacheRead?: number; cacheWrite?: number; totalTokens?: number; cost?: number | null }
interface RunResult { runId?: string; agent?: string | null; backend?: string; model?: string | null; status?: string; finalText?: string | null; errorMessage?: string | null; diagnostics?: string | null; usage?: EngineUsage; paths?: { transcript?: string } }
interface JobResult { jobId: string; mode: string; status: string; runs?: RunResult[]; runIds?: string[]; finalText?: string | null; usage?: EngineUsage; startedAt?: string; completedAt?: string; durationMs?: number; driver?: { pid?: number } }
interface FeedRecord { type: string; jobId?: string; runId?: string | null; index?: number; label?: string; text?: string; status?: string; activity?: string | null; toolCount?: number; usage?: EngineUsage }
export interface RunProgress { runId?: string | null; label?: string; status: string; activity?: string | null; toolCount: number; usage: Usage; text?: string }
export interface SubagentDetails { jobId?: string; runIds: string[]; status: string; usage: Usage; runs?: RunProgress[] }

function piUsage(u: EngineUsage | undefined): Usage {
	const n = (x: unknown) => (typeof x === "number" ? x : 0);
	return {
		input: n(u?.input), output: n(u?.output), cacheRead: n(u?.cacheRead), cacheWrite: n(u?.cacheWrite),
		totalTokens: n(u?.totalTokens),
		cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: n(u?.cost) },
	};
}

function parseJson(text: string): unknown {
	try { return JSON.parse(text); } catch { return undefined; }
}

/** `run --json` prints result.json for one run and the job result otherwise: always a job. */
function asJob(obj: unknown, mode: string): JobResult | undefined {
	if (!obj || typeof obj !== "object") return undefined;
	const o = obj as Record<string, unknown>;
	if (Array.isArray(o.runs) || typeof o.jobId === "string" && typeof o.runId !== "string") return o as unknown as JobResult;
	if (typeof o.runId === "string") {
		const r = o as RunResult & { jobId?: string; startedAt?: string; completedAt?: string; durationMs?: number };
		return { jobId: r.jobId ?? "", mode, status: r.status ?? "failed", runs: [r], finalText: r.finalText, usage: r.usage, startedAt: r.startedAt, completedAt: r.completedAt, durationMs: r.durationMs };
	}
	return undefined;
}

interface CliExit { code: number | null; signal: NodeJS.Signals | null; stdout: string; stderrTail: string[] }
interface CliOptions { cwd?: string; onRecord?: (r: FeedRecord) => void; signal?: AbortSignal; onAbort?: () => void; onSpawn?: (pid: number | undefined) => void }

/** Run the CLI with an argv (never a shell). JSON records on stderr go to onRecord; other lines are kept as a tail. */
function runCli(args: string[], opts: CliOptions = {}): Promise<CliExit> {
	return new Promise((resolve, reject) => {
		const child = spawn(BIN(), args, { cwd: opts.cwd, stdio: ["ignore", "pipe", "pipe"], env: process.env });
		opts.onSpawn?.(child.pid);
		let stdout = "";
		let pending = "";
		const tail: string[] = [];
		const take = (line: string) => {
			const rec = line.startsWith("{") ? (parseJson(line) as FeedRecord | undefined) : undefined;
			if (rec && typeof rec.type === "string") opts.onRecord?.(rec);
			else if (line.trim()) { tail.push(line); if (tail.length > 40) tail.shift(); }
		};
		child.stdout.setEncoding("utf8").on("data", (d: string) => { stdout += d; });
		child.stderr.setEncoding("utf8").on("data", (d: string) => {
			const lines = (pending + d).split("\n");
			pending = lines.pop() ?? "";
			for (const line of lines) take(line);
		});
		let killer: NodeJS.Timeout | undefined;
		const abort = () => {
			opts.onAbort?.();
			child.kill("SIGTERM"); // the CLI stops its job (process groups killed) and exits 130
			killer = setTimeout(() => child.kill("SIGKILL"), 15_000);
			killer.unref();
		};
		if (opts.signal?.aborted) abort();
		else opts.signal?.addEventListener("abort", abort, { once: true });
		child.on("error", (err: NodeJS.ErrnoException) => {
			opts.signal?.removeEventListener("abort", abort);
			reject(err.code === "ENOENT" ? new Error(`subagents CLI not found: ${BIN()} (put it on PATH, or set SUBAGENTS_BIN)`) : err);
		});
		child.on("close", (code, signal) => {
			opts.signal?.removeEventListener("abort", abort);
			if (killer) clearTimeout(killer);
			if (pending) take(pending);
			resolve({ code, signal, stdout, stderrTail: tail });
		});
	});
}

function answerText(job: JobResult): string {
	const runs = job.runs ?? [];
	if (job.mode === "parallel") {
		return runs.map((r, i) => `## ${i + 1}. ${r.agent ?? r.backend ?? "task"} (${r.status})\n\n${r.finalText || r.errorMessage || ""}`).join("\n\n");
	}
	return job.finalText || runs[runs.length - 1]?.finalText || "";
}

/** The engine's diagnostics for the runs that did not complete, else what the CLI said. */
function failureText(job: JobResult | undefined, exit: CliExit): string {
	const parts = (job?.runs ?? []).filter((r) => r.status !== "completed").map((r) => r.diagnostics || r.errorMessage || `run ${r.runId} ${r.status}`);
	if (parts.length) return parts.join("\n\n");
	if (job) return `subagent job ${job.jobId} ${job.status}`;
	const how = exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
	return `subagents ${how}${exit.stderrTail.length ? `:\n${exit.stderrTail.join("\n")}` : ""}`;
}

function requester(): string {
	try { return process.env.USER || userInfo().username || "assistant"; } catch { return "assistant"; }
}

export default function (pi: ExtensionAPI) {
	// A child pi that subagents started loads installed packages too: no delegation from there.
	if (process.env.PI_SUBAGENTS_CHILD === "1") return;

	const ended = new Set<string>(); // jobs whose end entry this session holds
	const watchers = new Map<string, () => void>(); // background jobs being waited for

	// After session_shutdown every pi.* call throws ("ctx is stale"): guard the async paths.
	let alive = true;
	const safely = (what: string, fn: () => void) => {
		if (!alive) return;
		try { fn(); } catch (err) { console.error(`subagents: ${what} failed: ${(err as Error).message}`); }
	};
	const recordStart = (jobId: string, mode: string, params: Params, pid: number | undefined, sessionId: string) => {
		safely("appendEntry", () => pi.appendEntry(ENTRY, {
			eventType: "subagent:start", jobId, requestedBy: requester(), agentName: params.agent ?? null,
			mode, pid: pid ?? null, startedAt: new Date().toISOString(), sessionId, background: Boolean(params.background),
		}));
	};
	const recordEnd = (job: JobResult, summary: string, pid?: number) => {
		if (!job.jobId || ended.has(job.jobId)) return;
		ended.add(job.jobId);
		const status = job.status;
		const eventType = status === "completed" ? "subagent:complete" : status === "aborted" ? "subagent:aborted" : "subagent:error";
		const runs = job.runs ?? [];
		const dirs = runs.map((r) => (r.paths?.transcript ? dirname(r.paths.transcript) : undefined)).filter(Boolean);
		safely("appendEntry", () => pi.appendEntry(ENTRY, {
			eventType, jobId: job.jobId, requestedBy: requester(), agentName: runs[0]?.agent ?? null, mode: job.mode,
			pid: pid ?? job.driver?.pid ?? null, startedAt: job.startedAt ?? null, completedAt: job.completedAt ?? new Date().toISOString(),
			durationMs: job.durationMs ?? null, model: runs[0]?.model ?? null, usage: piUsage(job.usage), status,
			summary: summary.replace(/\s+/g, " ").trim().slice(0, SUMMARY_CHARS),
			runIds: runs.map((r) => r.runId).filter(Boolean), runDir: dirs.length === 1 ? dirs[0] : dirs,
		}));
	};
	const details = (job: JobResult | undefined, jobId: string | undefined, status: string): SubagentDetails => ({
		jobId: job?.jobId || jobId, runIds: (job?.runs ?? []).map((r) => r.runId ?? "").filter(Boolean), status, usage: piUsage(job?.usage),
	});
	/** End entry + a custom message; `live`: pi is running, so a follow-up that may start a turn. */
	const notify = (job: JobResult, exit: CliExit, intro: string, live: boolean) => {
		const text = job.status === "completed" ? answerText(job) : failureText(job, exit);
		recordEnd(job, text);
		safely("sendMessage", () => pi.sendMessage(
			{ customType: MESSAGE, content: `${intro} (${job.status}):\n\n${text}`, display: true, details: details(job, job.jobId, job.status) },
			live ? { deliverAs: "followUp", triggerTurn: true } : undefined,
		));
	};

	/** Wait for a background job in a child `subagents wait`; deliver its end into the session. */
	const watch = (jobId: string, cwd: string) => {
		if (watchers.has(jobId)) return;
		const stop = new AbortController();
		watchers.set(jobId, () => stop.abort());
		runCli(["wait", jobId, "--json"], { cwd, signal: stop.signal }).then((exit) => {
			watchers.delete(jobId);
			const job = asJob(parseJson(exit.stdout), "single");
			if (!job || stop.signal.aborted) return; // pi is going away: session_start reconciles later
			notify(job, exit, `Background subagent job ${jobId} ended`, true);
		}, () => watchers.delete(jobId));
	};

	pi.registerTool({
		name: "subagent",
		label: "Subagent",
		description: "Delegate work to child coding agents run by the `subagents` engine. Give exactly one of: task (one agent), tasks (in parallel), chain (in order; {previous} = the previous answer). background: true returns at once with a job id and delivers the result later as a message.",
		parameters: Params,
		async execute(_toolCallId, params: Params, signal, onUpdate, ctx: ExtensionContext) {
			const given = [params.task, params.tasks, params.chain].filter((x) => x !== undefined).length;
			if (given !== 1) throw new Error("give exactly one of task, tasks or chain");
			const steps = params.tasks ?? params.chain;
			if (steps && steps.length === 0) throw new Error("tasks/chain must not be empty");
			const mode = params.chain ? "chain" : params.tasks ? "parallel" : "single";
			const sessionId = ctx.sessionManager.getSessionId();

			const args = ["run", "--json", "--session", sessionId, "--cwd", params.cwd ?? ctx.cwd];
			for (const [flag, value] of [["--agent", params.agent], ["--model", params.model], ["--backend", params.backend]] as const) {
				if (value) args.push(flag, value);
			}
			let planDir: string | undefined;
			const tail: string[] = [];
			if (steps) {
				// Per-step agents need a plan file (0600, removed after the CLI read it).
				planDir = mkdtempSync(join(tmpdir(), "pi-subagents-"));
				const plan = join(planDir, "plan.json");
				writeFileSync(plan, JSON.stringify({ mode, steps: steps.map((s) => ({ task: s.task, ...(s.agent ? { agent: s.agent } : {}) })) }), { mode: 0o600 });
				args.push("--plan", plan);
			} else {
				tail.push("--", params.task ?? "");
			}

			try {
				if (params.background) {
					const exit = await runCli([...args, "--bg", ...tail], { cwd: ctx.cwd });
					const started = parseJson(exit.stdout) as { jobId?: string; pid?: number } | undefined;
					if (!started?.jobId) throw new Error(failureText(undefined, exit));
					recordStart(started.jobId, mode, params, started.pid, sessionId);
					watch(started.jobId, ctx.cwd);
					return {
						content: [{ type: "text", text: `Started background subagent job ${started.jobId}; its result will arrive as a message when it ends.` }],
						details: details(undefined, started.jobId, "running"),
					};
				}

				// Foreground: the CLI stops the job if pi dies (print mode exits on SIGINT without telling us).
				const fg = [...args, "--progress", "jsonl", "--parent-pid", String(process.pid), ...tail];
				let jobId: string | undefined;
				let cliPid: number | undefined;
				const live = new Map<number, RunProgress>();
				const onRecord = (r: FeedRecord) => {
					if (r.type === "job" && r.jobId && !jobId) {
						jobId = r.jobId;
						recordStart(jobId, mode, params, cliPid, sessionId);
						return;
					}
					if (r.type !== "progress") return;
					live.set(r.index ?? 0, { runId: r.runId, label: r.label, status: r.status ?? "running", activity: r.activity, toolCount: r.toolCount ?? 0, usage: piUsage(r.usage), text: r.text });
					const runs = [...live.entries()].sort(([a], [b]) => a - b).map(([, p]) => p);
					const sum: EngineUsage = {};
					for (const p of live.values()) {
						for (const k of ["input", "output", "cacheRead", "cacheWrite", "totalTokens"] as const) sum[k] = (sum[k] ?? 0) + p.usage[k];
						sum.cost = (sum.cost ?? 0) + p.usage.cost.total;
					}
					const text = runs.length > 1 ? runs.map((p) => `${p.label}: ${p.text ?? ""}`).join("\n") : (r.text ?? "");
					onUpdate?.({
						content: [{ type: "text", text }],
						details: { jobId, runIds: runs.map((p) => p.runId ?? "").filter(Boolean), status: "running", usage: piUsage(sum), runs },
					});
				};
				const exit = await runCli(fg, { cwd: ctx.cwd, onRecord, signal, onSpawn: (pid) => { cliPid = pid; } });
				const job = asJob(parseJson(exit.stdout), mode);
				if (job && !jobId && job.jobId) { jobId = job.jobId; recordStart(jobId, mode, params, cliPid, sessionId); }
				if (signal?.aborted) {
					if (job) recordEnd(job, "aborted by the user", cliPid);
					else if (jobId) recordEnd({ jobId, mode, status: "aborted" }, "aborted by the user", cliPid);
					throw new Error(`subagent job ${jobId ?? ""} aborted`);
				}
				if (!job || job.status !== "completed") {
					const text = failureText(job, exit);
					if (job) recordEnd(job, text, cliPid);
					throw new Error(text);
				}
				const text = answerText(job);
				recordEnd(job, text, cliPid);
				return { content: [{ type: "text", text }], details: details(job, jobId, job.status), usage: piUsage(job.usage) };
			} finally {
				if (planDir) rmSync(planDir, { recursive: true, force: true });
			}
		},
	});

	pi.registerCommand("subagents", {
		description: "This session's subagent jobs; `/subagents stop JOB` stops one",
		handler: async (args, ctx) => {
			const [verb, id] = args.trim().split(/\s+/);
			if (verb === "stop" && id) {
				const exit = await runCli(["stop", id], { cwd: ctx.cwd });
				ctx.ui.notify((exit.stdout.trim() || exit.stderrTail.join("\n")) || `stop ${id}: exit ${exit.code}`, exit.code === 0 ? "info" : "error");
				return;
			}
			const mine = new Set<string>();
			for (const e of ctx.sessionManager.getEntries()) {
				if (e.type === "custom" && e.customType === ENTRY) {
					const d = (e.data ?? {}) as { jobId?: string };
					if (d.jobId) mine.add(d.jobId);
				}
			}
			const exit = await runCli(["ps", "--json", "-n", "200"], { cwd: ctx.cwd });
			const rows = exit.stdout.split("\n").map((l) => parseJson(l) as { jobId?: string; status?: string; mode?: string; agents?: string[]; activity?: string } | undefined)
				.filter((r) => r?.jobId && mine.has(r.jobId));
			const lines = rows.map((r) => `${r!.jobId}  ${r!.status}  ${r!.mode}  ${(r!.agents ?? []).join(",") || "-"}  ${r!.activity ?? ""}`);
			ctx.ui.notify(lines.length ? lines.join("\n") : "no subagent jobs in this session", "info");
		},
	});

	// Jobs started in this session whose end entry is missing (pi was not running when they
	// ended): reconcile from the engine's records, once — the end entry marks it done.
	// Awaited with a bound, so even a print-mode pi records them before it runs its prompt.
	pi.on("session_start", async (_event, ctx) => {
		alive = true;
		const started = new Set<string>();
		for (const e of ctx.sessionManager.getEntries()) {
			if (e.type !== "custom" || e.customType !== ENTRY) continue;
			const d = (e.data ?? {}) as { eventType?: string; jobId?: string };
			if (!d.jobId) continue;
			if (d.eventType === "subagent:start") started.add(d.jobId);
			else ended.add(d.jobId);
		}
		const reconcile = async (jobId: string) => {
			const exit = await runCli(["show", jobId, "--json"], { cwd: ctx.cwd });
			const job = asJob(parseJson(exit.stdout), "single");
			if (!job) return;
			if (job.status === "running" || job.status === "pending") return watch(jobId, ctx.cwd);
			notify(job, exit, `Subagent job ${jobId} ended while pi was away`, false);
		};
		const all = Promise.allSettled([...started].filter((id) => !ended.has(id)).map(reconcile));
		await Promise.race([all, new Promise((r) => setTimeout(r, 10_000).unref())]);
	});

	pi.on("session_shutdown", () => {
		alive = false;
		for (const stop of watchers.values()) stop(); // the jobs run on; only our waiters go
		watchers.clear();
	});
}
