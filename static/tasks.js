// videogen console: pages that follow their running videos (the task page, the Tasks list, the
// dashboard's Recent videos). Without this file each page is complete as served; with it, every element
// carrying data-task-id and data-task-status="queued" or "in_progress" is kept current:
//
//   - GET /console/tasks/{id}/status (JSON, the signed-in account's tasks only) is polled as often as its
//     openai-poll-after-ms header says, the header GET /v1/videos/{id} sends: about every second for a
//     new task, backing off as it ages. A failed request is retried later and later (up to a minute).
//   - Each answer updates the element's data-task-status and its [data-task-field] descendants: "status"
//     and "billing" (their .badge, or their text), "progress" (a <progress> value, or "NN%"), "amount".
//   - When the task ends (completed or failed) polling stops and the page is fetched again: the element
//     is replaced by its fresh copy (same data-task-id), which shows the player, the refund, the log;
//     so is every element with an id and data-follows-tasks (the dashboard's balances), so that nothing
//     on the page lags the task's end.
//   - A 404 (not this account's task) or a signed-out session stops polling and shows "Reload" again.
//
// Elements with class live-nojs are hidden while this runs, and live-js ones shown.
(function () {
  "use strict";
  if (!window.fetch || !window.DOMParser || location.pathname.indexOf("/console") !== 0) return;

  var RUNNING = { queued: true, in_progress: true };
  var MIN_WAIT = 1000, MAX_WAIT = 60000;
  var polls = {}; // task id → {errors: n}

  function each(root, sel, fn) { Array.prototype.forEach.call(root.querySelectorAll(sel), fn); }
  function byTask(root, id) {
    return Array.prototype.filter.call(root.querySelectorAll("[data-task-id]"), function (el) {
      return el.getAttribute("data-task-id") === id;
    });
  }

  function hints(following) {
    each(document, ".live-nojs", function (el) { el.hidden = following; });
    each(document, ".live-js", function (el) { el.hidden = !following; });
  }

  // setState shows a state word in a field: on its badge (class and text) when it has one.
  function setState(el, word) {
    var badge = el.classList.contains("badge") ? el : el.querySelector(".badge");
    if (badge) {
      badge.className = "badge " + word;
      badge.textContent = word;
    } else {
      el.textContent = word;
    }
  }

  function show(id, s) {
    // A Cancel form is offered only while a cancel can succeed (data-cancel-while: the statuses).
    each(document, "[data-cancel-for]", function (form) {
      if (form.getAttribute("data-cancel-for") !== id) return;
      var while_ = " " + (form.getAttribute("data-cancel-while") || "") + " ";
      form.hidden = while_.indexOf(" " + s.status + " ") < 0;
    });
    byTask(document, id).forEach(function (task) {
      task.setAttribute("data-task-status", s.status);
      each(task, "[data-task-field]", function (el) {
        switch (el.getAttribute("data-task-field")) {
          case "status": setState(el, s.status); break;
          case "billing": setState(el, s.billing_state); break;
          case "amount":
            // A cell that shows the amount with its billing state keeps its amount and updates the state.
            if (el.querySelector(".badge")) setState(el, s.billing_state); else el.textContent = s.amount;
            break;
          case "progress":
            if (el.tagName === "PROGRESS") el.value = s.progress; else el.textContent = s.progress + "%";
            el.hidden = s.done;
            break;
        }
      });
    });
  }

  // refresh fetches this page again and puts the fresh copy of the finished task's elements in place.
  // A task the fresh page no longer lists (a filtered list) keeps the fields show() gave it.
  function refresh(id) {
    fetch(location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) return;
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = byTask(doc, id);
        byTask(document, id).forEach(function (el, i) {
          if (fresh[i] && fresh[i].tagName === el.tagName) el.replaceWith(document.importNode(fresh[i], true));
        });
        each(document, "[data-follows-tasks][id]", function (el) {
          var now = doc.getElementById(el.id);
          if (now && now.tagName === el.tagName) el.replaceWith(document.importNode(now, true));
        });
      })
      .catch(function () { /* the fields are current; the player shows on the next visit */ });
  }

  function wait(id, ms) {
    setTimeout(function () {
      if (!document.hidden) return poll(id);
      // A page nobody looks at does not poll; it catches up when shown again.
      document.addEventListener("visibilitychange", function again() {
        if (document.hidden) return;
        document.removeEventListener("visibilitychange", again);
        poll(id);
      });
    }, ms);
  }

  function stop(id) {
    delete polls[id];
    if (Object.keys(polls).length === 0) hints(false);
  }

  function poll(id) {
    fetch("/console/tasks/" + encodeURIComponent(id) + "/status", {
      credentials: "same-origin", cache: "no-store", headers: { Accept: "application/json" }
    }).then(function (r) {
      var json = (r.headers.get("Content-Type") || "").indexOf("application/json") === 0;
      if (r.status === 404 || r.redirected || (r.ok && !json)) return stop(id); // not ours, or signed out
      if (!r.ok) throw new Error("HTTP " + r.status);
      var after = parseInt(r.headers.get("openai-poll-after-ms"), 10);
      return r.json().then(function (s) {
        polls[id].errors = 0;
        show(id, s);
        if (s.done) {
          delete polls[id];
          refresh(id);
          return;
        }
        wait(id, Math.min(Math.max(after || MIN_WAIT, MIN_WAIT), MAX_WAIT));
      });
    }).catch(function () {
      if (!polls[id]) return;
      polls[id].errors++;
      wait(id, Math.min(MIN_WAIT * Math.pow(2, polls[id].errors), MAX_WAIT));
    });
  }

  each(document, "[data-task-id][data-task-status]", function (el) {
    var id = el.getAttribute("data-task-id");
    if (!RUNNING[el.getAttribute("data-task-status")] || polls[id]) return;
    polls[id] = { errors: 0 };
    wait(id, MIN_WAIT);
  });
  if (Object.keys(polls).length > 0) hints(true);
})();
