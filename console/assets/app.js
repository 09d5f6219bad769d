// The spool console: a page per view, each drawn from the JSON API with
// the DOM's text nodes only (never innerHTML): what a dead letter holds is
// shown as text, whatever it is.
"use strict";
(function () {
  const csrf = document.querySelector('meta[name="csrf"]').content;
  const who = document.getElementById("who");
  const me = { name: who.dataset.name, role: who.dataset.role };
  const rank = { viewer: 1, operator: 2, approver: 3 };
  const view = document.getElementById("view");
  const status = document.getElementById("status");
  let timer = null;

  // el makes an element with attributes and children (strings are text).
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "on") for (const [ev, f] of Object.entries(v)) e.addEventListener(ev, f);
      else if (v !== null && v !== undefined && v !== false) e.setAttribute(k, v === true ? "" : v);
    }
    for (const k of kids.flat()) {
      if (k === null || k === undefined) continue;
      e.append(typeof k === "string" || typeof k === "number" ? document.createTextNode(String(k)) : k);
    }
    return e;
  }

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
    if (!res.ok) throw new Error((data && data.error) || res.statusText);
    return data;
  }

  // table is a table with head; rows are its rows, or its tbody.
  function table(head, rows) {
    const body = rows instanceof HTMLTableSectionElement ? rows : el("tbody", {}, rows);
    return el("table", {}, el("thead", {}, el("tr", {}, head.map(h => el("th", {}, h)))), body);
  }
  function short(t) { return t ? t.replace("T", " ").replace(/\.\d+Z$/, "Z") : "-"; }
  function msgLink(q, text) { return el("a", { href: "#/message/" + encodeURIComponent(q) }, text); }
  function replace(...kids) { view.replaceChildren(...kids); }
  function fail(err) { status.replaceChildren(el("span", { class: "error" }, String(err.message || err))); }
  function updated() { status.textContent = "updated " + new Date().toLocaleTimeString(); }
  function poll(f, ms) { timer = setInterval(() => f().catch(fail), ms || 5000); }

  async function overview() {
    const o = await api("GET", "overview");
    const cards = (o.stages || []).map(s => el("div", { class: "card", id: "stage-" + s.stage },
      el("div", {}, s.stage + "/"), el("div", { class: "n" }, s.messages),
      el("div", {}, s.oldest_age_seconds === null ? "empty" : "oldest " + Math.round(s.oldest_age_seconds) + " s")));
    const r = o.rates;
    const rate = v => (v === null ? "-" : v.toFixed(2) + "/s");
    replace(el("h2", {}, "Overview"), el("p", {}, o.queue), el("div", { class: "cards" }, cards),
      el("h3", {}, "Ledger"),
      table(["processed", "duplicates", "dead letters recorded", "processed rate", "dead-letter rate"],
        [el("tr", {}, el("td", {}, o.ledger.processed), el("td", {}, o.ledger.duplicates),
          el("td", {}, o.ledger.dead_letters_recorded), el("td", {}, rate(r.processed_per_second)),
          el("td", {}, rate(r.dead_letters_per_second)))]));
    updated();
  }

  // The dead letters' filter, kept in the page's address.
  function filterOf(params) {
    const f = {};
    for (const k of ["reason", "detail", "since", "until"]) if (params.get(k)) f[k] = params.get(k);
    return f;
  }
  function query(f) { return new URLSearchParams(f).toString(); }
  function regexQuote(s) { return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"); }
  function selectionOf(f) {
    const s = {};
    if (f.reason) s.reason = f.reason; else s.all = true;
    if (f.since) s.since = new Date(f.since).toISOString();
    if (f.until) s.until = new Date(f.until).toISOString();
    if (f.detail) s.detail_match = regexQuote(f.detail);
    return s;
  }

  async function deadLetters(params) {
    const f = filterOf(params);
    const input = (name, label, type) => el("label", {}, label,
      el("input", { name, id: "filter-" + name, type: type || "text", value: f[name] || "" }));
    const form = el("form", { class: "filter", id: "filter", on: { submit: ev => {
      ev.preventDefault();
      const nf = {};
      for (const k of ["reason", "detail", "since", "until"]) { const v = form.elements[k].value.trim(); if (v) nf[k] = v; }
      location.hash = "#/dead-letters?" + query(nf);
    } } }, input("reason", "reason"), input("detail", "detail contains"),
      input("since", "since", "datetime-local"), input("until", "until", "datetime-local"),
      el("button", { type: "submit", id: "filter-apply" }, "Filter"));
    const body = el("tbody", { id: "dead-letter-rows" });
    const more = el("button", { id: "more", hidden: true }, "More");
    const actions = el("div", { class: "actions", id: "actions" });
    let next = null;
    async function page(reset) {
      const q = Object.assign({ limit: 50 }, f);
      if (!reset && next) q.cursor = next;
      const d = await api("GET", "dead-letters?" + query(q));
      if (reset) body.replaceChildren();
      for (const it of d.items) {
        body.append(el("tr", { class: "dead-letter" },
          el("td", {}, msgLink(it.message, it.file)), el("td", {}, it.reason),
          el("td", { class: "detail" }, (it.field ? it.field + ": " : "") + it.detail),
          el("td", {}, it.msg_id || "-"), el("td", {}, short(it.at)), el("td", {}, it.attempts)));
      }
      next = d.next;
      more.hidden = !next;
      updated();
    }
    more.addEventListener("click", () => page(false).catch(fail));
    if (rank[me.role] >= rank.operator) {
      const note = el("input", { id: "note", placeholder: "why (recorded with the task)" });
      const out = el("span", { id: "action-result" });
      const ask = kind => async () => {
        const sel = selectionOf(f);
        const path = kind === "replay" ? "replays" : "discards";
        const dry = await api("POST", path, { selection: sel, dry_run: true });
        out.replaceChildren();
        const n = dry.count;
        const confirm = el("button", { id: "confirm-" + kind, on: { click: async () => {
          try {
            const t = await api("POST", path, { selection: sel, note: note.value });
            out.replaceChildren(el("span", { class: "ok", id: "task-created" },
              "task " + t.id + ": " + t.state + " (" + t.files + " files)"), " ", el("a", { href: "#/tasks" }, "see tasks"));
          } catch (e) { out.replaceChildren(el("span", { class: "error" }, e.message)); }
        } } }, "Ask " + kind + " of these " + n);
        out.append(el("span", { id: "dry-run-count" }, n + " dead letters match"), " ", n > 0 ? confirm : null);
      };
      actions.append(el("button", { id: "replay-all", on: { click: () => ask("replay")().catch(e => out.replaceChildren(el("span", { class: "error" }, e.message))) } }, "Replay all matching"),
        el("button", { id: "discard-all", on: { click: () => ask("discard")().catch(e => out.replaceChildren(el("span", { class: "error" }, e.message))) } }, "Discard all matching"),
        note, out);
    }
    replace(el("h2", {}, "Dead letters"), form, actions,
      table(["file", "reason", "detail", "msg_id", "dead-lettered", "attempts"], body), more);
    await page(true);
  }

  async function groups() {
    const d = await api("GET", "dead-letters/groups");
    replace(el("h2", {}, "Dead letters by reason and signature"),
      table(["count", "reason", "signature", "first", "last", ""], d.groups.map(g => el("tr", { class: "group" },
        el("td", {}, g.count), el("td", {}, g.reason), el("td", { class: "detail" }, g.signature),
        el("td", {}, short(g.first)), el("td", {}, short(g.last)),
        el("td", {}, el("a", { href: "#/dead-letters?" + query({ reason: g.reason }) }, "show"))))));
    updated();
  }

  async function message(q) {
    const m = await api("GET", "messages/" + encodeURIComponent(q));
    const places = m.places.map(p => el("li", {}, p.stage + "/" + p.name));
    const dels = m.deliveries.map(d => el("tr", {}, el("td", {}, short(d.at)), el("td", {}, d.file),
      el("td", {}, d.outcome), el("td", {}, d.reason || "-"), el("td", { class: "detail" }, d.detail || "")));
    const reps = m.replays.map(r => el("tr", {}, el("td", {}, short(r.at)), el("td", {}, r.file),
      el("td", {}, r.new_name), el("td", {}, r.by), el("td", {}, r.note || "")));
    replace(el("h2", {}, "Message ", el("span", { id: "message-id" }, m.msg_id || q)),
      el("h3", {}, "Where it is"), el("ul", {}, places.length ? places : el("li", {}, "in no stage")),
      el("h3", {}, "Body", m.body_from ? " (" + m.body_from + ")" : ""),
      el("pre", { id: "body" }, m.body === null ? "(not found)" : m.body),
      el("h3", {}, "Deliveries"), table(["at", "file", "outcome", "reason", "detail"], dels),
      el("h3", {}, "Replays"), table(["at", "file", "new name", "by", "note"], reps));
    updated();
  }

  async function tasks() {
    const d = await api("GET", "tasks");
    const rows = d.items.map(t => {
      const acts = [];
      if (t.state === "waiting" && rank[me.role] >= rank.approver && t.by !== me.name)
        acts.push(el("button", { class: "approve", "data-task": t.id, on: { click: () => act(t.id, "approve", { digest: t.digest }) } }, "Approve"));
      // A running task with every file begun (its last chunk, or a replay
      // or discard run as one move) finishes all or nothing: no cancel.
      const cancellable = ["waiting", "approved"].includes(t.state) || (t.state === "running" && t.next < t.files);
      if (cancellable && rank[me.role] >= rank.operator)
        acts.push(el("button", { class: "cancel", "data-task": t.id, on: { click: () => act(t.id, "cancel") } }, "Cancel"));
      return el("tr", { class: "task", id: "task-" + t.id }, el("td", {}, t.id), el("td", {}, t.kind),
        el("td", { class: "state" }, t.state), el("td", {}, t.done + "/" + t.files),
        el("td", { class: "detail" }, JSON.stringify(t.request.selection)), el("td", {}, t.by),
        el("td", {}, t.request.note || ""), el("td", {}, t.approved_by || "-"), el("td", { class: "detail" }, t.detail || ""), el("td", {}, acts));
    });
    replace(el("h2", {}, "Tasks"), el("div", { id: "task-result" }),
      table(["id", "kind", "state", "done", "selection", "asked by", "why", "approved by", "detail", ""], rows));
    updated();
  }
  // An approval names the digest of the set the row shows: it approves
  // that set and no other.
  async function act(id, what, body) {
    const out = document.getElementById("task-result");
    try {
      const t = await api("POST", "tasks/" + id + "/" + what, body || {});
      out.replaceChildren(el("p", { class: "ok" }, "task " + t.id + ": " + t.state));
    } catch (e) { out.replaceChildren(el("p", { class: "error" }, e.message)); }
    tasks().catch(fail);
  }

  async function audit() {
    const d = await api("GET", "audit?limit=200");
    replace(el("h2", {}, "Audit"), table(["id", "at", "actor", "role", "via", "action", "selection", "counts", "outcome", "detail"],
      d.items.map(a => el("tr", { class: "audit-row" }, el("td", {}, a.id), el("td", {}, short(a.at)), el("td", {}, a.actor),
        el("td", {}, a.role || "-"), el("td", {}, a.via), el("td", {}, a.action),
        el("td", { class: "detail" }, JSON.stringify(a.selection)), el("td", {}, JSON.stringify(a.counts)),
        el("td", { class: "outcome" }, a.shown), el("td", { class: "detail" }, a.detail)))));
    updated();
  }

  function route() {
    clearInterval(timer);
    const h = location.hash.slice(1) || "/overview";
    const [path, qs] = h.split("?");
    const params = new URLSearchParams(qs || "");
    for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", h.startsWith(a.getAttribute("href").slice(1)));
    let run;
    if (path === "/overview") { run = overview; poll(overview); }
    else if (path === "/dead-letters") run = () => deadLetters(params);
    else if (path === "/groups") { run = groups; poll(groups, 10000); }
    else if (path.startsWith("/message/")) run = () => message(decodeURIComponent(path.slice(9)));
    else if (path === "/tasks") { run = tasks; poll(tasks); }
    else if (path === "/audit") { run = audit; poll(audit); }
    else run = overview;
    run().catch(fail);
  }
  window.addEventListener("hashchange", route);
  route();
})();
