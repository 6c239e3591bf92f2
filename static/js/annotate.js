/* The annotator's work page: keyboard, timers, live caption checks (the keys are listed on the page).
 *
 *   1-9              pick an answer (choices); on a candidate grid, rate the focused row (the first
 *                    unrated row when none has the focus) and move on to the next row
 *   Tab / Shift+Tab  next / previous rating row; arrow keys change the focused row's rating
 *   Enter            submit; after a training example, continue
 *   u / Backspace    undo: re-open the last answer to change it (within the edit window)
 *   i                show or hide the instructions
 *
 * Every action is a plain form (htmx swaps the task panel when it is there; the form posts without
 * it), so the keys only pick inputs and submit the page's own forms. The server is the authority on
 * every check; the length note here only helps while typing.
 *
 * The instructions drawer opens on the first visit of a campaign; on a phone it stays closed on
 * later visits (remembered in localStorage), so the item is not pushed below the fold. Key hints
 * are hidden on touch screens by annotate.css.
 */
(function () {
  "use strict";

  var PANEL = "#task-panel";
  var started = Date.now();
  var ticker = null;

  function panel() { return document.querySelector(PANEL); }
  function voteForm() { var p = panel(); return p && p.querySelector('[data-role="vote-form"]'); }

  function typing(element) {
    if (!element || !element.tagName) return false;
    if (element.isContentEditable) return true;
    var tag = element.tagName;
    if (tag === "TEXTAREA" || tag === "SELECT") return true;
    if (tag === "INPUT") return ["checkbox", "radio", "button", "submit", "reset", "range", "hidden"].indexOf(element.type) < 0;
    return false;
  }

  function submit(form) {
    if (!form) return;
    var button = form.querySelector('button[type="submit"]');
    if (button && button.disabled) return;
    // A key can come before htmx has processed a just-swapped form; make sure it has, or the
    // browser would post it natively and load a whole page.
    if (window.htmx && form.hasAttribute("hx-post")) window.htmx.process(form);
    if (form.requestSubmit) form.requestSubmit(); else if (button) button.click();
  }

  function clock(seconds) {
    var m = Math.floor(seconds / 60), s = Math.floor(seconds % 60);
    return m + ":" + (s < 10 ? "0" : "") + s;
  }

  // --- a new panel: restart the item timer, focus the first control, wire the caption checks ----

  function setUp() {
    started = Date.now();
    var p = panel();
    if (!p) return;
    if (ticker) clearInterval(ticker);
    var timer = p.querySelector('[data-role="task-timer"]');
    if (timer) ticker = setInterval(function () { timer.textContent = clock((Date.now() - started) / 1000); }, 1000);
    var text = p.querySelector('[data-role="caption-input"]');
    if (text) { checkCaption(text); text.focus(); text.setSelectionRange(text.value.length, text.value.length); return; }
    var go = p.querySelector('[data-role="continue"]');
    if (go) { go.focus(); return; }
    var slider = p.querySelector('[data-role="slider"]');
    if (slider) { slider.focus(); return; }
    var row = p.querySelector('[data-role="rating-row"]');
    if (row) focusRow(row);
  }

  // --- candidate grids: one radio group per caption and dimension --------------------------------

  function rows() { var p = panel(); return p ? Array.prototype.slice.call(p.querySelectorAll('[data-role="rating-row"]')) : []; }

  function focusRow(row) {
    var radio = row.querySelector("input:checked") || row.querySelector("input");
    if (radio) { radio.focus({ preventScroll: true }); row.scrollIntoView({ block: "nearest" }); }
  }

  function rateRow(key, active) {
    var list = rows();
    var row = active && active.closest ? active.closest('[data-role="rating-row"]') : null;
    if (!row) row = list.filter(function (r) { return !r.querySelector("input:checked"); })[0] || list[0];
    if (!row) return false;
    var radio = row.querySelector('input[data-key="' + key + '"]');
    if (!radio) return false;
    radio.checked = true;
    radio.dispatchEvent(new Event("change", { bubbles: true }));
    var next = list[list.indexOf(row) + 1];
    if (next) focusRow(next); else radio.focus();
    return true;
  }

  function pick(key) {
    var p = panel();
    if (!p) return false;
    var radio = p.querySelector('[data-role="choices"] input[data-key="' + key + '"]');
    if (!radio || radio.disabled) return false;
    radio.checked = true;
    radio.focus({ preventScroll: true });
    // Verify-rewrite: Fix goes on in the box for the corrected text.
    var fix = radio.value === "fix" && p.querySelector('[data-role="fix-input"]');
    if (fix) fix.focus();
    radio.dispatchEvent(new Event("change", { bubbles: true }));
    return true;
  }

  // --- the caption box: live length against the campaign's limits --------------------------------
  // No language guess here: a word list in the browser called German "English" (German shares "in",
  // "an", "man" with English). The server checks language, gibberish and markup on submit
  // (annotation/text_checks.py) and its message comes back with the typed text kept.

  function checkCaption(box) {
    var p = panel();
    if (!p) return;
    var text = box.value.split(/\s+/).filter(Boolean).join(" "); // what the server counts
    var min = parseInt(box.dataset.min, 10) || 0, max = parseInt(box.dataset.max, 10) || Infinity;
    var meter = p.querySelector('[data-role="length"]');
    var count = p.querySelector('[data-role="count"]');
    if (count) count.textContent = text.length;
    if (meter) {
      meter.classList.toggle("is-short", text.length > 0 && text.length < min);
      meter.classList.toggle("is-long", text.length > max);
      meter.classList.toggle("is-ok", text.length >= min && text.length <= max);
    }
  }

  document.addEventListener("input", function (event) {
    var target = event.target;
    if (target.matches && target.matches('[data-role="caption-input"]')) checkCaption(target);
    if (target.matches && target.matches('[data-role="fix-input"]') && target.value.trim()) {
      var fixRadio = panel() && panel().querySelector('[data-role="choices"] input[value="fix"]');
      if (fixRadio) fixRadio.checked = true;  // typing a correction is answering Fix
    }
    if (target.matches && target.matches('[data-role="slider"]')) {
      var out = panel() && panel().querySelector('[data-role="score"]');
      if (out) out.textContent = target.value;
    }
  });

  // --- the time taken, posted with the vote (capture: before htmx reads the form) ------------------

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var field = form.querySelector && form.querySelector('[data-role="seconds"]');
    if (field) field.value = ((Date.now() - started) / 1000).toFixed(1);
  }, true);

  // --- keys ------------------------------------------------------------------------------------------

  // Continue after a training answer: swap the next item in through htmx even when Enter comes
  // before htmx has processed the just-swapped link (a native click would load the whole page).
  function follow(link) {
    if (window.htmx) {
      window.htmx.ajax("GET", link.getAttribute("href"), {target: "#task-panel", swap: "outerHTML"});
    } else {
      window.location.href = link.getAttribute("href");
    }
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.defaultPrevented) return;
    var p = panel();
    if (!p) return;
    var target = event.target;
    if (typing(target)) {
      // In the caption box Enter submits (a caption is one sentence); Shift+Enter is a new line.
      if (event.key === "Enter" && !event.shiftKey && target.matches('[data-role="caption-input"], [data-role="fix-input"]')) {
        event.preventDefault();
        submit(voteForm());
      }
      return;
    }
    var tag = target && target.tagName;
    if (event.key === "Enter") {
      var go = p.querySelector('[data-role="continue"]');
      if (go && (target === go || !(tag === "A" || tag === "BUTTON" || tag === "SUMMARY"))) {
        event.preventDefault();
        follow(go);
        return;
      }
      if (tag === "A" || tag === "BUTTON" || tag === "SUMMARY") return; // its own action
      if (voteForm()) { event.preventDefault(); submit(voteForm()); }
      return;
    }
    if (/^[0-9]$/.test(event.key)) {
      if (pick(event.key) || rateRow(event.key, target)) event.preventDefault();
      return;
    }
    if (event.key === "u" || event.key === "U" || event.key === "Backspace") {
      var undo = p.querySelector('[data-role="undo-form"]');
      if (undo) { event.preventDefault(); submit(undo); }
      return;
    }
    if (event.key === "i") {
      var drawer = document.getElementById("instructions");
      if (drawer) { event.preventDefault(); drawer.open = !drawer.open; }
    }
  });

  // --- htmx: show refusals (4xx) in the panel, as the page without htmx does -----------------------

  document.addEventListener("htmx:beforeSwap", function (event) {
    var xhr = event.detail.xhr;
    if (xhr && xhr.status >= 400 && xhr.status < 500 && xhr.getResponseHeader("X-Annotate-Panel")) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });
  // After the settle, not the swap: htmx restores the attributes of elements whose id did not change
  // (the length meter's class among them) during the settle, which would undo what setUp sets.
  document.addEventListener("htmx:afterSettle", function () { if (panel()) setUp(); });

  // --- the instructions drawer: open on a first visit; on a phone, where it pushes the item below the
  // fold, closed on every later visit of the campaign (remembered in this browser's localStorage) ----

  var PHONE = "(max-width: 639px)";

  function rememberDrawer() {
    var drawer = document.getElementById("instructions");
    if (!drawer) return;
    var key = "captionlab:instructions-seen:" + (drawer.dataset.campaign || "");
    var seen = false;
    try {
      seen = window.localStorage.getItem(key) === "1";
      window.localStorage.setItem(key, "1");
    } catch (error) {
      return; // storage blocked: the server's choice stands
    }
    if (seen && window.matchMedia && window.matchMedia(PHONE).matches) drawer.open = false;
  }

  function start() { rememberDrawer(); setUp(); }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start); else start();
})();
