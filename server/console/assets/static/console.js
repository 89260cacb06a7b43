// The console's only script: live inbox rows, live task timelines (pushed by
// server-sent events, polled when the stream is unavailable), deadline countdowns.
// Pages work without it (a reload shows the same); it adds no secrets and reads only
// the console's own endpoints.
(function () {
  "use strict";
  var POLL_MS = 2000;

  function fmt(ms) {
    if (ms <= 0) return "passed";
    var s = Math.floor(ms / 1000), h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    s = s % 60;
    return (h ? h + "h " : "") + (h || m ? m + "m " : "") + s + "s left";
  }
  function tickCountdowns() {
    var now = Date.now();
    document.querySelectorAll("time.countdown").forEach(function (el) {
      var t = Date.parse(el.getAttribute("datetime"));
      if (!isNaN(t)) {
        el.textContent = fmt(t - now);
        el.setAttribute("title", el.getAttribute("datetime"));
      }
    });
  }

  function getJSON(url) {
    return fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" }, cache: "no-store" })
      .then(function (r) {
        if (r.status === 401 || r.redirected) { window.location.assign("/ui/signin?next=" + encodeURIComponent(location.pathname + location.search)); throw new Error("signed out"); }
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      });
  }

  // stream follows the page's server-sent events (url): onChange runs for each event
  // named name, onEnd (if given) for "end". A stream carries only sequence numbers,
  // never text to show: the page reads the change from its own endpoint, rendered and
  // escaped by the server. onState(true) while the stream is open, onState(false)
  // while it is not (refused, unsupported, reconnecting): the page polls meanwhile.
  function stream(url, name, onChange, onEnd, onState) {
    if (typeof EventSource !== "function") { onState(false); return null; }
    var es;
    try { es = new EventSource(url); } catch (e) { onState(false); return null; }
    es.addEventListener("open", function () { onState(true); onChange(); }); // what came while it was down
    es.addEventListener(name, function () { onChange(); });
    if (onEnd) es.addEventListener("end", function () { es.close(); onEnd(); });
    es.addEventListener("error", function () { onState(false); }); // EventSource retries unless refused (then CLOSED)
    return es;
  }

  // refresher runs load (a promise) for every call of the function it returns, one at a
  // time: calls during a load make one more load after it.
  function refresher(load) {
    var busy = false, again = false;
    function run() {
      if (busy) { again = true; return; }
      busy = true;
      load().catch(function () {}).then(function () {
        busy = false;
        if (again) { again = false; run(); }
      });
    }
    return run;
  }

  function liveInbox(table) {
    var body = table.tBodies[0], status = document.getElementById("inbox-status"), last = body.innerHTML;
    var pushed = false, deferred = false, timer = null;
    var refresh = refresher(function () {
      return getJSON(table.getAttribute("data-live")).then(function (d) {
        // Not under the reader's focus: replacing the rows would lose it; next round.
        deferred = d.html !== last && body.contains(document.activeElement);
        if (d.html !== last && !deferred) {
          var before = {};
          body.querySelectorAll("tr[data-id]").forEach(function (tr) { before[tr.getAttribute("data-id")] = 1; });
          body.innerHTML = d.html; // the server's html/template rendering, not the stream's
          last = d.html;
          body.querySelectorAll("tr[data-id]").forEach(function (tr) {
            if (!before[tr.getAttribute("data-id")]) tr.classList.add("fresh");
          });
          if (status) status.textContent = d.count + " waiting" + (d.more ? " on this page" : "") + ".";
          tickCountdowns();
        }
      });
    });
    // Polling: every 2 s without a stream; with one, only to retry a deferred update.
    function tick() {
      if (!pushed || deferred) refresh();
      timer = setTimeout(tick, POLL_MS);
    }
    stream("/ui/inbox/live", "inbox", refresh, null, function (open) { pushed = open; });
    timer = setTimeout(tick, POLL_MS);
  }

  function liveTimeline(list) {
    var stateEl = document.getElementById("task-state"), cont = document.getElementById("continue");
    var pushed = false, done = false, es = null;
    var refresh = refresher(function () {
      var url = list.getAttribute("data-live") + "?after=" + encodeURIComponent(list.getAttribute("data-last"));
      return getJSON(url).then(function (d) {
        if (d.html) list.insertAdjacentHTML("beforeend", d.html); // the server's rendering, not the stream's
        list.setAttribute("data-last", String(d.last));
        if (stateEl && stateEl.textContent !== d.state) {
          stateEl.textContent = d.state;
          stateEl.className = "state state-" + d.state;
        }
        if (cont) cont.hidden = d.state !== "INPUT_REQUIRED";
        list.setAttribute("data-terminal", String(d.terminal));
        if (d.terminal) { done = true; if (es) es.close(); }
      });
    });
    function tick() {
      if (done) return;
      if (!pushed) refresh();
      setTimeout(tick, POLL_MS);
    }
    if (list.getAttribute("data-terminal") === "true") return;
    var base = list.getAttribute("data-live").replace(/\/events$/, "/live");
    es = stream(base + "?after=" + encodeURIComponent(list.getAttribute("data-last")), "task", refresh, refresh,
      function (open) { pushed = open; });
    setTimeout(tick, POLL_MS);
  }

  document.addEventListener("DOMContentLoaded", function () {
    var inbox = document.getElementById("inbox");
    if (inbox) liveInbox(inbox);
    var tl = document.getElementById("timeline");
    if (tl) liveTimeline(tl);
    tickCountdowns();
    setInterval(tickCountdowns, 1000);
    var err = document.querySelector(".field-error[id], #page-error");
    var bad = document.querySelector('[aria-invalid="true"]');
    if (bad) bad.focus(); else if (err) document.getElementById("main").focus();
  });
})();
