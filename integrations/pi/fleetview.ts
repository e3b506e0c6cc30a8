/**
 * `/subagents`'s list while it is open (pi's TUI): the session's jobs as `subagents top --json`
 * says them, asked again every POLL_MS, a running job's elapsed time ticking between answers;
 * ↑↓ choose, Enter acts on the chosen job, Esc closes. Drawing only: the rows' words come from
 * fleet.ts.
 */
import type { Theme } from "@earendil-works/pi-coding-agent";
import { type Component, matchesKey, type TUI, truncateToWidth } from "@earendil-works/pi-tui";

const POLL_MS = 2000;
const TICK_MS = 1000;

/** What the list needs of a job: its id, its status and its elapsed seconds when asked. */
export interface Listed { jobId: string; status?: string; elapsed?: number | null }

export interface ListWords<J> {
	title: string;
	/** The column labels, over the rows, for a width. */
	header(width: number): string;
	/** A job's row at a width. */
	row(job: J, width: number): string;
	hint: string;
}

export class LiveList<J extends Listed> implements Component {
	private selected = 0;
	private askedAt = Date.now();
	private timers: NodeJS.Timeout[] = [];
	private asking = false;
	private closed = false;

	constructor(
		private tui: TUI,
		private theme: Theme,
		private jobs: J[],
		private load: () => Promise<J[]>,
		private words: ListWords<J>,
		private done: (job: J | undefined) => void,
	) {
		this.timers.push(setInterval(() => this.ask(), POLL_MS), setInterval(() => this.tui.requestRender(), TICK_MS));
		for (const t of this.timers) t.unref();
	}

	/** The engine's answer again; the chosen job stays chosen. */
	private ask(): void {
		if (this.asking || this.closed) return;
		this.asking = true;
		this.load().then((jobs) => {
			if (this.closed || !jobs.length) return;
			const chosen = this.jobs[this.selected]?.jobId;
			this.jobs = jobs;
			this.askedAt = Date.now();
			this.selected = Math.max(0, jobs.findIndex((j) => j.jobId === chosen));
			this.tui.requestRender();
		}, () => {}).finally(() => { this.asking = false; });
	}

	handleInput(data: string): void {
		if (matchesKey(data, "enter")) this.close(this.jobs[this.selected]);
		else if (matchesKey(data, "escape") || matchesKey(data, "ctrl+c")) this.close(undefined);
		else {
			if (matchesKey(data, "up")) this.selected = Math.max(0, this.selected - 1);
			else if (matchesKey(data, "down")) this.selected = Math.min(this.jobs.length - 1, this.selected + 1);
			this.tui.requestRender();
		}
	}

	private close(job: J | undefined): void {
		this.dispose();
		this.done(job);
	}

	dispose(): void {
		this.closed = true;
		for (const t of this.timers) clearInterval(t);
		this.timers = [];
	}

	invalidate(): void {}

	/** A running job's elapsed time as of now, not as of the last answer. */
	private now(job: J): J {
		const live = job.status === "running" || job.status === "pending";
		return live && typeof job.elapsed === "number" ? { ...job, elapsed: job.elapsed + (Date.now() - this.askedAt) / 1000 } : job;
	}

	render(width: number): string[] {
		const t = this.theme;
		const inner = Math.max(20, width - 2); // the marker's room
		const rows = this.jobs.map((job, i) => {
			const line = this.words.row(this.now(job), inner);
			return i === this.selected ? `${t.fg("accent", "→ ")}${t.fg("accent", line)}` : `  ${line}`;
		});
		return [
			t.fg("border", "─".repeat(width)),
			truncateToWidth(t.fg("accent", t.bold(` ${this.words.title}`)), width),
			truncateToWidth(t.fg("muted", `  ${this.words.header(inner)}`), width),
			...rows.map((r) => truncateToWidth(r, width)),
			truncateToWidth(t.fg("dim", ` ${this.words.hint}`), width),
			t.fg("border", "─".repeat(width)),
		];
	}
}
