// Reload a calibration run's page while the run is pending or running (certlabel, vendored).
// The page sets data-refresh-ms on <body>'s #run-status element; nothing runs once it is absent.
(function () {
  "use strict";
  var status = document.getElementById("run-status");
  if (!status || !status.dataset.refreshMs) { return; }
  var ms = parseInt(status.dataset.refreshMs, 10);
  if (!(ms > 0)) { return; }
  window.setTimeout(function () { window.location.reload(); }, ms);
})();
