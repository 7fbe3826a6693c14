// What the site does with htmx answers that are not a success (4xx, 5xx, no answer).
//
// Such an answer never replaces the page. Its message shows in place: in the element
// named by data-error-target on the requesting element or an ancestor, else in the
// request's own target (search results, a suggestion list, a form's error area).
// A fragment from the site (<p class="error-message">) is shown as it is; of a whole
// page (the 503, 404 or 405 page) only its message is kept; a page without one (a
// traceback with DEBUG on) becomes a short sentence with the status. A request that
// swaps a part of a page (hx-select="main", the market) gets that part of the error
// page. A form with data-reset-on-success is cleared only after a 2xx answer, so a
// refused message stays in its box. On an element with data-stop-on="403 404", those
// statuses stop its polling (a chat left in another tab). A request from inside an
// element with data-reveal-result brings the first message of what it swapped in into
// view when that message is out of view (see the end). A wait before trying again
// (data-retry-seconds, a rate limit's answer) counts down to "now".
(function () {
  "use strict";
  if (window.sitePagesReady) return;
  window.sitePagesReady = true;

  function errorTarget(elt, fallback) {
    var holder = elt && elt.closest ? elt.closest("[data-error-target]") : null;
    var named = holder ? document.querySelector(holder.dataset.errorTarget) : null;
    return named || fallback;
  }

  function isWholePage(text) {
    return /<!doctype|<html[\s>]/i.test(text.slice(0, 512));
  }

  function sentenceFor(status) {
    if (status === 0) return "The site cannot be reached. Check your connection and try again.";
    if (status === 404) return "This is gone (deleted or never there). Reload the page.";
    if (status === 403) return "You may not do this here any more. Reload the page.";
    if (status >= 500) return "The site could not answer (error " + status + "). Try again in a moment.";
    return "That did not work (error " + status + "). Reload the page and try again.";
  }

  function paragraph(text) {
    var p = document.createElement("p");
    p.className = "error-message";
    p.setAttribute("role", "alert");
    p.textContent = text;
    return p.outerHTML;
  }

  // The message of a page: what its main part says went wrong.
  function pageMessage(doc) {
    var found = doc.querySelector(
      "main [role=alert], main .message.error, main .error-message, main .notice p, main p"
    );
    return found ? found.textContent.replace(/\s+/g, " ").trim() : "";
  }

  function messageHtml(xhr) {
    var text = xhr.responseText || "";
    if (!text.trim()) return paragraph(sentenceFor(xhr.status));
    if (!isWholePage(text)) return text;
    var doc = new DOMParser().parseFromString(text, "text/html");
    return paragraph(pageMessage(doc) || sentenceFor(xhr.status));
  }

  function stopsOn(elt, status) {
    var holder = elt && elt.closest ? elt.closest("[data-stop-on]") : null;
    return holder && holder.dataset.stopOn.split(/\s+/).indexOf(String(status)) >= 0 ? holder : null;
  }

  document.addEventListener("htmx:beforeSwap", function (event) {
    var detail = event.detail;
    var xhr = detail.xhr;
    if (xhr.status < 400) return;
    // detail.elt is the swap's target here; the requesting element is the config's.
    var elt = (detail.requestConfig && detail.requestConfig.elt) || event.target;
    detail.isError = true;  // never a success: forms keep what was typed
    detail.shouldSwap = true;
    var select = elt.closest ? elt.closest("[hx-select]") : null;
    if (select && isWholePage(xhr.responseText || "")) {
      var doc = new DOMParser().parseFromString(xhr.responseText, "text/html");
      if (doc.querySelector(select.getAttribute("hx-select"))) return;  // swapped as asked
    }
    detail.target = errorTarget(elt, detail.target);
    detail.serverResponse = messageHtml(xhr);
    detail.selectOverride = "unset";
    detail.swapOverride = "innerHTML";
    var stopped = stopsOn(elt, xhr.status);
    if (stopped) stopped.remove();
  });

  // No answer at all (the server is down, the network gone).
  document.addEventListener("htmx:sendError", function (event) {
    var elt = event.detail.elt;
    var target = errorTarget(elt, event.detail.target);
    if (target) target.innerHTML = paragraph(sentenceFor(0));
  });

  document.addEventListener("htmx:afterRequest", function (event) {
    var detail = event.detail;
    var status = detail.xhr ? detail.xhr.status : 0;
    if (status < 200 || status >= 300) return;
    var elt = detail.elt;
    if (elt.matches("form[data-reset-on-success]")) {
      elt.reset();
      var errors = elt.querySelector(".form-errors");
      if (errors) errors.innerHTML = "";
    }
    // A success clears the message an earlier failure left in a separate place.
    var target = errorTarget(elt, null);
    if (target && target !== detail.target) target.innerHTML = "";
  });

  // The market's answer is its whole main part, the purchase's message at the top: tapped
  // low on a long page, the message lands above the view and nothing seems to happen. A
  // message already in view stays where it is. Under a bar that sticks to the top is out
  // of view too.
  var MESSAGE = "[role=status], [role=alert]";

  document.addEventListener("htmx:afterSettle", function (event) {
    var config = event.detail.requestConfig;
    var elt = config && config.elt;
    if (!elt || !elt.closest || !elt.closest("[data-reveal-result]")) return;
    var swapped = event.target;
    var message = swapped.matches(MESSAGE) ? swapped : swapped.querySelector(MESSAGE);
    if (!message) return;
    var bar = document.querySelector(".topbar");
    var top = bar && getComputedStyle(bar).position === "sticky" ? bar.getBoundingClientRect().bottom : 0;
    var box = message.getBoundingClientRect();
    if (box.top >= top && box.bottom <= window.innerHeight) return;
    window.scrollBy(0, box.top - top - 12);
  });

  // Each wait counts from when it was first seen; the timer stops when none is left.
  var timer = null;

  function countDown() {
    var waiting = 0;
    document.querySelectorAll("[data-retry-seconds]").forEach(function (wait) {
      if (!wait.dataset.retryAt) {
        wait.dataset.retryAt = Date.now() + 1000 * Number(wait.dataset.retrySeconds);
      }
      var left = Math.ceil((Number(wait.dataset.retryAt) - Date.now()) / 1000);
      if (left > 0) {
        waiting += 1;
        wait.textContent = "in " + left + (left === 1 ? " second" : " seconds");
      } else {
        wait.textContent = "now";
        wait.removeAttribute("data-retry-seconds");
      }
    });
    if (!waiting && timer) {
      clearInterval(timer);
      timer = null;
    }
  }

  function startCountDown() {
    if (!document.querySelector("[data-retry-seconds]")) return;
    countDown();  // stamps the new waits now, not a second late
    if (!timer) timer = setInterval(countDown, 1000);
  }

  startCountDown();
  document.addEventListener("htmx:afterSettle", startCountDown);
})();
