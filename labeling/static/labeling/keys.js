// The project pages' global keys (every page with the project navigation):
//   n  the next item: submits the navigation's "Next item" form (#nav-next-form), which reopens
//      the item held, else claims the next one (annotators);
//   q  the queue: the data-queue-url of #project-nav's links (the disagreement queue for
//      reviewers, else the annotator's "Label items" page).
// Never while typing in a field, with a dialog open, or with a modifier; and never a key a page
// script took already: page scripts listen on document, which the event reaches before window,
// and call preventDefault on the keys they use (the adjudication page's own n, a label's key).
(function () {
  "use strict";

  /** True while `target` takes typed text (text inputs, textareas, selects). */
  function typing(target) {
    if (!target || !target.closest) return false;
    if (target.closest("textarea, select, [contenteditable=true]")) return true;
    const input = target.closest("input");
    return Boolean(input && !["radio", "checkbox", "button", "submit", "reset"].includes(input.type));
  }
  window.CertlabelKeys = { typing: typing };

  window.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey || event.shiftKey) return;
    if (typing(event.target) || document.querySelector("dialog[open]")) return;
    if (event.key === "n") {
      const form = document.getElementById("nav-next-form");
      if (!form) return;
      event.preventDefault();
      form.requestSubmit();
    } else if (event.key === "q") {
      const links = document.querySelector("#project-nav [data-queue-url]");
      const url = links && links.dataset.queueUrl;
      if (!url) return;
      event.preventDefault();
      window.location.assign(url);
    }
  });
})();
