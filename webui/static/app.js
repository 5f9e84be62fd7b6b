// The Sandboxes page's script: it swaps in the sections the server pushes
// over Server-Sent Events, sends the actions with the CSRF token, follows a
// new sandbox to Ready, and runs the inline terminal. The server renders
// every piece of HTML; this file only moves it.
"use strict";

const csrf = document.querySelector('meta[name="csrf-token"]').content;
const $ = (id) => document.getElementById(id);

// ---- times: "3m ago", "in 2h" -----------------------------------------

function relative(date) {
  const seconds = Math.round((date - Date.now()) / 1000);
  const abs = Math.abs(seconds);
  const [n, unit] = abs < 60 ? [abs, "s"] : abs < 3600 ? [Math.floor(abs / 60), "m"]
    : abs < 172800 ? [Math.floor(abs / 3600), "h"] : [Math.floor(abs / 86400), "d"];
  return seconds < 0 ? `${n}${unit} ago` : `in ${n}${unit}`;
}

function showTimes(root) {
  for (const t of root.querySelectorAll("time[datetime]")) {
    const date = new Date(t.dateTime);
    if (isNaN(date)) continue;
    t.textContent = relative(date);
    t.title = date.toISOString();
  }
}

// ---- notices --------------------------------------------------------------

function notify(message, kind) {
  const notice = $("notice");
  notice.textContent = message;
  notice.className = kind || "error";
  notice.hidden = !message;
}

// ---- live sections --------------------------------------------------------

// swap replaces a section's HTML, keeping what the user chose or typed in
// its fields (the new-sandbox choices are a section).
function swap(id, html) {
  const el = $(id);
  if (!el) return;
  const kept = {};
  for (const f of el.querySelectorAll("select, input")) kept[f.name] = f.value;
  el.innerHTML = html;
  for (const f of el.querySelectorAll("select, input")) {
    const value = kept[f.name];
    if (value === undefined) continue;
    if (f.tagName === "SELECT" && ![...f.options].some((o) => o.value === value)) continue;
    f.value = value;
  }
  showTimes(el);
  followProgress();
}

// placeRows puts the sandboxes' rows in the server's order, replacing the
// changed ones and dropping those no longer on the page.
function placeRows(update) {
  const body = $("sandbox-rows");
  if (!body) return;
  const have = new Map([...body.rows].map((row) => [row.dataset.sandbox, row]));
  const template = document.createElement("template");
  let previous = null;
  for (const name of update.order) {
    let row = have.get(name);
    const html = update.changed[name];
    if (html !== undefined) {
      template.innerHTML = html.trim();
      const fresh = template.content.firstElementChild;
      if (row) row.replaceWith(fresh);
      row = fresh;
      showTimes(row);
    }
    have.delete(name);
    const next = previous ? previous.nextElementSibling : body.firstElementChild;
    if (row !== next) body.insertBefore(row, next);
    previous = row;
  }
  for (const row of have.values()) row.remove();
  body.closest("table").hidden = update.order.length === 0;
  followProgress();
}

function follow() {
  // The stream shows what the page's query does (its filter and page).
  const source = new EventSource(`/events${location.search}`);
  const live = $("live");
  source.addEventListener("open", () => { live.textContent = "live"; live.className = "live on"; });
  source.addEventListener("error", () => { live.textContent = "reconnecting…"; live.className = "live off"; });
  source.addEventListener("section", (e) => {
    const s = JSON.parse(e.data);
    swap(s.id, s.html);
  });
  source.addEventListener("rows", (e) => placeRows(JSON.parse(e.data)));
  source.addEventListener("failure", (e) => notify(JSON.parse(e.data)));
}

// ---- actions --------------------------------------------------------------

async function call(method, url, body) {
  const response = await fetch(url, {
    method,
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const answer = await response.json().catch(() => ({ error: `${response.status} ${response.statusText}` }));
  if (!response.ok) throw new Error(answer.error || `${response.status} ${response.statusText}`);
  return answer;
}

function confirmAction(text) {
  return new Promise((resolve) => {
    const dialog = $("confirm");
    $("confirm-text").textContent = text;
    dialog.returnValue = "";
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
    $("confirm-ok").focus();
  });
}

const confirmations = {
  stop: (name) => `Stop ${name}? Its pod is deleted; the workspace is kept for Start.`,
  delete: (name) => `Delete ${name}? Its namespace and workspace are deleted too.`,
};

async function act(action, name) {
  if (confirmations[action] && !(await confirmAction(confirmations[action](name)))) return;
  try {
    if (action === "delete") await call("DELETE", `/api/sandboxes/${encodeURIComponent(name)}`);
    else await call("POST", `/api/sandboxes/${encodeURIComponent(name)}/${action}`);
    notify(`${action === "delete" ? "Deleting" : action === "stop" ? "Stopping" : "Starting"} ${name}…`, "info");
  } catch (err) {
    notify(`Could not ${action} ${name}: ${err.message}`);
  }
}

// ---- new sandbox and its progress ------------------------------------------

let creating = null; // {name, since}

function followProgress() {
  if (!creating) return;
  const progress = $("progress");
  const row = document.querySelector(`tr[data-sandbox="${CSS.escape(creating.name)}"]`);
  const took = ((Date.now() - creating.since) / 1000).toFixed(1);
  if (!row) {
    progress.textContent = `${creating.name}: requested (${took} s)`;
    return;
  }
  const { phase, ready, failed, message } = row.dataset;
  if (ready === "true") {
    progress.textContent = `${creating.name} is Ready (${took} s)`;
    progress.className = "done";
    creating = null;
  } else if (failed === "true") {
    progress.textContent = `${creating.name} failed: ${message}`;
    progress.className = "failed";
    creating = null;
  } else {
    progress.textContent = `${creating.name}: ${phase}${message ? ` (${message})` : ""} (${took} s)`;
  }
}

async function create(event) {
  event.preventDefault();
  const form = event.target;
  const data = Object.fromEntries(new FormData(form));
  const progress = $("progress");
  progress.className = "";
  progress.textContent = "requesting…";
  try {
    const answer = await call("POST", "/api/sandboxes", data);
    creating = { name: answer.name, since: Date.now() };
    notify("");
    followProgress();
  } catch (err) {
    progress.textContent = "";
    notify(`Could not create a sandbox: ${err.message}`);
  }
}

// ---- logs and connection help ----------------------------------------------

function showText(title, text) {
  $("text-title").textContent = title;
  $("text-body").textContent = text;
  $("text-dialog").showModal();
}

async function logs(name) {
  const response = await fetch(`/api/sandboxes/${encodeURIComponent(name)}/logs`);
  if (!response.ok) {
    const answer = await response.json().catch(() => ({}));
    notify(`Could not read the logs of ${name}: ${answer.error || response.statusText}`);
    return;
  }
  showText(`Logs: ${name}`, (await response.text()) || "(no output yet)");
}

function connect(name) {
  showText(`Reach ${name}`, [
    "# a shell, with the CLI:",
    `agentsandbox exec -it ${name} -- sh`,
    "",
    "# over SSH (scp, sftp and -L too), after once running",
    "#   agentsandbox ssh-config >> ~/.ssh/config",
    `ssh ${name}.sandbox`,
  ].join("\n"));
}

// ---- terminal -------------------------------------------------------------

let session = null; // {term, socket, fit}

function openTerminal(name) {
  const dialog = $("terminal-dialog");
  $("terminal-name").textContent = name;
  $("terminal-status").textContent = "connecting…";
  dialog.showModal();
  const term = new window.Terminal({ cursorBlink: true, convertEol: false, fontSize: 14 });
  const fit = new window.FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open($("terminal"));
  fit.fit();
  const url = new URL(`/api/sandboxes/${encodeURIComponent(name)}/terminal`, location.href);
  url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  url.searchParams.set("csrf", csrf);
  const socket = new WebSocket(url);
  socket.binaryType = "arraybuffer";
  const encoder = new TextEncoder();
  const sendSize = () => {
    if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ resize: { cols: term.cols, rows: term.rows } }));
  };
  socket.addEventListener("open", () => {
    $("terminal-status").textContent = "connected";
    sendSize();
    term.focus();
  });
  socket.addEventListener("message", (e) => {
    if (typeof e.data !== "string") {
      term.write(new Uint8Array(e.data));
      return;
    }
    const msg = JSON.parse(e.data);
    if (msg.session) {
      // The agent's terminal session: it outlives this socket.
      $("terminal-status").textContent = msg.resumed
        ? `connected: resumed "${msg.session}", which kept running (closing leaves it running; exit ends it)`
        : `connected: "${msg.session}" (closing leaves it running; exit ends it)`;
    } else if (msg.error) {
      $("terminal-status").textContent = `refused: ${msg.error}`;
      term.write(`\r\n\x1b[31m${msg.error}\x1b[0m\r\n`);
    } else if (msg.exit !== undefined) {
      $("terminal-status").textContent = `the shell exited with code ${msg.exit}`;
    }
  });
  socket.addEventListener("close", () => {
    if ($("terminal-status").textContent.startsWith("connected")) $("terminal-status").textContent = "disconnected";
  });
  term.onData((data) => {
    if (socket.readyState === WebSocket.OPEN) socket.send(encoder.encode(data));
  });
  term.onResize(sendSize);
  session = { term, socket, fit };
}

function closeTerminal() {
  if (session) {
    session.socket.close();
    session.term.dispose();
    session = null;
  }
  $("terminal").replaceChildren();
  if ($("terminal-dialog").open) $("terminal-dialog").close();
}

// ---- wiring ---------------------------------------------------------------

document.addEventListener("click", (e) => {
  const button = e.target.closest("button[data-action]");
  if (!button) return;
  const { action, name } = button.dataset;
  if (action === "terminal") openTerminal(name);
  else if (action === "logs") logs(name);
  else if (action === "connect") connect(name);
  else act(action, name);
});
$("new-sandbox").addEventListener("submit", create);
$("terminal-close").addEventListener("click", closeTerminal);
$("terminal-dialog").addEventListener("close", closeTerminal);
$("text-close").addEventListener("click", () => $("text-dialog").close());
window.addEventListener("resize", () => session && session.fit.fit());
setInterval(() => { showTimes(document); followProgress(); }, 5000);
showTimes(document);
follow();
