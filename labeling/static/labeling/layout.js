// Scrollable boxes reachable by keyboard: a table (or a .table-scroll box, a source, a <pre>)
// that is wider than the screen scrolls sideways inside its own box; such a box gets
// tabindex="0" so that keyboard users can focus it and scroll it with the arrow keys.
// Checked on load and whenever the window is resized.
(function () {
  "use strict";
  const SELECTOR = "main table, main .table-scroll, main pre, main .labelling-sources";

  function isFocusable(element) {
    return element.hasAttribute("tabindex") || element.querySelector("a[href], button, input, select, textarea, [tabindex]") !== null;
  }

  function markScrollable() {
    for (const box of document.querySelectorAll(SELECTOR)) {
      const scrolls = box.scrollWidth > box.clientWidth + 1 || box.scrollHeight > box.clientHeight + 1;
      if (box.dataset.scrollFocus === "added" && !scrolls) {
        box.removeAttribute("tabindex");
        delete box.dataset.scrollFocus;
      } else if (scrolls && !isFocusable(box)) {
        box.setAttribute("tabindex", "0");
        box.dataset.scrollFocus = "added";
      }
    }
  }

  let pending = null;
  window.addEventListener("resize", function () {
    if (pending !== null) window.cancelAnimationFrame(pending);
    pending = window.requestAnimationFrame(function () { pending = null; markScrollable(); });
  });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", markScrollable);
  } else {
    markScrollable();
  }
})();
