/* certlabel — the labelling page (annotate.html): a keyboard-first workbench built on
 * workbench.js. Plain JavaScript, no dependencies.
 *
 * Progressive: without this script the forms post as plain HTML forms. With it:
 * - every action has a key (see the help dialog, `?`), citing included: `]` / `[` select the
 *   next / previous sentence of the sources, Shift+arrows move the selection's end by a word,
 *   `/` finds text, `c` cites; the sentence closest to a claim is selected when it becomes
 *   active, so citing it is one key;
 * - a claim that becomes complete (label, and evidence or reason when its label needs them)
 *   hands over to the next unlabelled claim;
 * - the form is checked before it is sent (every problem at once, in the server's words), then
 *   sent with fetch (Accept: application/json); the answer carries the next item's workbench,
 *   which is swapped in place, its URL pushed to the history (back and reload open the URL);
 * - skip (a reason is required) and undo work the same way;
 * - the next item is reserved and rendered ahead while the annotator works (see "the next item,
 *   ready ahead" below), so a submit shows it at once and saves in the background.
 *
 * Offsets: chips carry the DOM's UTF-16 offsets (`unit` utf16) of what was selected, or the
 * stored code points (`unit` codepoint); the server converts and checks the quote.
 */
(function () {
  "use strict";

  const W = window.Workbench;
  const root = document.getElementById("workbench");
  if (!W || !root) return;

  const WORDS = JSON.parse((document.getElementById("problem-words") || {}).textContent || "{}");
  const RULES = JSON.parse((document.getElementById("workbench-rules") || {}).textContent || "{}");
  const REQUIRED = RULES.evidence_required || ["supported", "contradicted"];
  const UNAVAILABLE = RULES.evidence_unavailable || "evidence_unavailable";
  const status = document.getElementById("workbench-status");
  const help = W.helpDialog(document.getElementById("help-dialog"), {});
  W.guidelinePanel(document.getElementById("guideline-panel"));

  // Submit → next item interactive, in milliseconds (read by the benchmark and the tests).
  window.workbenchTimings = window.workbenchTimings || [];

  let page = null;
  let busy = false;
  let lastSelection = null;
  let popover = null;

  function say(message, isError) {
    if (!status) return;
    status.textContent = message || "";
    status.classList.toggle("error", Boolean(isError));
  }

  function words(value) {
    return value === "cannot_decide" ? "can't decide" : String(value).replace(/_/g, " ");
  }

  // --- the claims' state -----------------------------------------------------------------------

  function labelOf(scope) {
    const checked = scope.querySelector("input[type=radio][data-role=label]:checked");
    return checked ? checked.value : "";
  }

  function reasonOf(scope) {
    const select = scope.querySelector(".reason-field select");
    return select ? select.value : "";
  }

  function rowProblem(row) {
    const label = labelOf(row);
    if (!label) return { kind: "label_missing" };
    if (REQUIRED.includes(label) && !row.querySelector(".chip")) {
      return { kind: "evidence_missing", label: words(label) };
    }
    if (label === UNAVAILABLE && !reasonOf(row)) {
      return { kind: "reason_missing", label: words(label) };
    }
    return null;
  }

  function complete(row) {
    return rowProblem(row) === null;
  }

  function syncReason(scope) {
    const field = scope.querySelector(".reason-field");
    if (field) field.hidden = labelOf(scope) !== UNAVAILABLE;
  }

  /** Every problem the page can see, worded as the server words them. */
  function check() {
    const problems = [];
    page.rows.forEach((row, position) => {
      const found = rowProblem(row);
      if (!found) return;
      const where = row.dataset.claimLabel || "Claim " + (position + 1);
      const text = W.words(WORDS, found.kind, found);
      problems.push({ target: "claim", claim_position: position, where: where, text: text,
        message: where + " — " + text });
    });
    const answer = page.form.querySelector(".answer-row");
    if (answer) {
      const label = labelOf(answer);
      let text = null;
      if (!label) text = W.words(WORDS, "label_missing", {});
      else if (label === UNAVAILABLE && !reasonOf(answer)) {
        text = W.words(WORDS, "reason_missing", { label: words(label) });
      }
      if (text) {
        problems.push({ target: "answer", claim_position: null, where: "The answer", text: text,
          message: "The answer — " + text });
      }
    }
    return problems;
  }

  function showProblems(problems) {
    root.querySelectorAll("#form-errors, #answer-error, .claim-error").forEach((node) => node.remove());
    const count = W.renderProblems({
      problems: problems,
      summary: root.querySelector("#problem-summary"),
      scope: root,
      place: (problem) => {
        if (problem.target === "claim") return page.rows[problem.claim_position] || null;
        if (problem.target === "answer") return page.form.querySelector(".answer-row");
        if (problem.target === "comment") return root.querySelector("#comment-field");
        if (problem.target === "skip") return root.querySelector("#skip-form");
        return null;
      },
    });
    // The server's problems of the previous answer (rendered in the page) are replaced.
    root.querySelectorAll(".has-error").forEach((node) => node.classList.remove("has-error"));
    return count;
  }

  // --- active claim, highlights ----------------------------------------------------------------

  function refresh(hover) {
    if (!page) return;
    const emphasised = hover || page.active;
    page.highlighter.set(W.chips.spans(page.rows, emphasised));
    page.rows.forEach((row) => row.classList.toggle("complete", complete(row)));
  }

  function activate(row, options) {
    if (!row || !page) return;
    page.active = row;
    page.rows.forEach((r) => r.classList.toggle("active", r === row));
    const id = row.dataset.claimId;
    root.querySelectorAll("mark.claim").forEach((mark) => {
      mark.classList.toggle("active", (mark.dataset.claimIds || "").split(" ").includes(id));
    });
    const label = root.querySelector("#active-claim-label");
    if (label) label.textContent = row.dataset.claimLabel || "";
    if (options && options.scroll) row.scrollIntoView({ block: "nearest" });
    if (options && options.suggest && !labelOf(row) && !row.querySelector(".chip")) {
      const text = row.querySelector(".claim-text");
      if (text && page.caret.suggest(text.textContent)) note(row, "");
      else {
        // A sentence still shown for the claim before must not be cited for this one.
        page.caret.hide();
        note(row, NOTHING_SELECTED);
      }
    }
    refresh();
  }

  const NOTHING_SELECTED =
    "No sentence is selected for this claim (none of the sources matches it well): c cites " +
    "nothing and the claim stays active. Select the evidence first: ] next sentence, / find.";

  /** Show `text` in the claim row, under the claim (empty: remove it). The status line alone
   * is easy to miss while typing keys fast. */
  function note(row, text) {
    let shown = row.querySelector(".claim-note");
    if (!text) {
      if (shown) shown.remove();
      return;
    }
    if (!shown) {
      shown = document.createElement("p");
      shown.className = "claim-note notice";
      shown.setAttribute("role", "status");
      row.querySelector(".claim-text").after(shown);
    }
    shown.textContent = text;
  }

  function move(step) {
    if (!page.rows.length) return;
    const i = Math.max(0, page.rows.indexOf(page.active));
    const next = page.rows[Math.min(page.rows.length - 1, Math.max(0, i + step))];
    activate(next, { scroll: true, suggest: true });
  }

  /** After a claim became complete: the next claim without a label (after it, then from the
   * top), else the next incomplete one; none left: say what remains. */
  function advance() {
    const rows = page.rows;
    const from = rows.indexOf(page.active);
    const order = rows.slice(from + 1).concat(rows.slice(0, from + 1));
    const next = order.find((r) => !labelOf(r)) || order.find((r) => !complete(r));
    if (next && next !== page.active) {
      activate(next, { scroll: true, suggest: true });
      return;
    }
    refresh();
    const answer = page.form.querySelector(".answer-row");
    if (answer && !labelOf(answer)) say("All claims are labelled: label the answer (⇧1…), then s.");
    else say("Ready: press s to submit.");
  }

  // --- evidence --------------------------------------------------------------------------------

  function cite() {
    const row = page.active;
    if (!row) return say("Choose a claim first.", true);
    let picked = W.readSelection();
    if (picked && picked.error) {
      return say("Select text inside one source (not across sources or outside them).", true);
    }
    picked = picked || page.caret.picked() || lastSelection;
    if (!picked || !picked.quote) {
      note(row, NOTHING_SELECTED);
      return say("Select the evidence text in a source first: ] selects a sentence.", true);
    }
    note(row, "");
    const before = complete(row);
    W.chips.add(row, {
      source_version_id: picked.container.dataset.sourceVersionId,
      source_label: picked.container.dataset.sourceLabel,
      start: picked.start,
      end: picked.end,
      quote: picked.quote,
      unit: "utf16",
    });
    lastSelection = null;
    page.caret.hide();
    const selection = window.getSelection();
    if (selection) selection.removeAllRanges();
    say("Cited for " + (row.dataset.claimLabel || "the claim") + ".");
    refresh();
    if (!before && complete(row)) advance();
  }

  function removeChip(chip) {
    if (!chip) return;
    const row = chip.closest(".claim-row");
    W.chips.remove(chip);
    closePopover();
    say("Evidence removed from " + ((row && row.dataset.claimLabel) || "the claim") + ".");
    refresh();
  }

  function closePopover() {
    if (popover) popover.remove();
    popover = null;
  }

  function openPopover(spans, x, y) {
    closePopover();
    popover = document.createElement("div");
    popover.className = "evidence-popover";
    popover.setAttribute("role", "group");
    popover.setAttribute("aria-label", "Cited here");
    spans.forEach((span) => {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "secondary popover-remove";
      const quote = W.chips.of(span.row).find((s) => s.chip === span.chip);
      const text = quote ? quote.quote : "";
      button.textContent =
        "Remove “" + (text.length > 40 ? text.slice(0, 37) + "…" : text) + "” from " +
        (span.row.dataset.claimLabel || "the claim");
      button.addEventListener("click", () => removeChip(span.chip));
      popover.appendChild(button);
    });
    popover.style.left = window.scrollX + x + "px";
    popover.style.top = window.scrollY + y + 12 + "px";
    document.body.appendChild(popover);
    popover.querySelector("button").focus();
  }

  // --- sending ---------------------------------------------------------------------------------

  async function send(form, onProblems) {
    if (busy) return null;
    busy = true;
    root.classList.add("loading");
    try {
      const response = await fetch(form.action, {
        method: "POST",
        body: new FormData(form),
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      });
      if (response.status === 409 && form.id === "labelling-form") {
        // Saved elsewhere or a new policy version since this form was loaded: post the form
        // as a page, whose answer shows the current state beside the input kept.
        form.submit();
        return null;
      }
      let body = null;
      try {
        body = await response.json();
      } catch (error) {
        body = null;
      }
      if (!response.ok || !body) {
        onProblems(failure(body, response.status));
        return null;
      }
      return body;
    } catch (error) {
      onProblems(unreachable());
      return null;
    } finally {
      busy = false;
      root.classList.remove("loading");
    }
  }

  function failure(body, code) {
    const message = "The server could not save this (" + code + "): your input is kept; try again.";
    const general = { target: "general", where: "", text: message, message: message };
    return (body && body.problems) || [general];
  }

  function unreachable() {
    return [{ target: "general", where: "", text: "", message:
      "The server could not be reached: your input is kept; try again." }];
  }

  function arrive(body, startedAt) {
    if (body.next && body.next.html) {
      root.innerHTML = body.next.html;
      if (body.next.title) document.title = body.next.title;
      history.pushState({ assignment: body.next.assignment_id }, "", body.next.url);
      mount();
      say(body.message || "");
      requestAnimationFrame(() => {
        if (startedAt !== null) window.workbenchTimings.push(performance.now() - startedAt);
        root.dataset.ready = String(body.next.assignment_id);
      });
      window.scrollTo(0, 0);
      return;
    }
    if (body.url) window.location.assign(body.url);
  }

  // --- the next item, ready ahead --------------------------------------------------------------
  //
  // While the annotator labels an item, the next one is reserved for them and rendered
  // (#item-meta[data-ahead-url]: POST, answered {"reserve"}; each submit's answer brings the
  // reserve after the next one). A submit then shows the reserve at once and saves in the
  // background: #workbench[data-saving] names the item being saved meanwhile, and
  // #workbench[data-reserve] the reserve kept for the item shown. The server
  // confirms the reserve is the item it serves next; if not (skipped or run out meanwhile), the
  // item it serves is shown instead. A refused save brings the item back with its input and its
  // problems, and keeps the reserve (with anything typed into it) for after it. A reserve is
  // an ordinary lease: it is never used once it has run out.

  // A reserve whose lease ends within this many milliseconds is not shown (the server's
  // "next item" would release it and serve another).
  const RESERVE_MARGIN_MS = 5000;
  // {forId, id, url, title, fragment, expiresAt (performance.now() time), counted (its
  // progress already counts the item before it done)} or null.
  let reserve = null;
  let asking = null; // the assignment whose reserve is being asked for
  let saving = null; // the save of the item before the one shown (a Promise), or null

  /** Keep `value` as the reserve (null: none); #workbench[data-reserve] names it. */
  function setReserve(value) {
    reserve = value;
    if (value) root.dataset.reserve = value.id;
    else delete root.dataset.reserve;
  }

  function shownId() {
    const meta = root.querySelector("#item-meta");
    return meta ? meta.dataset.assignmentId : null;
  }

  function csrfToken() {
    const input = root.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  /** Keep the server's rendered reserve (parsed now, so showing it is a swap). */
  function keep(data) {
    if (!data || String(data.for) !== shownId()) return;
    const template = document.createElement("template");
    template.innerHTML = data.html;
    setReserve({
      forId: String(data.for),
      id: String(data.assignment_id),
      url: data.url,
      title: data.title,
      fragment: template.content,
      expiresAt: performance.now() + Number(data.lease_seconds || 0) * 1000,
    });
  }

  /** Ask for the reserve of the item shown, unless it is there or being asked for. */
  async function prefetch() {
    const meta = root.querySelector("#item-meta");
    const url = meta && meta.dataset.aheadUrl;
    const id = shownId();
    if (!url || saving || asking === id || (reserve && reserve.forId === id)) return;
    asking = id;
    try {
      const response = await fetch(url, {
        method: "POST",
        headers: { Accept: "application/json", "X-CSRFToken": csrfToken() },
        credentials: "same-origin",
      });
      if (response.ok) keep((await response.json()).reserve);
    } catch (error) {
      // No reserve: the submit's answer brings the next item, as without one.
    } finally {
      if (asking === id) asking = null;
    }
  }

  /** The reserve of the item shown, if its lease still runs. */
  function usableReserve() {
    if (!reserve || reserve.forId !== shownId()) return null;
    if (reserve.expiresAt - performance.now() < RESERVE_MARGIN_MS) {
      setReserve(null);
      return null;
    }
    return reserve;
  }

  function detach() {
    const nodes = document.createDocumentFragment();
    while (root.firstChild) nodes.appendChild(root.firstChild);
    return nodes;
  }

  /** The reserve was rendered while the item before it was held: that one is done now. */
  function countDone() {
    const done = root.querySelector("#progress-done");
    const left = root.querySelector("#progress-left");
    const bar = root.querySelector("#progress-bar");
    if (!done || !left) return;
    const count = parseInt(done.textContent, 10) + 1;
    if (Number.isNaN(count)) return;
    done.textContent = String(count);
    // "1000+" (a capped count) stays as it is.
    const remaining = left.textContent.trim();
    if (!remaining.endsWith("+")) {
      left.textContent = String(Math.max(0, (parseInt(remaining, 10) || 0) - 1));
    }
    if (bar) {
      bar.value = count;
      bar.textContent = count + " of " + bar.max;
    }
  }

  /** Submit the item shown and show its reserve at once; the save goes on in the background. */
  function submitAhead(ahead, startedAt) {
    const form = page.form;
    const data = new FormData(form);
    data.append("ahead", ahead.id);
    const before = { nodes: null, title: document.title, url: window.location.href, id: shownId() };
    setReserve(null);
    const request = fetch(form.action, {
      method: "POST",
      body: data,
      headers: { Accept: "application/json" },
      credentials: "same-origin",
    });
    // Set before the reserve is mounted: no reserve is asked for it while the save runs (the
    // item saved still holds its lease until then; the save's answer brings the reserve).
    root.dataset.saving = before.id;
    const pending = settle(request, before, ahead).finally(() => {
      if (saving === pending) saved();
    });
    saving = pending;
    before.nodes = detach();
    root.appendChild(ahead.fragment);
    document.title = ahead.title;
    history.pushState({ assignment: ahead.id }, "", ahead.url);
    if (!ahead.counted) countDone();
    mount();
    say("Saving the previous item…");
    requestAnimationFrame(() => window.workbenchTimings.push(performance.now() - startedAt));
    window.scrollTo(0, 0);
  }

  /** Navigate (`go`) once the background save is answered: the page it opens reads what was
   * saved. Meanwhile the item shown is no longer the page's (#workbench loses data-ready). */
  function afterSaving(go) {
    if (!saving) {
      go();
      return;
    }
    delete root.dataset.ready;
    root.classList.add("loading");
    saving.then(go);
  }

  /** The answer of a save made in the background (see submitAhead). */
  async function settle(request, before, ahead) {
    let response = null;
    let body = null;
    try {
      response = await request;
      body = await response.json();
    } catch (error) {
      body = null;
    }
    if (response && response.ok && body) {
      if (body.next && body.next.ahead && String(body.next.assignment_id) === ahead.id) {
        say(body.message || "");
        revisePrevious(body.next.previous_url);
        keep(body.reserve);
        return;
      }
      // The server serves another item next (the reserve was skipped or ran out meanwhile).
      saved();
      arrive(body, null);
      return;
    }
    // Not saved: the item comes back as it was, and the reserve (with any input) waits for it.
    const shown = detach();
    root.appendChild(before.nodes);
    document.title = before.title;
    history.replaceState({ assignment: before.id }, "", before.url);
    setReserve(Object.assign({}, ahead, { forId: before.id, fragment: shown, counted: true }));
    mount();
    if (response && response.status === 409) {
      // As send() does: post the form as a page, whose answer shows the current state.
      page.form.submit();
      return;
    }
    showProblems(response ? failure(body, response.status) : unreachable());
    say("Not saved: fix the problems listed.", true);
  }

  /** Point "Revise previous" (p) at `url`, adding the link when the item shown was rendered
   * without one (a reserve fetched before any submission could be revised); none (the vote just
   * saved closed its item, and no earlier one can be revised): remove it, as the server renders
   * the page. */
  function revisePrevious(url) {
    let link = root.querySelector("#revise-previous");
    if (!url) {
      if (link) link.remove();
      return;
    }
    if (!link) {
      const links = root.querySelector(".workbench-links");
      if (!links) return;
      link = document.createElement("a");
      link.id = "revise-previous";
      const key = document.createElement("kbd");
      key.textContent = "p";
      link.append("Revise previous ", key);
      links.prepend(link);
    }
    link.href = url;
  }

  function saved() {
    saving = null;
    delete root.dataset.saving;
  }

  /** Wait for a save made in the background; false when the item shown changed meanwhile. */
  async function settled() {
    if (!saving) return true;
    const mine = page;
    say("Saving the previous item…");
    await saving;
    return page === mine;
  }

  async function submit() {
    if (!page || page.editable === false) return;
    const startedAt = performance.now();
    if (!(await settled()) || !page) return;
    const problems = check();
    if (showProblems(problems)) {
      say(problems.length === 1 ? "1 problem to fix." : problems.length + " problems to fix.", true);
      return;
    }
    const spent = page.form.querySelector("input[name=time_spent_seconds]");
    if (spent) spent.value = ((performance.now() - page.loadedAt) / 1000).toFixed(1);
    const ahead = busy ? null : usableReserve();
    if (ahead) {
      submitAhead(ahead, startedAt);
      return;
    }
    say("Saving…");
    const body = await send(page.form, (found) => {
      showProblems(found);
      say("Not saved: fix the problems listed.", true);
    });
    if (body) arrive(body, startedAt);
  }

  async function skip() {
    if (!(await settled())) return;
    const form = root.querySelector("#skip-form");
    if (!form) return;
    const reason = form.querySelector("select[name=reason]");
    const problem = form.querySelector("#skip-problem");
    if (reason && !reason.value) {
      if (problem) {
        problem.textContent = "Choose why you skip this item.";
        problem.hidden = false;
      }
      reason.focus();
      return;
    }
    const startedAt = performance.now();
    const body = await send(form, (found) => {
      if (problem) {
        problem.textContent = found.map((p) => p.message).join(" ");
        problem.hidden = false;
      }
    });
    if (body) arrive(body, startedAt);
  }

  async function undo() {
    if (!(await settled())) return;
    const form = root.querySelector("#undo-skip-form");
    if (!form) return;
    const startedAt = performance.now();
    const body = await send(form, (found) => say(found.map((p) => p.message).join(" "), true));
    if (body) arrive(body, startedAt);
  }

  // --- mounting one item -----------------------------------------------------------------------

  function mount() {
    closePopover();
    if (page) page.caret.hide();
    lastSelection = null;
    const form = root.querySelector("form.labels-form");
    const meta = root.querySelector("#item-meta");
    if (!form) {
      page = null;
      return;
    }
    const sources = Array.from(root.querySelectorAll(".source-text[data-source-version-id]"));
    page = {
      form: form,
      rows: Array.from(form.querySelectorAll(".claim-row[data-claim-id]")),
      active: null,
      sources: sources,
      caret: W.Caret(sources),
      highlighter: W.Highlighter(sources),
      loadedAt: performance.now(),
      editable: !meta || meta.dataset.editable !== "false",
    };
    form.querySelectorAll(".label-group").forEach(syncReason);
    page.rows.forEach((row) => {
      row.addEventListener("focusin", () => {
        if (page.active !== row) activate(row);
      });
      row.addEventListener("mouseenter", () => refresh(row));
      row.addEventListener("mouseleave", () => refresh());
    });
    const first =
      page.rows.find((r) => r.classList.contains("has-error")) ||
      page.rows.find((r) => !complete(r)) ||
      page.rows[0];
    if (first) activate(first, { suggest: true });
    else refresh();
    if (meta) root.dataset.ready = meta.dataset.assignmentId;
    if (reserve && reserve.forId !== shownId()) setReserve(null);
    if (page.editable) prefetch();
  }

  // --- events (bound once; they act on the mounted item) ---------------------------------------

  root.addEventListener("click", (event) => {
    const target = event.target;
    const link = target.closest("a[href]");
    if (link && saving && !link.hash) {
      event.preventDefault();
      afterSaving(() => window.location.assign(link.href));
      return;
    }
    if (!page) return;
    const remove = target.closest(".chip-remove");
    if (remove) {
      event.preventDefault();
      removeChip(remove.closest(".chip"));
      return;
    }
    const citeButton = target.closest("button.cite, #cite");
    if (citeButton) {
      event.preventDefault();
      const row = citeButton.closest(".claim-row");
      if (row) activate(row);
      cite();
      return;
    }
    if (target.closest("#help-open")) {
      if (help) help.open();
      return;
    }
    const row = target.closest(".claim-row");
    if (row && page.rows.includes(row) && page.active !== row) activate(row);
    const mark = target.closest("mark.claim");
    if (mark) {
      const id = (mark.dataset.claimIds || "").split(" ")[0];
      activate(page.rows.find((r) => r.dataset.claimId === id), { scroll: true });
    }
    if (target.closest(".source-text")) {
      const selection = window.getSelection();
      if (selection && !selection.isCollapsed) return;
      const spans = page.highlighter.at(event.clientX, event.clientY);
      if (spans.length) openPopover(spans, event.clientX, event.clientY);
      else closePopover();
    }
  });

  // Keep the selection when a cite button is pressed with the mouse.
  root.addEventListener("mousedown", (event) => {
    if (event.target.closest("button.cite, #cite")) event.preventDefault();
  });

  root.addEventListener("change", (event) => {
    if (!page) return;
    const group = event.target.closest(".label-group");
    if (group) syncReason(group);
    const row = event.target.closest(".claim-row");
    if (row && event.target.matches("input[type=radio][data-role=label]")) {
      if (page.active !== row) activate(row);
      if (labelOf(row) === UNAVAILABLE && !reasonOf(row)) {
        const select = row.querySelector(".reason-field select");
        if (select) select.focus();
        refresh();
        return;
      }
      if (complete(row)) advance();
      else {
        refresh();
        const found = rowProblem(row);
        if (found) say(row.dataset.claimLabel + " — " + W.words(WORDS, found.kind, found));
      }
      return;
    }
    refresh();
  });

  root.addEventListener("submit", (event) => {
    const form = event.target;
    if (form.matches("form.labels-form")) {
      event.preventDefault();
      submit();
    } else if (form.id === "skip-form") {
      event.preventDefault();
      skip();
    } else if (form.id === "undo-skip-form") {
      event.preventDefault();
      undo();
    }
  });

  root.addEventListener("keydown", (event) => {
    const target = event.target;
    if (target.id === "find-text") {
      if (event.key === "Enter") {
        event.preventDefault();
        const query = target.value;
        target.blur();
        const found = page && page.caret.find(query);
        const findStatus = root.querySelector("#find-status");
        if (findStatus) findStatus.textContent = found ? "" : "not found";
        if (found) root.querySelector("#find-field").hidden = true;
      } else if (event.key === "Escape") {
        event.preventDefault();
        root.querySelector("#find-field").hidden = true;
        target.blur();
      }
      return;
    }
    if (target.matches && target.matches(".reason-field select") && event.key === "Enter") {
      event.preventDefault();
      const row = target.closest(".claim-row");
      target.blur();
      if (row && complete(row)) advance();
      return;
    }
    if (target.matches && target.matches("#skip-form select, #skip-form textarea")) {
      if (event.key === "Enter" && !event.shiftKey) {
        event.preventDefault();
        skip();
      } else if (event.key === "Escape") {
        target.blur();
      }
    }
  });

  document.addEventListener("selectionchange", () => {
    const current = W.readSelection();
    if (current && !current.error) lastSelection = current;
  });

  document.addEventListener("keydown", (event) => {
    if (!page || event.ctrlKey || event.metaKey || event.altKey) return;
    if (W.typing(event.target) || document.querySelector("dialog[open]")) return;
    if (event.key === "Escape") {
      closePopover();
      return;
    }
    // A label's shortcut (the policy's keys): the active claim's, or with Shift the answer's.
    if (page.editable) {
      const scope = event.shiftKey ? page.form.querySelector(".answer-row") : page.active;
      if (W.pickLabel(scope, W.labelKey(event))) {
        event.preventDefault();
        return;
      }
    }
    if (event.shiftKey && (event.key === "ArrowRight" || event.key === "ArrowLeft")) {
      event.preventDefault();
      page.caret.extend(event.key === "ArrowRight" ? 1 : -1);
      return;
    }
    if (event.key === "S") {
      const reason = root.querySelector("#skip-form select[name=reason]");
      if (reason) {
        event.preventDefault();
        reason.scrollIntoView({ block: "center" });
        reason.focus();
      }
      return;
    }
    switch (event.key) {
      case "j": move(1); break;
      case "k": move(-1); break;
      case "]": page.caret.next(); break;
      case "[": page.caret.previous(); break;
      case "c": if (page.editable) cite(); break;
      case "x": {
        const chips = page.active ? page.active.querySelectorAll(".chip") : [];
        if (chips.length) removeChip(chips[chips.length - 1]);
        break;
      }
      case "b": {
        const box = page.active && page.active.querySelector("input[type=checkbox][name$='-boundary_error']");
        if (box) box.checked = !box.checked;
        break;
      }
      case "r": {
        const select = page.active && page.active.querySelector(".reason-field:not([hidden]) select");
        if (select) select.focus();
        break;
      }
      case "/": {
        const field = root.querySelector("#find-field");
        if (!field) return;
        field.hidden = false;
        field.querySelector("input").focus();
        break;
      }
      case "s": submit(); break;
      case "u": if (root.querySelector("#undo-skip-form")) undo(); else return; break;
      case "p": {
        if (!root.querySelector("#revise-previous")) return;
        // Read the link once the save is answered: it may point elsewhere, or be gone, then.
        settled().then(() => {
          const link = root.querySelector("#revise-previous");
          if (link) window.location.assign(link.href);
        });
        break;
      }
      default: return;
    }
    event.preventDefault();
  });

  // Back and forward: the URL names the item; open it as a reload would.
  window.addEventListener("popstate", () => afterSaving(() => window.location.reload()));
  history.replaceState({ assignment: root.querySelector("#item-meta") &&
    root.querySelector("#item-meta").dataset.assignmentId }, "", window.location.href);

  mount();
})();
