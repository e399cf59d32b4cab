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

  function fragment() {
    return fetch(withFragment(location.pathname + location.search), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; });
  }

  function swap(html) {
    var open = {};
    main.querySelectorAll("details[id]").forEach(function (d) { open[d.id] = d.open; });
    main.innerHTML = html;
    main.querySelectorAll("details[id]").forEach(function (d) {
      if (d.id in open) { d.open = open[d.id]; }
    });
  }

  function refresh() {
    return fragment().then(function (html) { if (html !== null) { swap(html); } });
  }

  // The outcome a run page's HTML shows (its #outcome badge), or null while the run goes on.
  function outcomeOf(html) {
    var t = document.createElement("template");
    t.innerHTML = html;
    var badge = t.content.querySelector("#outcome[data-outcome]");
    return badge ? badge.getAttribute("data-outcome") : null;
  }

  function say(text) {
    toast.textContent = text;
    toast.className = "shown";
    setTimeout(function () { toast.className = ""; }, 2500);
  }

  var MARK = { green: "\u2713", red: "\u2717", broken: "!" };
  var runEvents = null;
  var finished = false;

  // A finished run's page: the result file can land a moment after the run is recorded, so the
  // page is swapped in only once it shows the outcome (retried a few times); the badge and the
  // page's colour change at once, whatever the fetch does.
  function settle(outcome, tries) {
    fragment().then(function (html) {
      if (html !== null && outcomeOf(html) !== null) {
        swap(html);
        say("run finished: " + outcome);
      } else if (tries < 40) {
        setTimeout(function () { settle(outcome, tries + 1); }, 250);
      }
    }, function () {
      if (tries < 40) { setTimeout(function () { settle(outcome, tries + 1); }, 250); }
    });
  }

  function finish(outcome) {
    if (finished) { return; }
    finished = true;
    if (runEvents) { runEvents.close(); }
    runStream = null;
    body.removeAttribute("data-stream");
    body.className = outcome;
    var badge = document.getElementById("outcome");
    if (badge) {
      badge.className = "badge " + outcome;
      badge.setAttribute("data-outcome", outcome);
      badge.textContent = (MARK[outcome] || "?") + " " + outcome;
    }
    settle(outcome, 0);
  }

  if (runStream) {
    var output = document.getElementById("output");
    var progress = document.getElementById("progress");
    runEvents = new EventSource(runStream);
    runEvents.addEventListener("line", function (e) {
      var stick = output.scrollTop + output.clientHeight >= output.scrollHeight - 4;
      output.appendChild(document.createTextNode(JSON.parse(e.data) + "\n"));
      if (stick) { output.scrollTop = output.scrollHeight; }
    });
    runEvents.addEventListener("progress", function (e) {
      var p = JSON.parse(e.data);
      progress.textContent = p.passed + " passed, " + p.failed + " failed, " + p.skipped + " skipped so far";
    });
    runEvents.addEventListener("end", function (e) { finish(JSON.parse(e.data).outcome); });
  }

  var events = new EventSource("/events");
  events.onopen = function () { status.className = "on"; };
  events.onerror = function () { status.className = "off"; };
  events.addEventListener("change", function (e) {
    var d = JSON.parse(e.data);
    if (runStream) {
      // A run page in progress follows its own stream; when the runs moved, it also asks its
      // page whether the run has ended, so a stream that missed its end cannot leave it running.
      if (d.kinds.indexOf("runs") >= 0 || d.kinds.indexOf("live") >= 0) {
        fragment().then(function (html) {
          var outcome = html === null ? null : outcomeOf(html);
          if (outcome !== null) { finish(outcome); }
        });
      }
      return;
    }
    refresh().then(function () { say("updated: " + d.kinds.join(", ")); });
  });
})();
