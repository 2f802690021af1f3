// taoflow ui: live updates over Server-Sent Events, log following, and
// a confirmation before a cancel. Served from the binary (no CDN); the pages
// work without it (they then just don't update by themselves).
"use strict";
(function () {
  var body = document.body;
  var src = body.getAttribute("data-events");
  var log = document.getElementById("log");
  if (src && window.EventSource) {
    var es = new EventSource(src);
    // A fragment of the page changed: replace it, nothing else.
    es.addEventListener("fragment", function (e) {
      var f = JSON.parse(e.data);
      var el = document.getElementById(f.id);
      if (el) { el.innerHTML = f.html; }
      body.setAttribute("data-updates", String(Number(body.getAttribute("data-updates") || 0) + 1));
    });
    es.addEventListener("log", function (e) {
      if (!log) { return; }
      log.appendChild(document.createTextNode(JSON.parse(e.data)));
      var follow = document.getElementById("follow");
      if (!follow || follow.checked) { log.scrollTop = log.scrollHeight; window.scrollTo(0, document.body.scrollHeight); }
    });
    es.addEventListener("state", function (e) {
      var st = document.getElementById("logstate");
      var s = JSON.parse(e.data);
      if (st) { st.innerHTML = ""; var sp = document.createElement("span"); sp.className = "st st-" + s; sp.textContent = s; st.appendChild(sp); }
    });
  }
  document.addEventListener("submit", function (e) {
    var f = e.target;
    if (f.classList && f.classList.contains("cancel") && !window.confirm("Cancel this run? Its running nodes stop and its instances are torn down.")) {
      e.preventDefault();
    }
  });
})();
