/**
 * Given with `-e` to a pi child only (config `copilot_agent_initiator = true`): requests to
 * the `github-copilot` provider carry `X-Initiator: agent`, so Copilot bills them as agent
 * turns, not user prompts. pi merges headers from an extension's `before_provider_headers`
 * hook last (pi >= 0.74; older pi never fires it, and this does nothing).
 *
 * If the endpoint answers 400 about the initiator, the header is dropped and pi's own
 * auto-retry asks for the turn again, once: the error text gets a note that pi reads as
 * retryable, so the run's events say `retrying after error (...): ... X-Initiator: agent
 * refused; retrying once without it`, and a line on stderr says so too (a failed run's
 * diagnostics quote it). Without it pi sends its own value (`user` after the user's message).
 * It needs pi's retry setting on (the default).
 *
 * No imports: pi loads this file from the installed Python package, outside any node_modules.
 */

const PROVIDER = "github-copilot";
const HEADER = "X-Initiator";

interface Ctx { model?: { provider?: string } }
interface Message { role?: string; stopReason?: string; errorMessage?: string }
interface Pi {
	on(event: "before_provider_headers", handler: (e: { headers: Record<string, string | null> }, ctx: Ctx) => void): unknown;
	on(event: "message_end", handler: (e: { message: Message }, ctx: Ctx) => { message: Message } | undefined): unknown;
}

// Words pi's auto-retry matches ("you can retry your request"), after what happened.
const NOTE = ` [${HEADER}: agent refused; retrying once without it: you can retry your request]`;

/** A 400 whose text names the initiator (header or field): the endpoint refuses it. */
export function refusesInitiator(m: Message): boolean {
	const text = m.errorMessage ?? "";
	return m.role === "assistant" && m.stopReason === "error" && /\b400\b/.test(text) && /initiator/i.test(text);
}

export default function copilotInitiator(pi: Pi): void {
	let send = true;
	pi.on("before_provider_headers", (event, ctx) => {
		if (send && ctx.model?.provider === PROVIDER) event.headers[HEADER] = "agent";
	});
	pi.on("message_end", (event, ctx) => {
		if (!send || ctx.model?.provider !== PROVIDER || !refusesInitiator(event.message)) return undefined;
		send = false;
		// On stderr too: a failed run's diagnostics quote its stderr tail.
		process.stderr.write(`subagents: ${PROVIDER} refused ${HEADER}: agent; retrying once without it\n`);
		return { message: { ...event.message, errorMessage: (event.message.errorMessage ?? "") + NOTE } };
	});
}
