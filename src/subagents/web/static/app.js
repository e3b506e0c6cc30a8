// subagents web: live pages over Server-Sent Events, and the page's two actions.
// Every fragment comes rendered (and escaped) by the server; this script only puts it in
// place. It runs under a Content-Security-Policy that allows no inline script at all.
"use strict";
(function () {
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const live = document.getElementById("live");

  function stream(url, handlers) {
    const source = new EventSource(url);
    source.onopen = () => live.classList.add("on");
    source.onerror = () => live.classList.remove("on"); // the browser reconnects by itself
    for (const [name, handle] of Object.entries(handlers)) {
      source.addEventListener(name, (e) => handle(JSON.parse(e.data), source));
    }
    return source;
  }

  async function post(url, payload) {
    const headers = { "X-CSRF-Token": csrf };
    if (payload !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(url, {
      method: "POST",
      headers,
      body: payload === undefined ? undefined : JSON.stringify(payload),
      credentials: "same-origin",
    });
    let body = {};
    try {
      body = await response.json();
    } catch (e) {
      body = { error: `${response.status} ${response.statusText}` };
    }
    return { ok: response.ok, body };
  }

  // Live regions are updated in place: the new fragment is laid over the old one, element
  // by element (matched by key, else by position and tag), so what did not change stays the
  // same node: a button being clicked, a link, a selection, the focused field.
  function key(node) {
    if (node.nodeType !== 1) return null;
    return node.getAttribute("data-key") || node.id || node.getAttribute("data-job") ||
      node.getAttribute("data-repo") || node.getAttribute("data-run") || null;
  }

  function same(a, b) {
    return a.nodeType === b.nodeType && a.nodeName === b.nodeName && key(a) === key(b);
  }

  function update(old, next) {
    if (old.nodeType !== 1) {
      if (old.nodeValue !== next.nodeValue) old.nodeValue = next.nodeValue;
      return;
    }
    if (old.hasAttribute("data-own")) return;
    for (const { name } of Array.from(old.attributes)) {
      if (!next.hasAttribute(name)) old.removeAttribute(name);
    }
    for (const { name, value } of Array.from(next.attributes)) {
      if (old.getAttribute(name) !== value) old.setAttribute(name, value);
    }
    // What the user types is theirs: a field's contents are never redrawn; nor is what
    // this script wrote (data-own: a receipt, a result).
    if (old.nodeName === "TEXTAREA" || old.nodeName === "INPUT" || old.nodeName === "SELECT") return;
    morphChildren(old, next);
  }

  function morphChildren(old, next) {
    const keyed = new Map();
    for (const child of old.childNodes) {
      const k = key(child);
      if (k) keyed.set(k, child);
    }
    let cursor = old.firstChild;
    for (const child of Array.from(next.childNodes)) {
      const k = key(child);
      let match = k ? keyed.get(k) : cursor && !key(cursor) && same(cursor, child) ? cursor : null;
      if (match && !same(match, child)) match = null;
      if (match) {
        if (k) keyed.delete(k);
        if (match === cursor) cursor = cursor.nextSibling;
        else old.insertBefore(match, cursor);
        update(match, child);
      } else {
        old.insertBefore(child, cursor);
      }
    }
    while (cursor) {
      const gone = cursor;
      cursor = cursor.nextSibling;
      old.removeChild(gone);
    }
  }

  function morph(region, html) {
    const next = document.createElement(region.nodeName);
    next.innerHTML = html;
    morphChildren(region, next);
  }

  // state: "busy" while waiting, then "ok" or "problem".
  function say(element, text, state) {
    element.textContent = text;
    element.className = state;
  }

  // Filters apply as soon as one is chosen.
  for (const select of document.querySelectorAll("select.autosubmit")) {
    select.addEventListener("change", () => select.form.submit());
  }

  const fleet = document.getElementById("fleet");
  if (fleet) {
    stream(fleet.dataset.stream, {
      fleet: (data) => morph(fleet, data.html),
    });
  }

  // The page follows a growing transcript when it is scrolled to its end, but never moves
  // under a pointer in use: not within STILL_MS of the pointer moving or pressing.
  const STILL_MS = 2000;
  let pointedAt = 0;
  for (const name of ["pointermove", "pointerdown", "wheel", "touchstart"]) {
    document.addEventListener(name, () => (pointedAt = Date.now()), { passive: true, capture: true });
  }
  const atEnd = () => window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;

  const job = document.getElementById("job-live");
  if (job) {
    const transcript = document.getElementById("transcript");
    const runEnd = document.getElementById("run-end");
    let url = job.dataset.stream;
    if (job.dataset.offset) {
      url += (url.includes("?") ? "&" : "?") + "offset=" + job.dataset.offset;
    }
    stream(url, {
      job: (data) => morph(job, data.html),
      transcript: (data) => {
        const follow = atEnd() && Date.now() - pointedAt > STILL_MS;
        transcript.insertAdjacentHTML("beforeend", data.html);
        filter();
        if (follow) window.scrollTo(0, document.body.scrollHeight);
      },
      run: (data) => {
        runEnd.innerHTML = data.html;
      },
      reload: (data, source) => {
        source.close();
        window.location.reload();
      },
      end: (data, source) => {
        source.close();
        live.classList.remove("on");
        live.classList.add("done");
      },
    });
  }

  const dialog = document.getElementById("stop-dialog");
  if (dialog) {
    dialog.addEventListener("close", async () => {
      if (dialog.returnValue !== "yes") return;
      const out = document.getElementById("stop-result");
      say(out, "stopping…", "busy");
      const answer = await post(`/api/jobs/${encodeURIComponent(dialog.dataset.job)}/stop`);
      say(out, answer.ok ? `job ${answer.body.status}` : answer.body.error, answer.ok ? "ok" : "problem");
    });
  }

  // Approve, deny or answer an item of the approvals inbox, after a confirmation (as Stop).
  // A question's answer: an option's label or words of one's own, a line per question.
  const decide = document.getElementById("decide-dialog");
  const DECIDE_WORDS = { allow: "Approve", deny: "Deny", answer: "Answer" };
  function confirmDecision(button) {
    const choice = button.dataset.choice;
    decide.dataset.item = button.dataset.item;
    decide.dataset.choice = choice;
    document.getElementById("decide-what").textContent =
      `${DECIDE_WORDS[choice] || choice} item ${button.dataset.item}: ${button.dataset.summary}?`;
    document.getElementById("decide-label").textContent =
      choice === "answer" ? "Your answer (a line per question)" : "Why (the child is told)";
    document.getElementById("decide-why").hidden = choice === "allow";
    document.getElementById("decide-reason").value = "";
    decide.returnValue = "";
    decide.showModal();
  }
  if (decide) {
    decide.addEventListener("close", async () => {
      if (decide.returnValue !== "yes") return;
      const out = document.getElementById("decide-result");
      say(out, "deciding…", "busy");
      const payload = { choice: decide.dataset.choice };
      const text = document.getElementById("decide-reason").value.trim();
      if (payload.choice === "answer") payload.answers = text.split("\n").map((a) => a.trim()).filter((a) => a);
      else if (text) payload.reason = text;
      const answer = await post(`/api/approvals/${encodeURIComponent(decide.dataset.item)}/decide`, payload);
      const done = { deny: "denied", answer: "answered" }[answer.body.choice] || "allowed";
      say(out, answer.ok ? `${done}: item ${answer.body.item}` : answer.body.error, answer.ok ? "ok" : "problem");
    });
  }

  // Re-run and Continue: a new job, after a confirmation; the page goes to it.
  const again = document.getElementById("again-dialog");
  function ask(button) {
    const rerun = button.dataset.action === "rerun";
    again.dataset.action = button.dataset.action;
    again.dataset.id = rerun ? button.dataset.job : button.dataset.run;
    document.getElementById("again-what").textContent = rerun
      ? `Run job ${button.dataset.job} again, as a new job?`
      : `Continue run ${button.dataset.run}: its child resumes its conversation with this message.`;
    document.getElementById("again-message").hidden = rerun;
    again.returnValue = "";
    again.showModal();
  }
  if (again) {
    again.addEventListener("close", async () => {
      if (again.returnValue !== "yes") return;
      const out = document.getElementById("stop-result");
      say(out, "starting…", "busy");
      const id = encodeURIComponent(again.dataset.id);
      const answer = again.dataset.action === "rerun"
        ? await post(`/api/jobs/${id}/rerun`)
        : await post(`/api/runs/${id}/continue`, { text: document.getElementById("again-text").value });
      if (answer.ok) window.location.assign(`/job/${encodeURIComponent(answer.body.jobId)}`);
      else say(out, answer.body.error, "problem");
    });
  }

  // The transcript's search: what does not match is hidden (a list item, a paragraph).
  const search = document.getElementById("transcript-search");
  function filter() {
    const transcript = document.getElementById("transcript");
    if (!search || !transcript) return;
    const words = search.value.trim().toLowerCase();
    for (const item of transcript.querySelectorAll(":scope > *, :scope > ul > li")) {
      if (item.nodeName === "UL") continue;
      item.hidden = words !== "" && !item.textContent.toLowerCase().includes(words);
    }
  }
  if (search) search.addEventListener("input", filter);

  // Send is in the live part: there while the run goes on, gone when it ended.
  document.addEventListener("submit", async (e) => {
    const sendForm = e.target.closest("#send-form");
    if (!sendForm) return;
    e.preventDefault();
    const out = document.getElementById("send-result");
    const text = document.getElementById("send-text");
    const mode = document.getElementById("send-mode").value;
    say(out, "sending…", "busy");
    const answer = await post(`/api/runs/${encodeURIComponent(sendForm.dataset.run)}/send`, {
      text: text.value,
      mode,
    });
    if (answer.ok) {
      const r = answer.body;
      say(out, `${r.receipt}: ${r.mode} ${r.id} to run ${r.runId}` + (r.reason ? ` (${r.reason})` : ""), "ok");
      text.value = "";
    } else {
      say(out, answer.body.error, "problem");
    }
  });

  document.addEventListener("click", async (e) => {
    const button = e.target.closest("button[data-action]");
    if (!button) return;
    if (button.dataset.action === "signout") {
      await post("/signout");
      window.location.assign("/");
    } else if ((button.dataset.action === "rerun" || button.dataset.action === "continue") && again) {
      ask(button);
    } else if (button.dataset.action === "decide" && decide) {
      confirmDecision(button);
    } else if (button.dataset.action === "stop" && dialog) {
      dialog.dataset.job = button.dataset.job;
      dialog.returnValue = "";
      dialog.showModal();
    } else if (button.dataset.action === "apply") {
      button.disabled = true;
      say(document.getElementById("apply-result"), "applying…", "busy");
      const partial = button.dataset.partial ? "?partial=1" : "";
      const answer = await post(`/api/runs/${encodeURIComponent(button.dataset.run)}/apply${partial}`);
      const out = document.getElementById("apply-result"); // (the live stream may have redrawn it)
      if (answer.ok) {
        const files = answer.body.applied;
        const text = files.length ? `applied ${files.length} file(s): ${files.join(", ")}` : "nothing to apply";
        say(out, text, "ok");
      } else {
        say(out, answer.body.error, "problem");
      }
      button.disabled = false;
    }
  });
})();
