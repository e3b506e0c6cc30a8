/**
 * `/subagents inbox` (and `/subagents` when something waits): the requests of this session's
 * runs that wait for a person (runs started with `approvals: "ask"`: docs/approvals.md), as
 * `subagents inbox --json` lists them; choosing one offers approve, approve for the rest of
 * the run, or deny with a reason, decided by `subagents approve|deny ITEM --json` (the engine
 * says who won when two decide at once).
 */
import type { ExtensionCommandContext } from "@earendil-works/pi-coding-agent";
import { truncateToWidth } from "@earendil-works/pi-tui";
import { parseJson, runCli } from "./engine.ts";
import { safe } from "./render.ts";

/** An item as `subagents inbox --json` gives it (types.ApprovalItem). */
export interface InboxItem { id: string; runId: string; jobId?: string | null; kind?: string; tool?: string; summary?: string; task?: string; choices?: string[] }

const CHOICES = { allow: "Approve", always: "Approve, and the same tool for the rest of the run", deny: "Deny (with a reason the child reads)", back: "Back" };

/** The items waiting for a person, of the jobs given (this session's), oldest first. */
export async function waiting(cwd: string, jobIds: Set<string>): Promise<InboxItem[]> {
	const exit = await runCli(["inbox", "--json"], { cwd });
	const items = parseJson(exit.stdout);
	return Array.isArray(items) ? (items as InboxItem[]).filter((i) => i.jobId && jobIds.has(i.jobId)) : [];
}

/** An item in one line: its job, what the child asks to do, for which task. */
export const itemLine = (item: InboxItem, width = 120) =>
	truncateToWidth(safe(`${(item.jobId ?? "").slice(0, 10)}  ${item.summary || item.tool || "a request"} · ${item.task ?? ""}`).replace(/\s+/g, " "), width);

/** Choose an item, then decide it; the decision (or why it could not be taken) as a notice. */
export async function decide(ctx: ExtensionCommandContext, items: InboxItem[]): Promise<void> {
	const width = Math.max(60, (process.stdout.columns || 120) - 6);
	const lines = items.map((i) => itemLine(i, width));
	const picked = await ctx.ui.select(`Inbox: ${items.length} request${items.length === 1 ? "" : "s"} wait for you`, lines);
	const item = picked === undefined ? undefined : items[lines.indexOf(picked)];
	if (!item) return;
	if (item.kind === "question") {
		// (not answered from pi yet: the engine's command does it)
		return ctx.ui.notify(`A question, not a request to act: answer it with \`subagents answer ${item.id} TEXT\``, "info");
	}
	const offered = (item.choices?.length ? item.choices : ["allow", "deny"]).filter((c): c is keyof typeof CHOICES => c in CHOICES);
	const how = await ctx.ui.select(`${safe(item.summary ?? item.tool ?? "")} (item ${item.id})`, [...offered.map((c) => CHOICES[c]), CHOICES.back]);
	const choice = offered.find((c) => CHOICES[c] === how);
	if (!choice) return;
	const args = choice === "deny" ? ["deny", item.id, "--json"] : ["approve", item.id, "--json", ...(choice === "always" ? ["--always"] : [])];
	if (choice === "deny") {
		const reason = await ctx.ui.input("Why (the child reads it)", "e.g. not outside the project");
		if (reason === undefined) return;
		if (reason.trim()) args.push("--reason", reason.trim());
	}
	const exit = await runCli(args, { cwd: ctx.cwd });
	const decided = parseJson(exit.stdout) as { choice?: string; by?: string } | undefined;
	ctx.ui.notify(
		exit.code === 0 && decided?.choice ? `${decided.choice === "deny" ? "Denied" : "Approved"}: ${safe(item.summary ?? item.id)}` : `${args[0]} ${item.id}: ${safe(exit.stderrTail.join("\n")) || `exit ${exit.code}`}`,
		exit.code === 0 ? "info" : "warning",
	);
}
