/* Keyboard review of a step's decisions (the keys are listed on the page).
 *
 *   j / ArrowDown   next row          k / ArrowUp   previous row
 *   a               keep (accept)     x             drop
 *   n               write a note      Esc / Enter   back from the note to the row
 *   s / Space       select the row for a bulk action
 *
 * "a" and "x" click the row's own Keep / Drop button, so the request is the one a mouse would send
 * (htmx swaps the row; without htmx the plain form posts). After a decision made from the
 * keyboard the focus moves on to the next row. Without this file every button still works.
 */
(function () {
  "use strict";

  var ROW = ".decision";
  var pending = null; // {id, advance}: the row whose override is on its way

  function rows() { return Array.prototype.slice.call(document.querySelectorAll(ROW)); }

  function currentRow() {
    var active = document.activeElement;
    return active && active.closest ? active.closest(ROW) : null;
  }

  function focusRow(row) {
    if (!row) return;
    row.focus({ preventScroll: true });
    row.scrollIntoView({ block: "nearest" });
  }

  function move(by) {
    var list = rows();
    if (!list.length) return;
    var here = currentRow();
    var index = here ? list.indexOf(here) + by : (by > 0 ? 0 : list.length - 1);
    focusRow(list[Math.max(0, Math.min(list.length - 1, index))]);
  }

  function typing(element) {
    if (!element || !element.tagName) return false;
    if (element.isContentEditable) return true;
    var tag = element.tagName;
    if (tag === "TEXTAREA" || tag === "SELECT") return true;
    if (tag === "INPUT") return ["checkbox", "radio", "button", "submit", "reset"].indexOf(element.type) < 0;
    return false;
  }

  function decide(row, outcome) {
    var button = row.querySelector('button[data-outcome="' + outcome + '"]');
    if (!button) return;
    pending = { id: row.id, advance: true };
    button.click();
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    var target = event.target;
    if (typing(target)) {
      var owner = target.closest && target.closest(ROW);
      if (owner && target.name === "note" && (event.key === "Escape" || event.key === "Enter")) {
        event.preventDefault(); // Enter in a note would submit "Keep": go back to the row instead
        focusRow(owner);
      }
      return;
    }
    if (!document.querySelector(ROW)) return;
    var row = currentRow();
    switch (event.key) {
      case "j": case "ArrowDown": event.preventDefault(); move(1); break;
      case "k": case "ArrowUp": event.preventDefault(); move(-1); break;
      case "a": if (row) { event.preventDefault(); decide(row, "keep"); } break;
      case "x": if (row) { event.preventDefault(); decide(row, "drop"); } break;
      case "n":
        if (row) { event.preventDefault(); var note = row.querySelector('input[name="note"]'); if (note) note.focus(); }
        break;
      case "s": case " ":
        if (row && (target === row || event.key === "s")) {
          event.preventDefault();
          var box = row.querySelector('input[name="ids"]');
          if (box) { box.checked = !box.checked; box.dispatchEvent(new Event("change", { bubbles: true })); }
        }
        break;
      default: return;
    }
  });

  // A Keep / Drop clicked with the mouse keeps the focus on its row once the row is swapped.
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button[data-outcome]");
    if (button && !pending) pending = { id: button.closest(ROW).id, advance: false };
  }, true);

  document.addEventListener("htmx:afterSettle", function () {
    if (!pending) return;
    var row = document.getElementById(pending.id);
    var advance = pending.advance;
    pending = null;
    if (!row) return;
    if (advance) {
      var list = rows();
      var next = list[list.indexOf(row) + 1];
      focusRow(next || row);
    } else {
      focusRow(row);
    }
  });

  // "Select all on this page" ticks the rows too, so what will be sent is what is seen.
  document.addEventListener("change", function (event) {
    if (event.target.name === "ids" && !event.target.checked) {
      var all = document.getElementById("select-page");
      if (all) all.checked = false; // the server would otherwise take the whole page
      return;
    }
    if (event.target.id !== "select-page") return;
    var checked = event.target.checked;
    Array.prototype.forEach.call(document.querySelectorAll('input[name="ids"]'), function (box) { box.checked = checked; });
  });

  // The sticky bulk bar sits right below the sticky top bar, whose height changes with the width
  // (its links wrap onto more rows), the role's links and the phone menu: the page's CSS reads the
  // measured heights from --topbar-h and --bulk-bar-h (with fallbacks per width when this file is absent).
  function measureBars() {
    var root = document.documentElement;
    var topbar = document.querySelector("header.topbar");
    var bulk = document.getElementById("bulk-form");
    if (topbar) root.style.setProperty("--topbar-h", topbar.getBoundingClientRect().height + "px");
    if (bulk) root.style.setProperty("--bulk-bar-h", bulk.getBoundingClientRect().height + "px");
  }
  measureBars();
  window.addEventListener("resize", measureBars);
  document.addEventListener("htmx:afterSettle", measureBars); // a new list brings a new bulk bar
  if (window.ResizeObserver) {
    var topbar = document.querySelector("header.topbar");
    if (topbar) new ResizeObserver(measureBars).observe(topbar); // the phone menu opens and closes
  }
})();
