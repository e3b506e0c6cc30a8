/**
 * The `subagents` CLI from pi's side: running it (an argv, never a shell), what it prints
 * (result.json, the job result, the `--progress jsonl` records, `top --json`), and one view
 * of a job that its progress records and its result fill in. No drawing here (render.ts).
 */
import { spawn } from "node:child_process";
import type { Usage } from "@earendil-works/pi-ai";

export const BIN = () => process.env.SUBAGENTS_BIN || "subagents";
const LINES_KEPT = 5; // a run's last progress lines, for the expanded view

/** The engine's usage (result.json); cost is a number or null. */
export interface EngineUsage { input?: number; output?: number; cacheRead?: number; cacheWrite?: number; totalTokens?: number; cost?: number | null }
export interface RunResult {
	runId?: string; agent?: string | null; backend?: string; task?: string; model?: string | null; requestedModel?: string | null;
	status?: string; finalText?: string | null; errorMessage?: string | null; diagnostics?: string | null; usage?: EngineUsage;
	toolCalls?: number; startedAt?: string; durationMs?: number; paths?: { transcript?: string };
}
export interface JobResult {
	jobId: string; mode: string; status: string; runs?: RunResult[]; runIds?: string[]; finalText?: string | null; usage?: EngineUsage;
	startedAt?: string; completedAt?: string; durationMs?: number; driver?: { pid?: number }; errorMessage?: string;
	map?: { total: number; completed: number; failed: number; failures: MapFailure[]; out?: string | null };
}
/** `role`: the run's place in its job (a council's `A`, `B`, `judge`; a chain's `step 2/3`). */
export interface Step { task: string; agent?: string | null; backend?: string | null; model?: string | null; role?: string | null }
/** How a face words a run's end (the `answer` record's `runs`, present/roles.py). */
export interface RunWords { mark?: string | null; used?: string | null; why?: string | null }
/** A `--progress jsonl` record: `job` first, then `progress` (docs/pi.md). */
export interface FeedRecord {
	type: string; jobId?: string; mode?: string; startedAt?: string | number | null; steps?: Step[]; index?: number; runId?: string | null; task?: string;
	text?: string; status?: string; activity?: string | null; toolCount?: number; usage?: EngineUsage; backend?: string | null;
	model?: string | null; stalled?: boolean; warning?: string | null; transcript?: string | null; durationMs?: number | null;
	table?: string; isError?: boolean; runs?: RunWords[]; verdict?: string[];
	/** A map's progress (its `map` records) and, in its `answer`, its rows counted. */
	total?: number; done?: number; completed?: number; failed?: number; running?: number; etaSeconds?: number | null;
	/** A child's request to act (a command, an edit): waiting on someone, or decided. */
	approval?: { item?: string; state?: string; summary?: string; waitsFor?: string | null };
	cost?: number | null; maxCost?: number | null; failures?: MapFailure[]; out?: string | null; map?: { total?: number; completed?: number; failed?: number; failures?: MapFailure[]; out?: string | null };
}
/** A map's rows that did not complete, by why (the engine groups them). */
export interface MapFailure { reason: string; rows: number }
/** A map as pi shows it: one progress row (the engine's `map` records, then its end). */
export interface MapView {
	total: number; done: number; completed: number; failed: number; running: number; etaSeconds?: number | null;
	cost?: number | null; maxCost?: number | null; failures: MapFailure[]; out?: string | null;
}

/** One run as pi shows it: filled in by progress records, then by its result. */
export interface RunView {
	index: number; runId?: string; task: string; agent?: string | null; backend?: string | null; model?: string | null;
	status: string; stalled?: boolean; activity?: string | null; warning?: string | null; lines: string[];
	toolCount: number; usage: Usage; startedAt?: number; durationMs?: number; transcript?: string;
	error?: string | null; text?: string; role?: string | null;
	/** A budget that ended it (`⏹ turn limit 3 · wrapped up`) and what it used. */
	mark?: string | null; used?: string | null;
}
/** The tool's `details`, and the view of a background job. */
export interface SubagentDetails {
	jobId?: string; mode: string; status: string; runIds: string[]; usage: Usage; runs: RunView[];
	startedAt?: string; background?: boolean; stoppedByUser?: boolean;
	/** The job's duration as the engine measured it: the one every view shows. */
	durationMs?: number;
	/** A council judge's verdict in words (best, agreement, reasons, merged answer). */
	verdict?: string[];
	/** A council's answers side by side and the verdict (the feed's `council` record). */
	council?: { table?: string };
	/** A map's progress: its rows counted, the failures grouped by why. */
	map?: MapView;
	/** The parent's answer as the engine composed it (the feed's last record, `answer`). */
	answer?: { text: string; isError: boolean };
}

export function piUsage(u: EngineUsage | undefined): Usage {
	const n = (x: unknown) => (typeof x === "number" ? x : 0);
	return {
		input: n(u?.input), output: n(u?.output), cacheRead: n(u?.cacheRead), cacheWrite: n(u?.cacheWrite),
		totalTokens: n(u?.totalTokens),
		cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: n(u?.cost) },
	};
}

export function parseJson(text: string): unknown {
	try { return JSON.parse(text); } catch { return undefined; }
}

/** A call's mode as its arguments ask it (the engine's job record says it too, once it runs). */
export const modeOf = (args: { tasks?: unknown; chain?: unknown; council?: unknown; map?: unknown }) =>
	args.map ? "map" : args.chain ? "chain" : args.tasks ? "parallel" : args.council ? "council" : "single";

export const firstLine = (text: string) => text.split("\n").find((l) => l.trim())?.trim() ?? "";

/** `run --json` prints result.json for one run and the job result otherwise: always a job. */
export function asJob(obj: unknown, mode: string): JobResult | undefined {
	if (!obj || typeof obj !== "object") return undefined;
	const o = obj as Record<string, unknown>;
	if (Array.isArray(o.runs) || typeof o.jobId === "string" && typeof o.runId !== "string") return o as unknown as JobResult;
	if (typeof o.runId === "string") {
		const r = o as RunResult & { jobId?: string; completedAt?: string };
		// The run's times are not the job's: the job's start came in its `job` record.
		return { jobId: r.jobId ?? "", mode, status: r.status ?? "failed", runs: [r], finalText: r.finalText, usage: r.usage, completedAt: r.completedAt };
	}
	return undefined;
}

export interface CliExit { code: number | null; signal: NodeJS.Signals | null; stdout: string; stderrTail: string[] }
interface CliOptions { cwd?: string; input?: string; onRecord?: (r: FeedRecord) => void; signal?: AbortSignal; onAbort?: () => void; onSpawn?: (pid: number | undefined) => void; onStdout?: (text: string) => void }

/** Run the CLI with an argv (never a shell); `input`, if any, on its stdin (text past an
 * argument's size limit). JSON records on stderr go to onRecord; other lines are kept as a tail. */
export function runCli(args: string[], opts: CliOptions = {}): Promise<CliExit> {
	return new Promise((resolve, reject) => {
		const child = spawn(BIN(), args, { cwd: opts.cwd, stdio: [opts.input === undefined ? "ignore" : "pipe", "pipe", "pipe"], env: process.env });
		opts.onSpawn?.(child.pid);
		if (child.stdin) {
			child.stdin.on("error", () => {}); // a CLI that refused before reading: its exit says why
			child.stdin.end(opts.input);
		}
		let stdout = "";
		let pending = "";
		const tail: string[] = [];
		const take = (line: string) => {
			const rec = line.startsWith("{") ? (parseJson(line) as FeedRecord | undefined) : undefined;
			if (rec && typeof rec.type === "string") opts.onRecord?.(rec);
			else if (line.trim()) { tail.push(line); if (tail.length > 40) tail.shift(); }
		};
		child.stdout?.setEncoding("utf8").on("data", (d: string) => { if (opts.onStdout) opts.onStdout(d); else stdout += d; });
		child.stderr?.setEncoding("utf8").on("data", (d: string) => {
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

/** What the CLI said when it refused or died before a job result. */
/** Where the tool's caller put each mode's steps (a single task's options are the call's own). */
const STEPS_PARAM: Record<string, string> = { parallel: "tasks", chain: "chain", council: "council" };

/**
 * A refusal of the call as its caller wrote it (`maxTurns: …`, `chain.1.acpCommand: …`), from
 * the record `run --json` prints with it (`{"refused": {loc, problem, flag}}`); `names` maps the
 * tool's parameters to the CLI's flags (options.ts's FLAGS). Undefined when there is none.
 */
export function refusalOf(stdout: string, mode: string, names: Record<string, string>): string | undefined {
	const refused = (parseJson(stdout) as { refused?: { loc?: unknown; problem?: unknown; flag?: unknown } } | undefined)?.refused;
	if (!refused || !Array.isArray(refused.loc) || typeof refused.problem !== "string") return undefined;
	const loc = refused.loc.map(String);
	const param = Object.keys(names).find((k) => names[k] === refused.flag);
	const name = param ?? loc[loc.length - 1]?.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());
	let where: string[] = loc;
	if (loc.length === 1) where = [name ?? ""];
	else if (loc.length === 3 && (loc[0] === "steps" || loc[0] === "tasks")) where = mode in STEPS_PARAM ? [STEPS_PARAM[mode], loc[1], name ?? ""] : [name ?? ""];
	const at = where.filter(Boolean).join(".");
	return at ? `${at}: ${refused.problem}` : refused.problem;
}

export function cliFailure(exit: CliExit): string {
	if (exit.code === 2 && exit.stderrTail.length) return exit.stderrTail.join("\n");
	const how = exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
	return `subagents ${how}${exit.stderrTail.length ? `:\n${exit.stderrTail.join("\n")}` : ""}`;
}

// ---- the job view ---------------------------------------------------------------

export function newView(mode: string, steps: Step[], jobId?: string): SubagentDetails {
	return {
		jobId, mode, status: "pending", runIds: [], usage: piUsage(undefined),
		runs: steps.map((s, index) => ({ index, task: firstLine(s.task), agent: s.agent, backend: s.backend, model: s.model, status: "pending", lines: [], toolCount: 0, usage: piUsage(undefined) })),
	};
}

function sumUsage(view: SubagentDetails): void {
	const total: EngineUsage = { cost: 0 };
	for (const r of view.runs) {
		for (const k of ["input", "output", "cacheRead", "cacheWrite", "totalTokens"] as const) total[k] = (total[k] ?? 0) + r.usage[k];
		total.cost = (total.cost ?? 0) + r.usage.cost.total;
	}
	view.usage = piUsage(total);
}

function runAt(view: SubagentDetails, index: number): RunView {
	while (view.runs.length <= index) view.runs.push({ index: view.runs.length, task: "", status: "pending", lines: [], toolCount: 0, usage: piUsage(undefined) });
	return view.runs[index];
}

/** Take a `--progress jsonl` record in. */
export function applyRecord(view: SubagentDetails, rec: FeedRecord): void {
	if (rec.type === "job") {
		view.jobId = rec.jobId ?? view.jobId;
		view.mode = rec.mode ?? view.mode;
		if (typeof rec.startedAt === "string") view.startedAt = rec.startedAt;
		if (view.status === "pending") view.status = "running";
		(rec.steps ?? []).forEach((s, i) => {
			const run = runAt(view, i);
			// (the engine's words for it: a chain step's `{previous}` said as a template's)
			if (s.task) run.task = firstLine(s.task);
			run.agent ??= s.agent;
			run.backend ??= s.backend;
			run.model ??= s.model;
			run.role ??= s.role;
		});
		return;
	}
	if (rec.type === "council") {
		view.council = { ...view.council, table: rec.table };
		return;
	}
	if (rec.type === "map") {
		view.jobId = rec.jobId ?? view.jobId;
		view.startedAt ??= new Date().toISOString(); // (a map's records carry no start: its first is at once)
		applyMap(view, rec);
		return;
	}
	if (rec.type === "answer") {
		view.answer = { text: rec.text ?? "", isError: Boolean(rec.isError) };
		if (rec.map) applyMap(view, { ...rec.map, done: (rec.map.completed ?? 0) + (rec.map.failed ?? 0), running: 0, etaSeconds: null });
		if (rec.status) view.status = rec.status;
		if (typeof rec.durationMs === "number") view.durationMs = rec.durationMs;
		if (rec.verdict) view.verdict = rec.verdict;
		(rec.runs ?? []).forEach((words, i) => {
			const run = runAt(view, i);
			run.mark = words.mark;
			run.used = words.used;
			if (words.why) run.error = words.why;
		});
		return;
	}
	if (rec.type !== "progress") return;
	view.status = "running";
	const run = runAt(view, rec.index ?? 0);
	if (rec.runId) run.runId = rec.runId;
	if (rec.task) run.task = firstLine(rec.task); // a chain step's, its `{previous}` filled
	run.status = rec.status ?? "running";
	run.stalled = Boolean(rec.stalled);
	run.activity = rec.activity;
	run.warning = rec.warning ?? run.warning;
	run.toolCount = rec.toolCount ?? run.toolCount;
	run.usage = piUsage(rec.usage);
	if (rec.backend) run.backend = rec.backend;
	if (rec.model) run.model = rec.model;
	if (typeof rec.startedAt === "number") run.startedAt = rec.startedAt * 1000;
	if (typeof rec.durationMs === "number") run.durationMs = rec.durationMs;
	if (rec.transcript) run.transcript = rec.transcript;
	if (rec.text) run.lines = [...run.lines, rec.text].slice(-LINES_KEPT);
	view.runIds = view.runs.map((r) => r.runId ?? "").filter(Boolean);
	sumUsage(view);
}

/** A map's counts from a `map` record (or its end's), what it does not say kept. */
function applyMap(view: SubagentDetails, rec: Partial<FeedRecord>): void {
	const before = view.map ?? { total: 0, done: 0, completed: 0, failed: 0, running: 0, failures: [] };
	const num = (x: unknown, or: number) => (typeof x === "number" ? x : or);
	view.map = {
		total: num(rec.total, before.total), done: num(rec.done, before.done), completed: num(rec.completed, before.completed),
		failed: num(rec.failed, before.failed), running: num(rec.running, before.running),
		etaSeconds: rec.etaSeconds !== undefined ? rec.etaSeconds : before.etaSeconds,
		cost: rec.cost !== undefined ? rec.cost : before.cost, maxCost: rec.maxCost !== undefined ? rec.maxCost : before.maxCost,
		failures: rec.failures ?? before.failures, out: rec.out ?? before.out,
	};
	if (view.status === "pending") view.status = "running";
	if (typeof rec.cost === "number") view.usage = { ...view.usage, cost: { ...view.usage.cost, total: rec.cost } };
}

/** The notice for a record of a run that now waits on a person (an inbox item), if it is one. */
export function waitingNotice(view: SubagentDetails, rec: FeedRecord): string | undefined {
	const asked = rec.approval;
	if (rec.type !== "progress" || asked?.state !== "requested" || asked.waitsFor !== "person") return undefined;
	return `⏸ subagent job ${view.jobId ?? ""} waits for your decision: ${asked.summary ?? "a request"} (item ${asked.item ?? "?"}; /subagents inbox: approve or deny)`;
}

/** A run's model as it was given (`provider/id` where given so); else as the CLI named it. */
export const fullModel = (r: RunResult) => r.requestedModel || r.model || null;

/** Take the job result in: each run's end, answer or diagnostics. */
export function applyResult(view: SubagentDetails, job: JobResult): void {
	view.jobId = job.jobId || view.jobId;
	view.status = job.status;
	view.startedAt = job.startedAt ?? view.startedAt;
	view.durationMs = job.durationMs ?? view.durationMs;
	if (job.mode === "map") {
		// A map's rows are counted, not drawn one by one (a map may have thousands).
		view.mode = "map";
		view.usage = piUsage(job.usage);
		if (job.map) applyMap(view, { ...job.map, done: job.map.completed + job.map.failed, running: 0, etaSeconds: null });
		return;
	}
	(job.runs ?? []).forEach((r, i) => {
		const run = runAt(view, i);
		run.runId = r.runId ?? run.runId;
		run.task ||= firstLine(r.task ?? "");
		run.agent = r.agent ?? run.agent;
		run.backend = r.backend ?? run.backend;
		run.model = fullModel(r) ?? run.model;
		run.status = r.status ?? "failed";
		run.stalled = false;
		run.usage = piUsage(r.usage);
		run.toolCount = r.toolCalls ?? run.toolCount;
		run.durationMs = r.durationMs;
		if (r.startedAt) run.startedAt = Date.parse(r.startedAt);
		run.transcript = r.paths?.transcript ?? run.transcript;
		// (the engine's plain words, when its answer record came, say why better than the record)
		run.error = r.status === "completed" ? null : run.error || r.errorMessage || `the run ended ${r.status}`;
		run.text = (r.status === "completed" ? r.finalText : r.diagnostics || r.errorMessage) ?? "";
	});
	// Steps a chain never reached, or runs a stopped job never started.
	for (const run of view.runs.slice(job.runs?.length ?? 0)) if (run.status === "pending" || run.status === "running") run.status = "not run";
	view.runIds = view.runs.map((r) => r.runId ?? "").filter(Boolean);
	sumUsage(view);
}

/** A job's end in a few words, for its lifecycle entry. */
export function summaryOf(view: SubagentDetails): string {
	const { text } = outcome(view);
	if (view.runs.length < 2) return text;
	if (view.mode === "council") {
		// Its members answered (the judge is no member), and what the judge made of them.
		const members = view.runs.filter((r) => r.role !== "judge");
		const answered = members.filter((r) => r.status === "completed").length;
		return [`council ${answered}/${members.length} members answered${view.verdict?.[0] ? `; verdict: ${view.verdict[0]}` : ""}`, text].join("; ");
	}
	const done = view.runs.filter((r) => r.status === "completed").length;
	const bad = view.runs.filter((r) => r.status !== "completed").map((r) => `"${r.task}" ${r.status}: ${r.error ?? ""}`.trim());
	return [`${view.mode} ${done}/${view.runs.length} completed`, ...bad].join("; ");
}

/** What the parent model reads, and whether the call failed: the engine's words (its feed's
 * `answer` record, present/answer.py), never rebuilt here. Without one (the CLI ended before
 * the job did), the job's status says it. */
export function outcome(view: SubagentDetails): { text: string; isError: boolean } {
	if (view.answer) return view.answer;
	return { text: `subagent job ${view.jobId ? `${view.jobId} ` : ""}ended ${view.status}`, isError: view.status !== "completed" };
}

// ---- live control: a message to a running child ---------------------------------

export type SendMode = "steer" | "follow-up";
/** `subagents send --json`: what became of the message (docs/live-control.md). */
export interface Receipt { runId: string; id: string; mode: string; receipt: string; reason?: string }

/** Send `text` to the run `id` (or its job's one running run): the receipt, or the CLI's
 * one-line refusal as the error. The text goes on stdin (`-`): no size limit of argv. */
export async function send(id: string, text: string, mode: SendMode, cwd?: string): Promise<Receipt> {
	const exit = await runCli(["send", "--mode", mode, "--json", "--", id, "-"], { cwd, input: text });
	const receipt = parseJson(exit.stdout) as Receipt | undefined;
	if (exit.code !== 0 || !receipt?.receipt) throw new Error(cliFailure(exit));
	return receipt;
}

/** A receipt in words, as `subagents send` prints it. */
export const receiptLine = (r: Receipt) => `${r.receipt}: ${r.mode} ${r.id} to run ${r.runId}${r.reason ? ` (${r.reason})` : ""}`;
