/* certlabel — labelling and adjudication forms. Plain JavaScript, no dependencies, vendored.
 *
 * Progressive: without JavaScript the forms still post (radios, selects, checkboxes); citing
 * evidence by selecting text needs this script.
 *
 * Evidence offsets: a source is rendered as the only text node of `.source-text` (the server
 * writes CR as `&#13;` so the DOM text equals the stored text). The start of a selection is the
 * length of the text from the container's start to the selection's start (a Range's
 * toString().length, i.e. UTF-16 code units); the quote is the selected Range's toString(), the
 * DOM text itself (Selection.toString() would give the *rendered* text, where a CR may become a
 * space). The server converts UTF-16 offsets to code points and checks the quote and the hash.
 *
 * Quotes travel as JSON string literals (`quote_json`): form encoding would rewrite a bare LF
 * in a field value to CRLF and change the quote.
 */
(function () {
  "use strict";

  const form = document.querySelector("form.labels-form");
  if (!form) return;

  const loadedAt = performance.now();
  const UNAVAILABLE = "evidence_unavailable";
  const rows = Array.from(form.querySelectorAll(".claim-row[data-claim-id]"));
  const status = document.getElementById("cite-status");
  let active = null;
  let lastSelection = null; // {container, start, quote} of the last selection inside a source

  function say(message, isError) {
    if (!status) return;
    status.textContent = message;
    status.classList.toggle("error", Boolean(isError));
  }

  // --- active claim ----------------------------------------------------------------------------
  function activate(row) {
    if (!row) return;
    rows.forEach((r) => r.classList.toggle("active", r === row));
    active = row;
    const id = row.dataset.claimId;
    document.querySelectorAll("mark.claim").forEach((mark) => {
      const ids = (mark.dataset.claimIds || "").split(" ");
      mark.classList.toggle("active", ids.includes(id));
    });
    const label = document.getElementById("active-claim-label");
    if (label) label.textContent = row.dataset.claimLabel || "";
  }
  rows.forEach((row) => {
    row.addEventListener("focusin", () => activate(row));
    row.addEventListener("click", () => activate(row));
  });
  document.querySelectorAll("mark.claim").forEach((mark) => {
    mark.addEventListener("click", () => {
      const first = (mark.dataset.claimIds || "").split(" ")[0];
      activate(rows.find((r) => r.dataset.claimId === first));
    });
  });
  if (rows.length) activate(rows.find((r) => r.classList.contains("has-error")) || rows[0]);

  function move(step) {
    if (!rows.length) return;
    const i = Math.max(0, rows.indexOf(active));
    const next = rows[Math.min(rows.length - 1, Math.max(0, i + step))];
    activate(next);
    next.scrollIntoView({ block: "nearest" });
  }

  // --- reasons: shown only for evidence_unavailable ---------------------------------------------
  function syncReason(scope) {
    const checked = scope.querySelector("input[type=radio][data-role=label]:checked");
    const field = scope.querySelector(".reason-field");
    if (field) field.hidden = !(checked && checked.value === UNAVAILABLE);
  }
  form.querySelectorAll(".label-group").forEach((group) => {
    syncReason(group);
    group.addEventListener("change", () => syncReason(group));
  });

  // --- evidence chips --------------------------------------------------------------------------
  function nextIndex(list) {
    let max = -1;
    list.querySelectorAll(".chip[data-n]").forEach((chip) => {
      max = Math.max(max, Number(chip.dataset.n));
    });
    return max + 1;
  }

  function hidden(name, value) {
    const input = document.createElement("input");
    input.type = "hidden";
    input.name = name;
    input.value = String(value);
    return input;
  }

  function addChip(row, span) {
    const list = row.querySelector(".evidence-list");
    const claim = row.dataset.claimId;
    const n = nextIndex(list);
    const prefix = "claim-" + claim + "-evidence-" + n + "-";
    const chip = document.createElement("span");
    chip.className = "chip";
    chip.dataset.n = String(n);
    chip.dataset.sourceVersionId = String(span.source_version_id);
    const text = document.createElement("span");
    text.className = "chip-text";
    const quote = span.quote.length > 80 ? span.quote.slice(0, 77) + "…" : span.quote;
    text.textContent = "“" + quote + "” · " + (span.source_label || "source " + span.source_version_id);
    chip.appendChild(text);
    chip.appendChild(hidden(prefix + "source_version_id", span.source_version_id));
    chip.appendChild(hidden(prefix + "start", span.start));
    chip.appendChild(hidden(prefix + "end", span.end));
    chip.appendChild(hidden(prefix + "quote_json", JSON.stringify(span.quote)));
    chip.appendChild(hidden(prefix + "unit", span.unit));
    const remove = document.createElement("button");
    remove.type = "button";
    remove.className = "chip-remove";
    remove.title = "Remove this evidence";
    remove.setAttribute("aria-label", "Remove this evidence");
    remove.textContent = "×";
    chip.appendChild(remove);
    list.appendChild(chip);
    const empty = list.querySelector(".evidence-empty");
    if (empty) empty.hidden = true;
  }

  form.addEventListener("click", (event) => {
    const remove = event.target.closest(".chip-remove");
    if (remove) {
      event.preventDefault();
      remove.closest(".chip").remove();
    }
  });

  function sourceOf(node) {
    const element = node.nodeType === Node.ELEMENT_NODE ? node : node.parentElement;
    return element ? element.closest(".source-text[data-source-version-id]") : null;
  }

  function readSelection() {
    const selection = window.getSelection();
    if (!selection || selection.rangeCount === 0 || selection.isCollapsed) return null;
    const range = selection.getRangeAt(0);
    const container = sourceOf(range.startContainer);
    if (!container || container !== sourceOf(range.endContainer)) return { error: true };
    const before = document.createRange();
    before.setStart(container, 0);
    before.setEnd(range.startContainer, range.startOffset);
    return { container: container, start: before.toString().length, quote: range.toString() };
  }

  document.addEventListener("selectionchange", () => {
    const current = readSelection();
    if (current && !current.error) lastSelection = current;
  });

  function cite(row) {
    row = row || active;
    if (!row) return say("Choose a claim first.", true);
    let picked = readSelection();
    if (picked && picked.error) {
      return say("Select text inside one source (not across sources or outside them).", true);
    }
    picked = picked || lastSelection;
    if (!picked || !picked.quote) return say("Select the evidence text in a source first.", true);
    const container = picked.container;
    addChip(row, {
      source_version_id: container.dataset.sourceVersionId,
      source_label: container.dataset.sourceLabel,
      start: picked.start,
      end: picked.start + picked.quote.length,
      quote: picked.quote,
      unit: "utf16",
    });
    lastSelection = null;
    const selection = window.getSelection();
    if (selection) selection.removeAllRanges();
    say("Cited for " + (row.dataset.claimLabel || "the claim") + ".", false);
  }

  // Keep the selection when a cite button is pressed (mousedown would move the focus).
  form.querySelectorAll("button.cite, #cite").forEach((button) => {
    button.addEventListener("mousedown", (event) => event.preventDefault());
  });
  const citeButton = document.getElementById("cite");
  if (citeButton) citeButton.addEventListener("click", (event) => { event.preventDefault(); cite(); });
  form.querySelectorAll("button.cite").forEach((button) => {
    button.addEventListener("click", (event) => {
      event.preventDefault();
      const row = button.closest(".claim-row");
      activate(row);
      cite(row);
    });
  });

  // --- adjudication: copy a column's labels and evidence ---------------------------------------
  const columnsData = document.getElementById("columns-data");
  const columns = columnsData ? JSON.parse(columnsData.textContent) : [];

  function setRadio(name, value) {
    form.querySelectorAll("input[type=radio][name='" + name + "']").forEach((radio) => {
      radio.checked = radio.value === value;
    });
  }
  function setSelect(name, value) {
    const select = form.querySelector("select[name='" + name + "']");
    if (select) select.value = value || "";
  }
  function copyClaim(column, row) {
    const vote = (column.claims || {})[row.dataset.claimId];
    const list = row.querySelector(".evidence-list");
    list.querySelectorAll(".chip").forEach((chip) => chip.remove());
    if (!vote) return;
    setRadio("claim-" + row.dataset.claimId + "-label", vote.label || "");
    setSelect("claim-" + row.dataset.claimId + "-reason", vote.reason);
    (vote.evidence || []).forEach((span) => {
      const source = document.getElementById("source-" + span.source_version_id);
      addChip(row, {
        source_version_id: span.source_version_id,
        source_label: source ? source.dataset.sourceLabel : "",
        start: span.start,
        end: span.end,
        quote: span.quote,
        unit: "codepoint",
      });
    });
    syncReason(row);
  }
  // The side-by-side table (and its copy buttons) sits outside the decision form.
  document.querySelectorAll("button.copy-column").forEach((button) => {
    button.addEventListener("click", (event) => {
      event.preventDefault();
      const column = columns[Number(button.dataset.column)];
      if (!column) return;
      setRadio("answer_label", column.answer_label || "");
      setSelect("answer_reason", column.answer_reason);
      form.querySelectorAll(".answer-row").forEach(syncReason);
      rows.forEach((row) => copyClaim(column, row));
      say("Copied " + column.pseudonym + "'s labels and evidence; review, then resolve.", false);
    });
  });
  document.querySelectorAll("button.copy-claim").forEach((button) => {
    button.addEventListener("click", (event) => {
      event.preventDefault();
      const column = columns[Number(button.dataset.column)];
      const row = rows.find((r) => r.dataset.claimId === button.dataset.claimId);
      if (column && row) {
        copyClaim(column, row);
        activate(row);
      }
    });
  });

  // --- time spent and keyboard -----------------------------------------------------------------
  form.addEventListener("submit", () => {
    const spent = form.querySelector("input[name=time_spent_seconds]");
    if (spent) spent.value = ((performance.now() - loadedAt) / 1000).toFixed(1);
  });

  function typing(target) {
    if (!target || !target.closest) return false;
    if (target.closest("textarea, select")) return true;
    const input = target.closest("input");
    return Boolean(input && !["radio", "checkbox", "button", "submit"].includes(input.type));
  }

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    const digit = /^Digit([1-9])$/.exec(event.code);
    if (digit) {
      const n = Number(digit[1]) - 1;
      const scope = event.shiftKey ? form.querySelector(".answer-row") : active;
      if (!scope) return;
      const radios = scope.querySelectorAll("input[type=radio][data-role=label]");
      if (radios[n]) {
        radios[n].checked = true;
        radios[n].dispatchEvent(new Event("change", { bubbles: true }));
        event.preventDefault();
      }
      return;
    }
    if (event.shiftKey) return;
    switch (event.key) {
      case "j": move(1); break;
      case "k": move(-1); break;
      case "c": cite(); break;
      case "b": {
        const box = active && active.querySelector("input[type=checkbox][name$='-boundary_error']");
        if (box) box.checked = !box.checked;
        break;
      }
      case "s": {
        const submit = document.getElementById("submit");
        if (submit) form.requestSubmit(submit);
        break;
      }
      default: return;
    }
    event.preventDefault();
  });
})();
