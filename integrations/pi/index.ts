/**
 * subagents for pi: the `subagent` tool, over the `subagents` CLI.
 *
 * Thin on purpose: the engine spawns the agents, decides how they ended, words the progress
 * (the same lines as transcript.md) and writes the diagnostics. This package builds an argv,
 * follows the engine's JSON progress records (`--progress jsonl`), draws them (render.ts),
 * keeps an eye on background jobs (background.ts), offers `/subagents` (fleet.ts) and
 * records lifecycle entries in pi's own session file. See docs/pi.md.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { dirname, join } from "node:path";
import type { Usage } from "@earendil-works/pi-ai";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { type Static, Type } from "typebox";
import { Background } from "./background.ts";
import {
	applyRecord, applyResult, asJob, cliFailure, type FeedRecord, firstLine, type JobResult, modeOf, newView, outcome,
	parseJson, piUsage, receiptLine, refusalOf, runCli, send, type Step, type SubagentDetails, summaryOf, waitingNotice,
} from "./engine.ts";
import { fleet } from "./fleet.ts";
import { FLAGS, JobOptions, MAP_FLAGS, MAP_TAKES, MapOptions, PLAN_NAMES, StepOptions, StringEnum } from "./options.ts";
import { mapLine, plainText, renderCall, safe, renderDone, renderEnded, renderEntry, renderLive, renderMap, renderSendCall, renderText } from "./render.ts";

export type { RunView, SubagentDetails } from "./engine.ts";

const ENTRY = "agent_event";
const MESSAGE = "subagent_result";
const SUMMARY_CHARS = 300;
const TICK_MS = 1000;

// The options come from the engine's one definition of them (options.ts is generated).
const StepParam = Type.Object({
	task: Type.String({ description: "The task for this step ({previous} = the previous step's answer, in a chain)" }),
	cwd: Type.Optional(Type.String({ description: "Working directory for this step (relative to the call's cwd)" })),
	...StepOptions,
});
const Params = Type.Object({
	task: Type.Optional(Type.String({ description: "One task (with `continue`: the follow-up). Give exactly one of task, tasks, chain." })),
	tasks: Type.Optional(Type.Array(StepParam, { description: "Tasks run in parallel" })),
	chain: Type.Optional(Type.Array(StepParam, { description: "Steps run one after another" })),
	cwd: Type.Optional(Type.String({ description: "Working directory for the child agent(s)" })),
	background: Type.Optional(Type.Boolean({ description: "Return at once with the job id; the result arrives later as a message" })),
	continue: Type.Optional(Type.String({ description: "A finished run's id (runIds in a result): its child resumes its own conversation with `task` as the follow-up" })),
	council: Type.Optional(Type.Array(Type.String(), { description: "Ask the one `task` of several members side by side: backend[:model] or agent names, e.g. [\"pi\", \"claude\", \"codex\"]" })),
	map: Type.Optional(Type.Object({
		input: Type.String({ description: "The dataset: a .csv (its header names the fields), .jsonl or lines file (field 'line'); a relative path is from pi's working directory" }),
		...MapOptions,
	}, { description: "Run `task` as a template once per row of a dataset ({field} is the row's), `concurrency` rows at once; jobMaxCost/jobMaxTokens bound the whole map. Shown as one progress row; each row's answer: `subagents show --rows JOB` or `out`." })),
	...StepOptions,
	...JobOptions,
});
type Params = Static<typeof Params>;
type StepParam = Static<typeof StepParam>;
const OPTIONS = Object.keys(FLAGS) as (keyof typeof FLAGS)[];
/** An option's value as the CLI's flag takes it (a schema given inline: its JSON). */
const flagValue = (value: unknown) => (typeof value === "object" ? JSON.stringify(value) : String(value));
/** A step as a plan file says it. */
function planStep(step: StepParam): Record<string, unknown> {
	const out: Record<string, unknown> = { task: step.task };
	if (step.cwd !== undefined) out.cwd = step.cwd;
	for (const [key, name] of Object.entries(PLAN_NAMES)) {
		const value = step[key as keyof typeof PLAN_NAMES];
		if (value !== undefined) out[name] = value;
	}
	return out;
}

const SendParams = Type.Object({
	id: Type.String({ description: "The background job's id (while one of its runs is going), or a run's id" }),
	text: Type.String({ description: "The message for the child" }),
	mode: Type.Optional(StringEnum(["steer", "follow-up"] as const, { description: "steer (default): into the child's running turn, after its current tool calls; follow-up: when it would otherwise end, and it goes on" })),
});
type SendParams = Static<typeof SendParams>;

function requester(): string {
	try { return process.env.USER || userInfo().username || "assistant"; } catch { return "assistant"; }
}
const unique = (xs: (string | null | undefined)[]) => [...new Set(xs.filter((x): x is string => Boolean(x)))];
const joined = (xs: (string | null | undefined)[]) => unique(xs).join(", ") || null;
const summarize = (text: string) => plainText(text).replace(/\s+/g, " ").trim().slice(0, SUMMARY_CHARS);

/** A map's own options as `subagents map` flags (`where`: a flag per field). */
function mapArgs(map: NonNullable<Params["map"]>): string[] {
	const args: string[] = [];
	for (const [key, flag] of Object.entries(MAP_FLAGS)) {
		const value = map[key as keyof typeof MAP_FLAGS];
		if (value === undefined) continue;
		if (key === "where") for (const [field, want] of Object.entries(value as Record<string, unknown>)) args.push(flag, `${field}=${String(want)}`);
		else args.push(flag, String(value));
	}
	return args;
}

/** The steps as asked: what the rows show before the engine says more. */
function stepsOf(params: Params): Step[] {
	if (params.map) return []; // a map's rows are counted, not listed
	const steps: { task: string; agent?: string; backend?: string; model?: string }[] = params.tasks ?? params.chain ?? [{ task: params.task ?? "" }];
	return steps.map((s) => ({ task: s.task, agent: s.agent ?? params.agent ?? null, backend: s.backend ?? params.backend ?? null, model: s.model ?? params.model ?? null }));
}

export default function (pi: ExtensionAPI) {
	// A child pi that subagents started loads installed packages too: no delegation from there.
	if (process.env.PI_SUBAGENTS_CHILD === "1") return;

	const ended = new Set<string>(); // jobs whose end entry this session holds
	const failedCalls = new Map<string, { details: SubagentDetails; usage: Usage }>(); // see tool_result
	const tickers = new Set<NodeJS.Timeout>();

	// After session_shutdown every pi.* call throws ("ctx is stale"): guard the async paths.
	let alive = true;
	const safely = (what: string, fn: () => void) => {
		if (!alive) return;
		try { fn(); } catch (err) { console.error(`subagents: ${what} failed: ${(err as Error).message}`); }
	};
	const append = (data: Record<string, unknown>) => safely("appendEntry", () => pi.appendEntry(ENTRY, { requestedBy: requester(), ...data }));

	// One clock: both entries carry the engine's startedAt for the job.
	const recordStart = (view: SubagentDetails, pid: number | undefined, sessionId: string) => append({
		eventType: "subagent:start", jobId: view.jobId, agentName: joined(view.runs.map((r) => r.agent)), mode: view.mode,
		pid: pid ?? null, startedAt: view.startedAt ?? null, sessionId, background: Boolean(view.background),
		model: joined(view.runs.map((r) => r.model)),
	});
	const recordEnd = (job: JobResult, view: SubagentDetails, summary = summaryOf(view), pid?: number) => {
		if (!job.jobId || ended.has(job.jobId)) return;
		ended.add(job.jobId);
		const status = job.status;
		const eventType = status === "completed" ? "subagent:complete" : status === "aborted" ? "subagent:aborted" : "subagent:error";
		const dirs = view.runs.map((r) => (r.transcript ? dirname(r.transcript) : undefined)).filter(Boolean);
		const [startedAt, completedAt] = [job.startedAt ?? view.startedAt ?? null, job.completedAt ?? new Date().toISOString()];
		append({
			eventType, jobId: job.jobId, agentName: joined(view.runs.map((r) => r.agent)), mode: job.mode,
			pid: pid ?? job.driver?.pid ?? null, startedAt, completedAt,
			durationMs: job.durationMs ?? (startedAt ? Date.parse(completedAt) - Date.parse(startedAt) : null), model: joined(view.runs.map((r) => r.model)), models: view.runs.map((r) => r.model ?? null),
			usage: piUsage(job.usage), status, summary: summarize(summary), runIds: view.runIds, runDir: dirs.length === 1 ? dirs[0] : dirs,
		});
	};
	/** A call refused before any job existed: an error entry with the reason, and the error. */
	const refuse = (params: Params, reason: string): never => {
		const now = new Date().toISOString();
		append({
			eventType: "subagent:error", jobId: null, agentName: params.agent ?? null, mode: modeOf(params),
			pid: null, startedAt: now, completedAt: now, durationMs: 0, model: params.model ?? null, usage: piUsage(undefined),
			status: "failed", summary: summarize(`refused: ${reason}`),
		});
		throw new Error(reason);
	};

	/** Background ends (grouped): end entries, then one notice; a turn only for news the user did not make. */
	const tell = (ends: { view: SubagentDetails; job: JobResult }[], live: boolean, away = false) => {
		const parts = ends.map(({ view, job }) => {
			const text = outcome(view).text;
			recordEnd(job, view);
			if (away) bg.spend(view); // (a live end was counted as it came)
			return `${away ? "Subagent" : "Background subagent"} job ${job.jobId} ended${away ? " while pi was away" : ""} (${job.status}):\n\n${text}`;
		});
		const turn = live && ends.some(({ view }) => !view.stoppedByUser);
		safely("sendMessage", () => pi.sendMessage(
			{ customType: MESSAGE, content: parts.join("\n\n---\n\n"), display: true, details: { jobs: ends.map((e) => e.view) } },
			turn ? { deliverAs: "followUp", triggerTurn: true } : { triggerTurn: false },
		));
	};
	const bg = new Background((ends, live) => tell(ends, live));

	pi.registerTool({
		name: "subagent",
		label: "Subagent",
		description: "Delegate work to child coding agents run by the `subagents` engine. Give exactly one of: task (one agent), tasks (in parallel), chain (in order; {previous} = the previous answer); with task, map runs it as a template once per row of a dataset, and council asks several members the same task side by side (judge, quorum). background: true returns at once with a job id and delivers the result later as a message (subagent_send steers it meanwhile). maxTurns, maxTokens, maxCost bound each run: at the limit it is asked to wrap up, then stopped.",
		parameters: Params,
		async execute(toolCallId, params: Params, signal, onUpdate, ctx: ExtensionContext) {
			const given = [params.task, params.tasks, params.chain].filter((x) => x !== undefined).length;
			if (given !== 1) refuse(params, "give exactly one of task, tasks or chain");
			const steps = params.tasks ?? params.chain;
			if (steps && steps.length === 0) refuse(params, "tasks/chain must not be empty");
			const mode = modeOf(params);
			const sessionId = ctx.sessionManager.getSessionId();
			if (params.continue !== undefined) {
				// The run being continued fixes agent, model, backend, directory and worktree.
				const extra = (["tasks", "chain", "cwd", "council", ...OPTIONS] as const).filter((k) => params[k] !== undefined);
				if (params.task === undefined || extra.length) refuse(params, `continue takes a task (the follow-up) and background only, not ${extra.join(", ") || "tasks"}`);
			}

			if (params.map !== undefined) {
				// A map's rows are one-shot runs of one template: it takes some of the options (MAP_TAKES).
				const extra = (["tasks", "chain", "continue", "council", ...OPTIONS] as const).filter((k) => params[k] !== undefined && !(k in MAP_TAKES));
				if (params.task === undefined || extra.length) refuse(params, `map takes a task (the template) and ${Object.keys(MAP_TAKES).join(", ")}, not ${extra.join(", ") || "tasks"}`);
			}

			const args = params.continue !== undefined
				? ["continue", "--json", "--session", sessionId]
				: params.map !== undefined
					? ["map", "--json", "--session", sessionId, ...(params.cwd ? ["--cwd", params.cwd] : []), ...mapArgs(params.map)]
					: ["run", "--json", "--session", sessionId, "--cwd", params.cwd ?? ctx.cwd];
			// Every option the call gives, as the CLI's flag (the engine checks them: a bad one is refused in one line).
			for (const key of OPTIONS) if (params[key] !== undefined) args.push((params.map ? MAP_TAKES[key] : undefined) ?? FLAGS[key], flagValue(params[key]));
			if (params.council) args.push("--council", params.council.join(","));
			let planDir: string | undefined;
			const tail: string[] = [];
			if (params.map !== undefined) {
				tail.push("--task", params.task ?? "", "--", params.map.input);
			} else if (params.continue !== undefined) {
				tail.push("--", params.continue, params.task ?? "");
			} else if (steps) {
				// Per-step options need a plan file (0600, removed after the CLI read it).
				planDir = mkdtempSync(join(tmpdir(), "pi-subagents-"));
				const plan = join(planDir, "plan.json");
				writeFileSync(plan, JSON.stringify({ mode, steps: steps.map(planStep) }), { mode: 0o600 });
				args.push("--plan", plan);
			} else {
				tail.push("--", params.task ?? "");
			}
			const view = newView(mode, stepsOf(params));

			try {
				if (params.background) {
					const exit = await runCli([...args, "--bg", ...tail], { cwd: ctx.cwd });
					const started = parseJson(exit.stdout) as { jobId?: string; pid?: number; startedAt?: string; steps?: Step[] } | undefined;
					if (!started?.jobId) refuse(params, refusalOf(exit.stdout, mode, FLAGS) ?? cliFailure(exit));
					// (its steps as the engine planned them: the model an agent picks, a council's judge)
					// (a map's one step is its template: its rows are counted, not listed)
					applyRecord(view, { type: "job", jobId: started?.jobId, startedAt: started?.startedAt, steps: mode === "map" ? undefined : started?.steps });
					Object.assign(view, { background: true, status: "running" });
					recordStart(view, started?.pid, sessionId);
					bg.watch(view, ctx.cwd);
					return {
						content: [{ type: "text", text: `Started background subagent job ${view.jobId}; its result will arrive as a message when it ends. To correct it while it runs: subagent_send with id ${view.jobId}.` }],
						details: structuredClone(view),
					};
				}

				// Foreground: the CLI stops the job if pi dies (print mode exits on SIGINT without telling us).
				const fg = [...args, "--progress", "jsonl", "--parent-pid", String(process.pid), ...tail];
				let cliPid: number | undefined;
				const onRecord = (r: FeedRecord) => {
					const fresh = (r.type === "job" || r.type === "map") && !view.jobId;
					applyRecord(view, r);
					const waits = waitingNotice(view, r);
					if (waits) safely("notify", () => ctx.ui.notify(safe(waits), "warning"));
					if (fresh) recordStart(view, cliPid, sessionId);
					if (r.type === "map") onUpdate?.({ content: [{ type: "text", text: mapLine(view) }], details: structuredClone(view) });
					if (r.type !== "progress") return;
					const text = view.runs.length > 1 ? view.runs.filter((p) => p.lines.length).map((p) => `${p.index + 1}. ${firstLine(p.task).slice(0, 60)}: ${p.lines[p.lines.length - 1]}`).join("\n") : (r.text ?? "");
					onUpdate?.({ content: [{ type: "text", text }], details: structuredClone(view) });
				};
				const exit = await runCli(fg, { cwd: ctx.cwd, onRecord, signal, onSpawn: (pid) => { cliPid = pid; } });
				const job = asJob(parseJson(exit.stdout), mode);
				if (job && !view.jobId && job.jobId) { view.jobId = job.jobId; view.startedAt = job.startedAt; recordStart(view, cliPid, sessionId); }
				if (job) applyResult(view, job);
				if (signal?.aborted) {
					recordEnd(job ?? { jobId: view.jobId ?? "", mode, status: "aborted" }, view, "aborted by the user", cliPid);
					failedCalls.set(toolCallId, { details: view, usage: view.usage });
					throw new Error(`subagent job ${view.jobId ?? ""} aborted`);
				}
				if (!job) {
					if (!view.jobId) refuse(params, refusalOf(exit.stdout, mode, FLAGS) ?? cliFailure(exit));
					throw new Error(cliFailure(exit));
				}
				const { text, isError } = outcome(view);
				recordEnd(job, view, undefined, cliPid);
				if (isError) {
					failedCalls.set(toolCallId, { details: view, usage: view.usage });
					throw new Error(text);
				}
				return { content: [{ type: "text", text }], details: view, usage: view.usage };
			} finally {
				if (planDir) rmSync(planDir, { recursive: true, force: true });
			}
		},
		renderCall: (args, theme) => renderCall(args, theme),
		renderResult(result, { expanded, isPartial }, theme, context) {
			const view = result.details as SubagentDetails | undefined;
			// A live row's elapsed time ticks between progress records.
			const state = context.state as { ticker?: NodeJS.Timeout };
			if (isPartial && !state.ticker) {
				state.ticker = setInterval(() => context.invalidate(), TICK_MS);
				state.ticker.unref();
				tickers.add(state.ticker);
			} else if (!isPartial && state.ticker) {
				clearInterval(state.ticker);
				tickers.delete(state.ticker);
				state.ticker = undefined;
			}
			if (view?.mode === "map") return isPartial ? renderMap(view, theme, true) : renderDone(view, theme, expanded);
			if (!view?.runs?.length) return renderText(theme, result.content[0]?.type === "text" ? result.content[0].text : "", context.isError);
			return isPartial ? renderLive(view, theme, expanded) : renderDone(view, theme, expanded);
		},
	});

	pi.registerTool({
		name: "subagent_send",
		label: "Subagent send",
		description: "Send a message to a running subagent job you started (background: true): steer (default) lands in its running conversation after its current tool calls; follow-up is taken when it would otherwise end, and it goes on. Answers with a receipt: queued or delivered; an error says why it could not be taken (the job ended, its CLI takes no messages while it runs, ...). The job's result still arrives as a message when it ends.",
		parameters: SendParams,
		async execute(_toolCallId, params: SendParams, _signal, _onUpdate, ctx: ExtensionContext) {
			const receipt = await send(params.id, params.text, params.mode ?? "steer", ctx.cwd);
			return { content: [{ type: "text", text: receiptLine(receipt) }], details: receipt };
		},
		renderCall: (args, theme) => renderSendCall(args, theme),
	});

	// A call that ended as an error (every run failed, or it was aborted) threw: its rows and
	// every run's usage are put back on the result here, so they are drawn and counted.
	pi.on("tool_result", (event) => {
		const kept = failedCalls.get(event.toolCallId);
		if (!kept) return;
		failedCalls.delete(event.toolCallId);
		return { details: kept.details, usage: kept.usage };
	});

	pi.registerMessageRenderer<{ jobs?: SubagentDetails[] }>(MESSAGE, (message, { expanded }, theme) => {
		const jobs = message.details?.jobs;
		return jobs?.length ? renderEnded(theme, jobs, expanded) : undefined;
	});
	pi.registerEntryRenderer<Record<string, unknown>>(ENTRY, (entry, _options, theme) => renderEntry(theme, entry.data ?? {}));

	pi.registerCommand("subagents", {
		description: "This session's subagent jobs: pick one to follow its transcript, steer or stop it; `/subagents inbox`: requests waiting for your decision; `/subagents cost`: totals by backend",
		handler: (args, ctx) => fleet(args, ctx, { stopping: (jobId) => bg.stoppedByUser(jobId) }),
	});

	// Jobs started in this session whose end entry is missing (pi was not running when they
	// ended): reconcile from the engine's records, once — the end entry marks it done.
	// Awaited with a bound, so even a print-mode pi records them before it runs its prompt.
	pi.on("session_start", async (_event, ctx) => {
		alive = true;
		bg.bind(ctx.ui, ctx.mode);
		const started = new Set<string>();
		for (const e of ctx.sessionManager.getEntries()) {
			if (e.type !== "custom" || e.customType !== ENTRY) continue;
			const d = (e.data ?? {}) as { eventType?: string; jobId?: string };
			if (!d.jobId) continue;
			if (d.eventType === "subagent:start") started.add(d.jobId);
			else ended.add(d.jobId);
		}
		const away: { view: SubagentDetails; job: JobResult }[] = [];
		const reconcile = async (jobId: string) => {
			const exit = await runCli(["show", jobId, "--json"], { cwd: ctx.cwd });
			const job = asJob(parseJson(exit.stdout), "single");
			if (!job) return;
			const view = newView(job.mode, [], jobId);
			if (job.status === "running" || job.status === "pending") return bg.watch(Object.assign(view, { background: true }), ctx.cwd);
			// The ended job's answer in the engine's words: `wait` gives it at once, as its feed's last record.
			const told = await runCli(["wait", jobId, "--json", "--progress", "jsonl"], { cwd: ctx.cwd, onRecord: (r) => applyRecord(view, r) });
			applyResult(view, asJob(parseJson(told.stdout), job.mode) ?? job);
			away.push({ view, job });
		};
		const all = Promise.allSettled([...started].filter((id) => !ended.has(id)).map(reconcile));
		await Promise.race([all, new Promise((r) => setTimeout(r, 10_000).unref())]);
		away.sort((a, b) => a.job.jobId.localeCompare(b.job.jobId)); // ids sort by time
		if (away.length) tell(away, false, true);
	});

	pi.on("session_shutdown", (event) => {
		for (const t of tickers) clearInterval(t);
		tickers.clear();
		const left = bg.shutdown(); // the jobs run on; only our waiters go
		alive = false;
		if (event.reason === "quit" && left.length) {
			const jobs = left.map((v) => `${v.jobId} (${firstLine(v.runs[0]?.task ?? "").slice(0, 60)})`).join(", ");
			const one = left.length === 1;
			process.stderr.write(`subagents: ${left.length} background job${one ? "" : "s"} still running: ${jobs}. ${one ? "It goes on; its result is" : "They go on; their results are"} recorded when this session is resumed (\`subagents ps\` shows ${one ? "it" : "them"}).\n`);
		}
	});
}
