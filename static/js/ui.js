// Small behaviours every page may use, kept out of inline handlers so the Content-Security-Policy
// can refuse inline script: [data-copy-from] copies the named input, select[data-autosubmit] submits
// its form on change.
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy-from]");
    if (!button) return;
    var input = document.getElementById(button.getAttribute("data-copy-from"));
    if (!input) return;
    input.select();
    if (navigator.clipboard) navigator.clipboard.writeText(input.value);
    button.textContent = "Copied";
  });
  document.addEventListener("change", function (event) {
    var select = event.target.closest("select[data-autosubmit]");
    if (select && select.form) select.form.submit();
  });
})();
