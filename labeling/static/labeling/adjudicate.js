/* certlabel — the adjudication page, built on the workbench core (workbench.js). Plain
 * JavaScript, no dependencies, no build step.
 *
 * Progressive: without JavaScript the decision form posts and the server redirects to the next
 * item of the queue. With it:
 *   - keyboard: j/k claim, 1-9 claim label, Shift+1-9 answer label, u then k: use Annotator k's
 *     label (and evidence) for the active claim, a then k: use all of Annotator k, ] / [ next /
 *     previous source sentence, Shift+Arrow a word more / less, / find text, c cite (the mouse's
 *     selection or the keyboard caret), r the active claim's reason, w the rationale (Esc
 *     leaves it, Ctrl+Enter resolves), s resolve, x mark unresolved (asks for the reason first;
 *     Enter in the reason submits), n next item, g guideline, ? help;
 *   - a decision is posted with fetch (Accept: application/json); on success the next item is
 *     fetched and swapped in, and the URL follows (history.pushState; back and reload load the
 *     page from the server); every refused problem is shown at once, in the server's words,
 *     next to its field and in the summary; a version conflict falls back to the plain post, so
 *     the server shows the current state.
 * Stored offsets are code points; copied evidence keeps `unit=codepoint`, cited selections are
 * UTF-16 (`unit=utf16`); the server converts.
 */
(function () {
  "use strict";

  const W = window.Workbench;
  if (!W) return;
  const UNAVAILABLE = "evidence_unavailable";
  const PREFIX_MS = 1500; // how long "u" or "a" waits for the annotator's number

  const page = {
    form: null,
    rows: [],
    active: null,
    columns: [],
    status: null,
    highlighter: null,
    caret: null,
    pending: null, // {kind: "u" | "a", until: ms}
    busy: false,
  };
  let help = null;
  let guideline = null;

  function say(message, isError) {
    if (!page.status) return;
    page.status.textContent = message;
    page.status.classList.toggle("error", Boolean(isError));
  }

  // --- claims ----------------------------------------------------------------------------------

  function activate(row) {
    if (!row) return;
    page.rows.forEach((r) => r.classList.toggle("active", r === row));
    page.active = row;
    const id = row.dataset.claimId;
    document.querySelectorAll("mark.claim").forEach((mark) => {
      const ids = (mark.dataset.claimIds || "").split(" ");
      mark.classList.toggle("active", ids.includes(id));
    });
    highlight();
  }

  function move(step) {
    if (!page.rows.length) return;
    const i = Math.max(0, page.rows.indexOf(page.active));
    const next = page.rows[Math.min(page.rows.length - 1, Math.max(0, i + step))];
    activate(next);
    next.scrollIntoView({ block: "nearest" });
  }

  function labelled(row) {
    return Boolean(row.querySelector("input[type=radio][data-role=label]:checked"));
  }

  /** After a claim is decided, the next claim without a label becomes active. */
  function advance() {
    const i = page.rows.indexOf(page.active);
    const later = page.rows.slice(i + 1).concat(page.rows.slice(0, i));
    const next = later.find((row) => !labelled(row));
    if (next) {
      activate(next);
      next.scrollIntoView({ block: "nearest" });
    }
  }

  function syncReason(scope) {
    const checked = scope.querySelector("input[type=radio][data-role=label]:checked");
    const field = scope.querySelector(".reason-field");
    if (field) field.hidden = !(checked && checked.value === UNAVAILABLE);
  }

  function highlight() {
    if (page.highlighter) page.highlighter.set(W.chips.spans(page.rows, page.active));
  }

  // --- using a vote ----------------------------------------------------------------------------

  function setRadio(name, value) {
    page.form.querySelectorAll("input[type=radio][name='" + name + "']").forEach((radio) => {
      radio.checked = radio.value === value;
    });
  }

  function setSelect(name, value) {
    const select = page.form.querySelector("select[name='" + name + "']");
    if (select) select.value = value || "";
  }

  function useClaim(column, row) {
    const vote = (column.claims || {})[row.dataset.claimId];
    row.querySelectorAll(".chip").forEach((chip) => W.chips.remove(chip));
    if (!vote) return false;
    setRadio("claim-" + row.dataset.claimId + "-label", vote.label || "");
    setSelect("claim-" + row.dataset.claimId + "-reason", vote.reason);
    (vote.evidence || []).forEach((span) => {
      const source = document.getElementById("source-" + span.source_version_id);
      W.chips.add(row, {
        source_version_id: span.source_version_id,
        source_label: source ? source.dataset.sourceLabel : "",
        start: span.start,
        end: span.end,
        quote: span.quote,
        unit: "codepoint",
      });
    });
    syncReason(row);
    return true;
  }

  function useAll(k) {
    const column = page.columns[k];
    if (!column) return say("There is no Annotator " + (k + 1) + ".", true);
    setRadio("answer_label", column.answer_label || "");
    setSelect("answer_reason", column.answer_reason);
    page.form.querySelectorAll(".answer-row").forEach(syncReason);
    page.rows.forEach((row) => useClaim(column, row));
    highlight();
    say("Used all of " + column.pseudonym + "'s labels; write the rationale (r), then resolve (s).");
  }

  function useForActive(k) {
    const column = page.columns[k];
    if (!column || !page.active) return say("There is no Annotator " + (k + 1) + ".", true);
    const name = page.active.dataset.claimLabel || "the claim";
    if (!useClaim(column, page.active)) return say(column.pseudonym + " did not label " + name + ".", true);
    say("Used " + column.pseudonym + "'s label for " + name + ".");
    highlight();
    advance();
  }

  // --- citing ----------------------------------------------------------------------------------

  function cite() {
    const row = page.active;
    if (!row) return say("Choose a claim first.", true);
    let picked = W.readSelection();
    if (picked && picked.error) {
      return say("Select text inside one source (not across sources or outside them).", true);
    }
    picked = picked || (page.caret && page.caret.picked());
    if (!picked || !picked.quote) {
      return say("Select the evidence text in a source first (mouse, or ] and Shift+→).", true);
    }
    W.chips.add(row, {
      source_version_id: picked.container.dataset.sourceVersionId,
      source_label: picked.container.dataset.sourceLabel,
      start: picked.start,
      end: picked.end,
      quote: picked.quote,
      unit: "utf16",
    });
    const selection = window.getSelection();
    if (selection) selection.removeAllRanges();
    if (page.caret) page.caret.hide();
    highlight();
    say("Cited for " + (row.dataset.claimLabel || "the claim") + ".");
  }

  // --- deciding --------------------------------------------------------------------------------

  function placeOf(problem) {
    if (problem.target === "claim" && problem.claim_position !== null) {
      const row = page.rows[problem.claim_position];
      return row ? row.querySelector(".labels") : null;
    }
    if (problem.target === "answer") return page.form.querySelector(".answer-row .labels");
    if (problem.field === "reason") return page.form.querySelector("fieldset.unresolved");
    if (problem.field === "rationale") return page.form.querySelector("#id_rationale").parentElement;
    return null;
  }

  function showProblems(problems) {
    const summary = document.getElementById("form-errors");
    page.form.querySelectorAll("#rationale-error, #unresolved-reason-error, .claim-error").forEach(
      (node) => node.remove()
    );
    W.renderProblems({ problems: problems, summary: summary, place: placeOf });
    if (summary && problems.length) summary.scrollIntoView({ block: "nearest" });
  }

  function plainSubmit(submitter) {
    // The server answers with a whole page (a conflict shows the item's current state).
    page.busy = true;
    const action = document.createElement("input");
    action.type = "hidden";
    action.name = submitter.name;
    action.value = submitter.value;
    page.form.appendChild(action);
    HTMLFormElement.prototype.submit.call(page.form);
  }

  async function decide(submitter) {
    if (page.busy) return;
    page.busy = true;
    say("Saving…");
    const data = new FormData(page.form, submitter);
    let response;
    try {
      // Not form.action: the buttons named "action" shadow that property.
      const url = new URL(page.form.getAttribute("action") || "", window.location.href);
      response = await fetch(url.href, {
        method: "POST",
        body: data,
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      });
    } catch (error) {
      page.busy = false;
      return plainSubmit(submitter);
    }
    let body = {};
    try {
      body = await response.json();
    } catch (error) {
      body = {};
    }
    page.busy = false;
    if (response.ok && body.next_url) return open(body.next_url, body.message, true);
    if (response.status === 400 && body.errors) {
      const problems = body.errors;
      say("Not saved: fix the problems listed.", true);
      return showProblems(problems);
    }
    plainSubmit(submitter);
  }

  /** Open another item of the queue: fetch its page and swap it in (the URL follows). */
  async function open(url, message, push) {
    const target = new URL(url, window.location.href);
    if (!/\/adjudicate\/\d+\/$/.test(target.pathname)) {
      window.location.assign(target.href); // the queue (empty now): a page of its own
      return;
    }
    let html;
    try {
      const response = await fetch(target.href, { credentials: "same-origin" });
      if (!response.ok) throw new Error(String(response.status));
      html = await response.text();
    } catch (error) {
      window.location.assign(url);
      return;
    }
    const doc = new DOMParser().parseFromString(html, "text/html");
    const fresh = doc.querySelector("main");
    const main = document.querySelector("main");
    if (!fresh || !main || !fresh.querySelector("#side-by-side, #not-adjudicable")) {
      window.location.assign(url);
      return;
    }
    // The help dialog and the guideline panel hold key listeners: keep them (the guideline is
    // the same while the policy version is).
    ["shortcut-help", "guideline-panel"].forEach((id) => {
      const old = document.getElementById(id);
      const neu = fresh.querySelector("#" + id);
      const same =
        id !== "guideline-panel" ||
        (old && neu && old.querySelector("#guideline-version").textContent ===
          neu.querySelector("#guideline-version").textContent);
      if (old && neu && same) neu.replaceWith(old);
    });
    main.replaceChildren(...Array.from(fresh.childNodes));
    document.title = doc.title;
    if (push) window.history.pushState({ adjudication: true }, "", target.href);
    if (message) {
      const list = document.createElement("ul");
      list.className = "messages";
      list.setAttribute("role", "status");
      const item = document.createElement("li");
      item.className = "success";
      item.textContent = message;
      list.appendChild(item);
      main.prepend(list);
    }
    init();
    window.scrollTo(0, 0);
    const first = page.rows.find((row) => !labelled(row)) || page.rows[0];
    if (first) activate(first);
    document.dispatchEvent(new CustomEvent("adjudication:opened", { detail: { url: target.href } }));
  }

  // --- keyboard --------------------------------------------------------------------------------

  function digitOf(event) {
    const match = /^Digit([1-9])$/.exec(event.code) || /^Numpad([1-9])$/.exec(event.code);
    return match ? Number(match[1]) - 1 : null;
  }

  function markUnresolved() {
    const select = document.getElementById("id_unresolved_reason");
    if (!select) return;
    if (!select.value) {
      select.focus();
      say("Choose why it stays unresolved (arrow keys), then press Enter.", false);
      return;
    }
    page.form.requestSubmit(document.getElementById("mark-unresolved"));
  }

  function onKey(event) {
    if (!page.form || event.ctrlKey || event.metaKey || event.altKey) return;
    if (document.querySelector("dialog[open]") || W.typing(event.target)) return;
    const n = digitOf(event);
    if (page.pending && Date.now() > page.pending.until) page.pending = null;
    if (n !== null && page.pending) {
      const kind = page.pending.kind;
      page.pending = null;
      event.preventDefault();
      return kind === "a" ? useAll(n) : useForActive(n);
    }
    // A label's shortcut (the policy's keys): the active claim's, or with Shift the answer's.
    const scope = event.shiftKey ? page.form.querySelector(".answer-row") : page.active;
    if (W.pickLabel(scope, W.labelKey(event))) {
      event.preventDefault();
      if (!event.shiftKey) advance();
      return;
    }
    if (event.shiftKey && (event.key === "ArrowRight" || event.key === "ArrowLeft")) {
      event.preventDefault();
      if (page.caret) page.caret.extend(event.key === "ArrowRight" ? 1 : -1);
      return;
    }
    if (event.shiftKey && event.key !== "?") return;
    switch (event.key) {
      case "j": move(1); break;
      case "k": move(-1); break;
      case "]": if (page.caret) page.caret.next(); break;
      case "[": if (page.caret) page.caret.previous(); break;
      case "/": {
        const field = document.getElementById("find-field");
        if (!field) return;
        field.hidden = false;
        field.querySelector("input").focus();
        break;
      }
      case "c": cite(); break;
      case "u":
      case "a":
        page.pending = { kind: event.key, until: Date.now() + PREFIX_MS };
        say(event.key === "a" ? "Use all of which annotator? Press 1–9." : "Use which annotator's label for " + ((page.active && page.active.dataset.claimLabel) || "the claim") + "? Press 1–9.");
        break;
      case "r": {
        const select = page.active && page.active.querySelector(".reason-field:not([hidden]) select");
        if (!select) return say("Only “evidence unavailable” takes a reason.", true);
        select.focus();
        break;
      }
      case "w": {
        const rationale = document.getElementById("id_rationale");
        if (rationale) rationale.focus();
        break;
      }
      case "s": {
        const submit = document.getElementById("submit");
        if (submit) page.form.requestSubmit(submit);
        break;
      }
      case "x": markUnresolved(); break;
      case "n": {
        const next = document.getElementById("next-item");
        if (next) open(next.href, "", true);
        break;
      }
      default: return;
    }
    event.preventDefault();
  }

  // --- set-up (again after each swap) ----------------------------------------------------------

  function init() {
    page.form = document.querySelector("form#adjudication-form");
    page.status = document.getElementById("cite-status");
    const data = document.getElementById("columns-data");
    page.columns = data ? JSON.parse(data.textContent) : [];
    page.rows = page.form ? Array.from(page.form.querySelectorAll(".claim-row[data-claim-id]")) : [];
    page.active = null;
    page.pending = null;
    page.busy = false;
    const sources = Array.from(document.querySelectorAll(".source-text[data-source-version-id]"));
    page.highlighter = W.Highlighter(sources);
    page.caret = W.Caret(sources);
    const find = document.getElementById("find-text");
    if (find) {
      find.addEventListener("keydown", (event) => {
        const field = document.getElementById("find-field");
        if (event.key === "Enter") {
          event.preventDefault();
          const found = page.caret.find(find.value);
          const status = document.getElementById("find-status");
          if (status) status.textContent = found ? "" : "not found";
          find.blur();
          if (found && field) field.hidden = true;
        } else if (event.key === "Escape") {
          event.preventDefault();
          find.blur();
          if (field) field.hidden = true;
        }
      });
    }
    if (!help) help = W.helpDialog(document.getElementById("shortcut-help"), {});
    const opener = document.getElementById("show-help");
    if (opener && help) opener.addEventListener("click", () => help.open());
    if (!guideline) guideline = W.guidelinePanel(document.getElementById("guideline-panel"));
    document.querySelectorAll("button.copy-column").forEach((button) => {
      button.addEventListener("click", (event) => {
        event.preventDefault();
        useAll(Number(button.dataset.column));
      });
    });
    document.querySelectorAll("button.copy-claim").forEach((button) => {
      button.addEventListener("click", (event) => {
        event.preventDefault();
        const row = page.rows.find((r) => r.dataset.claimId === button.dataset.claimId);
        if (!row) return;
        activate(row);
        useForActive(Number(button.dataset.column));
      });
    });
    const next = document.getElementById("next-item");
    if (next) {
      next.addEventListener("click", (event) => {
        event.preventDefault();
        open(next.href, "", true);
      });
    }
    if (!page.form) return;
    page.rows.forEach((row) => {
      row.addEventListener("focusin", () => activate(row));
      row.addEventListener("click", () => activate(row));
    });
    page.form.querySelectorAll(".label-group").forEach((group) => {
      syncReason(group);
      group.addEventListener("change", () => syncReason(group));
    });
    page.form.addEventListener("click", (event) => {
      const remove = event.target.closest(".chip-remove");
      if (remove) {
        event.preventDefault();
        W.chips.remove(remove.closest(".chip"));
        highlight();
      }
    });
    page.form.querySelectorAll("button.cite, #cite").forEach((button) => {
      // Keep the selection when a cite button is pressed (mousedown would move the focus).
      button.addEventListener("mousedown", (event) => event.preventDefault());
      button.addEventListener("click", (event) => {
        event.preventDefault();
        const row = button.closest(".claim-row");
        if (row) activate(row);
        cite();
      });
    });
    page.form.addEventListener("submit", (event) => {
      const submitter = event.submitter || document.getElementById("submit");
      if (!submitter || !window.fetch) return;
      event.preventDefault();
      decide(submitter);
    });
    const rationale = document.getElementById("id_rationale");
    if (rationale) {
      rationale.addEventListener("keydown", (event) => {
        if (event.key === "Escape") {
          event.preventDefault();
          rationale.blur();
          if (page.active) page.active.focus();
        } else if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
          event.preventDefault();
          page.form.requestSubmit(document.getElementById("submit"));
        }
      });
    }
    page.form.querySelectorAll(".reason-field select").forEach((select) => {
      select.addEventListener("keydown", (event) => {
        if (event.key === "Enter" || event.key === "Escape") {
          event.preventDefault();
          select.blur();
          if (event.key === "Enter") advance();
        }
      });
    });
    const reason = document.getElementById("id_unresolved_reason");
    if (reason) {
      reason.addEventListener("keydown", (event) => {
        if (event.key === "Enter" && reason.value) {
          event.preventDefault();
          page.form.requestSubmit(document.getElementById("mark-unresolved"));
        } else if (event.key === "Enter") {
          // No reason yet: keep the select as it is (Enter would open its list) and say so.
          event.preventDefault();
          say("Choose why it stays unresolved (arrow keys), then press Enter.", true);
        } else if (event.key === "Escape") {
          reason.blur();
        }
      });
    }
    activate(page.rows.find((r) => r.querySelector(".claim-error, .has-error")) || page.rows.find((r) => !labelled(r)) || page.rows[0]);
  }

  document.addEventListener("keydown", onKey);
  window.addEventListener("popstate", () => window.location.reload());
  init();
})();
