// Aries document viewer/editor. Plain JS, no build step, no remote asset.
// The token comes in the URL fragment (#token=...) and goes back as X-Aries-Token on every /api call.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const tree = $("tree"), editor = $("editor"), saveButton = $("save"), preview = $("preview");
  const status = $("status"), title = $("doc-title"), kindLabel = $("doc-kind"), filter = $("filter");
  const panes = document.querySelector(".panes");

  const token = (function () {
    const match = /(?:^#|&)token=([^&]+)/.exec(window.location.hash);
    if (match) {
      const value = decodeURIComponent(match[1]);
      try { sessionStorage.setItem("aries-token", value); } catch (e) { /* storage off */ }
      return value;
    }
    try { return sessionStorage.getItem("aries-token") || ""; } catch (e) { return ""; }
  })();

  const state = { doc: null, etag: null, dirty: false, saving: false, previewSeq: 0, previewTimer: null,
    pendingDiscard: null };

  function say(kind, text) {
    status.dataset.state = kind;
    status.textContent = text;
  }

  async function api(method, path, body, headers) {
    const init = { method: method, headers: Object.assign({ "X-Aries-Token": token }, headers || {}),
      credentials: "same-origin", cache: "no-store" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(path, init);
    let data = {};
    try { data = await response.json(); } catch (e) { data = {}; }
    return { status: response.status, data: data };
  }

  function errorText(result) {
    return (result.data && result.data.error) || ("the server answered " + result.status);
  }

  // -- the tree ------------------------------------------------------------------------------------
  function groupOf(doc) {
    if (doc.id.indexOf("rag/") === 0) return "index " + doc.id.split("/")[1];
    const match = /^axiom:\/\/([^/]+)/.exec(doc.id);
    return match ? "axiom://" + match[1] : "other";
  }

  function labelOf(doc) {
    if (doc.id.indexOf("rag/") === 0) return doc.path.slice(doc.path.indexOf("/") + 1);
    return doc.path.replace(/^axiom:\/\/[^/]+\//, "");
  }

  async function loadTree() {
    if (!token) {
      say("error", "No token: open the exact URL that `aries serve` printed (it ends with #token=…).");
      return;
    }
    const result = await api("GET", "/api/tree");
    if (result.status !== 200) {
      say("error", "Cannot list the documents: " + errorText(result));
      return;
    }
    tree.textContent = "";
    let group = null;
    for (const doc of result.data.documents) {
      const name = groupOf(doc);
      if (name !== group) {
        group = name;
        const header = document.createElement("li");
        header.className = "group";
        header.textContent = name;
        tree.appendChild(header);
      }
      const item = document.createElement("li");
      const button = document.createElement("button");
      button.type = "button";
      button.dataset.docId = doc.id;
      button.textContent = labelOf(doc);
      button.title = doc.path + " (" + doc.kind + (doc.editable ? "" : ", read-only") + ", " + doc.bytes + " bytes)";
      if (!doc.editable) button.classList.add("readonly");
      button.addEventListener("click", () => openDocument(doc.id));
      item.appendChild(button);
      tree.appendChild(item);
    }
    const count = result.data.documents.length;
    say("loaded", count ? count + " documents. Pick one on the left." : "No documents: add a folder with `aries rag index add PATH` or `aries context add PATH`.");
  }

  function applyFilter() {
    const needle = filter.value.trim().toLowerCase();
    for (const button of tree.querySelectorAll("button")) {
      const hit = !needle || button.dataset.docId.toLowerCase().indexOf(needle) !== -1;
      button.parentElement.classList.toggle("hidden", !hit);
    }
  }

  function markActive(id) {
    for (const button of tree.querySelectorAll("button")) {
      button.classList.toggle("active", button.dataset.docId === id);
    }
  }

  // -- one document ----------------------------------------------------------------------------------
  async function openDocument(id) {
    // Unsaved text is never dropped by one click: the first says so, a second click on the same
    // document discards the changes (no dialog: the page stays keyboard- and test-friendly).
    if (state.dirty && state.doc && state.pendingDiscard !== id) {
      state.pendingDiscard = id;
      say("unsaved", "Unsaved changes in " + state.doc.path + ": save them (Ctrl+S) first, or open " +
        id + " again to discard them.");
      return;
    }
    state.pendingDiscard = null;
    say("loaded", "Opening " + id + "…");
    const result = await api("GET", "/api/doc?id=" + encodeURIComponent(id));
    if (result.status === 423) {
      say("locked", "This document is being saved and reindexed right now; try again in a moment.");
      return;
    }
    if (result.status !== 200) {
      say("error", "Cannot open " + id + ": " + errorText(result));
      return;
    }
    const doc = result.data;
    state.doc = doc;
    state.etag = doc.etag;
    state.dirty = false;
    editor.value = doc.content;
    editor.disabled = false;
    editor.readOnly = !doc.editable;
    saveButton.disabled = true; // nothing to save until the text changes
    title.textContent = doc.path;
    kindLabel.textContent = doc.kind + (doc.editable ? "" : " · read-only");
    markActive(doc.id);
    const markdown = doc.kind === "markdown";
    panes.classList.toggle("no-preview", !markdown);
    preview.textContent = "";
    if (markdown) renderPreview();
    if (doc.editable) {
      say("loaded", "Opened " + doc.path + " (" + doc.bytes + " bytes).");
    } else {
      say("readonly", "Opened " + doc.path + " read-only: " + (doc.note || doc.kind + " documents are not edited here") + ".");
    }
  }

  async function renderPreview() {
    if (!state.doc || state.doc.kind !== "markdown") return;
    const seq = ++state.previewSeq;
    const result = await api("POST", "/api/preview", { content: editor.value });
    if (seq !== state.previewSeq) return; // a newer preview is on its way
    if (result.status === 200) {
      preview.innerHTML = result.data.html; // sanitized on the server (markdown-it-py + nh3); the CSP backs it up
    }
  }

  function schedulePreview() {
    if (state.previewTimer) clearTimeout(state.previewTimer);
    state.previewTimer = setTimeout(renderPreview, 300);
  }

  async function save() {
    const doc = state.doc;
    if (!doc || !doc.editable || state.saving) return;
    state.saving = true;
    saveButton.disabled = true;
    say("loaded", "Saving " + doc.path + "…");
    try {
      const result = await api("PUT", "/api/doc?id=" + encodeURIComponent(doc.id), { content: editor.value },
        { "If-Match": '"' + state.etag + '"' });
      const data = result.data;
      if (result.status === 200) {
        state.etag = data.etag;
        state.dirty = false;
        say("saved", "Saved " + doc.path + " and reindexed it (save " + Math.round(data.save_ms) +
          " ms, reindex " + Math.round(data.reindex_ms) + " ms).");
        renderPreview();
      } else if (result.status === 412) {
        say("conflict", "Not saved: this document changed elsewhere since you opened it. Reload it (open it again) " +
          "and re-apply your edit; your text is still in the editor.");
      } else if (result.status === 423) {
        say("locked", "Not saved: the document is being saved and reindexed right now; try again in a moment.");
      } else if (result.status === 422) {
        const where = data.line ? " at line " + data.line + ", column " + data.column : "";
        say("invalid", "Not saved: " + errorText(result) + where + ".");
      } else if (result.status === 405) {
        say("readonly", "Not saved: " + errorText(result));
      } else {
        say("error", "Not saved: " + errorText(result));
      }
    } catch (e) {
      say("error", "Not saved: the server cannot be reached (" + e + ").");
    } finally {
      state.saving = false;
      saveButton.disabled = !(state.doc && state.doc.editable && state.dirty);
    }
  }

  // -- wiring --------------------------------------------------------------------------------------
  window.addEventListener("beforeunload", (event) => {
    if (state.dirty) event.preventDefault(); // the browser asks before unsaved text is lost
  });
  editor.addEventListener("input", () => {
    state.dirty = true;
    state.pendingDiscard = null;
    saveButton.disabled = !(state.doc && state.doc.editable) || state.saving;
    schedulePreview();
  });
  saveButton.addEventListener("click", save);
  filter.addEventListener("input", applyFilter);
  document.addEventListener("keydown", (event) => {
    const key = event.key.toLowerCase();
    if ((event.ctrlKey || event.metaKey) && key === "s") {
      event.preventDefault();
      save();
    } else if ((event.ctrlKey || event.metaKey) && key === "k") {
      event.preventDefault();
      filter.focus();
    }
  });

  loadTree().catch((e) => say("error", "Cannot reach the server: " + e));
})();
