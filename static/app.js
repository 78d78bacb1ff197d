// videogen console: small progressive enhancements. Every page works without this file.
(function () {
  "use strict";
  document.documentElement.classList.add("js"); // what only works with this file shows (button.copy)

  // Times are shown in the viewer's time zone: tell the server which one, once.
  try {
    var tz = Intl.DateTimeFormat().resolvedOptions().timeZone;
    if (tz && document.cookie.indexOf("vg_tz=" + encodeURIComponent(tz)) === -1) {
      document.cookie = "vg_tz=" + encodeURIComponent(tz) + "; path=/; max-age=31536000; samesite=lax";
      // Reload once so this page shows the zone too; never again (cookies may be blocked).
      if (document.body && document.body.dataset.tz === "UTC" && tz !== "UTC" && !sessionStorage.getItem("vg_tz_reloaded")) {
        sessionStorage.setItem("vg_tz_reloaded", "1");
        location.reload();
      }
    }
  } catch (e) { /* older browsers keep UTC */ }

  // Copy buttons: <button data-copy="element-id"> copies the element's text, <button data-copy-text="…">
  // the value itself (a shortened id whose whole value is in the button).
  document.addEventListener("click", function (ev) {
    var btn = ev.target.closest("[data-copy], [data-copy-text]");
    if (!btn || !navigator.clipboard) return;
    var value = btn.getAttribute("data-copy-text");
    if (value === null) {
      var el = document.getElementById(btn.getAttribute("data-copy"));
      if (!el) return;
      value = el.textContent.trim();
    }
    navigator.clipboard.writeText(value).then(function () {
      var label = btn.textContent;
      btn.textContent = "Copied";
      setTimeout(function () { btn.textContent = label; }, 1500);
    });
  });

  // Forms that destroy something ask first: <form data-confirm="...">.
  document.addEventListener("submit", function (ev) {
    var msg = ev.target.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) ev.preventDefault();
  });

  // Sections that follow new rows (a webhook endpoint's deliveries): <section id=… data-follow-every=ms>
  // is replaced by its copy in the page fetched again, every so many milliseconds while the tab is
  // visible, backing off to a minute after failures. Without this script the page says to reload.
  var followed = document.querySelector("section[id][data-follow-every]");
  if (followed && window.fetch && window.DOMParser) {
    var every = parseInt(followed.getAttribute("data-follow-every"), 10) || 5000, wait = every;
    Array.prototype.forEach.call(document.querySelectorAll(".live-nojs"), function (el) { el.hidden = true; });
    Array.prototype.forEach.call(document.querySelectorAll(".live-js"), function (el) { el.hidden = false; });
    var refresh = function () {
      if (document.hidden) { setTimeout(refresh, every); return; }
      fetch(location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.text(); })
        .then(function (html) {
          var fresh = new DOMParser().parseFromString(html, "text/html").getElementById(followed.id);
          // Not while a control in it has the focus (a Resend about to be pressed).
          if (fresh && fresh.innerHTML !== followed.innerHTML && !followed.contains(document.activeElement)) {
            followed.replaceWith(fresh);
            followed = fresh;
          }
          wait = every;
        })
        .catch(function () { wait = Math.min(wait * 2, 60000); })
        .then(function () { setTimeout(refresh, wait); });
    };
    setTimeout(refresh, wait);
  }

  // The new-video form: choosing a model loads its lengths, sizes and inputs; the button says the price
  // of the chosen length (each length's option carries it, so the page is right without this script).
  var modelForm = document.querySelector("[data-model-form]");
  if (modelForm) {
    var model = modelForm.querySelector("select[name=model]");
    if (model) model.addEventListener("change", function () { modelForm.submit(); });
  }
  var videoForm = document.querySelector("[data-video-form]");
  if (videoForm) {
    var seconds = videoForm.querySelector("select[name=seconds]");
    var button = videoForm.querySelector("[data-price-button]");
    if (seconds && button) {
      seconds.addEventListener("change", function () {
        var price = seconds.options[seconds.selectedIndex].getAttribute("data-price");
        if (price) button.textContent = "Make video · " + price;
      });
    }
  }
})();
