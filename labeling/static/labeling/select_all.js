// A "select all" checkbox (data-select-all="NAME") checks or clears every checkbox named NAME
// on the page. Without JavaScript it stays hidden and each row is checked by hand.
(function () {
  "use strict";
  document.querySelectorAll("input[data-select-all]").forEach(function (all) {
    var name = all.getAttribute("data-select-all");
    var boxes = function () {
      return Array.prototype.slice.call(
        document.querySelectorAll('input[type="checkbox"][name="' + name + '"]')
      );
    };
    var sync = function () {
      var list = boxes();
      var checked = list.filter(function (b) { return b.checked; }).length;
      all.checked = list.length > 0 && checked === list.length;
      all.indeterminate = checked > 0 && checked < list.length;
    };
    all.hidden = false;
    all.addEventListener("change", function () {
      boxes().forEach(function (b) { b.checked = all.checked; });
    });
    boxes().forEach(function (b) { b.addEventListener("change", sync); });
    sync();
  });
})();
