// notifyd's inbox widget: a bell with the unread badge and a panel of the person's inbox, live
// over Server-Sent Events. One script, no dependencies; a product's page adds three lines:
//
//   <div id="bell"></div>
//   <script src="https://notify.example.com/inbox.js"></script>
//   <script>NotifydInbox.mount("#bell", {userId: "u_42", token, refreshToken: getToken})</script>
//
// Options: userId, token (a user token), refreshToken (async () => a new token, asked when the
// daemon answers 401), url (default: where this script came from), locale (default: the
// browser's), preferences (false hides the link to the preference centre), pageSize.
// Theme it with CSS variables on the element: --notifyd-accent, --notifyd-bg, --notifyd-fg,
// --notifyd-muted, --notifyd-badge-bg, --notifyd-badge-fg, --notifyd-font, --notifyd-width.
"use strict";
(function () {
  const ORIGIN = document.currentScript ? new URL(document.currentScript.src).origin : "";
  const STYLE = `
:host { --notifyd-accent: #0b57d0; --notifyd-bg: #fff; --notifyd-fg: #1a1a1a;
  --notifyd-muted: #4a4a4a; --notifyd-badge-bg: #b3261e; --notifyd-badge-fg: #fff;
  --notifyd-font: system-ui, -apple-system, "Segoe UI", sans-serif; --notifyd-width: 22rem;
  display: inline-block; position: relative; font-family: var(--notifyd-font); }
button { font: inherit; cursor: pointer; }
button:focus-visible, a:focus-visible, [tabindex]:focus-visible { outline: 3px solid #f0b400; outline-offset: 2px; }
.bell { position: relative; background: none; border: 0; padding: .4rem; color: var(--notifyd-fg); }
.bell svg { width: 1.5rem; height: 1.5rem; display: block; }
.badge { position: absolute; top: 0; right: 0; min-width: 1.1rem; padding: 0 .25rem;
  border-radius: .6rem; background: var(--notifyd-badge-bg); color: var(--notifyd-badge-fg);
  font-size: .75rem; line-height: 1.1rem; text-align: center; }
.badge[hidden] { display: none; }
.panel { position: absolute; z-index: 1000; width: var(--notifyd-width); max-height: 28rem;
  display: flex; flex-direction: column; background: var(--notifyd-bg); color: var(--notifyd-fg);
  border: 1px solid #d0d0d0; border-radius: 8px; box-shadow: 0 8px 24px rgba(0,0,0,.15); }
.panel[hidden] { display: none; }
header { display: flex; align-items: center; gap: .5rem; padding: .6rem .8rem; border-bottom: 1px solid #e0e0e0; }
h2 { font-size: 1rem; margin: 0; flex: 1; }
.link { background: none; border: 0; color: var(--notifyd-accent); padding: .2rem; font-size: .85rem; text-decoration: underline; }
ul { list-style: none; margin: 0; padding: 0; overflow-y: auto; flex: 1; }
li.item { padding: .6rem .8rem; border-bottom: 1px solid #eee; }
li.item.unread { background: color-mix(in srgb, var(--notifyd-accent) 7%, var(--notifyd-bg)); }
li.item.unread .title::before { content: ""; display: inline-block; width: .5rem; height: .5rem;
  border-radius: 50%; background: var(--notifyd-accent); margin-right: .4rem; vertical-align: middle; }
.title { font-weight: 600; margin: 0; }
.body { margin: .2rem 0; }
time, .kind { color: var(--notifyd-muted); font-size: .8rem; }
.acts { display: flex; gap: .8rem; margin-top: .3rem; }
.empty, .state { padding: 1rem .8rem; color: var(--notifyd-muted); margin: 0; }
.more { height: 1px; }
.hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }`;
  const BELL = '<svg viewBox="0 0 24 24" aria-hidden="true" focusable="false"><path fill="currentColor" ' +
    'd="M12 22a2.5 2.5 0 0 0 2.45-2h-4.9A2.5 2.5 0 0 0 12 22Zm7-6V11a7 7 0 0 0-5.5-6.84V3.5a1.5 1.5 0 0 0-3 0v.66A7 7 0 0 0 5 11v5l-2 2v1h18v-1l-2-2Z"/></svg>';
  let mounted = 0;

  function mount(target, options) {
    const host = typeof target === "string" ? document.querySelector(target) : target;
    if (!host) throw new Error(`notifyd inbox: no element ${target}`);
    const o = Object.assign({url: ORIGIN, locale: undefined, preferences: true, pageSize: 20}, options);
    if (!o.userId) throw new Error("notifyd inbox: userId is required");
    const n = ++mounted, person = `${o.url}/v1/users/${encodeURIComponent(o.userId)}`;
    const base = `${person}/inbox`;
    const root = host.attachShadow({mode: "open"});
    root.innerHTML = `<style>${STYLE}</style>
<button class="bell" type="button" aria-haspopup="dialog" aria-expanded="false" aria-controls="nd-panel-${n}">${BELL}<span class="badge" aria-hidden="true" hidden></span></button>
<div class="panel" id="nd-panel-${n}" role="dialog" aria-labelledby="nd-title-${n}" hidden>
  <header><h2 id="nd-title-${n}" tabindex="-1">Notifications</h2>
    <button class="link read-all" type="button">Mark all read</button>
    ${o.preferences ? '<button class="link prefs" type="button">Preferences</button>' : ""}
    <button class="link close" type="button" aria-label="Close notifications">✕</button></header>
  <ul class="items" aria-labelledby="nd-title-${n}" aria-busy="true"></ul>
  <p class="state" hidden></p>
</div>
<div class="hidden live" aria-live="polite"></div>`;
    const $ = (s) => root.querySelector(s);
    const bell = $(".bell"), badge = $(".badge"), panel = $(".panel"), list = $(".items"),
          live = $(".live"), stateLine = $(".state"), sentinel = document.createElement("li");
    sentinel.className = "more"; sentinel.setAttribute("aria-hidden", "true");
    list.append(sentinel);
    const items = new Map();  // id -> {item, node}
    const dates = new Intl.DateTimeFormat(o.locale, {dateStyle: "medium", timeStyle: "short"});
    const stopped = new AbortController();
    let token = o.token, next = undefined, loading = false, lastSeq = null, refreshing = null;

    // --- talking to notifyd: every call with the token; a 401 asks the page for a new one ---
    async function refresh() {
      if (!o.refreshToken) throw new Error("the user token expired and no refreshToken was given");
      refreshing ||= Promise.resolve(o.refreshToken()).then((t) => { token = t; })
        .finally(() => { refreshing = null; });
      return refreshing;
    }
    async function call(path, method = "GET", extra = {}, root = base) {
      for (let tries = 0; ; tries++) {
        const r = await fetch(`${root}${path}`, {method, signal: stopped.signal, cache: "no-store",
          headers: {"Authorization": `Bearer ${token}`, ...extra}});
        if (r.status === 401 && tries === 0) { await refresh(); continue; }
        return r;
      }
    }
    async function json(path, method) {
      const r = await call(path, method);
      if (!r.ok) throw new Error(`notifyd inbox: ${method || "GET"} ${path}: ${r.status}`);
      return r.json();
    }

    // --- each item's kind by its name in the person's language, never its identifier: asked
    // once, and again for a kind that came after (one notifyd's config gained since) ---
    let kinds = null, naming = null;  // kinds: null until the names came
    const asked = new Set();
    function names() {
      naming ||= call("/names", "GET", {}, person).then((r) => (r.ok ? r.json() : null))
        .catch(() => null).then((doc) => {
          kinds = doc ? doc.kinds : kinds || {};
          naming = null;
          for (const e of items.values()) paint(e);
        });
      return naming;
    }
    function kindOf(item) {
      if (kinds === null) return "";  // on their way: every item is painted again then
      if (kinds[item.kind]) return kinds[item.kind].title;
      if (!asked.has(item.kind)) { asked.add(item.kind); names(); }
      return "";
    }

    // --- the list: newest first, each item once ---
    const newer = (a, b) => a.created_at > b.created_at || (a.created_at === b.created_at && a.id > b.id);
    function show(item) {
      const known = items.get(item.id);
      if (item.archived) { if (known) { known.node.remove(); items.delete(item.id); } return; }
      if (known) { known.item = item; paint(known); return; }
      const entry = {item, node: document.createElement("li")};
      entry.node.className = "item"; entry.node.dataset.id = item.id;
      const before = [...items.values()].find((e) => newer(item, e.item));
      list.insertBefore(entry.node, before ? before.node : sentinel);
      items.set(item.id, entry);
      paint(entry);
      empty();
    }
    function paint(entry) {
      const {item, node} = entry;
      const focused = node.contains(root.activeElement);  // redrawn, it keeps the focus
      node.classList.toggle("unread", !item.read);
      const when = new Date(item.created_at);
      node.replaceChildren();
      const title = document.createElement("p"); title.className = "title"; title.textContent = item.title;
      const status = document.createElement("span"); status.className = "hidden";
      status.textContent = item.read ? "" : "Unread: ";
      title.prepend(status);
      node.append(title);
      if (item.body) { const b = document.createElement("p"); b.className = "body"; b.textContent = item.body; node.append(b); }
      const time = document.createElement("time"); time.dateTime = item.created_at; time.textContent = dates.format(when);
      const kind = kindOf(item);
      if (kind) { const k = document.createElement("span"); k.className = "kind"; k.textContent = `${kind} · `; node.append(k); }
      const acts = document.createElement("div"); acts.className = "acts";
      if (!item.read) acts.append(button("Mark read", `Mark read: ${item.title}`, () => read(item.id)));
      acts.append(button("Archive", `Archive: ${item.title}`, () => archive(item.id)));
      node.append(time, acts);
      if (focused) acts.lastElementChild.focus();
    }
    function button(text, label, act) {
      const b = document.createElement("button");
      b.type = "button"; b.className = "link"; b.textContent = text; b.setAttribute("aria-label", label);
      b.addEventListener("click", act);
      return b;
    }
    function empty() {
      stateLine.hidden = items.size > 0 || next !== null;
      stateLine.textContent = "Nothing here yet.";
    }
    function setBadge(unread) {
      badge.hidden = unread === 0;
      badge.textContent = unread > 99 ? "99+" : String(unread);
      bell.setAttribute("aria-label", `Notifications, ${unread} unread`);
      host.dataset.unread = String(unread);
    }

    async function page(before) {
      const q = new URLSearchParams({limit: String(o.pageSize)});
      if (before) q.set("before", before);
      return json(`?${q}`);
    }
    async function more() {
      if (loading || next === null) return;
      loading = true; list.setAttribute("aria-busy", "true");
      try { const p = await page(next); p.items.forEach(show); next = p.next; }
      finally { loading = false; list.setAttribute("aria-busy", "false"); empty(); }
    }
    async function firstPage() {  // after a (re)connect without a seq: what came meanwhile
      const p = await page();
      p.items.forEach(show);
      if (next === undefined) next = p.next;
      empty();
    }
    new IntersectionObserver((seen) => { if (seen.some((e) => e.isIntersecting)) more(); },
                             {root: list}).observe(sentinel);

    async function read(id) {
      const r = await json(`/${encodeURIComponent(id)}/read`, "POST");
      const e = items.get(id); if (e) { e.item = {...e.item, read: true}; paint(e); }
      setBadge(r.unread); live.textContent = "Marked read.";
    }
    async function archive(id) {
      const e = items.get(id), after = e && (e.node.nextElementSibling || e.node.previousElementSibling);
      const r = await json(`/${encodeURIComponent(id)}/archive`, "POST");
      show({id, archived: true}); setBadge(r.unread); live.textContent = "Archived.";
      const focus = after && after.querySelector && after.querySelector("button");
      (focus || $("h2")).focus(); empty();
    }
    $(".read-all").addEventListener("click", async () => {
      const r = await json("/read-all", "POST");
      for (const e of items.values()) { e.item = {...e.item, read: true}; paint(e); }
      setBadge(r.unread); live.textContent = "All marked read.";
    });
    const prefs = $(".prefs");
    if (prefs) prefs.addEventListener("click", () => {
      const fragment = new URLSearchParams({user: o.userId, token});
      window.open(`${o.url}/preferences#${fragment}`, "_blank", "noopener");
    });

    // --- the panel: a button that opens a dialog; Escape closes it and gives the bell focus ---
    function open(yes) {
      panel.hidden = !yes;
      bell.setAttribute("aria-expanded", String(yes));
      if (yes) {  // open toward the page's middle, so the panel stays in view
        const left = bell.getBoundingClientRect().left < window.innerWidth / 2;
        panel.style.left = left ? "0" : "auto"; panel.style.right = left ? "auto" : "0";
      }
      if (yes) { $("h2").focus(); if (next === undefined) firstPage(); }
      else bell.focus();
    }
    bell.addEventListener("click", () => open(panel.hidden));
    $(".close").addEventListener("click", () => open(false));
    root.addEventListener("keydown", (e) => { if (e.key === "Escape" && !panel.hidden) { e.preventDefault(); open(false); } });

    // --- live: an SSE stream over fetch (so the token stays in a header), resumed after a
    // restart from the last item seen (Last-Event-ID), never showing an item twice ---
    function handle(name, data, id) {
      if (name === "item") {
        if (id !== null) lastSeq = Number(id);
        const isNew = !items.has(data.id);
        show(data);
        if (isNew && !data.read) live.textContent = `New notification: ${data.title}`;
      } else if (name === "badge") setBadge(data.unread);
      else if (name === "read") { const e = items.get(data.id); if (e) { e.item = {...e.item, read: true}; paint(e); } }
      else if (name === "archived") show({id: data.id, archived: true});
    }
    async function listen(response) {
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "", first = true;
      for (;;) {
        const {value, done} = await reader.read();
        if (done) return;
        buffer += value;
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
          let name = "message", data = "", id = null;
          for (const line of block.split("\n")) {
            if (line.startsWith("event: ")) name = line.slice(7);
            else if (line.startsWith("data: ")) data += line.slice(6);
            else if (line.startsWith("id: ")) id = line.slice(4);
          }
          if (!data) continue;
          const parsed = JSON.parse(data);
          handle(name, parsed, id);
          if (name === "badge" && first) {  // subscribed: anything from now on comes live
            first = false;
            host.dataset.live = "yes";
            host.dataset.connects = String(Number(host.dataset.connects || 0) + 1);
            if (lastSeq === null) await firstPage();
          }
        }
      }
    }
    (async function stream() {
      let wait = 250;
      while (!stopped.signal.aborted) {
        try {
          const headers = lastSeq === null ? {} : {"Last-Event-ID": String(lastSeq)};
          const r = await call("/stream", "GET", headers);
          if (r.ok) { wait = 250; await listen(r); }
          else if (r.status !== 503) throw new Error(`stream: ${r.status}`);
        } catch (e) {
          if (stopped.signal.aborted) return;
          if (!String(e && e.message).startsWith("stream:") && !(e instanceof TypeError)) console.warn("notifyd inbox:", e);
        }
        host.dataset.live = "no";
        await new Promise((done) => setTimeout(done, wait));
        wait = Math.min(wait * 2, 4000);
      }
    })();
    setBadge(0);
    names();
    return {destroy() { stopped.abort(); root.replaceChildren(); },
            setToken(t) { token = t; }};
  }
  window.NotifydInbox = {mount};
})();
