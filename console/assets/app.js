// The spool console: a page per view, each drawn from the JSON API with
// the DOM's text nodes only (never innerHTML): what a dead letter holds is
// shown as text, whatever it is. The Content-Security-Policy allows no
// inline script, so every handler is attached here, and every
// confirmation is a step in the page.
//
// Times: the API speaks UTC; the page shows the browser's local time (its
// zone named in the footer) and sends every time it was given as RFC 3339
// with the browser's offset, the same text to the list and to the task it
// asks, so that both select the same dead letters in any time zone.
"use strict";
(function () {
  const csrf = document.querySelector('meta[name="csrf"]').content;
  const who = document.getElementById("who");
  const me = { name: who.dataset.name, role: who.dataset.role };
  const rank = { viewer: 1, operator: 2, approver: 3 };
  const view = document.getElementById("view");
  const status = document.getElementById("status");
  const DASH = "\u2014";
  const reasons = ["parse", "missing-field", "invalid-field", "not-regular", "too-large", "unreadable", "handler", "retries-exhausted", "unknown"];
  const actions = ["replay", "discard", "approve", "cancel", "run", "policy", "login", "logout", "read", "request", "flush", "repair", "prune", "bind", "backup"];
  const outcomes = ["started", "ok", "failed", "interrupted", "refused"];
  let timer = null;
  // gen counts the routes taken: a page's late answer draws nothing once
  // another page is shown.
  let gen = 0;

  // el makes an element with attributes and children (strings are text;
  // null, undefined and false are left out).
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "on") for (const [ev, f] of Object.entries(v)) e.addEventListener(ev, f);
      else if (v !== null && v !== undefined && v !== false) e.setAttribute(k, v === true ? "" : v);
    }
    for (const k of kids.flat()) {
      if (k === null || k === undefined || k === false) continue;
      e.append(typeof k === "string" || typeof k === "number" ? document.createTextNode(String(k)) : k);
    }
    return e;
  }
  // put replaces node's children with kids, leaving out null, undefined
  // and false (replaceChildren would write them as text: "null").
  function put(node, ...kids) {
    node.replaceChildren(...kids.flat().filter(k => k !== null && k !== undefined && k !== false));
  }
  // show is v as text, or a dash for a value missing.
  function show(v) { return v === null || v === undefined || v === "" ? DASH : String(v); }

  async function api(method, path, body) {
    const opts = { method, credentials: "same-origin", headers: {} };
    if (method !== "GET") {
      opts.headers["X-CSRF-Token"] = csrf;
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body || {});
    }
    const res = await fetch("/api/v1/" + path, opts);
    let data = null;
    try { data = await res.json(); } catch (e) { data = { error: res.statusText }; }
    if (res.status === 401) throw new Error("signed out: reload the page to sign in again");
    if (!res.ok) throw new Error((data && data.error) || res.statusText);
    return data;
  }

  // Times.
  function pad(n) { return String(n).padStart(2, "0"); }
  function offsetOf(d) {
    const m = -d.getTimezoneOffset(), a = Math.abs(m);
    return (m >= 0 ? "+" : "-") + pad(Math.floor(a / 60)) + ":" + pad(a % 60);
  }
  function localDate(d) { return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()); }
  function localClock(d) { return pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()); }
  // when is a time of the API shown in local time, its UTC in the title.
  function when(iso) {
    if (!iso) return DASH;
    const d = new Date(iso);
    if (isNaN(d)) return String(iso);
    return el("time", { datetime: iso, title: d.toISOString() }, localDate(d) + " " + localClock(d));
  }
  function whenText(iso) {
    const d = iso ? new Date(iso) : null;
    return d && !isNaN(d) ? localDate(d) + " " + localClock(d) : show(iso);
  }
  // fromInput is a datetime-local value, the browser's local time, as
  // RFC 3339 with the browser's offset at that instant; "" for none,
  // null when it is no time.
  function fromInput(v) {
    if (!v) return "";
    const d = new Date(v);
    if (isNaN(d)) return null;
    return localDate(d) + "T" + localClock(d) + offsetOf(d);
  }
  // normTime is a time of the page's address as RFC 3339 with the
  // browser's offset: one written without an offset (an address of an
  // older console) is the browser's local time, as it was then.
  function normTime(v) {
    const d = v ? new Date(v) : null;
    return d && !isNaN(d) ? localDate(d) + "T" + localClock(d) + offsetOf(d) : "";
  }
  function normTimes(f) {
    for (const k of ["since", "until"]) {
      if (!f[k]) continue;
      const t = normTime(f[k]);
      if (t) f[k] = t; else delete f[k];
    }
  }
  // toInput is an RFC 3339 time as a datetime-local value.
  function toInput(t) {
    const d = t ? new Date(t) : null;
    return d && !isNaN(d) ? localDate(d) + "T" + localClock(d) : "";
  }
  function zoneText() {
    let z = "";
    try { z = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { z = ""; }
    const off = "UTC" + offsetOf(new Date());
    return z && z !== "UTC" && z !== "Etc/UTC" ? z + " (" + off + ")" : off;
  }

  // valueText is a JSON value as text: lists shortened, yes/no.
  function valueText(v) {
    if (v === null || v === undefined || v === "") return DASH;
    if (Array.isArray(v)) return v.length ? v.slice(0, 5).map(valueText).join(", ") + (v.length > 5 ? " and " + (v.length - 5) + " more" : "") : DASH;
    if (typeof v === "boolean") return v ? "yes" : "no";
    if (typeof v === "object") return Object.keys(v).length ? Object.entries(v).map(([k, x]) => k + " " + valueText(x)).join(", ") : DASH;
    return String(v);
  }
  // pairs shows an object's keys and values, one a line; a dash for none.
  function pairs(o) {
    if (o === null || o === undefined || typeof o !== "object") return show(o);
    const es = Object.entries(o);
    if (!es.length) return DASH;
    return es.map(([k, v]) => el("div", { class: "kv" }, el("span", { class: "k" }, k), " ", valueText(v)));
  }

  // table is a table with head; rows are its rows, or its tbody.
  function table(head, rows, attrs) {
    const body = rows instanceof HTMLTableSectionElement ? rows : el("tbody", {}, rows);
    return el("table", attrs || {}, el("thead", {}, el("tr", {}, head.map(h => el("th", {}, h)))), body);
  }
  function msgLink(q, text) { return el("a", { href: "#/message/" + encodeURIComponent(q) }, text); }
  function taskLink(id) { return el("a", { href: "#/task/" + id, class: "task-link" }, "task " + id); }
  // drawer returns the function that draws the page of this route, which
  // draws nothing once another route is taken.
  function drawer() {
    const g = gen;
    return (...kids) => {
      if (g !== gen) return false;
      put(view, ...kids);
      return true;
    };
  }
  function live(g) { return g === gen; }
  function fail(err) { put(status, el("span", { class: "error" }, String(err.message || err))); }
  function updated() { status.textContent = "updated " + localClock(new Date()); }
  function poll(f, ms) { timer = setInterval(() => f().catch(fail), ms || 5000); }
  function errorText(e) { return el("span", { class: "error" }, String(e.message || e)); }
  function query(f) {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(f)) if (v !== "" && v !== null && v !== undefined) p.set(k, v);
    return p.toString();
  }

  // stageAge says what a stage's card knows of its oldest message: a
  // stage is empty only without messages; done/ and held/ are not aged
  // (their listing stats no file), which is said, not shown as empty.
  function stageAge(s) {
    if (s.messages === 0) return "empty";
    if (s.oldest_age_seconds === null || s.oldest_age_seconds === undefined) return "age not measured";
    return "oldest " + Math.round(s.oldest_age_seconds) + " s";
  }

  // The charts: drawn by the server as SVG (GET charts), put in the page
  // as inline SVG through the XML parser (never innerHTML); their times
  // are in the browser's offset from UTC, which the request names.
  let chartWindow = "1h";
  async function charts() {
    const off = -new Date().getTimezoneOffset();
    const res = await fetch("/api/v1/charts?" + query({ window: chartWindow, utc_offset: off }), { credentials: "same-origin" });
    const body = await res.text();
    if (res.status === 401) throw new Error("signed out: reload the page to sign in again");
    if (!res.ok) {
      let msg = res.statusText;
      try { msg = JSON.parse(body).error || msg; } catch (e) { /* not JSON: the status says it */ }
      throw new Error("charts: " + msg);
    }
    const doc = new DOMParser().parseFromString(body, "image/svg+xml");
    if (doc.querySelector("parsererror") || doc.documentElement.localName !== "svg") throw new Error("charts: the server's SVG did not parse");
    return document.importNode(doc.documentElement, true);
  }
  function chartTabs() {
    const tab = (w, label) => el("button", { type: "button", id: "chart-window-" + w, class: w === chartWindow ? "tab active" : "tab",
      "aria-pressed": w === chartWindow ? "true" : "false", on: { click: () => { chartWindow = w; overview().catch(fail); } } }, label);
    return el("div", { class: "tabs" }, tab("1h", "Last hour"), tab("24h", "Last day"));
  }

  async function overview() {
    const draw = drawer();
    const [o, svg] = await Promise.all([api("GET", "overview"), charts().catch(errorText)]);
    const cards = (o.stages || []).map(s => el("div", { class: "card", id: "stage-" + s.stage },
      el("div", {}, s.stage + "/"), el("div", { class: "n" }, s.messages),
      el("div", {}, stageAge(s)), waitingForDoneFile(s), notTaken(s)));
    const r = o.rates;
    const rate = v => (v === null || v === undefined ? DASH : v.toFixed(2) + "/s");
    draw(el("h2", {}, "Overview"), el("p", {}, o.queue), el("div", { class: "cards" }, cards),
      el("h3", {}, "Ledger"),
      table(["processed", "duplicates", "dead letters recorded", "processed rate", "duplicate rate", "dead-letter rate"],
        [el("tr", {}, el("td", {}, o.ledger.processed), el("td", {}, o.ledger.duplicates),
          el("td", {}, o.ledger.dead_letters_recorded), el("td", {}, rate(r.processed_per_second)),
          el("td", {}, rate(r.duplicates_per_second)), el("td", {}, rate(r.dead_letters_per_second)))]),
      batchFiles(o.batch_files || []),
      el("h3", {}, "Over time"), chartTabs(), el("div", { id: "charts", class: "charts-box" }, svg));
    updated();
  }
  // waitingForDoneFile says, on the inbox/ card, how many data files wait
  // for their done-file (not counted as messages), and for how long.
  function waitingForDoneFile(s) {
    if (!s.waiting_for_done_file) return null;
    return el("div", { class: "waiting", id: "stage-" + s.stage + "-waiting" },
      plural(s.waiting_for_done_file, "data file", "data files") + " waiting for a done-file, the oldest " +
      Math.round(s.oldest_waiting_for_done_file_age_seconds) + " s");
  }
  // notTaken says, on the inbox/ card, how many entries the queue never
  // takes (not named as its messages are): spool status names them.
  function notTaken(s) {
    if (!s.inbox_not_taken) return null;
    return el("div", { class: "waiting", id: "stage-" + s.stage + "-not-taken" },
      plural(s.inbox_not_taken, "other entry", "other entries") + " never taken (not a message name; spool status names them)");
  }
  // batchFiles is what became of the records of the batch files last
  // committed (nothing on a queue without any).
  function batchFiles(files) {
    if (!files.length) return null;
    return el("div", { id: "batch-files" }, el("h3", {}, "Batch files"),
      table(["file", "processed", "duplicates", "dead letters", "last commit"],
        files.map(f => el("tr", {}, el("td", {}, msgLink(f.file, f.file)), el("td", {}, f.processed), el("td", {}, f.duplicates),
          el("td", {}, f.dead_letters), el("td", {}, f.last_commit)))));
  }

  // ---- Asking for a replay or a discard ----

  // stateText says where task t is.
  function stateText(t) {
    switch (t.state) {
      case "waiting": return "waiting for an approver";
      case "approved": return "approved, starting";
      case "running": return "running: " + t.done + " of " + t.files + " moved";
      case "done": return "done: " + t.done + " moved" + (t.missing ? ", " + t.missing + " gone" : "") + (t.changed ? ", " + t.changed + " changed and left" : "");
      default: return t.state + (t.detail ? ": " + t.detail : "");
    }
  }
  // follow polls task id while it runs, calling each(t) with each state,
  // and returns it once it waits or ended.
  async function follow(id, g, each) {
    const deadline = Date.now() + 120000;
    for (;;) {
      const t = await api("GET", "tasks/" + id);
      each(t);
      if (!["approved", "running"].includes(t.state) || Date.now() > deadline || !live(g)) return t;
      await new Promise(r => setTimeout(r, 300));
    }
  }
  function plural(n, one, many) { return n + " " + (n === 1 ? one : many); }

  // actionBar is the replay and discard of a selection: a dry run that
  // counts the files first, then a confirm step that asks for the task
  // with that same selection and its note; refresh() redraws what the
  // page shows once the task waits for an approver or has ended. ids
  // prefixes the elements' ids; labels names the buttons.
  function actionBar(selection, ids, labels, refresh) {
    const g = gen;
    const id = s => ids.prefix + s;
    const note = el("input", { id: id("note"), placeholder: "why (a discard needs it)", size: 30 });
    const force = el("input", { type: "checkbox", id: id("force") });
    const out = el("div", { class: "action-result", id: id("action-result") });
    const ask = async kind => {
      put(out);
      const path = kind === "replay" ? "replays" : "discards";
      if (kind === "discard" && !note.value.trim()) {
        put(out, el("span", { class: "error", id: id("need-note") }, "A discard needs a note: say why these dead letters go."));
        note.focus();
        return;
      }
      const sel = selection();
      const opts = kind === "replay" ? { force: force.checked } : {};
      const dry = await api("POST", path, Object.assign({ selection: sel, dry_run: true, note: note.value }, opts));
      const n = dry.count;
      const said = [el("span", { id: id("dry-run-count") }, plural(n, "dead letter matches", "dead letters match"))];
      if (dry.skipped) said.push(el("span", { class: "hint" }, "; " + plural(dry.skipped, "more is", "more are") + " left out: processed already (tick force to replay " + (dry.skipped === 1 ? "it" : "them") + ")"));
      if (dry.pending) said.push(el("span", { class: "hint" }, "; " + plural(dry.pending, "more is", "more are") + " left out: not recorded yet, a batch file's run still to record " + (dry.pending === 1 ? "it" : "them")));
      if (n === 0) {
        put(out, el("p", {}, said, ": nothing to " + kind + "."));
        return;
      }
      said.push(el("span", { class: "hint" }, dry.needs_approval ? "; the task will wait for an approver." : "; it runs at once."));
      const back = el("button", { type: "button", id: id("dry-run-back"), on: { click: () => put(out) } }, "Back");
      const confirm = el("button", { type: "button", class: "primary", id: id("confirm-" + kind), on: { click: async () => {
        confirm.disabled = true;
        try {
          const t = await api("POST", path, Object.assign({ selection: sel, note: note.value }, opts));
          const line = el("span", { class: "ok", id: id("task-created") });
          const say = t => put(line, taskLink(t.id), " (" + plural(t.files, "file", "files") + "): " + stateText(t));
          say(t);
          put(out, el("p", {}, line));
          const end = await follow(t.id, g, say);
          if (live(g)) await refresh(end);
        } catch (e) { put(out, errorText(e)); }
      } } }, "Ask " + kind + " of " + (n === 1 ? "this 1" : "these " + n));
      put(out, el("p", {}, said), el("p", {}, confirm, " ", back));
    };
    const run = kind => () => ask(kind).catch(e => put(out, errorText(e)));
    return el("div", { class: "action-bar", id: id("actions") },
      el("div", { class: "actions" },
        el("button", { type: "button", id: ids.replay, on: { click: run("replay") } }, labels.replay),
        el("button", { type: "button", id: ids.discard, on: { click: run("discard") } }, labels.discard),
        note, el("label", { class: "inline" }, force, " force (replay what was processed)")),
      out);
  }

  // ---- Dead letters ----

  // The dead letters' filter, kept in the page's address; since and until
  // as RFC 3339 with their offset.
  const filterKeys = ["reason", "detail", "since", "until"];
  function filterOf(params) {
    const f = {};
    for (const k of filterKeys) if (params.get(k)) f[k] = params.get(k);
    normTimes(f);
    return f;
  }
  function regexQuote(s) { return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"); }
  // selectionOf is the task selection of filter f: the same reason, the
  // same times (the same text the list sent), and the detail as a
  // regular expression that matches what the list's "contains" does,
  // without case.
  function selectionOf(f) {
    const s = {};
    if (f.reason) s.reason = f.reason; else s.all = true;
    if (f.since) s.since = f.since;
    if (f.until) s.until = f.until;
    if (f.detail) s.detail_match = "(?i)" + regexQuote(f.detail);
    return s;
  }
  function timeInput(name, id, value) {
    return el("input", { name, id, type: "datetime-local", step: 1, value: toInput(value) });
  }
  function datalist(id, items) { return el("datalist", { id }, items.map(v => el("option", { value: v }))); }

  async function deadLetters(params) {
    const draw = drawer();
    const f = filterOf(params);
    const form = el("form", { class: "filter", id: "filter", on: { submit: ev => {
      ev.preventDefault();
      const nf = {};
      for (const k of ["reason", "detail"]) { const v = form.elements[k].value.trim(); if (v) nf[k] = v; }
      for (const k of ["since", "until"]) {
        const v = fromInput(form.elements[k].value);
        if (v === null) { fail(new Error(k + ": not a time")); return; }
        if (v) nf[k] = v;
      }
      location.hash = "#/dead-letters?" + query(nf);
    } } },
    el("label", {}, "reason", el("input", { name: "reason", id: "filter-reason", list: "reasons", value: f.reason || "" })),
    datalist("reasons", reasons),
    el("label", {}, "detail contains", el("input", { name: "detail", id: "filter-detail", value: f.detail || "" })),
    el("label", {}, "dead-lettered since", timeInput("since", "filter-since", f.since)),
    el("label", {}, "until", timeInput("until", "filter-until", f.until)),
    el("button", { type: "submit", id: "filter-apply" }, "Filter"),
    el("a", { href: "#/dead-letters", id: "filter-clear" }, "clear"));
    const body = el("tbody", { id: "dead-letter-rows" });
    const more = el("button", { type: "button", id: "more", hidden: true }, "More");
    const shown = el("p", { class: "hint", id: "dead-letter-count" });
    let next = null;
    async function page(reset) {
      const q = Object.assign({ limit: 50 }, f);
      if (!reset && next) q.cursor = next;
      const d = await api("GET", "dead-letters?" + query(q));
      if (reset) put(body);
      for (const it of d.items) {
        body.append(el("tr", { class: "dead-letter" },
          el("td", {}, msgLink(it.message, it.file)), el("td", {}, it.reason),
          el("td", { class: "detail" }, (it.field ? it.field + ": " : "") + show(it.detail)),
          el("td", {}, show(it.msg_id)), el("td", {}, when(it.at)), el("td", {}, it.attempts)));
      }
      next = d.next;
      more.hidden = !next;
      const n = body.children.length;
      shown.textContent = n === 0 ? "No dead letter matches." : "Showing " + plural(n, "dead letter", "dead letters") + (next ? " (more below)" : "") + ", newest first.";
      updated();
    }
    more.addEventListener("click", () => page(false).catch(fail));
    let bar = null;
    if (rank[me.role] >= rank.operator) {
      bar = actionBar(() => selectionOf(f), { prefix: "", replay: "replay-all", discard: "discard-all" },
        { replay: "Replay all matching", discard: "Discard all matching" }, () => page(true));
    }
    draw(el("h2", {}, "Dead letters"), form, bar, shown,
      table(["file", "reason", "detail", "msg_id", "dead-lettered", "attempts"], body), more);
    await page(true);
  }

  async function groups() {
    const draw = drawer();
    const d = await api("GET", "dead-letters/groups");
    draw(el("h2", {}, "Dead letters by reason and signature"),
      table(["count", "reason", "signature", "first", "last", ""], d.groups.map(g => el("tr", { class: "group" },
        el("td", {}, g.count), el("td", {}, g.reason), el("td", { class: "detail" }, g.signature),
        el("td", {}, when(g.first)), el("td", {}, when(g.last)),
        el("td", {}, el("a", { href: "#/dead-letters?" + query({ reason: g.reason }) }, "show"))))));
    updated();
  }

  // ---- One message ----

  async function message(q, notice) {
    const draw = drawer();
    const m = await api("GET", "messages/" + encodeURIComponent(q));
    const places = m.places.map(p => el("li", { class: "place" }, p.stage + "/" + p.name));
    const sections = [el("h2", {}, "Message ", el("span", { id: "message-id" }, m.msg_id || q)), notice || null];
    // A file of the message in error/ may be replayed or discarded on its
    // own: a task of that one file.
    const dead = m.places.filter(p => p.stage === "error");
    if (dead.length && rank[me.role] >= rank.operator) {
      const bars = dead.map((p, i) => {
        const prefix = i === 0 ? "msg-" : "msg-" + (i + 1) + "-";
        const result = el("div", { id: prefix + "notice" });
        const bar = actionBar(() => ({ names: [p.name] }), { prefix, replay: prefix + "replay", discard: prefix + "discard" },
          { replay: "Replay this file", discard: "Discard this file" },
          async () => { put(result, ...bar.querySelector(".action-result").childNodes); await message(q, result); });
        return el("div", { class: "message-action" }, el("h3", {}, "error/" + p.name), bar);
      });
      sections.push(el("div", { id: "message-actions" }, bars));
    }
    sections.push(el("h3", {}, "Where it is"), el("ul", { id: "places" }, places.length ? places : el("li", {}, "in no stage")));
    // A batch file of that name: what became of its records, and its
    // first dead letters, each a message page of its own.
    const batches = (m.batch_files || []).map(b => el("tr", { class: "batch-file" }, el("td", {}, when(b.last_commit)),
      el("td", {}, b.processed), el("td", {}, b.duplicates), el("td", {}, b.dead_letters),
      el("td", {}, b.dead_letter_files.map((n, i) => [i ? ", " : "", msgLink(n, n)]).flat(),
        b.dead_letters > b.dead_letter_files.length ? " and " + (b.dead_letters - b.dead_letter_files.length) + " more" : "")));
    if (batches.length) sections.push(el("h3", {}, "Batch file"),
      table(["last commit", "processed", "duplicates", "dead letters", "its dead letters"], batches));
    // A reservation for a call: in flight, or held after its consumer died.
    const res = m.reservation;
    if (res) sections.push(el("h3", {}, "Reserved for a call"), el("p", { id: "reservation" }, when(res.at), " by session ", res.session, ": ",
      res.session_in_processing ? "its call is in flight or waits for a slot (or its consumer died and is not recovered yet)"
        : "that consumer is gone; its call may still run, so the msg_id is held for its call bound" +
          (res.call_bound_seconds ? " (" + res.call_bound_seconds + " s)" : "") + " after a consumer found it gone, or until its calls lock is free"));
    if (m.processed) {
      const p = m.processed;
      sections.push(el("h3", {}, "Processed"), el("p", {}, when(p.processed_at), " from ", p.file, " (body sha256 ", el("code", {}, show(p.content_hash)), ")"));
    }
    sections.push(el("h3", {}, "Body", m.body_from ? " (" + m.body_from + (m.body_truncated ? ", cut at 1 MiB" : "") + ")" : ""),
      el("pre", { id: "body" }, m.body === null || m.body === undefined ? "(not found)" : m.body));
    const dels = m.deliveries.map(d => el("tr", {}, el("td", {}, when(d.at)), el("td", {}, d.file),
      el("td", {}, d.outcome), el("td", {}, show(d.reason)), el("td", { class: "detail" }, (d.field ? d.field + ": " : "") + show(d.detail)),
      el("td", {}, d.outcome === "dead-letter" ? Math.max(1, d.attempts || 0) : DASH)));
    sections.push(el("h3", {}, "Deliveries"), dels.length ? table(["at", "file", "outcome", "reason", "detail", "attempts"], dels) : el("p", {}, "none besides the one processed"));
    const reps = m.replays.map(r => el("tr", {}, el("td", {}, when(r.at)), el("td", {}, r.file),
      el("td", {}, show(r.new_name)), el("td", {}, show(r.by)), el("td", {}, show(r.note))));
    sections.push(el("h3", {}, "Replays"), reps.length ? table(["at", "file", "new name", "by", "note"], reps) : el("p", {}, "none"));
    const dis = (m.discards || []).map(x => el("tr", {}, el("td", {}, when(x.at)), el("td", {}, x.file), el("td", {}, show(x.by)),
      el("td", {}, show(x.note)), el("td", {}, x.state + (x.outcome ? ": " + x.outcome : "")),
      el("td", {}, x.to ? x.to + "/" + show(x.new_name) : DASH)));
    sections.push(el("h3", {}, "Discards"), dis.length ? table(["at", "file", "by", "note", "state", "moved to"], dis) : el("p", {}, "none"));
    draw(...sections);
    updated();
  }

  // ---- Tasks ----

  function selectionSummary(s) {
    if (!s) return DASH;
    const base = s.names && s.names.length ? "files " + valueText(s.names) : s.reason ? "reason " + s.reason : "all dead letters";
    const f = [];
    if (s.since) f.push("since " + whenText(s.since));
    if (s.until) f.push("until " + whenText(s.until));
    if (s.detail_match) f.push("detail ~ " + s.detail_match);
    if (s.msg_id) f.push("msg_id " + s.msg_id);
    if (s.order_no) f.push("order_no " + s.order_no);
    return base + (f.length ? ", " + f.join(", ") : "");
  }
  function ownTask(t) { return (t.by || "").toLowerCase() === (me.name || "").toLowerCase(); }
  function cancellable(t) {
    // A running task with every file begun (its last chunk, or a replay
    // or discard run as one move) finishes all or nothing: no cancel.
    return ["waiting", "approved"].includes(t.state) || (t.state === "running" && t.next < t.files);
  }
  // confirmStep replaces box's content with question and two buttons,
  // yes running act; Back puts the content back.
  function confirmStep(box, idp, question, yesText, act) {
    const before = [...box.childNodes];
    const yes = el("button", { type: "button", class: "primary", id: idp + "-yes", on: { click: async () => {
      yes.disabled = true;
      try { await act(); } catch (e) { fail(e); }
    } } }, yesText);
    const back = el("button", { type: "button", id: idp + "-back", on: { click: () => put(box, ...before) } }, "Back");
    put(box, el("div", { class: "confirm", id: idp }, el("p", {}, question), yes, " ", back));
  }

  // tasks draws the tasks page; a poll (polled) leaves it as it is while
  // a confirm step is open in it.
  async function tasks(params, polled) {
    const draw = drawer();
    const cursor = params.get("cursor");
    const d = await api("GET", "tasks" + (cursor ? "?cursor=" + encodeURIComponent(cursor) : ""));
    const result = el("div", { id: "tasks-result" });
    const rows = d.items.map(t => {
      const acts = el("td", { class: "acts" });
      if (t.state === "waiting" && rank[me.role] >= rank.approver && !ownTask(t))
        acts.append(el("a", { class: "approve-link button", href: "#/task/" + t.id }, "Review and approve"), " ");
      if (cancellable(t) && rank[me.role] >= rank.operator)
        acts.append(el("button", { type: "button", class: "cancel", "data-task": t.id, on: { click: () =>
          confirmStep(acts, "cancel-" + t.id, "Cancel task " + t.id + "? Files moved so far stay moved.", "Cancel task " + t.id, async () => {
            try {
              const c = await api("POST", "tasks/" + t.id + "/cancel", {});
              put(result, el("p", { class: "ok" }, "task " + c.id + ": " + c.state));
            } catch (e) { put(result, el("p", {}, errorText(e))); }
            await tasks(params);
          }) } }, "Cancel"));
      return el("tr", { class: "task", id: "task-" + t.id }, el("td", {}, taskLink(t.id)), el("td", {}, t.kind),
        el("td", { class: "state" }, t.state), el("td", {}, t.done + "/" + t.files),
        el("td", { class: "detail" }, selectionSummary(t.request.selection)), el("td", {}, show(t.by)),
        el("td", {}, show(t.request.note)), el("td", {}, show(t.approved_by)), el("td", {}, when(t.created)),
        el("td", { class: "detail" }, show(t.detail)), acts);
    });
    const older = d.next ? el("a", { href: "#/tasks?cursor=" + encodeURIComponent(d.next), id: "tasks-older" }, "Older tasks") : null;
    const newest = cursor ? el("a", { href: "#/tasks", id: "tasks-newest" }, "Newest tasks") : null;
    if (polled && document.querySelector("#tasks-table .confirm")) return;
    const keep = document.getElementById("tasks-result");
    if (keep && keep.childNodes.length) put(result, ...keep.childNodes);
    draw(el("h2", {}, "Tasks"), result,
      rows.length ? table(["id", "kind", "state", "done", "selection", "asked by", "why", "approved by", "asked", "detail", ""], rows, { id: "tasks-table" }) : el("p", {}, "No task yet."),
      el("p", { class: "pager" }, newest, " ", older));
    updated();
  }

  // task is one task: everything it does, who asked and why, its file set
  // a page at a time, and the approval of that set by its digest.
  async function task(id) {
    const draw = drawer();
    const g = gen;
    const v = await api("GET", "tasks/" + id);
    const notice = el("div", { id: "task-result" });
    const params = el("table", { class: "params", id: "task-params" });
    const actsBox = el("div", { class: "actions", id: "task-actions" });
    let shown = v; // the task as the page shows it: the approval names its digest
    function param(key, label, value) {
      return el("tr", { "data-param": key }, el("th", {}, label), el("td", {}, value));
    }
    function drawParams(t) {
      const r = t.request || {};
      const s = r.selection || {};
      const what = s.names && s.names.length ? el("span", {}, "files: ", s.names.slice(0, 20).map((n, i) => [i ? ", " : "", msgLink(n, n)]),
        s.names.length > 20 ? " and " + (s.names.length - 20) + " more" : "") : s.reason ? "reason " + s.reason : "all dead letters";
      const asked = [show(t.by), t.role ? " (" + t.role + ")" : "", t.via ? ", via " + t.via : "", t.by_os ? ", OS user " + t.by_os : ""];
      const approved = t.approved_by ? [t.approved_by, ", ", when(t.approved)] : t.state === "waiting" ? "not yet" : "none needed";
      put(params,
        param("kind", "kind", t.kind),
        param("state", "state", el("span", { id: "task-state" }, t.state)),
        param("files", "files", plural(t.files, "file", "files") + (t.skipped ? " (" + t.skipped + " more selected, left out: processed already)" : "")),
        param("progress", "progress", t.next + " begun, " + t.done + " moved, " + t.missing + " gone, " + t.changed + " changed and left"),
        param("by", "asked by", asked),
        param("created", "asked at", when(t.created)),
        param("note", "why", show(r.note)),
        param("selection", "selection", what),
        param("since", "dead-lettered since", when(s.since)),
        param("until", "until", when(s.until)),
        param("detail_match", "detail matches", show(s.detail_match)),
        param("msg_id", "msg_id", show(s.msg_id)),
        param("order_no", "order_no", show(s.order_no)),
        param("to", "to", t.kind === "discard" ? (r.to ? r.to : DASH + " (deleted)") : DASH + " (back to inbox/)"),
        param("force", "force", t.kind === "replay" ? (r.force ? "yes: processed messages too" : "no") : DASH),
        param("rate", "rate", r.rate ? r.rate + " files a second" : "no limit (one move, all or nothing)"),
        param("digest", "digest", el("code", { id: "task-digest" }, show(t.digest))),
        param("approved_by", "approved by", approved),
        param("ended", "ended", t.ended ? [when(t.ended), t.ended_by ? ", by " + t.ended_by : ""] : DASH),
        param("detail", "detail", show(t.detail)));
    }
    function drawActions(t) {
      const acts = [];
      if (t.state === "waiting" && rank[me.role] >= rank.approver && !ownTask(t)) {
        acts.push(el("button", { type: "button", class: "primary", id: "approve", on: { click: () => {
          const digest = shown.digest;
          confirmStep(actsBox, "approve-confirm",
            ["Approve the ", shown.kind, " of ", plural(shown.files, "file", "files"), " whose set has the digest ",
              el("code", { id: "approve-digest" }, digest), "? ",
              shown.kind === "replay" ? "They go back to inbox/" : "They are " + (shown.request.to ? "moved to " + shown.request.to : "deleted"),
              shown.request.rate ? ", at most " + shown.request.rate + " a second" : ", in one move",
              ", as soon as you approve; the run is audited in your name."],
            "Approve " + shown.kind + " of " + plural(shown.files, "file", "files"), async () => {
              try {
                const t = await api("POST", "tasks/" + id + "/approve", { digest });
                put(notice, el("p", { class: "ok", id: "task-approved" }, "You approved task " + t.id + " (digest " + digest.slice(0, 12) + "\u2026): it runs."));
              } catch (e) { put(notice, el("p", {}, errorText(e))); }
              await refresh(true);
            });
        } } }, "Approve\u2026"));
      } else if (t.state === "waiting" && rank[me.role] >= rank.approver) {
        acts.push(el("span", { class: "hint" }, "Your own request: it needs someone else's approval."));
      }
      if (cancellable(t) && rank[me.role] >= rank.operator) {
        acts.push(el("button", { type: "button", id: "cancel", on: { click: () =>
          confirmStep(actsBox, "cancel-confirm", "Cancel task " + id + "? Files moved so far stay moved.", "Cancel the task", async () => {
            try {
              const t = await api("POST", "tasks/" + id + "/cancel", {});
              put(notice, el("p", { class: "ok" }, "Task " + t.id + ": " + t.state + "."));
            } catch (e) { put(notice, el("p", {}, errorText(e))); }
            await refresh(true);
          }) } }, "Cancel\u2026"));
      }
      put(actsBox, ...acts);
    }
    // The files, a page at a time.
    const fileRows = el("tbody", { id: "task-file-rows" });
    const range = el("span", { id: "task-files-range" });
    const prev = el("button", { type: "button", id: "files-prev" }, "Previous");
    const nextB = el("button", { type: "button", id: "files-next" }, "Next");
    let offset = 0, size = 100;
    function drawFiles(p) {
      offset = p.offset;
      size = Math.max(size, p.items.length);
      put(fileRows, ...p.items.map(f => el("tr", { class: "task-file" },
        el("td", {}, f.idx + 1), el("td", {}, msgLink(f.file, f.file)), el("td", {}, show(f.msg_id)), el("td", {}, show(f.reason)),
        el("td", {}, f.size), el("td", {}, f.sha256 ? el("code", { title: f.sha256 }, f.sha256.slice(0, 12) + "\u2026") : DASH),
        el("td", { class: "detail" }, show(f.changed)))));
      range.textContent = p.total === 0 ? "no files" : "files " + (p.items.length ? p.offset + 1 : p.offset) + "\u2013" + (p.offset + p.items.length) + " of " + p.total;
      prev.disabled = p.offset === 0;
      nextB.disabled = p.next === null || p.next === undefined;
      nextB.dataset.next = nextB.disabled ? "" : p.next;
    }
    async function files(at) {
      const p = await api("GET", "tasks/" + id + "/files?offset=" + at + "&limit=" + size);
      if (live(g)) drawFiles(p);
    }
    prev.addEventListener("click", () => files(Math.max(0, offset - size)).catch(fail));
    nextB.addEventListener("click", () => files(Number(nextB.dataset.next)).catch(fail));
    // refresh redraws the task as it is now; its actions too unless a
    // confirm step is open (acted: the step was answered).
    async function refresh(acted) {
      const t = await api("GET", "tasks/" + id);
      if (!live(g)) return;
      const changed = t.state !== shown.state;
      shown = t;
      drawParams(t);
      if (acted || changed || !actsBox.querySelector(".confirm")) drawActions(t);
      await files(offset);
      updated();
    }
    drawParams(v);
    drawActions(v);
    drawFiles(v.file_list);
    draw(el("h2", {}, "Task " + v.id + ": " + v.kind), notice, actsBox, params,
      el("h3", {}, "Files of the set"), el("p", { class: "pager" }, range, " ", prev, " ", nextB),
      table(["#", "file", "msg_id", "reason", "size", "sha256", "changed"], fileRows, { id: "task-files" }));
    updated();
    // While it runs, follow it.
    poll(() => ["approved", "running"].includes(shown.state) ? refresh() : Promise.resolve(), 1000);
  }

  // ---- Audit ----

  async function audit(params) {
    const draw = drawer();
    const f = {};
    for (const k of ["actor", "action", "outcome", "since", "until", "limit"]) if (params.get(k)) f[k] = params.get(k);
    normTimes(f);
    const at = {};
    for (const k of ["cursor", "after"]) if (params.get(k)) at[k] = params.get(k);
    const form = el("form", { class: "filter", id: "audit-filter", on: { submit: ev => {
      ev.preventDefault();
      const nf = {};
      for (const k of ["actor", "action", "outcome", "limit"]) { const v = form.elements[k].value.trim(); if (v) nf[k] = v; }
      for (const k of ["since", "until"]) {
        const v = fromInput(form.elements[k].value);
        if (v === null) { fail(new Error(k + ": not a time")); return; }
        if (v) nf[k] = v;
      }
      location.hash = "#/audit?" + query(nf);
    } } },
    el("label", {}, "actor", el("input", { name: "actor", id: "audit-actor", value: f.actor || "", placeholder: "olga, token:olga" })),
    el("label", {}, "action", el("input", { name: "action", id: "audit-action", list: "audit-actions", value: f.action || "" })),
    datalist("audit-actions", actions),
    el("label", {}, "outcome", el("select", { name: "outcome", id: "audit-outcome" }, el("option", { value: "" }, "any"),
      outcomes.map(o => el("option", { value: o, selected: o === f.outcome }, o)))),
    el("label", {}, "since", timeInput("since", "audit-since", f.since)),
    el("label", {}, "until", timeInput("until", "audit-until", f.until)),
    el("label", {}, "rows", el("select", { name: "limit", id: "audit-limit" },
      ["10", "50", "100", "200"].map(n => el("option", { value: n, selected: n === (f.limit || "50") }, n)))),
    el("button", { type: "submit", id: "audit-apply" }, "Filter"),
    el("a", { href: "#/audit", id: "audit-clear" }, "clear"));
    const body = el("tbody", { id: "audit-rows" });
    const pager = el("p", { class: "pager", id: "audit-pager" });
    async function load() {
      const d = await api("GET", "audit?" + query(Object.assign({ limit: "50" }, f, at)));
      put(body, ...d.items.map(a => el("tr", { class: "audit-row", "data-id": a.id },
        el("td", {}, a.id), el("td", {}, when(a.at)), el("td", { class: "actor" }, a.actor, a.role ? " (" + a.role + ")" : ""),
        el("td", {}, a.via), el("td", { class: "action" }, a.action), el("td", {}, a.task ? taskLink(a.task) : DASH),
        el("td", { class: "detail" }, pairs(a.selection)), el("td", {}, pairs(a.counts)),
        el("td", { class: "outcome" }, a.shown), el("td", { class: "detail" }, show(a.detail)))));
      const to = k => "#/audit?" + query(Object.assign({}, f, k));
      put(pager, 
        d.newer ? el("a", { href: to({}), id: "audit-newest" }, "Newest") : null, " ",
        d.newer ? el("a", { href: to({ after: d.newer }), id: "audit-newer" }, "\u2190 Newer") : null, " ",
        el("span", { id: "audit-range" }, d.items.length ? plural(d.items.length, "row", "rows") + ", ids " + d.items[0].id + " to " + d.items[d.items.length - 1].id + ", newest first" : "no row matches"), " ",
        d.next ? el("a", { href: to({ cursor: d.next }), id: "audit-older" }, "Older \u2192") : null);
      updated();
    }
    await load();
    draw(el("h2", {}, "Audit"), form, pager,
      table(["id", "at", "actor", "via", "action", "task", "selection", "counts", "outcome", "detail"], body));
    // The newest page follows new rows; an older one stays as it is.
    if (!at.cursor && !at.after) poll(load);
  }

  function route() {
    clearInterval(timer);
    gen++;
    const h = location.hash.slice(1) || "/overview";
    const [path, qs] = h.split("?");
    const params = new URLSearchParams(qs || "");
    for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", h.startsWith(a.getAttribute("href").slice(1)));
    let run;
    if (path === "/overview") { run = overview; poll(overview); }
    else if (path === "/dead-letters") run = () => deadLetters(params);
    else if (path === "/groups") { run = groups; poll(groups, 10000); }
    else if (path.startsWith("/message/")) run = () => message(decodeURIComponent(path.slice(9)));
    else if (path === "/tasks") { run = () => tasks(params); poll(() => tasks(params, true)); }
    else if (path.startsWith("/task/")) run = () => task(encodeURIComponent(decodeURIComponent(path.slice(6))));
    else if (path === "/audit") run = () => audit(params);
    else run = overview;
    run().catch(fail);
  }
  document.getElementById("zone").textContent = "\u00b7 times in " + zoneText();
  window.addEventListener("hashchange", route);
  route();
})();
