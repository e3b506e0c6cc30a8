/**
 * `/subagents`: this session's jobs as a list with labelled columns (`subagents top --json`,
 * the engine's live view), kept up to date while open (fleetview.ts); choosing one offers its
 * transcript live (viewer.ts: steer, follow-up, stop, the budget as it goes), a message to it
 * and stopping it.
 * `/subagents cost`: the session's totals by backend; `/subagents stop JOB` stops one;
 * `/subagents inbox`: what this session's runs ask a person to decide (inbox.ts), also offered
 * first by `/subagents` when something waits.
 */
import { closeSync, openSync, readSync, statSync } from "node:fs";
import type { ExtensionCommandContext } from "@earendil-works/pi-coding-agent";
import { truncateToWidth, visibleWidth } from "@earendil-works/pi-tui";
import { parseJson, receiptLine, runCli, type SendMode, send } from "./engine.ts";
import { LiveList, type ListWords } from "./fleetview.ts";
import { decide, waiting } from "./inbox.ts";
import { elapsed, money, safe, tokens } from "./render.ts";
import { TranscriptView, type ViewerAction } from "./viewer.ts";

interface FleetRun { runId?: string | null; task?: string; agent?: string | null; backend?: string; status?: string; tokens?: number; cost?: number | null; transcript?: string | null; budget?: string | null }
interface FleetJob { jobId: string; mode?: string; status?: string; elapsed?: number | null; tokens?: number; cost?: number | null; runs: FleetRun[] }

const TAIL_BYTES = 64 * 1024;
const TAIL_LINES = 30;
// Name, width (0: TASK takes what is left), and the order columns go in when the screen is
// narrow (the highest first; 0 stays): a job's id, task and status stay.
const COLUMNS: [string, number, number][] = [["JOB", 10, 0], ["TASK", 0, 0], ["AGENTS", 14, 3], ["BACKENDS", 8, 4], ["STATUS", 9, 0], ["ELAPSED", 7, 1], ["TOKENS", 6, 2], ["COST", 7, 0]];
const TASK_MIN = 24; // the task's least width before a column goes
const ACTIONS = { tail: "Show the transcript tail", send: "Send a message", stop: "Stop the job", back: "Back" };
const LIVE_TAIL = "Show the transcript (live: steer, stop)"; // in pi's TUI (viewer.ts)
const MODES = { steer: "steer: into its running turn (after its current tool calls)", "follow-up": "follow-up: when it would otherwise end (it goes on)" };

const unique = (xs: (string | null | undefined)[]) => [...new Set(xs.filter((x): x is string => Boolean(x)))];

/** The columns shown at `width`: all of them when the task keeps TASK_MIN, else without the
 * least useful (BACKENDS, then AGENTS, TOKENS, ELAPSED) until it does. */
export function columnsFor(width: number): number[] {
	const shown = COLUMNS.map((_, i) => i);
	const room = () => width - shown.reduce((sum, i) => sum + COLUMNS[i][1] + 2, 0);
	for (const drop of [...COLUMNS.keys()].filter((i) => COLUMNS[i][2]).sort((a, b) => COLUMNS[b][2] - COLUMNS[a][2])) {
		if (room() >= TASK_MIN) break;
		shown.splice(shown.indexOf(drop), 1);
	}
	return shown;
}

/** A row's cells, each cut or padded to its column (the flexible TASK takes what is left). */
function row(cells: string[], width: number): string {
	const shown = columnsFor(width);
	const fixed = shown.reduce((sum, i) => sum + (COLUMNS[i][1] ? COLUMNS[i][1] + 2 : 0), 0);
	return shown.map((i) => {
		const w = COLUMNS[i][1] || Math.max(10, width - fixed - 2);
		const cut = truncateToWidth(safe(cells[i]).replace(/\s+/g, " "), w);
		return cut + " ".repeat(Math.max(0, w - visibleWidth(cut)));
	}).join("  ").trimEnd();
}

function cells(job: FleetJob): string[] {
	const tasks = job.runs.map((r) => r.task).filter(Boolean);
	return [
		job.jobId.slice(0, 10),
		tasks.length > 1 ? `${job.mode} ×${tasks.length}: ${tasks.join(" · ")}` : tasks[0] ?? "",
		unique(job.runs.map((r) => r.agent)).join(",") || "-",
		unique(job.runs.map((r) => r.backend)).join(","),
		job.status ?? "",
		elapsed(typeof job.elapsed === "number" ? job.elapsed * 1000 : undefined),
		tokens(job.tokens ?? 0),
		money(job.cost),
	];
}

/** The last lines of a file (its tail only is read), safe to draw. */
function tail(path: string): string[] {
	try {
		const size = statSync(path).size;
		const fd = openSync(path, "r");
		try {
			const buf = Buffer.alloc(Math.min(size, TAIL_BYTES));
			readSync(fd, buf, 0, buf.length, size - buf.length);
			return safe(buf.toString("utf8")).split("\n").slice(-TAIL_LINES);
		} finally {
			closeSync(fd);
		}
	} catch {
		return [`(no transcript at ${path})`];
	}
}

export interface FleetHooks { stopping(jobId: string): void }

/** The job's transcript: in pi's TUI live (viewer.ts), with steer, follow-up and stop, and
 * open again after each; elsewhere (rpc) its tail once, as a notice. */
async function showTranscript(ctx: ExtensionCommandContext, job: FleetJob, hooks: FleetHooks, load: () => Promise<FleetJob[]>): Promise<void> {
	if (ctx.mode !== "tui") {
		const lines = job.runs.flatMap((r, i) => [
			...(job.runs.length > 1 ? [`── ${i + 1}. ${r.task ?? ""}`] : []),
			...(r.transcript ? tail(r.transcript) : ["(not started)"]),
		]);
		return ctx.ui.notify([`job ${job.jobId} · transcript tail`, ...lines].join("\n"), "info");
	}
	const again = async () => (await load()).find((j) => j.jobId === job.jobId);
	for (let current = job; ;) {
		const shown = current;
		const action = await ctx.ui.custom<ViewerAction>((tui, theme, _kb, done) => new TranscriptView(tui, theme, shown, again, done, ctx.cwd));
		if (!action) return;
		if (action === "stop") {
			if (await ctx.ui.confirm("Stop this subagent job?", `${job.jobId}: ${safe(cells(job)[1])}\nIts runs are stopped; it ends as aborted.`)) await stop(ctx, job.jobId, hooks);
		} else await message(ctx, current, action);
		current = (await again()) ?? current;
	}
}

async function stop(ctx: ExtensionCommandContext, jobId: string, hooks: FleetHooks): Promise<void> {
	hooks.stopping(jobId); // its end is told without starting a turn
	const exit = await runCli(["stop", jobId], { cwd: ctx.cwd });
	const said = exit.stdout.trim() || exit.stderrTail.join("\n");
	ctx.ui.notify(exit.code === 0 ? `Stopped subagent job ${safe(said)}` : `stop ${jobId}: ${safe(said) || `exit ${exit.code}`}`, exit.code === 0 ? "info" : "warning");
}

/** A message to a running job (its one running run): the text, then how; the receipt or the refusal as a notice. */
async function message(ctx: ExtensionCommandContext, job: FleetJob, given?: SendMode): Promise<void> {
	const text = await ctx.ui.input(`${given ? `${given} ` : ""}Message for job ${job.jobId}`, "e.g. only fix the tokenizer, then report");
	if (!text?.trim()) return;
	const how = given ? MODES[given] : await ctx.ui.select("Deliver it as", Object.values(MODES));
	const mode = how === MODES["follow-up"] ? "follow-up" : how === MODES.steer ? "steer" : undefined;
	if (!mode) return;
	try {
		ctx.ui.notify(safe(receiptLine(await send(job.jobId, text, mode, ctx.cwd))), "info");
	} catch (err) {
		ctx.ui.notify(`send to ${job.jobId}: ${safe((err as Error).message)}`, "warning");
	}
}

async function costs(ctx: ExtensionCommandContext): Promise<void> {
	const exit = await runCli(["cost", "--session", ctx.sessionManager.getSessionId(), "--by", "backend", "--json"], { cwd: ctx.cwd });
	const report = parseJson(exit.stdout) as { rows?: { key: string; jobs: number; runs: number; input: number; output: number; totalTokens: number; cost: number | null; unpriced: number }[]; summary?: string } | undefined;
	if (!report?.summary) return ctx.ui.notify(`subagents cost: ${safe(exit.stderrTail.join("\n")) || `exit ${exit.code}`}`, "warning");
	const lines = (report.rows ?? []).map((r) => `${safe(r.key)}: ${r.runs} run${r.runs === 1 ? "" : "s"}, ${r.totalTokens} tokens (${r.input} in, ${r.output} out), ${money(r.cost)}${r.unpriced ? ` (${r.unpriced} unpriced)` : ""}`);
	ctx.ui.notify([...lines, `session total: ${safe(report.summary)}`].join("\n"), "info");
}

const WORDS: ListWords<FleetJob> = {
	title: "Subagent jobs of this session",
	header: (width) => row(COLUMNS.map(([name]) => name), width),
	row: (job, width) => row(cells(job), width),
	hint: "↑↓ choose · enter: transcript, message, stop · esc close · updates while open",
};

/** The job to act on: in pi's TUI from a list that keeps up with the jobs while it is open;
 * elsewhere (rpc) from pi's own one-shot select. */
async function choose(ctx: ExtensionCommandContext, jobs: FleetJob[], load: () => Promise<FleetJob[]>): Promise<FleetJob | undefined> {
	if (ctx.mode === "tui") {
		return ctx.ui.custom<FleetJob | undefined>((tui, theme, _kb, done) => new LiveList(tui, theme, jobs, load, WORDS, done));
	}
	const width = Math.max(60, (process.stdout.columns || 120) - 5); // the list's margin and marker
	const options = jobs.map((job) => WORDS.row(job, width));
	const chosen = await ctx.ui.select(`${WORDS.title}\n  ${WORDS.header(width)}`, options);
	return chosen === undefined ? undefined : jobs[options.indexOf(chosen)];
}

export async function fleet(args: string, ctx: ExtensionCommandContext, hooks: FleetHooks): Promise<void> {
	const [verb, id] = args.trim().split(/\s+/);
	if (verb === "cost") return costs(ctx);
	if (verb === "stop" && id) return stop(ctx, id, hooks);
	const top = async () => {
		const exit = await runCli(["top", "--json", "-s", ctx.sessionManager.getSessionId(), "-n", "30"], { cwd: ctx.cwd });
		return { exit, jobs: (parseJson(exit.stdout) as { jobs?: FleetJob[] } | undefined)?.jobs ?? [] };
	};
	const { exit, jobs } = await top();
	// What waits for a person comes first: `/subagents inbox`, or offered when something waits.
	const asked = jobs.length ? await waiting(ctx.cwd, new Set(jobs.map((j) => j.jobId))) : [];
	if (verb === "inbox") return asked.length ? decide(ctx, asked) : ctx.ui.notify("nothing of this session waits for a decision", "info");
	if (asked.length) {
		const inbox = `Inbox: ${asked.length} request${asked.length === 1 ? "" : "s"} wait${asked.length === 1 ? "s" : ""} for you`;
		const first = await ctx.ui.select("Subagents", [inbox, "Jobs of this session"]);
		if (first === inbox) return decide(ctx, asked);
		if (first === undefined) return;
	}
	if (!jobs.length) return ctx.ui.notify(exit.code === 0 ? "no subagent jobs in this session" : `subagents top: ${safe(exit.stderrTail.join("\n"))}`, "info");
	const job = await choose(ctx, jobs, async () => (await top()).jobs);
	if (!job) return;
	const running = job.status === "running" || job.status === "pending";
	const tail = ctx.mode === "tui" ? LIVE_TAIL : ACTIONS.tail;
	const actions = [tail, ...(running ? [ACTIONS.send, ACTIONS.stop] : []), ACTIONS.back];
	const action = await ctx.ui.select(`Job ${job.jobId} · ${truncateToWidth(safe(cells(job)[1]), 40)} · ${job.status}`, actions);
	if (action === tail) return showTranscript(ctx, job, hooks, async () => (await top()).jobs);
	if (action === ACTIONS.send) return message(ctx, job);
	if (action === ACTIONS.stop && await ctx.ui.confirm("Stop this subagent job?", `${job.jobId}: ${safe(cells(job)[1])}\nIts runs are stopped; it ends as aborted.`)) {
		return stop(ctx, job.jobId, hooks);
	}
}
