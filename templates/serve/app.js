// hank serve: live updates. The server sends an event named `change` when a record of the
// project this page shows changes; the page's <main> is then fetched again and swapped in
// (no reload). Served from the same origin as the page (CSP: script-src 'self').
"use strict";
(function () {
  var live = document.body.getAttribute("data-live") || "*";
  var state = document.getElementById("live-state");
  var busy = false, again = false;
  function say(text) { if (state) { state.textContent = "live updates: " + text; } }
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(location.pathname + location.search, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.text(); })
      .then(function (text) {
        var doc = new DOMParser().parseFromString(text, "text/html");
        var fresh = doc.querySelector("main"), old = document.querySelector("main");
        if (fresh && old) { old.replaceWith(document.importNode(fresh, true)); }
        say("updated " + new Date().toLocaleTimeString());
      })
      .catch(function (e) { say("update failed (" + e.message + ")"); })
      .finally(function () { busy = false; if (again) { again = false; refresh(); } });
  }
  if (!window.EventSource) { say("not supported by this browser"); return; }
  var source = new EventSource("/events?watch=" + encodeURIComponent(live));
  source.addEventListener("open", function () { say("on"); });
  source.addEventListener("change", refresh);
  source.addEventListener("error", function () { say("reconnecting"); });
})();
