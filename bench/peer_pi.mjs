// Peer A of the benchmark (bench/bench_peers.py): the loop of pi's official subagent
// example extension, re-implemented here from its description, run against the same
// child as `subagents run`.
//
//     node bench/peer_pi.mjs COMMAND [ARG...]
//
// It spawns COMMAND (shell: false, stdin ignored), and for each stdout chunk appends
// it to one string buffer, splits the whole buffer on "\n" and keeps the last piece;
// each non-empty line is JSON.parse'd in a try/catch. Only `message_end` (collect the
// message, sum the assistant's usage, note model and stop reason) and
// `tool_result_end` (collect the message) are acted on, each calling the update
// callback, which words the latest answer as the example's does. At the end it prints
// one JSON line: the final answer, usage, stop reason, exit code.
import { spawn } from "node:child_process";

const [command, ...args] = process.argv.slice(2);
if (!command) {
  process.stderr.write("usage: node peer_pi.mjs COMMAND [ARG...]\n");
  process.exit(2);
}

const result = {
  messages: [],
  stderr: "",
  usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, cost: 0, contextTokens: 0, turns: 0 },
  model: undefined,
  stopReason: undefined,
  errorMessage: undefined,
};

// The text of the last assistant message that has any (the example's getFinalOutput).
function finalOutput(messages) {
  for (let i = messages.length - 1; i >= 0; i--) {
    const msg = messages[i];
    if (msg.role === "assistant" && Array.isArray(msg.content)) {
      for (const part of msg.content) {
        if (part.type === "text") return part.text;
      }
    }
  }
  return "";
}

let updates = 0;
let lastUpdate = null;
function onUpdate(partial) {
  updates++;
  lastUpdate = partial;
}

function emitUpdate() {
  onUpdate({
    content: [{ type: "text", text: finalOutput(result.messages) || "(running...)" }],
    details: { usage: result.usage, model: result.model, stopReason: result.stopReason },
  });
}

function processLine(line) {
  if (!line.trim()) return;
  let event;
  try {
    event = JSON.parse(line);
  } catch {
    return;
  }
  if (event.type === "message_end" && event.message) {
    const msg = event.message;
    result.messages.push(msg);
    if (msg.role === "assistant") {
      result.usage.turns++;
      const usage = msg.usage;
      if (usage) {
        result.usage.input += usage.input || 0;
        result.usage.output += usage.output || 0;
        result.usage.cacheRead += usage.cacheRead || 0;
        result.usage.cacheWrite += usage.cacheWrite || 0;
        result.usage.cost += usage.cost?.total || 0;
        result.usage.contextTokens = usage.totalTokens || 0;
      }
      if (!result.model && msg.model) result.model = msg.model;
      if (msg.stopReason) result.stopReason = msg.stopReason;
      if (msg.errorMessage) result.errorMessage = msg.errorMessage;
    }
    emitUpdate();
  }
  if (event.type === "tool_result_end" && event.message) {
    result.messages.push(event.message);
    emitUpdate();
  }
}

const exitCode = await new Promise((resolve) => {
  const proc = spawn(command, args, { shell: false, stdio: ["ignore", "pipe", "pipe"] });
  let buffer = "";
  proc.stdout.on("data", (data) => {
    buffer += data.toString();
    const lines = buffer.split("\n");
    buffer = lines.pop() || "";
    for (const line of lines) processLine(line);
  });
  proc.stderr.on("data", (data) => {
    result.stderr += data.toString();
  });
  proc.on("close", (code) => {
    if (buffer.trim()) processLine(buffer);
    resolve(code ?? 0);
  });
  proc.on("error", () => resolve(1));
});

process.stdout.write(
  `${JSON.stringify({
    finalText: finalOutput(result.messages),
    stopReason: result.stopReason,
    usage: result.usage,
    messages: result.messages.length,
    updates,
    lastUpdate: lastUpdate?.content[0].text,
    exitCode,
  })}\n`,
);
process.exit(exitCode);
