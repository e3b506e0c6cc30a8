/**
 * This session's background jobs while pi runs: each is followed by a child
 * `subagents wait JOB --json --progress jsonl` (the same records as a foreground call), shown
 * in a widget above the editor (a row per running run) and in the footer (how many run, and
 * what the session's background runs used: a foreground call's usage reaches pi's own
 * totals with its tool result, a background job's has no such way in), and its end
 * delivered as a notice — ends within a second of each other in one notice.
 */
import type { ExtensionUIContext } from "@earendil-works/pi-coding-agent";
import type { TUI } from "@earendil-works/pi-tui";
import { stripTerminalSequences } from "@earendil-works/pi-tui";
import { applyRecord, applyResult, asJob, type JobResult, parseJson, runCli, type SubagentDetails, waitingNotice } from "./engine.ts";
import { money, renderWidget, safe, tokens } from "./render.ts";

const KEY = "subagents";
const GROUP_MS = 1000;
const TICK_MS = 1000;

/** `live`: pi goes on (the notice may start a turn); else pi is going away. */
export type Ended = (ends: { view: SubagentDetails; job: JobResult }[], live: boolean) => void;

export class Background {
	private jobs = new Map<string, SubagentDetails>();
	private stops = new Map<string, () => void>();
	private ends: Parameters<Ended>[0] = [];
	private flushing?: NodeJS.Timeout;
	private ticker?: NodeJS.Timeout;
	private ui?: ExtensionUIContext;
	private tui?: TUI;
	private tuiMode = false;
	private shown = false;
	/** What this session's ended background jobs used (tokens, USD). */
	private spent = { tokens: 0, cost: 0 };

	constructor(private onEnded: Ended) {}

	/** The session's UI: where the widget and the count go (a new one after a session switch). */
	bind(ui: ExtensionUIContext, mode: string): void {
		this.ui = ui;
		this.tuiMode = mode === "tui";
		this.shown = false;
		this.refresh();
	}

	running(): SubagentDetails[] {
		return [...this.jobs.values()];
	}

	/** Follow a background job until it ends; its view fills in from the progress records. */
	watch(view: SubagentDetails, cwd: string): void {
		const jobId = view.jobId;
		if (!jobId || this.stops.has(jobId)) return;
		const stop = new AbortController();
		this.stops.set(jobId, () => stop.abort());
		this.jobs.set(jobId, view);
		this.refresh();
		const onRecord = (r: Parameters<typeof applyRecord>[1]) => {
			applyRecord(view, r);
			const waits = waitingNotice(view, r); // a person is asked: say so wherever they are
			if (waits) try { this.ui?.notify(safe(waits), "warning"); } catch { /* a stale context */ }
			this.refresh();
		};
		const done = () => { this.stops.delete(jobId); this.jobs.delete(jobId); this.refresh(); };
		runCli(["wait", jobId, "--json", "--progress", "jsonl"], { cwd, signal: stop.signal, onRecord }).then((exit) => {
			done();
			const job = asJob(parseJson(exit.stdout), view.mode);
			if (!job || stop.signal.aborted) return; // pi is going away: session_start reconciles later
			applyResult(view, job);
			this.ended(view, job);
		}, done);
	}

	/** Ends are gathered for a second, then told in one notice. */
	ended(view: SubagentDetails, job: JobResult): void {
		this.spend(view);
		this.ends.push({ view, job });
		this.flushing ??= setTimeout(() => {
			this.flushing = undefined;
			const ends = this.ends.splice(0);
			if (ends.length) this.onEnded(ends, true);
		}, GROUP_MS);
	}

	/** Mark a job the user stopped: its end is told without starting a turn. */
	stoppedByUser(jobId: string): void {
		for (const [id, view] of this.jobs) if (id.startsWith(jobId)) view.stoppedByUser = true;
	}

	/** Count a background job's usage in the footer (one that ended while pi was away, too). */
	spend(view: SubagentDetails): void {
		this.spent.tokens += view.usage.totalTokens;
		this.spent.cost += view.usage.cost.total;
		this.refresh();
	}

	/** The footer's segment: `2 subagent jobs running · bg 1.2k tok · $0.01`. */
	private status(jobs: SubagentDetails[]): string | undefined {
		const used = jobs.reduce((u, j) => ({ tokens: u.tokens + j.usage.totalTokens, cost: u.cost + j.usage.cost.total }), { ...this.spent });
		const counts = used.tokens ? `bg ${tokens(used.tokens)} tok${used.cost ? ` · ${money(used.cost)}` : ""}` : "";
		const running = jobs.length ? `${jobs.length} subagent job${jobs.length === 1 ? "" : "s"} running` : "";
		return [running, counts].filter(Boolean).join(" · ") || undefined;
	}

	private refresh(): void {
		const ui = this.ui;
		if (!ui) return;
		const jobs = this.running();
		try {
			ui.setStatus(KEY, this.status(jobs));
			if (!jobs.length) {
				if (this.shown) ui.setWidget(KEY, undefined);
				this.shown = false;
				if (this.ticker) clearInterval(this.ticker);
				this.ticker = undefined;
			} else if (this.tuiMode) {
				// One component reading the live views; redrawn on news and every second.
				if (!this.shown) ui.setWidget(KEY, (tui, theme) => { this.tui = tui; return { render: (w: number) => renderWidget(theme, this.running()).render(w), invalidate() {} }; });
				this.shown = true;
				this.ticker ??= setInterval(() => this.tui?.requestRender(), TICK_MS);
				this.ticker.unref();
				this.tui?.requestRender();
			} else {
				ui.setWidget(KEY, renderWidget(ui.theme, jobs).render(120).map((l) => stripTerminalSequences(l).trimEnd()));
				this.shown = true;
			}
		} catch {
			// a stale context (pi is switching sessions): the next bind draws again
		}
	}

	/** pi is going away (or to another session): stop following; the jobs run on. */
	shutdown(): SubagentDetails[] {
		const left = this.running();
		for (const stop of this.stops.values()) stop();
		this.stops.clear();
		this.jobs.clear();
		if (this.ticker) clearInterval(this.ticker);
		if (this.flushing) clearTimeout(this.flushing);
		this.ticker = this.flushing = undefined;
		const ends = this.ends.splice(0);
		if (ends.length) this.onEnded(ends, false); // told now, or reconciled on the next start
		this.ui = this.tui = undefined;
		this.spent = { tokens: 0, cost: 0 }; // the next session counts its own
		return left;
	}
}
