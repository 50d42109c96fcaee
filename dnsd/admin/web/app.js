// transmirror dnsd dashboard: plain JS, no build step, nothing loaded from
// elsewhere. Data comes from GET v1/stream (Server-Sent Events: "snapshot"
// every couple of seconds and on every event, "history" every 10 s).
"use strict";
(function () {
  const TOKEN_KEY = "transmirror.adminToken";
  const SVGNS = "http://www.w3.org/2000/svg";
  const PALETTE = ["#58a6ff", "#bc8cff", "#39c5cf", "#f778ba", "#e3b341", "#7ee787", "#ffa657", "#a5d6ff", "#ff7b72", "#d2a8ff"];
  // Fallback client positions when the locator had no coordinates.
  const CONTINENTS = { AF: [20, 5], AN: [0, -80], AS: [100, 35], EU: [15, 50], NA: [-100, 42], OC: [140, -25], SA: [-60, -15] };

  const state = {
    snap: null,
    history: null,
    sort: {}, // group → {key, dir}
    groups: {}, // group → DOM refs
  };

  const $ = (sel, root) => (root || document).querySelector(sel);
  const esc = (s) => String(s == null ? "" : s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  const short = (g) => g.replace(/\.$/, "");

  function fmtNum(x, digits) {
    if (x == null || !isFinite(x)) return "–";
    if (Math.abs(x) >= 1000) return (x / 1000).toFixed(1) + "k";
    return x.toFixed(digits == null ? 1 : digits);
  }
  function fmtPct(x) { return x == null || !isFinite(x) ? "–" : Math.round(x * 100) + "%"; }
  // A rate given in bytes per second, in bytes (a measured flow) or in
  // bits (an uplink, as operators write it).
  function fmtRate(bytesPerSecond, bits) {
    if (bytesPerSecond == null || !isFinite(bytesPerSecond)) return "–";
    let x = bits ? bytesPerSecond * 8 : bytesPerSecond;
    const unit = bits ? "bit/s" : "B/s";
    for (const p of ["", "k", "M", "G", "T"]) {
      if (Math.abs(x) < 1000 || p === "T") return (p === "" ? String(Math.round(x)) : x.toFixed(x < 10 ? 1 : 0)) + " " + p + unit;
      x /= 1000;
    }
  }
  // Which capacity a member's utilization comes from, for its title.
  function utilParts(m) {
    let s = "load " + fmtPct(m.load_utilization);
    if (m.bandwidth) s += " · bandwidth " + fmtPct(m.bandwidth_utilization) + " of " + fmtRate(m.bandwidth, true);
    return s;
  }
  function fmtAge(sec) {
    if (sec == null || !isFinite(sec) || sec < 0) return "–";
    sec = Math.floor(sec);
    if (sec < 60) return sec + "s";
    if (sec < 3600) return Math.floor(sec / 60) + "m " + (sec % 60) + "s";
    if (sec < 86400) return Math.floor(sec / 3600) + "h " + Math.floor((sec % 3600) / 60) + "m";
    return Math.floor(sec / 86400) + "d " + Math.floor((sec % 86400) / 3600) + "h";
  }
  function fmtTime(t) {
    const d = new Date(t);
    return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });
  }
  function svg(tag, attrs, parent) {
    const el = document.createElementNS(SVGNS, tag);
    for (const k in attrs) el.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(el);
    return el;
  }
  function proj(lon, lat) { return [lon + 180, 90 - lat]; }

  // ---- token ---------------------------------------------------------
  function getToken() { try { return sessionStorage.getItem(TOKEN_KEY) || ""; } catch (e) { return ""; } }
  function setToken(t) {
    try { if (t) sessionStorage.setItem(TOKEN_KEY, t); else sessionStorage.removeItem(TOKEN_KEY); } catch (e) { /* private mode */ }
    $("#token-button").textContent = t ? "token: set" : "token: none";
  }
  let tokenWaiter = null;
  function askToken() {
    const dlg = $("#token-dialog");
    $("#token-input").value = "";
    dlg.showModal();
    $("#token-input").focus();
    return new Promise((resolve) => { tokenWaiter = resolve; });
  }
  function closeToken(value) {
    $("#token-dialog").close();
    if (tokenWaiter) { const w = tokenWaiter; tokenWaiter = null; w(value); }
  }
  $("#token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const t = $("#token-input").value.trim();
    setToken(t);
    closeToken(t);
  });
  $("#token-cancel").addEventListener("click", () => closeToken(""));
  $("#token-clear").addEventListener("click", () => { setToken(""); closeToken(""); toast("Token forgotten."); });
  $("#token-dialog").addEventListener("cancel", () => closeToken(""));
  $("#token-button").addEventListener("click", () => { askToken(); });
  setToken(getToken());

  let toastTimer = 0;
  function toast(msg, isError) {
    const el = $("#toast");
    el.textContent = msg;
    el.className = "toast" + (isError ? " error" : "");
    el.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { el.hidden = true; }, 5000);
  }

  async function drain(group, member, on) {
    let token = getToken();
    if (!token) token = await askToken();
    if (!token) return;
    const url = "v1/groups/" + encodeURIComponent(group) + "/members/" + encodeURIComponent(member) + "/" + (on ? "drain" : "undrain");
    let res;
    try {
      res = await fetch(url, { method: "POST", headers: { Authorization: "Bearer " + token }, cache: "no-store" });
    } catch (e) {
      toast("Request failed: " + e, true);
      return;
    }
    let body = {};
    try { body = await res.json(); } catch (e) { /* not JSON */ }
    if (res.status === 401) {
      setToken("");
      toast("Admin token refused: " + (body.error || res.statusText), true);
      return;
    }
    if (!res.ok) { toast((on ? "Drain" : "Undrain") + " failed: " + (body.error || res.statusText), true); return; }
    toast(member + (on ? " drained" : " undrained") + ".");
  }

  // ---- group sections --------------------------------------------------
  const COLUMNS = [
    { key: "name", label: "Member", get: (m) => m.name },
    { key: "state", label: "State", get: (m) => ({ up: 0, unknown: 1, lagging: 2, draining: 3, down: 4 }[m.state] ?? 5) },
    { key: "util", label: "Utilization", get: (m) => m.utilization },
    { key: "rps", label: "Req/s", num: true, get: (m) => (m.last_report ? m.last_report.r : -1) },
    { key: "redir", label: "Redir/s", num: true, get: (m) => (m.last_report ? m.last_report.redirects_per_second : -1) },
    { key: "bytes", label: "Bytes/s", num: true, get: (m) => (m.last_report ? m.bytes_per_second || 0 : -1) },
    { key: "share", label: "DNS / cap. share", get: (m) => m.answer_share },
    { key: "lag", label: "Lag", num: true, get: (m) => (m.generation ? m.lag_seconds || 0 : 1e12) },
    { key: "rescued", label: "Rescued", num: true, get: (m) => (m.last_report ? m.rescued || 0 : -1) },
    { key: "https", label: "HTTPS", num: true, get: (m) => (m.last_report && m.last_report.cert_not_after ? Date.parse(m.last_report.cert_not_after) : 1e15) },
    { key: "loc", label: "Where", get: (m) => (m.location.continent || "") + (m.location.country || "") },
    { key: "age", label: "Report", num: true, get: (m) => (m.last_report ? m.report_age_seconds || 0 : 1e12) },
    { key: "act", label: "", nosort: true },
  ];

  // httpsCell is a member's HTTPS column from its last report r: how
  // long until its first certificate expires (hot under 14 days), "yes"
  // for https through a terminator (no certificate of its own), "–" for
  // none.
  // acme (0: none) is its live ACME challenges at dnsd: an order under
  // way, shown beside the expiry.
  function httpsCell(r, acme) {
    const https = r && (r.schemes || []).includes("https");
    const order = acme ? ' <span class="util-parts" data-role="acme" title="live ACME DNS-01 challenges: an order under way">ACME ×' + acme + "</span>" : "";
    if (!https) return '<td class="num" data-role="https"><span class="muted">–</span>' + order + "</td>";
    if (!r.cert_not_after) return '<td class="num" data-role="https" title="https through a terminator">yes' + order + "</td>";
    const left = (Date.parse(r.cert_not_after) - Date.now()) / 1000;
    return '<td class="num' + (left < 14 * 86400 ? " hot" : "") + '" data-role="https" title="' + esc("certificate expires " + r.cert_not_after) + '">' +
      esc(left > 0 ? fmtAge(left) : "expired") + order + "</td>";
  }

  function groupSection(g) {
    let ref = state.groups[g.name];
    if (ref) return ref;
    const sec = document.createElement("section");
    sec.className = "panel group";
    sec.dataset.group = g.name;
    sec.innerHTML =
      '<div class="panel-head group-head"><span class="name"></span><span class="tags"></span></div>' +
      '<div class="group-body">' +
      '<div class="members-wrap"><table class="members"><thead><tr>' +
      COLUMNS.map((c) => '<th data-key="' + c.key + '" class="' + (c.num ? "num " : "") + (c.nosort ? "nosort" : "") + '">' + esc(c.label) + "</th>").join("") +
      "</tr></thead><tbody></tbody></table></div>" +
      '<div class="map-wrap"><svg class="map" viewBox="0 8 360 140" preserveAspectRatio="xMidYMid meet" role="img"></svg><div class="map-note"></div></div>' +
      "</div>" +
      '<div class="top-wrap"><div class="chart-head"><h3>Most requested</h3><span class="muted" data-role="top-note"></span></div>' +
      '<table class="top"><thead><tr><th class="num">Requests</th><th>Path</th></tr></thead><tbody></tbody></table></div>' +
      '<div class="charts">' +
      '<div class="chart" data-chart="answers"><div class="chart-head"><h3>DNS answers / s</h3><div class="legend"></div></div><svg class="chart-svg" viewBox="0 0 600 150" preserveAspectRatio="none"></svg></div>' +
      '<div class="chart" data-chart="util"><div class="chart-head"><h3>Utilization</h3><div class="legend"></div></div><svg class="chart-svg" viewBox="0 0 600 150" preserveAspectRatio="none"></svg></div>' +
      "</div>";
    $("#groups").appendChild(sec);
    ref = {
      sec,
      name: $(".name", sec),
      tags: $(".tags", sec),
      tbody: $("table.members tbody", sec),
      top: $("table.top tbody", sec),
      topNote: $('[data-role="top-note"]', sec),
      thead: $("thead", sec),
      map: $("svg.map", sec),
      mapNote: $(".map-note", sec),
      answers: $('[data-chart="answers"]', sec),
      util: $('[data-chart="util"]', sec),
      mapBase: false,
    };
    ref.thead.addEventListener("click", (e) => {
      const th = e.target.closest("th");
      if (!th || th.classList.contains("nosort")) return;
      const cur = state.sort[g.name] || { key: "name", dir: 1 };
      state.sort[g.name] = { key: th.dataset.key, dir: cur.key === th.dataset.key ? -cur.dir : 1 };
      renderGroup(currentGroup(g.name));
    });
    ref.tbody.addEventListener("click", (e) => {
      const b = e.target.closest("button[data-action]");
      if (!b) return;
      drain(g.name, b.dataset.member, b.dataset.action === "drain");
    });
    state.groups[g.name] = ref;
    return ref;
  }

  function currentGroup(name) { return state.snap && state.snap.groups.find((x) => x.name === name); }

  function render() {
    const s = state.snap;
    if (!s) return;
    const empty = $("#groups > .empty");
    if (empty) empty.remove();
    const seen = {};
    for (const g of s.groups) { seen[g.name] = true; renderGroup(g); }
    for (const name in state.groups) {
      if (!seen[name]) { state.groups[name].sec.remove(); delete state.groups[name]; }
    }
    if (s.groups.length === 0) $("#groups").innerHTML = '<p class="empty">No groups configured.</p>';
    renderSummary(s);
    renderCluster(s.cluster);
    renderEvents(s.events || []);
    $("#token-button").textContent = getToken() ? "token: set" : "token: none";
    $("#token-button").hidden = !s.token_auth;
  }

  // renderCluster shows the NS set: this node, degraded or not, the
  // nodes etcd knows, and with quorum the members some node sees down.
  function renderCluster(c) {
    const el = $("#cluster");
    el.hidden = !c;
    if (!c) return;
    let quorum = "";
    if (c.quorum) {
      const votes = (c.votes || []).map((v) => short(v.member) + " " + v.down + "/" + v.live + " down" +
        (v.down_by && v.down_by.length ? " (" + v.down_by.join(" ") + ")" : "") +
        (v.down > c.down_share * v.live ? " out" : ""));
      quorum = " · quorum > " + fmtPct(c.down_share) + ": " + (votes.join(", ") || "no member seen down");
    }
    el.textContent = "node " + c.node + " · " + (c.degraded ? "DEGRADED (etcd away" + (c.error ? ": " + c.error : "") + ")" : "etcd ok") +
      " · nodes: " + ((c.nodes || []).join(" ") || "none") + quorum;
    el.title = c.degraded ? "Serving the last known state; membership changes are refused until etcd is back." : "";
  }

  function renderSummary(s) {
    let members = 0, up = 0, down = 0, draining = 0, lagging = 0;
    for (const g of s.groups) for (const m of g.members) {
      members++;
      if (m.state === "up") up++; else if (m.state === "down") down++; else if (m.state === "draining") draining++; else if (m.state === "lagging") lagging++;
    }
    $("#summary").innerHTML =
      "<span><b>" + s.groups.length + "</b> groups</span>" +
      "<span><b>" + up + "</b>/" + members + " members up</span>" +
      (down ? '<span class="state down">' + down + " down</span>" : "") +
      (draining ? '<span class="state draining">' + draining + " draining</span>" : "") +
      (lagging ? '<span class="state lagging">' + lagging + " lagging</span>" : "") +
      '<span class="mono">' + esc(fmtTime(s.time)) + "</span>";
  }

  function renderGroup(g) {
    if (!g) return;
    const ref = groupSection(g);
    const up = g.members.filter((m) => m.state === "up").length;
    ref.name.textContent = short(g.name);
    ref.tags.innerHTML =
      '<span class="tag">' + esc(g.policy) + "</span> " +
      '<span class="tag">' + g.answers + " per answer</span> " +
      '<span class="tag">TTL ' + g.ttl.min + "–" + g.ttl.max + "s</span> " +
      '<span class="tag">watermarks ' + fmtPct(g.watermarks.low) + " / " + fmtPct(g.watermarks.high) + "</span> " +
      '<span class="tag ' + (up === g.members.length ? "ok" : up === 0 ? "bad" : "") + '">' + up + "/" + g.members.length + " up</span>" +
      (g.max_lag_seconds ? ' <span class="tag">max lag ' + esc(fmtAge(g.max_lag_seconds)) + "</span>" : "") +
      (g.fail_open ? ' <span class="tag failopen" data-failopen="true">FAIL-OPEN</span>' : "") +
      (g.lag_fail_open ? ' <span class="tag failopen" data-lag-failopen="true" title="every member lags more than max lag: answering with the freshest">LAG FAIL-OPEN</span>' : "");
    renderMembers(ref, g);
    renderTop(ref, g);
    renderMap(ref, g);
    renderCharts(ref, g);
  }

  function renderMembers(ref, g) {
    const srt = state.sort[g.name] || { key: "name", dir: 1 };
    const col = COLUMNS.find((c) => c.key === srt.key) || COLUMNS[0];
    const rows = g.members.slice().sort((a, b) => {
      const x = col.get(a), y = col.get(b);
      return (x < y ? -1 : x > y ? 1 : a.name < b.name ? -1 : 1) * srt.dir;
    });
    for (const th of ref.thead.querySelectorAll("th")) {
      if (th.dataset.key === srt.key) th.setAttribute("aria-sort", srt.dir > 0 ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    }
    const token = state.snap.token_auth;
    const now = new Date(state.snap.time).getTime();
    const html = rows.map((m) => {
      const r = m.last_report;
      const since = m.since ? fmtAge((now - new Date(m.since).getTime()) / 1000) : "";
      const util = m.utilization || 0;
      const hot = util >= g.watermarks.high ? " hot" : util >= g.watermarks.low ? " warm" : "";
      const loc = m.location || {};
      const coords = loc.lat != null ? loc.lat.toFixed(1) + ", " + loc.lon.toFixed(1) : "";
      let act = "";
      if (token) {
        act = m.state === "draining"
          ? '<button type="button" class="btn small" data-action="undrain" data-member="' + esc(m.name) + '">Undrain</button>'
          : '<button type="button" class="btn small warn" data-action="drain" data-member="' + esc(m.name) + '">Drain</button>';
      }
      return '<tr data-member="' + esc(m.name) + '" data-state="' + esc(m.state) + '">' +
        '<td class="member-name" title="' + esc(short(m.host) + " · " + (m.addresses || []).join(", ")) + '"><b>' + esc(m.name) + "</b>" + (m.source === "runtime" ? ' <span class="host">run-time</span>' : "") + "</td>" +
        '<td><span class="state ' + esc(m.state) + '" data-role="state">' + esc(m.state) + "</span>" + (since ? '<span class="since">' + since + "</span>" : "") + "</td>" +
        '<td data-role="util" title="' + esc(utilParts(m)) + '"><span class="util-line"><span class="bar"><span class="fill' + hot + '" data-w="' + Math.min(100, util * 100).toFixed(1) + '"></span>' +
        '<span class="mark" data-l="' + Math.min(100, g.watermarks.low * 100) + '"></span><span class="mark" data-l="' + Math.min(100, g.watermarks.high * 100) + '"></span></span>' +
        '<span class="bar-label num">' + fmtPct(util) + "</span></span>" +
        (m.bandwidth ? '<span class="util-parts" data-role="util-parts">load ' + fmtPct(m.load_utilization) + " · bw " + fmtPct(m.bandwidth_utilization) + "</span>" : "") +
        "</td>" +
        '<td class="num">' + (r ? fmtNum(r.r) : "–") + "</td>" +
        '<td class="num">' + (r ? fmtNum(r.redirects_per_second) : "–") + "</td>" +
        '<td class="num" data-role="bytes">' + (r ? esc(fmtRate(m.bytes_per_second, false)) : "–") +
        (m.bandwidth ? '<span class="util-parts"> of ' + esc(fmtRate(m.bandwidth, true)) + "</span>" : "") + "</td>" +
        '<td><span class="share" title="DNS answers last minute / capacity share"><span class="dns" data-w="' + Math.min(100, m.answer_share * 100) + '"></span><span class="cap" data-w="' + Math.min(100, m.capacity_share * 100) + '"></span></span>' +
        '<span class="share-text num">' + fmtPct(m.answer_share) + ' <span class="muted">/ ' + fmtPct(m.capacity_share) + "</span></span></td>" +
        '<td class="num" data-role="lag" title="' + esc(m.generation ? "generation " + new Date(m.generation).toISOString() : "no generation reported") + '">' +
        (m.generation ? (m.lag_seconds ? esc(fmtAge(m.lag_seconds)) + " behind" : "newest") : '<span class="muted">–</span>') + "</td>" +
        '<td class="num" data-role="rescued" title="requests sent to a sibling holding the file instead of a 404, since the mirror started">' +
        (r ? esc(String(m.rescued || 0)) : '<span class="muted">–</span>') + "</td>" +
        httpsCell(r, (g.acme_challenges || {})[m.name] || 0) +
        '<td title="' + esc(coords) + '">' + esc([loc.country, loc.continent].filter(Boolean).join(" · ") || "–") + "</td>" +
        '<td class="num">' + (r ? fmtAge(m.report_age_seconds || 0) : '<span class="muted">never</span>') + "</td>" +
        "<td>" + act + "</td></tr>";
    }).join("");
    ref.tbody.innerHTML = html;
    // Widths through the CSSOM: the page's CSP allows no inline style.
    for (const el of ref.tbody.querySelectorAll("[data-w]")) el.style.width = el.dataset.w + "%";
    for (const el of ref.tbody.querySelectorAll("[data-l]")) el.style.left = el.dataset.l + "%";
  }

  // renderTop lists the group's most requested paths: the members' counts
  // (GETs, ranges from byte 0 only, halved every 5 minutes) summed.
  function renderTop(ref, g) {
    const top = g.top || [];
    ref.topNote.textContent = top.length ? "requests, halved every 5 min, summed over the members" : "none reported";
    ref.top.innerHTML = top.map((p, i) =>
      '<tr data-rank="' + (i + 1) + '" data-path="' + esc(p.path) + '"><td class="num" data-role="count">' + esc(fmtNum(p.count)) + "</td>" +
      '<td class="mono path" data-role="path">' + esc(p.path) + "</td></tr>").join("");
  }

  function renderMap(ref, g) {
    const m = ref.map;
    if (!ref.mapBase) {
      for (let lon = -150; lon <= 150; lon += 30) svg("line", { class: "grat", x1: lon + 180, y1: 0, x2: lon + 180, y2: 180 }, m);
      for (let lat = -60; lat <= 60; lat += 30) svg("line", { class: "grat", x1: 0, y1: 90 - lat, x2: 360, y2: 90 - lat }, m);
      svg("path", { class: "land", d: window.TM_LAND || "" }, m);
      ref.flowLayer = svg("g", { class: "flows" }, m);
      ref.dotLayer = svg("g", { class: "dots" }, m);
      ref.mapBase = true;
    }
    const byName = {};
    for (const mm of g.members) byName[mm.name] = mm;
    // Flows: client region → member, width by share of the minute's answers.
    const fl = ref.flowLayer;
    fl.replaceChildren();
    const flows = (g.flows || []).slice(0, 200);
    const total = flows.reduce((a, f) => a + f.answers, 0) || 1;
    let drawn = 0;
    for (const f of flows) {
      const mem = byName[f.member];
      if (!mem || mem.location.lat == null) continue;
      let src = null;
      if (f.has_coords) src = [f.lon, f.lat];
      else if (CONTINENTS[f.continent]) src = CONTINENTS[f.continent];
      if (!src) continue;
      const [x1, y1] = proj(src[0], src[1]);
      const [x2, y2] = proj(mem.location.lon, mem.location.lat);
      const share = f.answers / total;
      const mx = (x1 + x2) / 2, my = (y1 + y2) / 2 - Math.min(30, Math.hypot(x2 - x1, y2 - y1) * 0.25);
      const p = svg("path", {
        class: "flow", d: "M" + x1.toFixed(1) + "," + y1.toFixed(1) + " Q" + mx.toFixed(1) + "," + my.toFixed(1) + " " + x2.toFixed(1) + "," + y2.toFixed(1),
        "stroke-width": (0.4 + 2.6 * share).toFixed(2), "stroke-opacity": (0.25 + 0.6 * share).toFixed(2),
        "data-member": f.member, "data-country": f.country,
      }, fl);
      const t = svg("title", {}, p);
      t.textContent = (f.country || f.continent || "?") + " → " + f.member + ": " + f.answers + " answers in the last minute";
      svg("circle", { class: "client", cx: x1.toFixed(1), cy: y1.toFixed(1), r: 1.1, "fill-opacity": 0.8 }, fl);
      drawn++;
    }
    // Members: dots sized by utilization, coloured by state.
    const dl = ref.dotLayer;
    dl.replaceChildren();
    const placed = g.members.filter((mm) => mm.location && mm.location.lat != null).sort((a, b) => b.utilization - a.utilization);
    for (const mm of placed) {
      const [x, y] = proj(mm.location.lon, mm.location.lat);
      const r = 2 + 4 * Math.sqrt(Math.min(1.5, Math.max(0, mm.utilization)));
      const c = svg("circle", { class: "member-dot " + mm.state, cx: x.toFixed(1), cy: y.toFixed(1), r: r.toFixed(2), "data-member": mm.name, "data-state": mm.state }, dl);
      const t = svg("title", {}, c);
      t.textContent = mm.name + " · " + mm.state + " · utilization " + fmtPct(mm.utilization) + " (" + utilParts(mm) + ")";
    }
    // Labels after dots, nudged apart when members sit close together.
    const used = [];
    for (const mm of placed) {
      const [x, y] = proj(mm.location.lon, mm.location.lat);
      let ly = y - 4;
      while (used.some((u) => Math.abs(u[0] - x) < 16 && Math.abs(u[1] - ly) < 4.5)) ly += 5;
      used.push([x, ly]);
      const lbl = svg("text", { class: "member-label", x: (x + 3.5).toFixed(1), y: ly.toFixed(1) }, dl);
      lbl.textContent = mm.name;
    }
    const unplaced = g.members.length - placed.length;
    ref.mapNote.innerHTML =
      '<span><i class="member-dot-sw up"></i>dot size: utilization</span>' +
      "<span>" + drawn + " client regions → members, last minute</span>" +
      (unplaced ? "<span>" + unplaced + " member(s) without coordinates</span>" : "");
    for (const el of ref.mapNote.querySelectorAll("i")) el.style.background = "var(--up)";
  }

  function renderCharts(ref, g) {
    const h = state.history && state.history.groups && state.history.groups[g.name];
    const names = g.members.map((m) => m.name);
    const colors = {};
    names.forEach((n, i) => { colors[n] = PALETTE[i % PALETTE.length]; });
    const end = new Date(state.snap.time).getTime() / 1000;
    const series = (field) => names.map((n) => ({ name: n, color: colors[n], points: ((h && h[n]) || []).map((p) => [p.t, p[field]]) }));
    drawChart(ref.answers, series("a"), end, { min: 1, fmt: (v) => fmtNum(v, v < 10 ? 1 : 0) });
    drawChart(ref.util, series("u"), end, {
      min: 1, fmt: (v) => Math.round(v * 100) + "%",
      marks: [{ v: g.watermarks.low, cls: "low" }, { v: g.watermarks.high, cls: "high" }],
    });
    for (const box of [ref.answers, ref.util]) {
      const lg = $(".legend", box);
      lg.innerHTML = names.map((n) => '<span><span class="sw" data-c="' + esc(colors[n]) + '"></span>' + esc(n) + "</span>").join("");
      for (const el of lg.querySelectorAll(".sw")) el.style.background = el.dataset.c;
    }
  }

  function niceStep(max, ticks) {
    const raw = max / ticks;
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * p;
  }

  function drawChart(box, series, end, opt) {
    const el = $("svg", box);
    el.replaceChildren();
    const W = 600, H = 150, L = 42, R = 6, T = 8, B = 18;
    // The axis spans the last hour, or less while there is less history.
    let first = end;
    for (const s of series) for (const [t] of s.points) if (t < first) first = t;
    const span = [120, 300, 600, 1800, 3600].find((x) => x >= end - first) || 3600;
    const start = end - span;
    let max = 0, any = false;
    for (const s of series) for (const [t, v] of s.points) { if (t < start) continue; if (v > max) max = v; any = true; }
    for (const mk of opt.marks || []) max = Math.max(max, mk.v);
    max = Math.max(max * 1.1, opt.min ? opt.min * (opt.marks ? 1 : 0.1) : 0, 1e-9);
    const step = niceStep(max, 4);
    max = Math.ceil(max / step) * step;
    const x = (t) => L + ((t - start) / span) * (W - L - R);
    const y = (v) => T + (1 - v / max) * (H - T - B);
    for (let v = 0; v <= max + 1e-9; v += step) {
      svg("line", { class: "grid", x1: L, x2: W - R, y1: y(v).toFixed(1), y2: y(v).toFixed(1) }, el);
      const t = svg("text", { class: "axis", x: L - 5, y: (y(v) + 3).toFixed(1), "text-anchor": "end" }, el);
      t.textContent = opt.fmt(v);
    }
    for (let i = 4; i >= 0; i--) {
      const ago = (span / 4) * i;
      const t = svg("text", { class: "axis", x: x(end - ago).toFixed(1), y: H - 4, "text-anchor": i === 4 ? "start" : i === 0 ? "end" : "middle" }, el);
      t.textContent = i === 0 ? "now" : ago % 60 === 0 ? "-" + ago / 60 + "m" : "-" + ago + "s";
    }
    for (const mk of opt.marks || []) {
      svg("line", { class: "wm " + mk.cls, x1: L, x2: W - R, y1: y(mk.v).toFixed(1), y2: y(mk.v).toFixed(1) }, el);
    }
    if (!any) {
      const t = svg("text", { class: "nodata", x: (L + W) / 2, y: H / 2, "text-anchor": "middle" }, el);
      t.textContent = "collecting… (a point every 10 s)";
      return;
    }
    for (const s of series) {
      const pts = s.points.filter(([t]) => t >= start);
      if (pts.length === 0) continue;
      let d = "";
      for (const [t, v] of pts) d += (d ? "L" : "M") + x(t).toFixed(1) + "," + y(v).toFixed(1);
      if (pts.length === 1) d += "l0.1,0";
      svg("path", { class: "series", d, stroke: s.color, "data-member": s.name, "vector-effect": "non-scaling-stroke" }, el);
    }
  }

  const KIND_TEXT = {
    member_state: "state", drain: "drain", undrain: "undrain", member_add: "member added", member_remove: "member removed",
    reload: "reload", reload_failed: "reload failed", fail_open: "fail-open", fail_open_over: "fail-open over", lagging: "lagging", caught_up: "caught up", start: "start",
  };
  let lastEventSeq = -1;
  function renderEvents(evs) {
    const top = evs.length ? evs[evs.length - 1].seq : 0;
    if (top === lastEventSeq) return;
    lastEventSeq = top;
    const list = evs.slice(-200).reverse();
    $("#events-count").textContent = evs.length + " kept";
    $("#events").innerHTML = list.length ? list.map((e) => {
      let cls = e.kind;
      if (e.kind === "member_state") cls = e.to === "up" ? "up" : e.to === "down" ? "down" : "state";
      const what = e.kind === "member_state" ? "<b>" + esc(e.member) + "</b> " + esc(e.from) + " → " + esc(e.to) : e.member ? "<b>" + esc(e.member) + "</b>" : "";
      const grp = e.group ? '<span class="muted"> ' + esc(short(e.group)) + "</span>" : "";
      return '<li data-kind="' + esc(e.kind) + '"><time class="mono">' + esc(fmtTime(e.time)) + '</time><span class="kind k-' + esc(cls) + '">' + esc(KIND_TEXT[e.kind] || e.kind) + "</span>" +
        '<span class="what">' + what + grp + (e.message ? ' <span class="muted">— ' + esc(e.message) + "</span>" : "") + "</span></li>";
    }).join("") : '<li class="muted">No events yet.</li>';
  }

  // ---- live stream -------------------------------------------------------
  function setConn(s, text) {
    const el = $("#conn");
    el.dataset.state = s;
    $("#conn-text").textContent = text;
  }
  function connect() {
    const es = new EventSource("v1/stream");
    es.addEventListener("open", () => setConn("live", "live"));
    es.addEventListener("snapshot", (e) => {
      state.snap = JSON.parse(e.data);
      setConn("live", "live");
      render();
    });
    es.addEventListener("history", (e) => {
      state.history = JSON.parse(e.data);
      if (state.snap) for (const g of state.snap.groups) renderCharts(groupSection(g), g);
    });
    es.addEventListener("error", () => setConn("reconnecting", "reconnecting…"));
  }
  connect();
})();
