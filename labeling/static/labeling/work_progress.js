// A page of background work still under way (a job, a calibration run, release builds): ask the
// work's JSON every data-poll-ms and update its status and progress in place; once nothing it
// shows is pending or running, load the page once, which then shows the result or the error.
// A failed request is tried again, less often.
//
// The element with data-poll-url also gives data-poll-ms and data-poll-path: where the work
// objects are in the JSON, dotted, "*" standing for every element of a list ("" is the body
// itself; "run"; "builds.*"; "results.*.build"). Each object (id, status, worker_lost,
// attempts; progress_done, progress_total or percent, and message where it has them) updates
// every element [data-work-id="<id>"] and, inside it, its [data-work-field] elements: status,
// lost (shown while worker_lost), attempts (shown from 2), message, progress (a <progress> of
// 100), percent, and count (" (done of total unit)", the unit in data-unit).
(function () {
  "use strict";
  const live = document.querySelector("[data-poll-url]");
  if (!live) return;
  const every = Number(live.dataset.pollMs) || 2000;
  const path = (live.dataset.pollPath || "").split(".").filter(Boolean);
  const UNDER_WAY = ["pending", "running"];

  function works(value, steps) {
    if (value === null || value === undefined) return [];
    if (!steps.length) return [value];
    const rest = steps.slice(1);
    if (steps[0] === "*") {
      return Array.isArray(value) ? value.flatMap((item) => works(item, rest)) : [];
    }
    return works(value[steps[0]], rest);
  }

  function fields(box, name, apply) {
    box.querySelectorAll('[data-work-field="' + name + '"]').forEach(apply);
  }

  function show(work) {
    const done = work.progress_done || 0;
    const total = work.progress_total || 0;
    const percent =
      typeof work.percent === "number" ? work.percent : total ? Math.round((100 * done) / total) : 0;
    document.querySelectorAll('[data-work-id="' + work.id + '"]').forEach(function (box) {
      fields(box, "status", (el) => { el.textContent = work.status; });
      fields(box, "lost", (el) => { el.hidden = !work.worker_lost; });
      fields(box, "attempts", (el) => {
        el.hidden = !(work.attempts > 1);
        el.textContent = "attempt " + work.attempts;
      });
      fields(box, "message", (el) => { el.textContent = work.message ? " · " + work.message : ""; });
      fields(box, "progress", (el) => {
        el.value = percent;
        el.textContent = percent + "%";
      });
      fields(box, "percent", (el) => { el.textContent = percent + "%"; });
      fields(box, "count", (el) => {
        const unit = el.dataset.unit ? " " + el.dataset.unit : "";
        el.textContent = total ? " (" + done + " of " + total + unit + ")" : "";
      });
    });
  }

  async function poll() {
    let body = null;
    try {
      const response = await fetch(live.dataset.pollUrl, {
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      });
      if (response.ok) body = await response.json();
    } catch (error) {
      body = null;
    }
    if (!body) {
      window.setTimeout(poll, every * 2);
      return;
    }
    const found = works(body, path);
    if (!found.some((work) => UNDER_WAY.includes(work.status))) {
      window.location.reload();
      return;
    }
    found.forEach(show);
    window.setTimeout(poll, every);
  }

  window.setTimeout(poll, every);
})();
