/* certlabel workbench core — shared by the labelling and adjudication pages. Plain JavaScript,
 * no dependencies, no build step. Exposes `window.Workbench`; page scripts (annotate.js, ...)
 * build on it and keep their page-specific behaviour to themselves.
 *
 * Pieces (each independent):
 *   Workbench.typing(target)                 true while the focus is in a text field
 *   Workbench.helpDialog(dialog, {opener})   the `?` help overlay (modal <dialog>, focus trapped,
 *                                            Esc closes, focus returns to where it was)
 *   Workbench.guidelinePanel(details)        the guideline <details> toggled with its data-key (g)
 *   Workbench.words(templates, kind, values) a problem sentence from the server's PROBLEM_WORDS
 *   Workbench.renderProblems({...})          every problem at once: a summary and each next to
 *                                            its field
 *   Workbench.offsets                        UTF-16 / code point offsets over DOM text
 *   Workbench.readSelection()                the selection inside one source, as offsets
 *   Workbench.Highlighter(containers)        cited spans highlighted in their claim's colour
 *                                            (CSS Custom Highlight API; <mark> fallback)
 *   Workbench.Caret(containers)              keyboard citing: sentence by sentence, word by word,
 *                                            best sentence for a claim, find text
 *   Workbench.chips                          the evidence chips of a claim row (hidden inputs)
 *
 * Offsets: a source is rendered as `.source-text[data-source-version-id]` whose text equals the
 * stored text (CR written as &#13;). In the DOM, offsets are UTF-16 code units (JavaScript
 * string indices); stored offsets are code points; chips say which (`-unit`), the server
 * converts. The highlighter never changes the text the offsets count.
 */
(function () {
  "use strict";

  const W = {};
  const SOURCE = ".source-text[data-source-version-id]";
  const COLOURS = 6; // claim colours: ev-0 .. ev-5, by claim position modulo COLOURS

  W.COLOURS = COLOURS;

  /** True while `target` takes typed text (keys.js, loaded by every page, defines it). */
  W.typing = window.CertlabelKeys.typing;

  /** The label shortcut a key press stands for: a digit or a lower-case letter (by the key's
   * position, so Shift+1 is "1" and Shift+D is "d"), else null. The policy chooses the keys; the
   * page's own keys are reserved and never match a label. */
  W.labelKey = function (event) {
    const code = /^(?:Digit|Numpad)([0-9])$/.exec(event.code) || /^Key([A-Z])$/.exec(event.code);
    return code ? code[1].toLowerCase() : null;
  };

  /** Check the label radio of `scope` whose shortcut is `key` (data-key); true when one was. */
  W.pickLabel = function (scope, key) {
    if (!scope || key === null) return false;
    const radio = Array.from(scope.querySelectorAll("input[type=radio][data-role=label]"))
      .find((input) => input.dataset.key === key);
    if (!radio || radio.disabled) return false;
    radio.checked = true;
    radio.dispatchEvent(new Event("change", { bubbles: true }));
    return true;
  };

  // --- help overlay ----------------------------------------------------------------------------

  const FOCUSABLE =
    "a[href], button:not([disabled]), input:not([disabled]), select:not([disabled]), " +
    "textarea:not([disabled]), [tabindex]:not([tabindex='-1'])";

  /** Make `dialog` (a <dialog> with aria-labelledby) the `?` help overlay.
   *
   * `?` opens it (not while typing), Esc or its [data-close] button closes it, Tab and
   * Shift+Tab cycle inside it, and the focus returns to where it was. `options.opener` (a button)
   * opens it too. Returns {open, close, isOpen}.
   */
  W.helpDialog = function (dialog, options) {
    if (!dialog) return null;
    const opener = options && options.opener;
    let before = null;
    function isOpen() {
      return dialog.open;
    }
    function open() {
      if (dialog.open) return;
      before = document.activeElement;
      if (typeof dialog.showModal === "function") dialog.showModal();
      else dialog.setAttribute("open", "");
      const first = dialog.querySelector(FOCUSABLE);
      if (first) first.focus();
    }
    function close() {
      if (!dialog.open) return;
      if (typeof dialog.close === "function") dialog.close();
      else dialog.removeAttribute("open");
    }
    dialog.addEventListener("close", () => {
      if (before && before.focus) before.focus();
    });
    dialog.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        close();
        return;
      }
      if (event.key !== "Tab") return;
      const items = Array.from(dialog.querySelectorAll(FOCUSABLE));
      if (!items.length) return event.preventDefault();
      const first = items[0];
      const last = items[items.length - 1];
      if (event.shiftKey && document.activeElement === first) {
        event.preventDefault();
        last.focus();
      } else if (!event.shiftKey && document.activeElement === last) {
        event.preventDefault();
        first.focus();
      }
    });
    dialog.querySelectorAll("[data-close]").forEach((button) => {
      button.addEventListener("click", (event) => {
        event.preventDefault();
        close();
      });
    });
    if (opener) opener.addEventListener("click", open);
    document.addEventListener("keydown", (event) => {
      if (event.key !== "?" || event.ctrlKey || event.metaKey || event.altKey) return;
      if (W.typing(event.target) || dialog.open) return;
      event.preventDefault();
      open();
    });
    return { open: open, close: close, isOpen: isOpen };
  };

  // --- guideline panel -------------------------------------------------------------------------

  /** Toggle the guideline <details> with its data-key (default g), not while typing; keep the
   * user's choice (open or closed) in localStorage under its data-remember. */
  W.guidelinePanel = function (details) {
    if (!details) return null;
    const key = details.dataset.key || "g";
    const remember = details.dataset.remember;
    try {
      const stored = remember ? window.localStorage.getItem(remember) : null;
      if (stored !== null) details.open = stored === "open";
      details.addEventListener("toggle", () => {
        if (remember) window.localStorage.setItem(remember, details.open ? "open" : "closed");
      });
    } catch (error) {
      // Storage refused (a private window, a policy): the panel still toggles, unremembered.
    }
    function toggle() {
      details.open = !details.open;
    }
    document.addEventListener("keydown", (event) => {
      if (event.key !== key || event.ctrlKey || event.metaKey || event.altKey) return;
      if (W.typing(event.target) || document.querySelector("dialog[open]")) return;
      event.preventDefault();
      toggle();
    });
    return { toggle: toggle };
  };

  // --- problems --------------------------------------------------------------------------------

  /** Fill a sentence of the server's PROBLEM_WORDS: words(t, "evidence_missing", {label}). */
  W.words = function (templates, kind, values) {
    const template = (templates && templates[kind]) || "{reason}";
    return template.replace(/\{(\w+)\}/g, (_, name) =>
      values && values[name] !== undefined ? String(values[name]) : ""
    );
  };

  /** Show every problem at once: each next to its field, and all of them in a summary.
   *
   * options.problems: [{target, claim_position, where, text, message}] (the server's JSON
   *   answer, or problems the page found itself, alike);
   * options.summary: the summary element (emptied, hidden when there is no problem);
   * options.place(problem): the element to show the problem's text in (appended as
   *   p.problem-inline), or null to show it in the summary only;
   * options.scope: where earlier problems are cleared (default document).
   * Returns the number of problems shown.
   */
  W.renderProblems = function (options) {
    const scope = options.scope || document;
    const problems = options.problems || [];
    scope.querySelectorAll(".problem-inline").forEach((node) => node.remove());
    scope.querySelectorAll(".has-problem").forEach((node) => {
      node.classList.remove("has-problem");
      node.removeAttribute("aria-invalid");
    });
    const summary = options.summary;
    if (summary) {
      summary.textContent = "";
      summary.hidden = problems.length === 0;
    }
    if (!problems.length) return 0;
    const list = document.createElement("ul");
    problems.forEach((problem) => {
      const place = options.place ? options.place(problem) : null;
      const item = document.createElement("li");
      if (place) {
        const inline = document.createElement("p");
        inline.className = "errorlist problem-inline";
        inline.textContent = problem.text;
        place.appendChild(inline);
        const group = place.closest("fieldset") || place;
        group.classList.add("has-problem");
        group.setAttribute("aria-invalid", "true");
        if (group.id) {
          const link = document.createElement("a");
          link.href = "#" + group.id;
          link.textContent = problem.message;
          link.addEventListener("click", (event) => {
            event.preventDefault();
            const first = group.querySelector(FOCUSABLE);
            group.scrollIntoView({ block: "center" });
            if (first) first.focus();
          });
          item.appendChild(link);
        } else {
          item.textContent = problem.message;
        }
      } else {
        item.textContent = problem.message;
      }
      list.appendChild(item);
    });
    if (summary) {
      const head = document.createElement("p");
      head.className = "problem-count";
      head.textContent =
        problems.length === 1 ? "1 problem to fix:" : problems.length + " problems to fix:";
      summary.appendChild(head);
      summary.appendChild(list);
    }
    return problems.length;
  };

  // --- offsets ---------------------------------------------------------------------------------

  const offsets = {};
  W.offsets = offsets;

  /** UTF-16 offset of the boundary (node, offset) from the start of `container`'s text. */
  offsets.of = function (container, node, offset) {
    const before = document.createRange();
    before.setStart(container, 0);
    before.setEnd(node, offset);
    return before.toString().length;
  };

  /** The DOM boundary {node, offset} at UTF-16 offset `at` of `container`'s text. */
  offsets.point = function (container, at) {
    const walker = document.createTreeWalker(container, NodeFilter.SHOW_TEXT);
    let seen = 0;
    let node = walker.nextNode();
    let last = null;
    while (node) {
      const length = node.data.length;
      if (at <= seen + length) return { node: node, offset: at - seen };
      seen += length;
      last = node;
      node = walker.nextNode();
    }
    return last ? { node: last, offset: last.data.length } : { node: container, offset: 0 };
  };

  /** A Range over UTF-16 offsets [start, end) of `container`'s text. */
  offsets.range = function (container, start, end) {
    const a = offsets.point(container, start);
    const b = offsets.point(container, end);
    const range = document.createRange();
    range.setStart(a.node, a.offset);
    range.setEnd(b.node, b.offset);
    return range;
  };

  /** UTF-16 offset of code point offset `cp` in `text`. */
  offsets.utf16 = function (text, cp) {
    let units = 0;
    let points = 0;
    while (points < cp && units < text.length) {
      const code = text.codePointAt(units);
      units += code > 0xffff ? 2 : 1;
      points += 1;
    }
    return units;
  };

  /** A span's UTF-16 offsets in `container` ({start, end, unit}; unit "codepoint" or "utf16"). */
  offsets.spanUtf16 = function (container, span) {
    const start = Number(span.start);
    const end = Number(span.end);
    if (span.unit !== "codepoint") return { start: start, end: end };
    const text = container.textContent;
    return { start: offsets.utf16(text, start), end: offsets.utf16(text, end) };
  };

  function sourceOf(node) {
    const element = node && (node.nodeType === Node.ELEMENT_NODE ? node : node.parentElement);
    return element ? element.closest(SOURCE) : null;
  }
  W.sourceOf = sourceOf;

  /** The current selection inside one source: {container, start, end, quote} (UTF-16), null
   * when nothing is selected, {error: true} when it crosses or leaves the sources. The quote is
   * the Range's text (the DOM text itself, CR included). */
  W.readSelection = function () {
    const selection = window.getSelection();
    if (!selection || selection.rangeCount === 0 || selection.isCollapsed) return null;
    const range = selection.getRangeAt(0);
    const container = sourceOf(range.startContainer);
    if (!container || container !== sourceOf(range.endContainer)) return { error: true };
    const start = offsets.of(container, range.startContainer, range.startOffset);
    const quote = range.toString();
    return { container: container, start: start, end: start + quote.length, quote: quote };
  };

  // --- highlights ------------------------------------------------------------------------------

  /** Highlight cited spans in the sources without changing their text.
   *
   * `set(spans)`: spans are {container, start, end (UTF-16), colour (0..COLOURS-1), active}.
   * With the CSS Custom Highlight API the ranges are registered as highlights ev-0..ev-5 and
   * ev-active (styled by ::highlight() rules); without it each source's text is split into
   * text nodes and <mark class="ev ev-N"> elements (the text content stays equal).
   * `at(x, y)`: the spans under a viewport point (for removing one from the highlight).
   */
  W.Highlighter = function (containers) {
    const native = Boolean(window.CSS && CSS.highlights && typeof window.Highlight === "function");
    let current = [];

    function setNative(spans) {
      const groups = {};
      spans.forEach((span) => {
        const range = offsets.range(span.container, span.start, span.end);
        const name = span.active ? "ev-active" : "ev-" + (span.colour % COLOURS);
        (groups[name] = groups[name] || []).push(range);
      });
      for (let i = 0; i < COLOURS; i += 1) CSS.highlights.delete("ev-" + i);
      CSS.highlights.delete("ev-active");
      Object.keys(groups).forEach((name) => {
        const highlight = new Highlight(...groups[name]);
        if (name === "ev-active") highlight.priority = 1;
        CSS.highlights.set(name, highlight);
      });
    }

    function setMarks(spans) {
      containers.forEach((container) => {
        const text = container.textContent;
        const mine = spans.filter((s) => s.container === container);
        const cuts = new Set([0, text.length]);
        mine.forEach((s) => {
          cuts.add(s.start);
          cuts.add(s.end);
        });
        const points = Array.from(cuts).sort((a, b) => a - b);
        const fragment = document.createDocumentFragment();
        for (let i = 0; i + 1 < points.length; i += 1) {
          const a = points[i];
          const b = points[i + 1];
          const piece = document.createTextNode(text.slice(a, b));
          const over = mine.filter((s) => s.start <= a && s.end >= b);
          if (!over.length) {
            fragment.appendChild(piece);
            continue;
          }
          const top = over.find((s) => s.active) || over[over.length - 1];
          const mark = document.createElement("mark");
          mark.className = "ev " + (top.active ? "ev-active" : "ev-" + (top.colour % COLOURS));
          mark.appendChild(piece);
          fragment.appendChild(mark);
        }
        container.textContent = "";
        container.appendChild(fragment);
      });
    }

    function set(spans) {
      current = spans.filter((s) => s.end > s.start);
      if (native) setNative(current);
      else setMarks(current);
    }

    function at(x, y) {
      let node = null;
      let offset = 0;
      if (document.caretPositionFromPoint) {
        const position = document.caretPositionFromPoint(x, y);
        if (position) {
          node = position.offsetNode;
          offset = position.offset;
        }
      } else if (document.caretRangeFromPoint) {
        const range = document.caretRangeFromPoint(x, y);
        if (range) {
          node = range.startContainer;
          offset = range.startOffset;
        }
      }
      const container = sourceOf(node);
      if (!container) return [];
      const where = offsets.of(container, node, offset);
      return current.filter((s) => s.container === container && s.start <= where && where < s.end);
    }

    return { set: set, at: at, native: native };
  };

  // --- keyboard citing -------------------------------------------------------------------------

  function segments(text, granularity) {
    if (typeof Intl === "object" && typeof Intl.Segmenter === "function") {
      const segmenter = new Intl.Segmenter(undefined, { granularity: granularity });
      return Array.from(segmenter.segment(text), (s) => ({
        start: s.index,
        end: s.index + s.segment.length,
        text: s.segment,
      }));
    }
    // Without Intl.Segmenter: sentences end after . ! ? or a line break; words are \S+ runs.
    const pattern = granularity === "sentence" ? /[^.!?\r\n]*(?:[.!?]+|\r?\n|$)\s*/g : /\S+|\s+/g;
    const found = [];
    let match;
    while ((match = pattern.exec(text)) && match[0].length) {
      found.push({ start: match.index, end: match.index + match[0].length, text: match[0] });
    }
    return found;
  }

  function trimmed(segment) {
    const lead = segment.text.length - segment.text.replace(/^\s+/, "").length;
    const trail = segment.text.length - segment.text.replace(/\s+$/, "").length;
    return { start: segment.start + lead, end: segment.end - trail };
  }

  // A suggested sentence has at least this many words: shorter ones ("Contents.", a caption)
  // say too little to be evidence of a claim.
  const MIN_SUGGESTED_WORDS = 4;

  /** Whether a sentence {start, end} of `text` may be suggested: enough words, and not a
   * title, i.e. not a line of its own without a full stop at the end of its last word (a
   * heading, or a title as "Poseidon (film) ." whose full stop stands apart). */
  function suggestible(text, sentence) {
    const body = text.slice(sentence.start, sentence.end);
    if ((body.match(/[\p{L}\p{N}]+/gu) || []).length < MIN_SUGGESTED_WORDS) return false;
    const ownLine =
      (sentence.start === 0 || /[\r\n]/.test(text[sentence.start - 1])) &&
      (sentence.end === text.length || /[\r\n]/.test(text[sentence.end]));
    return !ownLine || /\S[.!?]["'’”)\]]*$/u.test(body);
  }

  function tokens(text) {
    return (text.toLowerCase().match(/[\p{L}\p{N}]+/gu) || []).filter((w) => w.length > 2);
  }

  /** A keyboard caret over the sources: a span shown as the ev-caret highlight (CSS Custom
   * Highlight API), or as the page's selection where that API is missing. It never takes the
   * page's selection away from the mouse: a selection made with the mouse moves the caret there.
   *
   * next() / previous(): the next / previous sentence (across sources, trailing spaces left
   *   out); extend(+1 / -1): move the end by one word (punctuation and emoji count as words;
   *   spaces and line breaks are skipped); suggest(text): the sentence sharing most words with
   *   `text` (e.g. the active claim's), never a title or a sentence of fewer than
   *   MIN_SUGGESTED_WORDS words, returning whether one shares any; find(query): the next
   *   occurrence of `query` (case-insensitive) after the caret, wrapping around, returning
   *   whether it was found; picked(): the caret as a selection {container, start, end, quote}
   *   while it is shown, else null; hide(): stop showing it (its place is kept).
   */
  W.Caret = function (containers) {
    const native = Boolean(window.CSS && CSS.highlights && typeof window.Highlight === "function");
    const sources = containers.map((container) => {
      const text = container.textContent;
      return {
        container: container,
        text: text,
        sentences: segments(text, "sentence")
          .map(trimmed)
          .filter((s) => s.end > s.start),
        words: segments(text, "word")
          .filter((s) => /\S/.test(s.text))
          .map(trimmed),
      };
    });
    let at = null; // {source index, start, end}
    let shown = false;

    function hide() {
      shown = false;
      if (native) CSS.highlights.delete("ev-caret");
    }

    function show() {
      if (!at) return;
      const source = sources[at.source];
      const range = offsets.range(source.container, at.start, at.end);
      const selection = window.getSelection();
      if (native) {
        if (selection) selection.removeAllRanges();
        CSS.highlights.set("ev-caret", new Highlight(range));
      } else if (selection) {
        selection.removeAllRanges();
        selection.addRange(range);
      }
      shown = true;
      const box = range.getBoundingClientRect();
      const scroller = source.container.closest(".labelling-sources");
      if (scroller && scroller.scrollHeight > scroller.clientHeight) {
        const outer = scroller.getBoundingClientRect();
        if (box.top < outer.top || box.bottom > outer.bottom) {
          scroller.scrollTop += box.top - outer.top - scroller.clientHeight / 3;
        }
      } else if (box.top < 0 || box.bottom > window.innerHeight) {
        window.scrollBy(0, box.top - window.innerHeight / 3);
      }
    }

    function sync() {
      // A selection made with the mouse moves the caret there.
      const picked = W.readSelection();
      if (!picked || picked.error) return;
      const index = sources.findIndex((s) => s.container === picked.container);
      if (index >= 0) at = { source: index, start: picked.start, end: picked.end };
    }

    function flat() {
      const all = [];
      sources.forEach((source, i) =>
        source.sentences.forEach((s) => all.push({ source: i, start: s.start, end: s.end }))
      );
      return all;
    }

    function step(direction) {
      sync();
      const all = flat();
      if (!all.length) return false;
      let index;
      if (!at) index = direction > 0 ? 0 : all.length - 1;
      else if (direction > 0) {
        index = all.findIndex((s) => s.source > at.source || (s.source === at.source && s.start >= at.end));
        if (index < 0) index = all.length - 1;
      } else {
        index = -1;
        all.forEach((s, i) => {
          if (s.source < at.source || (s.source === at.source && s.end <= at.start)) index = i;
        });
        if (index < 0) index = 0;
      }
      at = Object.assign({}, all[index]);
      show();
      return true;
    }

    function extend(direction) {
      sync();
      if (!at) return step(1);
      const words = sources[at.source].words;
      if (direction > 0) {
        const next = words.find((w) => w.end > at.end);
        if (next) at.end = next.end;
      } else {
        const previous = words.filter((w) => w.end < at.end && w.end > at.start).pop();
        if (previous) at.end = previous.end;
      }
      show();
      return true;
    }

    function suggest(text) {
      const wanted = new Set(tokens(text));
      let best = null;
      let bestScore = 0;
      flat().forEach((s) => {
        const text = sources[s.source].text;
        if (!suggestible(text, s)) return;
        const words = tokens(text.slice(s.start, s.end));
        const score = new Set(words.filter((w) => wanted.has(w))).size;
        if (score > bestScore) {
          best = s;
          bestScore = score;
        }
      });
      if (!best) return false;
      at = Object.assign({}, best);
      show();
      return true;
    }

    function find(query) {
      if (!query) return false;
      sync();
      const needle = query.toLowerCase();
      const order = [];
      const from = at ? at.source : 0;
      for (let k = 0; k <= sources.length; k += 1) order.push((from + k) % sources.length);
      for (let k = 0; k < order.length; k += 1) {
        const i = order[k];
        const haystack = sources[i].text.toLowerCase();
        const after = k === 0 && at ? at.start + 1 : 0;
        const hit = haystack.indexOf(needle, k === order.length - 1 ? 0 : after);
        if (hit >= 0) {
          at = { source: i, start: hit, end: hit + needle.length };
          show();
          return true;
        }
      }
      return false;
    }

    function picked() {
      if (!at || !shown) return null;
      const source = sources[at.source];
      return {
        container: source.container,
        start: at.start,
        end: at.end,
        quote: source.text.slice(at.start, at.end),
      };
    }

    return {
      next: () => step(1),
      previous: () => step(-1),
      extend: extend,
      suggest: suggest,
      find: find,
      picked: picked,
      hide: hide,
    };
  };

  // --- evidence chips --------------------------------------------------------------------------

  function hidden(name, value) {
    const input = document.createElement("input");
    input.type = "hidden";
    input.name = name;
    input.value = String(value);
    return input;
  }

  const chips = {};
  W.chips = chips;

  /** The evidence of a claim row, from its chips: [{chip, n, source_version_id, start, end,
   * unit, quote}]. */
  chips.of = function (row) {
    const claim = row.dataset.claimId;
    return Array.from(row.querySelectorAll(".chip[data-n]")).map((chip) => {
      const prefix = "claim-" + claim + "-evidence-" + chip.dataset.n + "-";
      const value = (name) => {
        const input = chip.querySelector("input[name='" + prefix + name + "']");
        return input ? input.value : "";
      };
      let quote = "";
      try {
        quote = JSON.parse(value("quote_json") || '""');
      } catch (error) {
        quote = "";
      }
      return {
        chip: chip,
        n: Number(chip.dataset.n),
        source_version_id: value("source_version_id"),
        start: value("start"),
        end: value("end"),
        unit: value("unit") || "codepoint",
        quote: quote,
      };
    });
  };

  /** Add a chip (hidden inputs named as the form expects) for `span` = {source_version_id,
   * source_label, start, end, quote, unit} to the claim row; returns the chip. */
  chips.add = function (row, span) {
    const list = row.querySelector(".evidence-list");
    const claim = row.dataset.claimId;
    let n = 0;
    list.querySelectorAll(".chip[data-n]").forEach((chip) => {
      n = Math.max(n, Number(chip.dataset.n) + 1);
    });
    const prefix = "claim-" + claim + "-evidence-" + n + "-";
    const chip = document.createElement("span");
    chip.className = "chip";
    chip.dataset.n = String(n);
    chip.dataset.sourceVersionId = String(span.source_version_id);
    const text = document.createElement("span");
    text.className = "chip-text";
    const quote = span.quote.length > 80 ? span.quote.slice(0, 77) + "…" : span.quote;
    text.textContent = "“" + quote + "” · " + (span.source_label || "source");
    text.title = span.quote;
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
    return chip;
  };

  /** Remove a chip; shows "none yet" when it was the claim's last. */
  chips.remove = function (chip) {
    const list = chip.closest(".evidence-list");
    chip.remove();
    const empty = list && list.querySelector(".evidence-empty");
    if (empty) empty.hidden = Boolean(list.querySelector(".chip"));
  };

  /** The highlight spans of claim rows: [{container, start, end, colour, active, row, chip}]. */
  chips.spans = function (rows, activeRow) {
    const spans = [];
    rows.forEach((row, position) => {
      chips.of(row).forEach((span) => {
        const container = document.getElementById("source-" + span.source_version_id);
        if (!container) return;
        const at = offsets.spanUtf16(container, span);
        spans.push({
          container: container,
          start: at.start,
          end: at.end,
          colour: position % COLOURS,
          active: row === activeRow,
          row: row,
          chip: span.chip,
        });
      });
    });
    return spans;
  };

  window.Workbench = W;
})();
