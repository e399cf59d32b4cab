// greenloop dashboard: live updates over Server-Sent Events. Everything that comes from a run
// is inserted as text (textContent); HTML comes only from the server, which escapes it.
(function () {
  "use strict";
  var body = document.body;
  var main = document.getElementById("main");
  var status = document.getElementById("live-status");
  var toast = document.getElementById("toast");
  var runStream = body.getAttribute("data-stream");

  function withFragment(url) {
    return url + (url.indexOf("?") >= 0 ? "&" : "?") + "fragment=1";
  }

  function refresh() {
    var open = {};
    main.querySelectorAll("details[id]").forEach(function (d) { open[d.id] = d.open; });
    return fetch(withFragment(location.pathname + location.search), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) { return; }
        main.innerHTML = html;
        main.querySelectorAll("details[id]").forEach(function (d) {
          if (d.id in open) { d.open = open[d.id]; }
        });
      });
  }

  function say(text) {
    toast.textContent = text;
    toast.className = "shown";
    setTimeout(function () { toast.className = ""; }, 2500);
  }

  if (runStream) {
    var output = document.getElementById("output");
    var progress = document.getElementById("progress");
    var runEvents = new EventSource(runStream);
    runEvents.addEventListener("line", function (e) {
      var stick = output.scrollTop + output.clientHeight >= output.scrollHeight - 4;
      output.appendChild(document.createTextNode(JSON.parse(e.data) + "\n"));
      if (stick) { output.scrollTop = output.scrollHeight; }
    });
    runEvents.addEventListener("progress", function (e) {
      var p = JSON.parse(e.data);
      progress.textContent = p.passed + " passed, " + p.failed + " failed, " + p.skipped + " skipped so far";
    });
    runEvents.addEventListener("end", function (e) {
      var d = JSON.parse(e.data);
      runEvents.close();
      runStream = null;
      body.className = d.outcome;
      body.removeAttribute("data-stream");
      refresh().then(function () { say("run finished: " + d.outcome); });
    });
  }

  var events = new EventSource("/events");
  events.onopen = function () { status.className = "on"; };
  events.onerror = function () { status.className = "off"; };
  events.addEventListener("change", function (e) {
    var d = JSON.parse(e.data);
    if (runStream) { return; }  // a run page in progress follows its own stream
    refresh().then(function () { say("updated: " + d.kinds.join(", ")); });
  });
})();
