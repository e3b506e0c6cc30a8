/**
 * `/subagents` → a job's transcript, live: the engine follows it (`subagents logs JOB -f`,
 * the runs' transcript.md as they grow) and this view shows its last lines while it is open,
 * with the job's status and each running run's budget as `subagents top --json` says them
 * (asked again every POLL_MS). Keys: s steer, f follow-up, x stop (fleet.ts asks for the
 * text or the confirmation, then opens the view again), Esc back. Drawing only.
 */
import type { Theme } from "@earendil-works/pi-coding-agent";
import { type Component, matchesKey, type TUI, truncateToWidth } from "@earendil-works/pi-tui";
import { runCli } from "./engine.ts";
import { safe } from "./render.ts";

const POLL_MS = 2000;
const KEPT_LINES = 2000; // of the transcript, in memory while the view is open
const CHROME = 9; // the lines pi and the view's own frame take besides the transcript

/** What the view shows of a job besides its transcript. */
export interface Watched { jobId: string; status?: string; runs: { status?: string; budget?: string | null }[] }
export type ViewerAction = "steer" | "follow-up" | "stop" | undefined;

const isLive = (status?: string) => status === "running" || status === "pending";

export class TranscriptView<J extends Watched> implements Component {
	private lines: string[] = [];
	private partial = "";
	private stop = new AbortController();
	private timer: NodeJS.Timeout;
	private closed = false;

	constructor(
		private tui: TUI,
		private theme: Theme,
		private job: J,
		private load: () => Promise<J | undefined>,
		private done: (action: ViewerAction) => void,
		cwd: string,
	) {
		runCli(["logs", job.jobId, "--follow"], { cwd, signal: this.stop.signal, onStdout: (text) => this.take(text) })
			.then(() => this.take("\n"), () => this.take("\n(the transcript could not be followed)\n"));
		this.timer = setInterval(() => {
			this.load().then((j) => { if (j && !this.closed) { this.job = j; this.tui.requestRender(); } }, () => {});
		}, POLL_MS);
		this.timer.unref();
	}

	/** New transcript text: whole lines kept (the last KEPT_LINES), safe to draw. */
	private take(text: string): void {
		if (this.closed) return;
		const lines = (this.partial + text).split("\n");
		this.partial = lines.pop() ?? "";
		this.lines.push(...lines.map((l) => safe(l)));
		if (this.lines.length > KEPT_LINES) this.lines.splice(0, this.lines.length - KEPT_LINES);
		this.tui.requestRender();
	}

	handleInput(data: string): void {
		const live = isLive(this.job.status);
		if (matchesKey(data, "escape") || matchesKey(data, "ctrl+c") || data === "q") this.close(undefined);
		else if (live && data === "s") this.close("steer");
		else if (live && data === "f") this.close("follow-up");
		else if (live && data === "x") this.close("stop");
	}

	private close(action: ViewerAction): void {
		this.dispose();
		this.done(action);
	}

	dispose(): void {
		this.closed = true;
		clearInterval(this.timer);
		this.stop.abort(); // the follower ends (SIGTERM); the job goes on
	}

	invalidate(): void {}

	render(width: number): string[] {
		const t = this.theme;
		const budgets = this.job.runs.map((r) => r.budget).filter((b): b is string => Boolean(b));
		const head = [`job ${this.job.jobId}`, this.job.status ?? "", ...budgets.map(safe)].filter(Boolean).join(" · ");
		const room = Math.max(5, this.tui.terminal.rows - CHROME);
		const body = this.lines.slice(-room).map((l) => truncateToWidth(` ${l}`, width));
		const keys = isLive(this.job.status) ? "s steer · f follow-up · x stop · esc back · updates while open" : "esc back";
		return [
			t.fg("border", "─".repeat(width)),
			truncateToWidth(t.fg("accent", t.bold(` ${head}`)), width),
			...body,
			truncateToWidth(t.fg("dim", ` ${keys}`), width),
			t.fg("border", "─".repeat(width)),
		];
	}
}
