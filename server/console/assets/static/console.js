// The console's only script: live inbox rows, live task timelines, deadline
// countdowns. Pages work without it (a reload shows the same); it adds no secrets and
// reads only the console's own endpoints.
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

  function liveInbox(table) {
    var body = table.tBodies[0], status = document.getElementById("inbox-status"), last = body.innerHTML;
    function poll() {
      getJSON(table.getAttribute("data-live")).then(function (d) {
        // Not under the reader's focus: replacing the rows would lose it; next round.
        if (d.html !== last && !body.contains(document.activeElement)) {
          var before = {};
          body.querySelectorAll("tr[data-id]").forEach(function (tr) { before[tr.getAttribute("data-id")] = 1; });
          body.innerHTML = d.html;
          last = d.html;
          body.querySelectorAll("tr[data-id]").forEach(function (tr) {
            if (!before[tr.getAttribute("data-id")]) tr.classList.add("fresh");
          });
          if (status) status.textContent = d.count + " waiting" + (d.more ? " on this page" : "") + ".";
          tickCountdowns();
        }
      }).catch(function () {}).then(function () { setTimeout(poll, POLL_MS); });
    }
    setTimeout(poll, POLL_MS);
  }

  function liveTimeline(list) {
    var stateEl = document.getElementById("task-state"), cont = document.getElementById("continue");
    function poll() {
      var url = list.getAttribute("data-live") + "?after=" + encodeURIComponent(list.getAttribute("data-last"));
      getJSON(url).then(function (d) {
        if (d.html) list.insertAdjacentHTML("beforeend", d.html);
        list.setAttribute("data-last", String(d.last));
        if (stateEl && stateEl.textContent !== d.state) {
          stateEl.textContent = d.state;
          stateEl.className = "state state-" + d.state;
        }
        if (cont) cont.hidden = d.state !== "INPUT_REQUIRED";
        list.setAttribute("data-terminal", String(d.terminal));
        if (!d.terminal) setTimeout(poll, POLL_MS);
      }).catch(function () { setTimeout(poll, POLL_MS * 2); });
    }
    if (list.getAttribute("data-terminal") !== "true") setTimeout(poll, POLL_MS);
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
