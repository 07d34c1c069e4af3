// Small shared pieces of every page: times, states, JSON, errors, forms, the confirmation
// dialog. Plain components; the look is in console.css.
import { html, useEffect, useRef, useState } from "./lib.js";

export function utc(iso) {
  return iso ? new Date(iso).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z") : "—";
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  const s = Math.abs(seconds);
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 90) return `${Math.round(s)} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${(s / 3600).toFixed(1)} h`;
  return `${Math.round(s / 86400)} d`;
}

export function relative(iso) {
  if (!iso) return "—";
  const seconds = (new Date(iso).getTime() - Date.now()) / 1000;
  return seconds >= 0 ? `in ${duration(seconds)}` : `${duration(seconds)} ago`;
}

// A time: relative in the text, the exact UTC instant in the title and datetime attribute.
export function Time({ at, exact = false }) {
  if (!at) return html`<span class="muted">—</span>`;
  return html`<time datetime=${at} title=${utc(at)}>${exact ? utc(at) : relative(at)}</time>`;
}

export function State({ state }) {
  if (!state) return null;
  return html`<span class=${`state state-${String(state).toLowerCase()}`}>${state}</span>`;
}

export function Json({ value, label }) {
  if (value === null || value === undefined) return html`<span class="muted">none</span>`;
  return html`<pre class="json" tabindex="0" aria-label=${label}>${JSON.stringify(value, null, 2)}</pre>`;
}

export function ErrorBox({ error }) {
  if (!error) return null;
  return html`<div class="error" role="alert">${error.message || String(error)}</div>`;
}

export function Page({ title, subtitle, actions, children }) {
  useEffect(() => {
    document.title = `${title} · Orbit`;
  }, [title]);
  return html`<section class="page" aria-labelledby="page-title">
    <header class="page-head">
      <div>
        <h1 id="page-title">${title}</h1>
        ${subtitle ? html`<p class="subtitle">${subtitle}</p>` : null}
      </div>
      ${actions ? html`<div class="page-actions">${actions}</div>` : null}
    </header>
    ${children}
  </section>`;
}

// When the data on screen was read, and whether the last refresh failed.
export function Freshness({ poll }) {
  const [, tick] = useState(0);
  useEffect(() => {
    const timer = setInterval(() => tick((n) => n + 1), 1000);
    return () => clearInterval(timer);
  }, []);
  return html`<p class="freshness">
    ${poll.at ? `Updated ${duration((Date.now() - poll.at.getTime()) / 1000)} ago` : "Loading…"}
    ${" "}<button type="button" class="link" onClick=${poll.refresh}>Refresh</button>
    <${ErrorBox} error=${poll.error} />
  </p>`;
}

export function Field({ label, hint, children }) {
  return html`<label class="field"><span class="field-label">${label}</span>${children}${
    hint ? html`<span class="hint">${hint}</span>` : null
  }</label>`;
}

export function Table({ caption, head, children, empty }) {
  return html`<div class="table-wrap" tabindex="0" role="region" aria-label=${caption}>
    <table>
      <caption class="visually-hidden">${caption}</caption>
      <thead><tr>${head.map((h) => html`<th scope="col">${h}</th>`)}</tr></thead>
      <tbody>${children}</tbody>
    </table>
    ${empty ? html`<p class="empty">${empty}</p>` : null}
  </div>`;
}

// A modal confirmation (the native <dialog>: focus stays inside, Escape cancels). `onConfirm`
// may be async; its error is shown in the dialog and keeps it open.
export function Confirm({ open, title, children, confirmLabel, onConfirm, onClose, danger }) {
  const ref = useRef(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (open && !dialog.open) {
      setError(null);
      dialog.showModal();
    }
    if (!open && dialog.open) dialog.close();
  }, [open]);
  const submit = async (event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await onConfirm();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return html`<dialog ref=${ref} onClose=${onClose} aria-labelledby="dialog-title">
    <form onSubmit=${submit}>
      <h2 id="dialog-title">${title}</h2>
      ${children}
      <${ErrorBox} error=${error} />
      <div class="dialog-actions">
        <button type="button" onClick=${onClose}>Close</button>
        <button type="submit" class=${danger ? "danger" : "primary"} disabled=${busy}>
          ${busy ? "Working…" : confirmLabel}
        </button>
      </div>
    </form>
  </dialog>`;
}

export const TERMINAL = ["SUCCEEDED", "FAILED", "CANCELLED"];

export function newId() {
  return crypto.randomUUID ? crypto.randomUUID() : `${Date.now()}-${Math.random()}`;
}
