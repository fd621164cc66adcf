// A running job's page (job_detail.html): ask for the job's JSON every data-poll-ms and update
// its status and progress in place; once the job is done or failed, load the page once, which
// then shows the result or the errors. A failed request is tried again, less often.
(function () {
  "use strict";
  const live = document.getElementById("job-live");
  if (!live || !live.dataset.pollUrl) return;
  const every = Number(live.dataset.pollMs) || 2000;
  const unit = live.dataset.unit;

  function show(job) {
    document.getElementById("job-state").textContent = job.status;
    document.getElementById("job-lost").hidden = !job.worker_lost;
    document.getElementById("job-message").textContent = job.message ? " · " + job.message : "";
    const bar = document.getElementById("job-progress");
    bar.value = job.percent;
    bar.textContent = job.percent + "%";
    document.getElementById("job-percent").textContent = job.percent + "%";
    document.getElementById("job-count").textContent = job.progress_total
      ? " (" + job.progress_done + " of " + job.progress_total + " " + unit + ")"
      : "";
  }

  async function poll() {
    let job = null;
    try {
      const response = await fetch(live.dataset.pollUrl, {
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      });
      if (response.ok) job = await response.json();
    } catch (error) {
      job = null;
    }
    if (!job) {
      window.setTimeout(poll, every * 2);
      return;
    }
    if (job.status === "done" || job.status === "failed") {
      window.location.reload();
      return;
    }
    show(job);
    window.setTimeout(poll, every);
  }

  window.setTimeout(poll, every);
})();
