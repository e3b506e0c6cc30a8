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

  async function post(url) {
    const response = await fetch(url, {
      method: "POST",
      headers: { "X-CSRF-Token": csrf },
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
      fleet: (data) => {
        fleet.innerHTML = data.html;
      },
    });
  }

  const job = document.getElementById("job-live");
  if (job) {
    const transcript = document.getElementById("transcript");
    const runEnd = document.getElementById("run-end");
    let url = job.dataset.stream;
    if (job.dataset.offset) {
      url += (url.includes("?") ? "&" : "?") + "offset=" + job.dataset.offset;
    }
    stream(url, {
      job: (data) => {
        job.innerHTML = data.html;
      },
      transcript: (data) => {
        const atEnd = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
        transcript.insertAdjacentHTML("beforeend", data.html);
        if (atEnd) window.scrollTo(0, document.body.scrollHeight);
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

  document.addEventListener("click", async (e) => {
    const button = e.target.closest("button[data-action]");
    if (!button) return;
    if (button.dataset.action === "stop" && dialog) {
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
