/**
 * Drawing only: the call line, a row per run (live), the result's sections, the widget of
 * background jobs, the end notices and the lifecycle entries. Everything shown that came
 * from a child (or a model) goes through `safe` first: no escape sequence reaches pi's UI.
 * Times are read when a line is drawn, so an elapsed time ticks with every redraw.
 */
import { getMarkdownTheme, keyHint, type Theme } from "@earendil-works/pi-coding-agent";
import { Box, type Component, Container, Markdown, stripTerminalSequences, Text, truncateToWidth, visibleWidth } from "@earendil-works/pi-tui";
import { firstLine, modeOf, type RunView, type SubagentDetails } from "./engine.ts";

const SPINNER = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
const PREVIEW_LINES = 12; // of an answer, collapsed (one run); a third of it each for several
const NARROW = 100; // columns below which a row leaves out its tool count

/** Text safe to draw: no terminal sequences, no control characters but newline and tab. */
export function safe(text: unknown): string {
	// biome-ignore lint/suspicious/noControlCharactersInRegex: removing them is the point
	return stripTerminalSequences(String(text ?? "")).replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, "");
}
const oneLine = (text: unknown) => safe(text).replace(/\s+/g, " ").trim();

// Numbers read as the engine writes them (src/subagents/present/figures.py).
export function tokens(n: number): string {
	if (n < 1000) return `${n}`;
	if (n < 100_000) return `${(n / 1000).toFixed(1)}k`;
	return n < 1_000_000 ? `${Math.floor(n / 1000)}k` : `${(n / 1_000_000).toFixed(1)}M`;
}
export function elapsed(ms: number | undefined): string {
	if (ms === undefined || !Number.isFinite(ms)) return "-";
	const s = Math.max(0, ms) / 1000;
	if (s < 60) return `${s.toFixed(1)}s`;
	if (s < 3600) return `${Math.floor(s / 60)}m${String(Math.floor(s % 60)).padStart(2, "0")}s`;
	return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}
export function money(cost: number | null | undefined): string {
	if (typeof cost !== "number" || !Number.isFinite(cost)) return "-";
	const amount = Math.abs(cost);
	const sign = cost < 0 ? "-" : "";
	if (amount === 0) return "$0";
	if (amount < 1e-6) return `<${sign}$0.000001`;
	const digits = amount >= 0.1 ? 2 : 1 - Math.floor(Math.log10(amount)); // cents, else 2 significant
	const text = amount.toFixed(digits);
	return `${sign}$${digits > 2 ? text.replace(/0+$/, "").replace(/\.$/, "") : text}`;
}
const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;

/** A run's time: ticking while it runs (from the engine's start), its duration once over. */
export function runMs(run: RunView): number | undefined {
	if (run.durationMs !== undefined) return run.durationMs;
	return run.startedAt !== undefined && run.status === "running" ? Date.now() - run.startedAt : undefined;
}

export function icon(theme: Theme, run: { status: string; stalled?: boolean; mark?: string | null }): string {
	if (run.stalled && run.status === "running") return theme.fg("warning", "⏸");
	if (run.mark && run.status !== "running") return theme.fg("warning", "⏹"); // a budget ended it
	switch (run.status) {
		case "running": return theme.fg("accent", SPINNER[Math.floor(Date.now() / 100) % SPINNER.length]);
		case "completed": return theme.fg("success", "✓");
		case "failed": case "timeout": return theme.fg("error", "✗");
		case "aborted": return theme.fg("muted", "■");
		default: return theme.fg("dim", "·");
	}
}

/** One line cut to the width: `head` and `tail` kept, `flex` shortened first. `extras`
 * (least useful last: a model is worth less than a task) follow the tail, and go, last
 * first, before `flex` is cut at all. */
export class Line implements Component {
	constructor(private parts: (width: number) => [string, string, string, string[]?]) {}
	invalidate(): void {}
	render(width: number): string[] {
		const [head, flex, tail, extras = []] = this.parts(width);
		const kept = [...extras];
		const fixed = () => visibleWidth(head) + visibleWidth(tail) + kept.reduce((n, e) => n + visibleWidth(e), 0);
		while (kept.length && width - fixed() < visibleWidth(flex)) kept.pop();
		const room = width - fixed();
		return [truncateToWidth(head + (room > 0 ? truncateToWidth(flex, room) : "") + tail + kept.join(""), width)];
	}
}

/** At most `max` lines of `inner`, then a line saying how many more. */
class Clip implements Component {
	constructor(private inner: Component, private max: number, private more: (n: number) => string) {}
	invalidate(): void { this.inner.invalidate(); }
	render(width: number): string[] {
		const lines = [...this.inner.render(width)]; // (pi 1.6 hands out a cached, readonly array)
		return lines.length <= this.max ? lines : [...lines.slice(0, this.max), truncateToWidth(this.more(lines.length - this.max), width)];
	}
}

const text = (s: string) => new Line(() => [s, "", ""]);

function stats(theme: Theme, run: RunView, narrow = false): string {
	const parts = [...(narrow ? [] : [plural(run.toolCount, "tool")]), `${tokens(run.usage.totalTokens)} tok`];
	if (run.usage.cost.total) parts.push(money(run.usage.cost.total));
	parts.push(elapsed(runMs(run)));
	return theme.fg("dim", ` · ${parts.join(" · ")}`);
}

function where(run: RunView): string {
	return [run.backend, run.model].filter(Boolean).map(oneLine).join(" · ");
}

/** A council's member (`A`, `B`, …) or judge: one task for all, so where it ran names it. */
const isCouncilRole = (run: RunView) => Boolean(run.role) && !run.role?.startsWith("step ");

/** A run's title: icon, its role (a council's `A`/`judge`, a chain's `step 2/3`), its task's
 * first line (a council's member: where it ran), agent, status word when it did not complete,
 * a budget's mark, stats; where it ran last, and first to go when the line is narrow. */
function runTitle(theme: Theme, run: RunView, indent: string, showWhere: boolean): Line {
	return new Line((width) => {
		const role = run.role ? `${theme.fg("accent", theme.bold(oneLine(run.role)))} ` : "";
		const head = `${indent}${icon(theme, run)} ${role}`;
		const agent = run.agent ? `${theme.fg("dim", " · ")}${theme.fg("accent", oneLine(run.agent))}` : "";
		const word = ["completed", "running", "pending"].includes(run.status) ? "" : ` · ${run.status}`;
		const mark = run.mark ? theme.fg("warning", ` · ${oneLine(run.mark.replace(/^⏹\s*/, ""))}`) : "";
		const council = isCouncilRole(run);
		const place = !council && showWhere && where(run) ? [theme.fg("dim", ` · ${where(run)}`)] : [];
		const tail = `${agent}${theme.fg(run.status === "failed" || run.status === "timeout" ? "error" : "muted", word)}${mark}${stats(theme, run, width < NARROW)}`;
		const label = council ? theme.fg("text", where(run) || oneLine(run.task)) : theme.fg("text", oneLine(run.task) || `task ${run.index + 1}`);
		return [head, label, tail, place];
	});
}

/** The second line of a live row: what it does now, or the child's warning. */
function activityLine(theme: Theme, run: RunView, indent: string): Line | undefined {
	const what = run.stalled ? theme.fg("warning", oneLine(run.activity ?? "stalled")) : theme.fg("muted", oneLine(run.activity ?? ""));
	const warn = run.warning ? theme.fg("warning", `⚠ ${oneLine(run.warning)}`) : "";
	if (!run.activity && !warn) return undefined;
	return new Line(() => [`${indent}  ${theme.fg("dim", "⎿ ")}`, [what, warn].filter(Boolean).join(theme.fg("dim", " · ")), ""]);
}

/** Expanded: a run's last progress lines, its warning, where its transcript is. */
function addDetails(box: Container, theme: Theme, run: RunView): void {
	for (const line of run.lines) box.addChild(text(`    ${theme.fg("dim", oneLine(line))}`));
	if (run.warning && !run.lines.some((l) => l.includes(run.warning ?? ""))) box.addChild(text(`    ${theme.fg("warning", `⚠ ${oneLine(run.warning)}`)}`));
	if (run.transcript) box.addChild(text(`    ${theme.fg("dim", `transcript: ${oneLine(run.transcript)}`)}`));
}

function chainLine(theme: Theme, view: SubagentDetails): Line {
	return new Line(() => ["", view.runs.map((r) => `${icon(theme, r)} ${theme.fg(r.status === "running" ? "accent" : "muted", oneLine(r.agent || r.task).slice(0, 24))}`).join(theme.fg("dim", " → ")), ""]);
}

/** What a council's counts come to: members answered, and the judge's verdict in a line. */
function councilLine(theme: Theme, view: SubagentDetails): Line {
	const members = view.runs.filter((r) => r.role && r.role !== "judge");
	const answered = members.filter((r) => r.status === "completed").length;
	const judge = view.runs.find((r) => r.role === "judge");
	const verdict = view.verdict?.[0] ? ` · verdict: ${oneLine(view.verdict[0])}` : judge && judge.status !== "completed" && judge.status !== "running" ? " · no verdict" : "";
	const u = view.usage;
	return new Line(() => ["", theme.fg("dim", `${answered}/${members.length} members answered${verdict}`), theme.fg("dim", ` · ${tokens(u.totalTokens)} tok${u.cost.total ? ` · ${money(u.cost.total)}` : ""}`)]);
}

function differ(view: SubagentDetails): boolean {
	return new Set(view.runs.map(where)).size > 1;
}

/** The call line: mode, the task (first line, cut to the width), agent, backend/model. */
export function renderCall(args: { task?: string; tasks?: { task: string }[]; chain?: { task: string }[]; council?: string[]; judge?: string; agent?: string; backend?: string; model?: string; background?: boolean; continue?: string }, theme: Theme): Component {
	const steps = args.tasks ?? args.chain;
	const mode = args.continue ? "continue" : modeOf(args);
	const count = steps?.length ?? args.council?.length;
	// A council's judge is a run of its own: `council ×2 + judge`, so the rows add up.
	const judged = args.council && args.judge ? " + judge" : "";
	const label = steps ? steps.map((s) => oneLine(firstLine(s.task))).join(theme.fg("dim", " · ")) : oneLine(firstLine(args.task ?? ""));
	const extra = [args.agent, [args.backend, args.model].filter(Boolean).join("/"), args.background ? "background" : ""].filter(Boolean).map(oneLine);
	return new Line(() => [
		`${theme.fg("toolTitle", theme.bold("subagent"))} ${theme.fg("accent", count ? `${mode} ×${count}${judged}` : mode)} `,
		label,
		"",
		extra.length ? [theme.fg("dim", ` · ${extra.join(" · ")}`)] : [], // the first to go
	]);
}

/** subagent_send's call: the mode, the job, the message's first line. */
export function renderSendCall(args: { id?: string; text?: string; mode?: string }, theme: Theme): Component {
	return new Line(() => [
		`${theme.fg("toolTitle", theme.bold("subagent_send"))} ${theme.fg("accent", oneLine(args.mode ?? "steer"))} ${theme.fg("dim", `→ ${oneLine(args.id ?? "")}:`)} `,
		oneLine(firstLine(args.text ?? "")),
		"",
	]);
}

/** Live: a row per run (two lines: title, activity); a chain's steps on one line above. */
export function renderLive(view: SubagentDetails, theme: Theme, expanded: boolean): Component {
	const box = new Container();
	if (view.mode === "chain" && view.runs.length > 1) box.addChild(chainLine(theme, view));
	const showWhere = differ(view);
	for (const run of view.runs) {
		if (view.mode === "chain" && run.status === "pending") continue;
		box.addChild(runTitle(theme, run, "", showWhere));
		const line = expanded ? undefined : activityLine(theme, run, "");
		if (expanded) addDetails(box, theme, run);
		else if (line) box.addChild(line);
	}
	return box;
}

// ---- a map: one progress row ------------------------------------------------------

const MAP_FAILURES_SHOWN = 3; // reasons under the row, collapsed

/** A map's counts in words: `rows 3/10 · 2 running · 1 failed · ETA 12.0s · $0.03 / $1.00`
 * while it runs; `rows 10/10 · 9 completed · 1 failed · $0.05` once over. */
export function mapLine(view: SubagentDetails): string {
	const m = view.map;
	if (!m) return "";
	const live = view.status === "running" || view.status === "pending";
	const parts = [`rows ${m.done}/${m.total}`];
	if (live) parts.push(`${m.running} running`);
	else parts.push(`${m.completed} completed`);
	if (m.failed || live) parts.push(`${m.failed} failed`);
	if (live) parts.push(`ETA ${typeof m.etaSeconds === "number" ? elapsed(m.etaSeconds * 1000) : "-"}`);
	if (typeof m.cost === "number" || typeof m.maxCost === "number") parts.push(`${money(m.cost ?? 0)}${typeof m.maxCost === "number" ? ` / ${money(m.maxCost)}` : ""}`);
	return parts.join(" · ");
}

/** A map's failures, grouped by why: `3 rows: timeout`. */
export const mapFailures = (view: SubagentDetails) => (view.map?.failures ?? []).map((f) => `${plural(f.rows, "row")}: ${oneLine(f.reason)}`);

/** The map's icon: running, all done, some failed, none done. */
function mapIcon(theme: Theme, view: SubagentDetails): string {
	const m = view.map;
	if (view.status === "running" || view.status === "pending") return icon(theme, { status: "running" });
	if (view.status === "aborted") return icon(theme, view);
	if (m?.failed && m.completed) return theme.fg("warning", "◐");
	return icon(theme, view);
}

/** A map as one row: its icon, the counts (ETA and $ against the budget while it runs), its
 * time; under it the failures grouped by why (`live`: the first few, as the row is redrawn). */
export function renderMap(view: SubagentDetails, theme: Theme, live: boolean, indent = ""): Component {
	const box = new Container();
	const ms = view.durationMs ?? (view.startedAt ? Date.now() - Date.parse(view.startedAt) : undefined);
	box.addChild(new Line(() => [`${indent}${mapIcon(theme, view)} ${theme.fg("accent", "map")} `, theme.fg("text", mapLine(view)), theme.fg("dim", ` · ${elapsed(ms)}`)]));
	const failures = mapFailures(view);
	const shown = live ? failures.slice(0, MAP_FAILURES_SHOWN) : failures;
	for (const f of shown) box.addChild(new Line(() => [`${indent}  ${theme.fg("dim", "⎿ ")}`, theme.fg("error", f), ""]));
	if (failures.length > shown.length) box.addChild(text(`${indent}  ${theme.fg("muted", `… ${plural(failures.length - shown.length, "more reason")}`)}`));
	return box;
}

/** The result: a titled section per run, its answer (or diagnostics) as Markdown. */
export function renderDone(view: SubagentDetails, theme: Theme, expanded: boolean): Component {
	if (view.background && view.status === "running") {
		const hint = theme.fg("dim", " (the widget above the editor follows it; /subagents lists it)");
		return new Line(() => [`${theme.fg("accent", "↗")} `, theme.fg("muted", `started in the background as job ${oneLine(view.jobId)}`), "", [hint]]);
	}
	if (view.map) {
		const box = new Container();
		box.addChild(renderMap(view, theme, !expanded));
		const where = view.map.out ? `results: ${oneLine(view.map.out)}` : `each row's answer: subagents show --rows ${oneLine(view.jobId)}`;
		box.addChild(text(`  ${theme.fg("dim", where)}`));
		return box;
	}
	const box = new Container();
	if (view.mode === "chain" && view.runs.length > 1) box.addChild(chainLine(theme, view));
	const showWhere = view.runs.length > 1 && differ(view);
	const budget = view.runs.length > 1 ? Math.max(3, Math.floor(PREVIEW_LINES / 3)) : PREVIEW_LINES;
	const more = (n: number) => theme.fg("muted", `  … ${plural(n, "more line")} (${keyHint("app.tools.expand", "to expand")}${theme.fg("muted", ")")}`);
	for (const run of view.runs) {
		box.addChild(runTitle(theme, run, "", showWhere));
		if (run.status === "not run") continue;
		const ok = run.status === "completed";
		if (run.warning && !expanded) box.addChild(text(`  ${theme.fg("warning", `⚠ ${oneLine(run.warning)}`)}`));
		if (!ok && !expanded) {
			box.addChild(text(`  ${theme.fg("error", oneLine(run.error ?? run.status))}`));
			if (run.text) box.addChild(text(`  ${keyHint("app.tools.expand", "for the post-mortem")}`));
			continue;
		}
		// A judge's answer is its verdict's JSON: its words instead.
		const body = (run.role === "judge" && view.verdict?.length ? safe(view.verdict.join("\n")) : safe(run.text ?? "")).trim();
		if (body) {
			const md = new Markdown(body, 2, 0, getMarkdownTheme());
			box.addChild(expanded ? md : new Clip(md, budget, more));
		}
		if (expanded) addDetails(box, theme, run);
	}
	if (view.mode === "council") box.addChild(councilLine(theme, view));
	else if (view.runs.length > 1) {
		const u = view.usage;
		const done = view.runs.filter((r) => r.status === "completed").length;
		// The runs that did not complete, by how they ended: as the job's end entry says it.
		const ends = new Map<string, number>();
		for (const r of view.runs) if (r.status !== "completed") ends.set(r.status, (ends.get(r.status) ?? 0) + 1);
		const bad = [...ends].map(([status, n]) => ` · ${n} ${status}`).join("");
		box.addChild(text(theme.fg("dim", `${done}/${view.runs.length} completed${bad} · ${tokens(u.totalTokens)} tok${u.cost.total ? ` · ${money(u.cost.total)}` : ""}`)));
	}
	return box;
}

/** A job in one line: the widget's row, and the title of its end notice. */
export function jobLine(theme: Theme, view: SubagentDetails, prefix = ""): Line {
	return new Line(() => {
		const runs = view.runs;
		const running = runs.find((r) => r.status === "running") ?? [...runs].reverse().find((r) => r.activity);
		const live = view.status === "running" || view.status === "pending";
		const state = live ? { status: "running", stalled: runs.some((r) => r.stalled) && runs.every((r) => r.status !== "running" || r.stalled) } : { status: view.status };
		const label = view.map ? `map ${mapLine(view)}` : runs.length > 1 ? `${view.mode} ×${runs.length}: ${runs.map((r) => oneLine(r.task)).join(" · ")}` : oneLine(runs[0]?.task ?? "");
		const starts = runs.map((r) => r.startedAt).filter((t): t is number => t !== undefined);
		const ms = live
			? (view.startedAt ? Date.now() - Date.parse(view.startedAt) : starts.length ? Date.now() - Math.min(...starts) : undefined)
			: view.durationMs; // the engine's, as the entry says it
		const word = view.map // (its counts say how it goes)
			? ""
			: live
			? theme.fg(running?.stalled ? "warning" : "muted", ` · ${oneLine(running?.activity ?? "starting")}`)
			: theme.fg(state.status === "completed" ? "success" : state.status === "aborted" ? "muted" : "error", ` · ${state.status}`);
		const cost = view.usage.cost.total ? ` · ${money(view.usage.cost.total)}` : "";
		return [`${prefix}${view.map ? mapIcon(theme, view) : icon(theme, state)} `, theme.fg("text", label), `${word}${theme.fg("dim", ` · ${tokens(view.usage.totalTokens)} tok${cost} · ${elapsed(ms)}`)}`];
	});
}

/** The runs a widget shows of a job: those running, else (starting, between chain steps) its first. */
function liveRuns(job: SubagentDetails): RunView[] {
	const running = job.runs.filter((r) => r.status === "running");
	return running.length ? running : job.runs.slice(0, 1);
}

/** One running run in the widget: its job's id (enough of it to type), its role or agent, its
 * task, what it does now, tokens and elapsed time. */
function widgetRow(theme: Theme, job: SubagentDetails, run: RunView): Line {
	return new Line(() => {
		const id = theme.fg("dim", oneLine(job.jobId ?? "").slice(0, 10));
		const who = oneLine(run.role ?? run.agent ?? "");
		const state = run.status === "running" || run.status === "pending" ? { status: "running", stalled: run.stalled } : run;
		const head = `  ${icon(theme, state)} ${id} ${who ? `${theme.fg("accent", who)} ` : ""}`;
		const activity = theme.fg(run.stalled ? "warning" : "muted", oneLine(run.activity ?? "starting"));
		const task = truncateToWidth(theme.fg("text", oneLine(run.task)), 32);
		const ms = runMs(run) ?? (job.startedAt ? Date.now() - Date.parse(job.startedAt) : undefined);
		return [head, `${task}${theme.fg("dim", " · ")}${activity}`, theme.fg("dim", ` · ${elapsed(ms)}`), [theme.fg("dim", ` · ${tokens(run.usage.totalTokens)} tok`)]];
	});
}

/** A background map in the widget: one row, its job's id and its counts. */
function mapWidgetRow(theme: Theme, job: SubagentDetails): Line {
	return new Line(() => {
		const head = `  ${icon(theme, { status: "running" })} ${theme.fg("dim", oneLine(job.jobId ?? "").slice(0, 10))} ${theme.fg("accent", "map")} `;
		const failures = mapFailures(job);
		const ms = job.startedAt ? Date.now() - Date.parse(job.startedAt) : undefined;
		return [head, theme.fg("text", mapLine(job)), theme.fg("dim", ` · ${elapsed(ms)}`), failures.length ? [theme.fg("error", ` · ${failures[0]}`)] : []];
	});
}

/** The widget above the editor: a row per running run of this session's background jobs. */
export function renderWidget(theme: Theme, jobs: SubagentDetails[]): Component {
	const box = new Container();
	const rows = jobs.flatMap((job) => (job.map ? [mapWidgetRow(theme, job)] : liveRuns(job).map((run) => widgetRow(theme, job, run))));
	const runs = rows.length > jobs.length ? `, ${plural(rows.length, "run")}` : "";
	box.addChild(text(theme.fg("dim", ` subagents · ${plural(jobs.length, "background job")} running${runs}`)));
	for (const row of rows) box.addChild(row);
	return box;
}

/** Background jobs' ends, in one notice: per job a title line, a preview, the transcript. */
export function renderEnded(theme: Theme, views: SubagentDetails[], expanded: boolean): Component {
	const box = new Box(1, 1, (s) => theme.bg("customMessageBg", s));
	const title = views.length > 1 ? `${views.length} background subagent jobs ended` : `background subagent job ${oneLine(views[0].jobId)} ended`;
	box.addChild(text(theme.fg("customMessageLabel", theme.bold(title))));
	for (const view of views) {
		box.addChild(jobLine(theme, view));
		if (view.map) for (const f of mapFailures(view)) box.addChild(text(`  ${theme.fg("error", f)}`));
		const multi = view.runs.length > 1;
		const pad = multi ? 4 : 2;
		for (const run of view.runs) {
			if (multi) box.addChild(runTitle(theme, run, "  ", false));
			const body = safe(run.status === "completed" ? run.text : run.error).trim();
			if (body) box.addChild(new Clip(new Markdown(body, pad, 0, getMarkdownTheme()), expanded ? 200 : 3, (n) => theme.fg("muted", `${" ".repeat(pad)}… ${plural(n, "more line")}`)));
			if (run.transcript) box.addChild(text(`${" ".repeat(pad)}${theme.fg("dim", `transcript: ${oneLine(run.transcript)}`)}`));
		}
	}
	return box;
}

/** A result without rows (a refused call): its text. */
export function renderText(theme: Theme, body: string, isError: boolean): Component {
	return new Text(theme.fg(isError ? "error" : "toolOutput", safe(body).trim()), 0, 0);
}

/** Text without Markdown's markers (`#` headings, `**`, `__`, backticks): an entry is a line, not a document. */
export const plainText = (s: string) => s.replace(/^#{1,6}\s+/gm, "").replace(/\*\*|__|`/g, "");

/** A lifecycle entry as one dim line. */
export function renderEntry(theme: Theme, d: Record<string, unknown>): Component {
	const num = (x: unknown) => (typeof x === "number" ? x : 0);
	const usage = (d.usage ?? {}) as { totalTokens?: number; cost?: { total?: number } };
	const start = d.eventType === "subagent:start";
	const facts = start
		? [d.mode, d.agentName, d.model, d.background ? "background" : ""]
		: [d.status, elapsed(num(d.durationMs)), `${tokens(num(usage.totalTokens))} tok`, usage.cost?.total ? money(usage.cost.total) : "", d.model];
	return new Line(() => [
		theme.fg("dim", ` ${oneLine(d.eventType)} ${oneLine(d.jobId ?? "(no job)")} · `),
		theme.fg("dim", [...facts.filter(Boolean).map(oneLine), start ? "" : oneLine(plainText(String(d.summary ?? "")))].filter(Boolean).join(" · ")),
		"",
	]);
}
