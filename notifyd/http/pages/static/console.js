// The console's only script: the overview's figures, refreshed over Server-Sent Events.
"use strict";
(function () {
  const live = document.getElementById("live");
  if (!live || !window.EventSource) return;
  const source = new EventSource(live.dataset.stream);
  const rows = (id, entries, format, empty) => {
    const body = document.querySelector(`#${id} tbody`);
    body.replaceChildren();
    for (const [name, value] of entries) {
      const tr = body.insertRow(), a = tr.insertCell(), b = tr.insertCell();
      a.textContent = name;
      const shown = format(value);
      if (shown instanceof Node) b.append(shown); else b.textContent = shown;
    }
    if (!entries.length) {
      const cell = body.insertRow().insertCell();
      cell.colSpan = 2;
      cell.textContent = empty;
    }
  };
  const state = (s) => { const span = document.createElement("span");
                         span.className = `state ${s}`; span.textContent = s; return span; };
  source.addEventListener("overview", (event) => {
    const f = JSON.parse(event.data);
    rows("lag", Object.entries(f.lag), (s) => s.toFixed(1), "No channel is sending from this daemon.");
    rows("sends", Object.entries(f.sends), (n) => String(Math.round(n)), "Nothing sent yet.");
    rows("breakers", Object.entries(f.breakers), state, "No channel is sending from this daemon.");
    const fan = document.getElementById("fanouts");
    fan.replaceChildren();
    f.fanouts.forEach((e, i) => {
      const p = document.createElement("p"), label = document.createElement("label"),
            bar = document.createElement("progress");
      label.htmlFor = bar.id = `f-${i + 1}`;
      label.textContent = `${e.event_id}: ${e.routed} of ${e.size}`;
      bar.max = e.size; bar.value = e.routed; bar.textContent = `${e.percent}%`;
      p.append(label, " ", bar); fan.append(p);
    });
    if (!f.fanouts.length) { const p = document.createElement("p");
                             p.textContent = "No event is fanning out."; fan.append(p); }
    document.getElementById("db-bytes").textContent = (f.db_bytes / 1048576).toFixed(1);
    document.getElementById("db-free").textContent = (f.db_free_bytes / 1048576).toFixed(1);
    document.getElementById("at").textContent = new Date(f.at).toISOString();
    live.dataset.updates = String(Number(live.dataset.updates || 0) + 1);
  });
})();
