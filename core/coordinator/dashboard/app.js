// The gpupool dashboard: signs in with a token held in this tab's sessionStorage only, then polls
// the coordinator's /v1 API (GET /v1/pool every few seconds, GET /v1/pool/samples less often) and
// draws what it gets. Read-only: it never changes the pool.
//
// Rules: every value from the API is put on the page as text (textContent, SVG attributes), never
// as HTML; nothing from a refused request (401/403) is drawn, and a refusal while signed in signs
// out and clears the page; the token lives in sessionStorage only: never in the URL, a cookie or
// the browser's long-term storage.
"use strict";

(function () {
  const TOKEN_KEY = "gpupool.token";
  const POOL_EVERY_MS = 3000;
  const SAMPLES_EVERY_MS = 30000;
  const DAY_MS = 24 * 3600 * 1000;
  const LOG_TAIL_BYTES = 64 * 1024;
  const LOG_MAX_READS = 16;

  const $ = (id) => document.getElementById(id);
  let token = null;
  let poolTimer = null;
  let samplesTimer = null;
  let logJob = null;
  let generation = 0; // bumped on every sign-in and sign-out: late answers of an old session are dropped

  // ---- the API ------------------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  async function api(path, withToken) {
    const response = await fetch(path, {
      headers: { Authorization: "Bearer " + withToken, Accept: "application/json" },
      cache: "no-store",
      credentials: "omit",
      referrerPolicy: "no-referrer",
    });
    let body = null;
    try {
      body = await response.json();
    } catch (e) {
      body = null;
    }
    if (!response.ok) {
      const detail = body && typeof body.detail === "string" ? body.detail : response.statusText;
      throw new ApiError(response.status, detail);
    }
    if (body === null || typeof body !== "object") {
      throw new ApiError(response.status, "the coordinator sent something that is not JSON");
    }
    return body;
  }

  const refused = (e) => e instanceof ApiError && (e.status === 401 || e.status === 403);

  // ---- formatting ---------------------------------------------------------------------------------

  const num = (v) => (typeof v === "number" && isFinite(v) ? v : 0);
  const str = (v) => (typeof v === "string" ? v : v === null || v === undefined ? "" : String(v));
  const list = (v) => (Array.isArray(v) ? v : []);

  function gpus(milli) {
    return (num(milli) / 1000).toFixed(2);
  }

  function credits(micro) {
    const c = num(micro) / 1e6;
    return Math.abs(c) < 0.01 && c !== 0 ? c.toFixed(6) : c.toFixed(2);
  }

  function duration(ms) {
    if (num(ms) > 0 && num(ms) < 1000) return (num(ms) / 1000).toFixed(1) + "s";
    let s = Math.max(0, Math.round(num(ms) / 1000));
    const d = Math.floor(s / 86400);
    s -= d * 86400;
    const h = Math.floor(s / 3600);
    s -= h * 3600;
    const m = Math.floor(s / 60);
    s -= m * 60;
    if (d > 0) return d + "d " + h + "h";
    if (h > 0) return h + "h " + m + "m";
    if (m > 0) return m + "m " + s + "s";
    return s + "s";
  }

  function ago(at, now) {
    return duration(num(now) - num(at)) + " ago";
  }

  function clock(at) {
    const d = new Date(num(at));
    return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  }

  // ---- building the page (text only) ----------------------------------------------------------------

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = str(text);
    if (cls) e.className = cls;
    return e;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function fillTable(id, rows, emptyText, makeRow) {
    const body = $(id).tBodies[0];
    clear(body);
    if (rows.length === 0) {
      const tr = el("tr");
      const td = el("td", emptyText, "empty");
      td.colSpan = $(id).tHead.rows[0].cells.length;
      tr.appendChild(td);
      body.appendChild(tr);
      return;
    }
    for (const row of rows) body.appendChild(makeRow(row));
  }

  function row(cells) {
    const tr = el("tr");
    for (const c of cells) {
      if (c instanceof Node) {
        const td = el("td");
        td.appendChild(c);
        tr.appendChild(td);
      } else if (c && typeof c === "object") {
        tr.appendChild(el("td", c.text, c.cls));
      } else {
        tr.appendChild(el("td", c));
      }
    }
    return tr;
  }

  function presenceClass(p) {
    if (p === "online") return "presence-online";
    if (p === "offline" || p === "banned" || p === "quarantined") return "presence-offline";
    return "presence-other";
  }

  function drawTotals(t) {
    const box = $("totals");
    clear(box);
    const items = [
      ["Workers online", num(t.workers_online) + " of " + num(t.workers)],
      ["GPUs online", num(t.gpus_online)],
      ["GPUs given out", gpus(t.gpu_milli_allocated) + " of " + gpus(t.gpu_milli_online)],
      ["GPUs shared", num(t.gpus_shared)],
      ["Jobs running", num(t.jobs_running)],
      ["Jobs queued", num(t.jobs_queued)],
    ];
    for (const [label, value] of items) {
      const d = el("div");
      d.appendChild(el("dt", label));
      d.appendChild(el("dd", value));
      box.appendChild(d);
    }
  }

  function gpuCell(gpuList) {
    const box = el("div");
    if (gpuList.length === 0) box.appendChild(el("span", "no GPU (CPU only)"));
    for (const g of gpuList) {
      const line = el("div", null, g.healthy === false ? "gpu unhealthy" : "gpu");
      const memory = num(g.memory_mib) >= 1024 ? Math.round(num(g.memory_mib) / 1024) + " GiB" : num(g.memory_mib) + " MiB";
      line.appendChild(el("span", "GPU " + num(g.index) + " " + str(g.model) + " " + memory));
      const meter = el("meter");
      meter.min = 0;
      meter.max = 1000;
      meter.value = Math.min(1000, num(g.allocated_milli));
      meter.title = gpus(g.allocated_milli) + " of 1.00 given out";
      line.appendChild(meter);
      const jobs = num(g.jobs);
      line.appendChild(el("span", gpus(g.allocated_milli) + ", " + jobs + (jobs === 1 ? " job" : " jobs")));
      if (g.healthy === false) line.appendChild(el("span", "unhealthy"));
      line.dataset.gpuIndex = String(num(g.index));
      box.appendChild(line);
    }
    return box;
  }

  function drawWorkers(workers, now) {
    fillTable("workers", workers, "No workers yet.", (w) => {
      const tr = row([
        w.name,
        w.team,
        { text: w.presence, cls: presenceClass(str(w.presence)) },
        ago(w.last_seen_at, now),
        gpuCell(list(w.gpus)),
        typeof w.reliability === "number" ? w.reliability.toFixed(3) : "not checked",
      ]);
      tr.dataset.workerId = String(num(w.id));
      return tr;
    });
  }

  function jobRow(j, cells) {
    const tr = row(cells);
    tr.dataset.jobId = String(num(j.id));
    return tr;
  }

  function drawJobs(pool, now) {
    fillTable("running", list(pool.running), "Nothing runs now.", (j) =>
      jobRow(j, [
        "#" + num(j.id),
        j.name,
        j.team,
        j.submitter,
        { text: str(j.worker_name) + (num(j.gpu_index) >= 0 ? " (GPU " + num(j.gpu_index) + ")" : ""), cls: "worker" },
        num(j.gpu_milli) > 0 ? gpus(j.gpu_milli) + " GPU" : "CPU only",
        duration(num(now) - num(j.since)),
      ])
    );
    fillTable("queued", list(pool.queued), "The queue is empty.", (j) =>
      jobRow(j, ["#" + num(j.id), j.name, j.team, j.submitter, duration(num(now) - num(j.since)), { text: j.why, cls: "why" }])
    );
    fillTable("recent", list(pool.recent), "No job has ended yet.", (j) => {
      const open = el("button", "#" + num(j.id), "link");
      open.type = "button";
      open.title = "Show the end of its log";
      open.addEventListener("click", () => showLog(num(j.id), str(j.name)));
      const exit = j.exit_code === null || j.exit_code === undefined ? "" : String(num(j.exit_code));
      return jobRow(j, [open, j.name, j.team, { text: j.state, cls: "state-" + str(j.state) }, exit, ago(j.since, now),
        { text: j.why, cls: "why" }]);
    });
  }

  function drawCredits(rows) {
    fillTable("credits", rows, "No team.", (c) => row([c.team, credits(c.balance_micro), credits(c.held_micro)]));
  }

  // ---- the chart ------------------------------------------------------------------------------------

  const SVG = "http://www.w3.org/2000/svg";

  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = str(text);
    return e;
  }

  let lastSeries = null;

  function drawChart(series, now) {
    lastSeries = series;
    const box = $("chart");
    clear(box);
    const samples = list(series.samples).filter((s) => s && typeof s.at === "number");
    const every = num(series.every_ms);
    $("chart-note").textContent =
      samples.length < 2
        ? "Not enough samples yet: the coordinator takes one every " + duration(every) + "."
        : samples.length + " samples, one every " + duration(every) + ".";
    // Drawn at the box's own width, so that the labels keep their size on a phone and on a wide screen.
    const W = Math.max(280, Math.round(box.clientWidth || 600)), H = 180, L = 34, R = 8, T = 8, B = 22;
    const from = now - DAY_MS;
    let top = 1;
    for (const s of samples) top = Math.max(top, num(s.gpu_milli_online) / 1000, num(s.gpu_milli_allocated) / 1000);
    top = Math.ceil(top);
    const x = (at) => L + ((Math.min(Math.max(at, from), now) - from) / DAY_MS) * (W - L - R);
    const y = (v) => T + (1 - v / top) * (H - T - B);
    const chart = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": "GPUs online and given out over the last 24 hours" });
    chart.appendChild(svg("line", { x1: L, y1: y(0), x2: W - R, y2: y(0), class: "axis" }));
    chart.appendChild(svg("line", { x1: L, y1: y(top), x2: W - R, y2: y(top), class: "axis" }));
    chart.appendChild(svg("text", { x: L - 4, y: y(0) + 4, "text-anchor": "end" }, "0"));
    chart.appendChild(svg("text", { x: L - 4, y: y(top) + 4, "text-anchor": "end" }, String(top)));
    for (let h = 0; h <= 24; h += W < 500 ? 12 : 6) { // fewer labels on a narrow screen
      const at = from + h * 3600 * 1000;
      chart.appendChild(svg("text", { x: x(at), y: H - 6, "text-anchor": h === 0 ? "start" : h === 24 ? "end" : "middle" },
        h === 24 ? "now" : clock(at)));
    }
    if (samples.length >= 1) {
      const pts = (key) => samples.map((s) => x(s.at).toFixed(1) + "," + y(num(s[key]) / 1000).toFixed(1));
      const allocated = pts("gpu_milli_allocated");
      const first = x(samples[0].at).toFixed(1);
      const last = x(samples[samples.length - 1].at).toFixed(1);
      const area = [first + "," + y(0).toFixed(1)].concat(allocated, [last + "," + y(0).toFixed(1)]);
      chart.appendChild(svg("polygon", { points: area.join(" "), class: "allocated" }));
      chart.appendChild(svg("polyline", { points: pts("gpu_milli_online").join(" "), class: "online" }));
    }
    box.appendChild(chart);
    const legend = el("div", null, "legend");
    for (const [cls, label] of [["online", "GPUs online"], ["allocated", "GPUs given out to jobs"]]) {
      const item = el("span");
      item.appendChild(el("span", null, "swatch " + cls));
      item.appendChild(document.createTextNode(label));
      legend.appendChild(item);
    }
    box.appendChild(legend);
  }

  // ---- logs -----------------------------------------------------------------------------------------

  async function showLog(jobId, name) {
    const mine = generation;
    logJob = jobId;
    $("log-panel").hidden = false;
    $("log-title").textContent = "Job #" + jobId + " " + name + ": end of its log";
    $("log").textContent = "Loading…";
    let text = "";
    try {
      let offset = 0;
      for (let i = 0; i < LOG_MAX_READS; i++) {
        const slice = await api("/v1/jobs/" + jobId + "/logs?offset=" + offset, token);
        const data = str(slice.data);
        text = (text + data).slice(-LOG_TAIL_BYTES);
        const next = num(slice.next_offset);
        if (data.length === 0 || next <= offset) break;
        offset = next;
      }
    } catch (e) {
      if (mine !== generation || logJob !== jobId) return;
      if (refused(e) && e.status === 401) return signOut("The coordinator no longer accepts this token.");
      $("log").textContent = "No log: " + e.message;
      return;
    }
    if (mine !== generation || logJob !== jobId) return;
    $("log").textContent = text.length > 0 ? text : "(the log is empty)";
    await showManifest(jobId, mine);
  }

  // The job's manifest (docs/evidence.md): a line of what ran, and the whole document to save.
  async function showManifest(jobId, mine) {
    const box = $("log-manifest");
    clear(box);
    let m;
    try {
      m = await api("/v1/jobs/" + jobId + "/manifest", token);
    } catch (e) {
      if (mine !== generation || logJob !== jobId) return;
      box.appendChild(el("span", "No manifest: " + e.message));
      return;
    }
    if (mine !== generation || logJob !== jobId) return;
    const image = m.image || {};
    const outputs = m.outputs || {};
    const worker = m.worker || {};
    box.appendChild(el("span", "Manifest: image " + str(image.digest || "(digest not known)") + " on " +
      str(worker.gpu_model || "CPU") + ", " + num(outputs.entry_count) + " output entries (tree " +
      str(outputs.tree_sha256 || "-").slice(0, 12) + "). "));
    const link = el("a", "Save manifest.json");
    link.href = URL.createObjectURL(new Blob([JSON.stringify(m, null, 2)], { type: "application/json" }));
    link.download = "job-" + jobId + ".manifest.json";
    box.appendChild(link);
  }

  // ---- polling --------------------------------------------------------------------------------------

  function status(text, stale) {
    const line = $("status-line");
    line.textContent = text;
    line.classList.toggle("stale", !!stale);
  }

  async function pollPool() {
    const mine = generation;
    try {
      const pool = await api("/v1/pool", token);
      if (mine !== generation) return;
      const now = num(pool.at) || Date.now();
      drawTotals(pool.totals || {});
      drawWorkers(list(pool.workers), now);
      drawJobs(pool, now);
      drawCredits(list(pool.credits));
      status("Updated " + new Date(now).toLocaleTimeString() + " (every " + POOL_EVERY_MS / 1000 + " s).", false);
    } catch (e) {
      if (mine !== generation) return;
      if (refused(e)) return signOut("Refused: " + e.message);
      status("Could not reach the coordinator (" + e.message + "); showing the last answer, retrying.", true);
    }
  }

  async function pollSamples() {
    const mine = generation;
    try {
      const since = Date.now() - DAY_MS;
      const series = await api("/v1/pool/samples?since=" + Math.max(0, Math.floor(since)), token);
      if (mine !== generation) return;
      drawChart(series, Date.now());
    } catch (e) {
      if (mine !== generation) return;
      if (refused(e)) return signOut("Refused: " + e.message);
      $("chart-note").textContent = "Could not read the samples (" + e.message + ").";
    }
  }

  function stopPolling() {
    clearInterval(poolTimer);
    clearInterval(samplesTimer);
    poolTimer = null;
    samplesTimer = null;
  }

  // ---- signing in and out ---------------------------------------------------------------------------

  function clearPage() {
    for (const id of ["workers", "running", "queued", "recent", "credits"]) clear($(id).tBodies[0]);
    clear($("totals"));
    clear($("chart"));
    $("chart-note").textContent = "";
    lastSeries = null;
    $("log").textContent = "";
    $("log-panel").hidden = true;
    $("who").textContent = "";
    status("", false);
    logJob = null;
  }

  function signOut(why) {
    generation++;
    stopPolling();
    token = null;
    sessionStorage.removeItem(TOKEN_KEY);
    clearPage();
    $("pool").hidden = true;
    $("sign-out").hidden = true;
    $("login-panel").hidden = false;
    const error = $("login-error");
    error.textContent = why || "";
    error.hidden = !why;
  }

  // Checks the token before anything is drawn: who it is, and that it may read the pool.
  async function signIn(candidate) {
    const mine = ++generation;
    let who;
    try {
      who = await api("/v1/whoami", candidate);
      if (who.role !== "admin" && who.role !== "member") {
        throw new ApiError(403, "a " + str(who.role) + " token cannot read the pool; use an admin or member token");
      }
      await api("/v1/pool", candidate);
    } catch (e) {
      if (mine !== generation) return;
      signOut(refused(e) ? "Wrong token: " + e.message : "Could not sign in: " + e.message);
      return;
    }
    if (mine !== generation) return;
    token = candidate;
    sessionStorage.setItem(TOKEN_KEY, candidate);
    $("login-error").hidden = true;
    $("login-error").textContent = "";
    $("login-panel").hidden = true;
    $("pool").hidden = false;
    $("sign-out").hidden = false;
    $("who").textContent =
      who.role === "admin" ? "admin (" + str(who.label) + "): every team" : "member of " + str(who.team) + " (" + str(who.label) + ")";
    status("Loading…", false);
    pollPool();
    pollSamples();
    poolTimer = setInterval(pollPool, POOL_EVERY_MS);
    samplesTimer = setInterval(pollSamples, SAMPLES_EVERY_MS);
  }

  function start() {
    $("login-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const input = $("token");
      const candidate = input.value.trim();
      input.value = "";
      if (candidate.length === 0) return;
      signIn(candidate);
    });
    $("sign-out").addEventListener("click", () => signOut(""));
    window.addEventListener("resize", () => {
      if (token !== null && lastSeries !== null) drawChart(lastSeries, Date.now());
    });
    $("log-close").addEventListener("click", () => {
      logJob = null;
      $("log-panel").hidden = true;
    });
    const saved = sessionStorage.getItem(TOKEN_KEY);
    if (saved) signIn(saved);
  }

  start();
})();
