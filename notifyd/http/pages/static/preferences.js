// The preference centre: read the person's preferences, show every optional topic by medium,
// the global opt-out, quiet hours and time zone, and save them through the preferences API with
// the version read, so a change made elsewhere meanwhile is never overwritten silently.
"use strict";
(function () {
  const centre = document.getElementById("centre");
  const form = document.getElementById("form");
  if (!form) return;
  const fragment = new URLSearchParams(location.hash.slice(1));
  const user = centre.dataset.user || fragment.get("user") || "";
  const token = centre.dataset.token || fragment.get("token") || "";
  if (fragment.has("token")) history.replaceState(null, "", location.pathname);  // out of sight
  const status = document.getElementById("status");
  const url = `/v1/users/${encodeURIComponent(user)}/preferences`;
  const MEDIUMS = ["email", "sms", "push", "chat"];
  const WORDS = {email: "Email", sms: "SMS", push: "Push", chat: "Chat"};
  let version = 0, shown = {};

  const say = (text, kind) => { status.textContent = text; status.className = kind || ""; };
  const call = async (method, body) => {
    const response = await fetch(url, {method, headers: {"Authorization": `Bearer ${token}`,
      "Content-Type": "application/json"}, body: body && JSON.stringify(body)});
    return [response.status, await response.json()];
  };

  // Each category by its name in the person's language, with a switch only for the media its
  // kinds can send by (a column only for the media some category uses); one its kinds send by
  // none of (the inbox, a webhook) has nothing to switch and is left out.
  function draw(prefs) {
    version = prefs.version;
    shown = prefs.categories;
    document.getElementById("opt_out").checked = prefs.opt_out;
    const listed = Object.entries(prefs.categories).filter(([, c]) => c.media.length > 0);
    const columns = MEDIUMS.filter((m) => listed.some(([, c]) => c.media.includes(m)));
    const head = document.querySelector("#categories thead tr");
    head.replaceChildren(head.firstElementChild);
    for (const m of columns) {
      const th = document.createElement("th");
      th.scope = "col"; th.className = "switch"; th.textContent = WORDS[m];
      head.append(th);
    }
    const body = document.querySelector("#categories tbody");
    body.replaceChildren();
    for (const [name, c] of listed) {
      const tr = body.insertRow();
      const th = document.createElement("th");
      th.scope = "row"; th.textContent = c.title;
      if (!c.optional) th.append(" (always sent)");
      tr.append(th);
      if (c.description) {
        const about = document.createElement("p");
        about.className = "hint"; about.textContent = c.description;
        th.append(about);
      }
      for (const m of columns) {
        const td = tr.insertCell();
        td.className = "switch";
        if (!c.media.includes(m)) continue;  // never sent this way: nothing to turn off
        const box = document.createElement("input");
        box.type = "checkbox"; box.checked = c[m]; box.disabled = !c.optional;
        box.dataset.category = name; box.dataset.medium = m;
        box.setAttribute("aria-label", `${c.title}: ${WORDS[m]}`);
        td.append(box);
      }
    }
    document.getElementById("none").hidden = listed.length > 0;
    const quiet = prefs.quiet_hours;
    document.getElementById("quiet_on").checked = Boolean(quiet);
    if (quiet) {
      document.getElementById("quiet_start").value = quiet.start;
      document.getElementById("quiet_end").value = quiet.end;
    }
    document.getElementById("timezone").value = prefs.timezone ||
      Intl.DateTimeFormat().resolvedOptions().timeZone || "";
    form.hidden = false;
  }

  function chosen() {
    const categories = {};  // a switch the page does not show is saved as it was read
    for (const [name, c] of Object.entries(shown)) {
      if (c.optional) categories[name] = Object.fromEntries(MEDIUMS.map((m) => [m, c[m]]));
    }
    for (const box of form.querySelectorAll("input[data-category]")) {
      if (!shown[box.dataset.category].optional) continue;
      categories[box.dataset.category][box.dataset.medium] = box.checked;
    }
    const zone = document.getElementById("timezone").value.trim();
    return {version, opt_out: document.getElementById("opt_out").checked, categories,
            timezone: zone || null,
            quiet_hours: document.getElementById("quiet_on").checked ? {
              start: document.getElementById("quiet_start").value,
              end: document.getElementById("quiet_end").value} : null};
  }

  async function load() {
    if (!user || !token) { say("Open this page from a link in one of our messages.", "problem"); return; }
    const [code, body] = await call("GET");
    if (code !== 200) { say(problem(code, body), "problem"); return; }
    draw(body);
    say(`Your preferences (version ${version}).`);
  }

  function problem(code, body) {
    if (code === 401) return "This page has expired. Open the link in the message again.";
    if (code === 412) return "These preferences were changed elsewhere (another tab?) since this page " +
      "read them. Nothing was saved: reload to see them, then choose again.";
    return (body && body.error && body.error.message) || `Something went wrong (${code}).`;
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    say("Saving…");
    const [code, body] = await call("PUT", chosen());
    if (code === 200) { draw(body); say(`Saved (version ${version}).`, "ok"); }
    else say(problem(code, body), "problem");
  });
  const zones = document.getElementById("zones");
  for (const z of (Intl.supportedValuesOf ? Intl.supportedValuesOf("timeZone") : [])) {
    const option = document.createElement("option"); option.value = z; zones.append(option);
  }
  load();
})();
