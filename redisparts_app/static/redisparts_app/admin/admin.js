// The Redis parts admin pages' script.
//
// Live pages: the element marked data-rp-live is fetched again every few seconds and
// swapped in place (htmx-style polling in a few lines, so the app needs no front-end
// dependency). It waits while the tab is hidden, while paused, and while the user has
// ticked a box or is typing inside it, so no choice or click is lost.
//
// Bulk actions: a "select all" box ticks every task box of its table.
//
// A section wider than a phone's screen scrolls sideways: it is made focusable, so it
// scrolls with the keyboard too.
(function () {
  "use strict";

  function reachScrolling() {
    document.querySelectorAll(".rp-section").forEach(function (section) {
      if (section.scrollWidth > section.clientWidth) section.tabIndex = 0;
      else section.removeAttribute("tabindex");
    });
  }
  reachScrolling();
  window.addEventListener("resize", reachScrolling);

  document.addEventListener("change", function (event) {
    var all = event.target.closest(".rp-select-all");
    if (!all) return;
    all.closest("table").querySelectorAll('input[name="ids"]').forEach(function (box) {
      box.checked = all.checked;
    });
  });

  var live = document.querySelector("[data-rp-live]");
  if (!live) return;
  var seconds = Number(live.getAttribute("data-rp-live")) || 5;
  var status = document.getElementById("rp-live-status");
  var toggle = document.getElementById("rp-live-toggle");
  var paused = false;
  var TYPING = 'input:not([type="checkbox"]):not([type="radio"]), select, textarea';

  function say(text) {
    if (status) status.textContent = text;
  }

  // Why the page must not change now ("" when it may); hidden tabs wait silently.
  function holdReason() {
    var focused = document.activeElement;
    if (paused) return "Paused.";
    if (live.querySelector("input:checked")) return "Paused while something is selected.";
    if (live.contains(focused) && focused.matches(TYPING)) {
      return "Paused while you type.";
    }
    return "";
  }

  function refresh() {
    var reason = holdReason();
    if (reason || document.hidden) {
      if (reason) say(reason);
      return later();
    }
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (response) {
        if (!response.ok) throw new Error("status " + response.status);
        return response.text();
      })
      .then(function (html) {
        var page = new DOMParser().parseFromString(html, "text/html");
        var fresh = page.querySelector("[data-rp-live]");
        if (!fresh) throw new Error("signed out");
        if (holdReason()) return;
        live.innerHTML = fresh.innerHTML;
        reachScrolling();
        say("Updated at " + new Date().toLocaleTimeString() + "; refreshes every " + seconds + " s.");
      })
      .catch(function () {
        say("Could not refresh (Redis or the site is away); trying again in " + seconds + " s.");
      })
      .then(later);
  }

  function later() {
    window.setTimeout(refresh, seconds * 1000);
  }

  if (toggle) {
    toggle.hidden = false;
    toggle.addEventListener("click", function () {
      paused = !paused;
      toggle.textContent = paused ? "Resume" : "Pause";
      toggle.setAttribute("aria-pressed", String(paused));
      say(paused ? "Paused." : "Refreshes every " + seconds + " s.");
    });
  }
  later();
})();
