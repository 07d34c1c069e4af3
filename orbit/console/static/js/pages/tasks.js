// Tasks: filters in the address (shareable), cursor paging that stays put while tasks change,
// live refresh that keeps the selection, and bulk cancel or retry after a confirmation that
// says what will happen to each selected task.
import { api, can, ns, query } from "../api.js";
import { html, useState } from "../lib.js";
import { usePoll } from "../poll.js";
import { setQuery } from "../router.js";
import { Confirm, Field, Freshness, Page, State, Table, TERMINAL, Time } from "../ui.js";

const STATES = ["WAITING", "LEASED", "RUNNING", "NEEDS_REVIEW", "SUCCEEDED", "FAILED", "CANCELLED"];
const FILTERS = ["state", "queue", "handler", "key", "after", "before"];

// A time filter as the API takes it: RFC 3339, a bare date-time being UTC.
function instant(value) {
  if (!value) return "";
  return /[zZ]|[+-]\d\d:?\d\d$/.test(value) ? value : `${value}Z`;
}

function Filters({ params }) {
  const submit = (event) => {
    event.preventDefault();
    const form = new FormData(event.target);
    setQuery(Object.fromEntries(FILTERS.map((name) => [name, form.get(name)?.trim()])));
  };
  return html`<form class="filters" onSubmit=${submit} aria-label="Filter tasks">
    <${Field} label="State">
      <select name="state" value=${params.get("state") || ""}>
        <option value="">any</option>
        ${STATES.map((s) => html`<option value=${s}>${s}</option>`)}
      </select>
    <//>
    <${Field} label="Queue"><input name="queue" value=${params.get("queue") || ""} /><//>
    <${Field} label="Handler"><input name="handler" value=${params.get("handler") || ""} /><//>
    <${Field} label="Idempotency key"><input name="key" value=${params.get("key") || ""} /><//>
    <${Field} label="Created after (UTC)">
      <input name="after" type="datetime-local" step="1" value=${params.get("after") || ""} />
    <//>
    <${Field} label="Created before (UTC)">
      <input name="before" type="datetime-local" step="1" value=${params.get("before") || ""} />
    <//>
    <div class="filter-buttons">
      <button type="submit" class="primary">Apply filters</button>
      <button type="button" onClick=${() => setQuery({})}>Clear</button>
    </div>
  </form>`;
}

// What cancelling each selected task does, by its state (the API's rules, in words).
function cancelPlan(tasks) {
  const now = tasks.filter((t) => t.state === "WAITING" || t.state === "LEASED");
  const asked = tasks.filter((t) => t.state === "RUNNING");
  const left = tasks.filter((t) => TERMINAL.includes(t.state) || t.state === "NEEDS_REVIEW");
  return { act: [...now, ...asked], lines: [
    now.length && `${now.length} waiting or leased: cancelled at once, they will not run.`,
    asked.length && `${asked.length} running: asked to stop; each ends CANCELLED when its worker confirms, or finishes as it would have.`,
    left.length && `${left.length} finished or held for review: left as they are.`,
  ].filter(Boolean) };
}

function retryPlan(tasks) {
  const act = tasks.filter((t) => t.state === "FAILED" || t.state === "CANCELLED");
  const skipped = tasks.length - act.length;
  return { act, lines: [
    act.length && `${act.length} failed or cancelled: each gets a new task with the same handler and params, linked to it by retry_of. The originals keep their state.`,
    skipped && `${skipped} not failed or cancelled: skipped (settle a task held for review first).`,
  ].filter(Boolean) };
}

function BulkDialog({ kind, tasks, namespace, onClose, onDone }) {
  const [reason, setReason] = useState("");
  const [safe, setSafe] = useState(false);
  const [results, setResults] = useState(null);
  const plan = kind === "cancel" ? cancelPlan(tasks) : retryPlan(tasks);
  const run = async () => {
    if (kind === "retry" && !safe) throw new Error("Confirm that running these tasks again is safe.");
    if (kind === "retry" && !reason.trim()) throw new Error("Give a reason: it is recorded with each retry.");
    const outcome = [];
    for (const task of plan.act) {
      const path = `${ns(namespace)}/tasks/${task.id}/${kind}`;
      const body = kind === "cancel"
        ? { reason }
        : { reason, expected_state_version: task.state_version, safe_to_retry: true };
      try {
        const answer = await api(path, { method: "POST", body });
        outcome.push({ id: task.id, ok: true, text: kind === "cancel" ? answer.state : `new task ${answer.id}` });
      } catch (e) {
        outcome.push({ id: task.id, ok: false, text: e.message });
      }
    }
    setResults(outcome);
    onDone();
  };
  const verb = kind === "cancel" ? "Cancel" : "Retry";
  return html`<${Confirm} open=${true} title=${`${verb} ${tasks.length} selected task${tasks.length === 1 ? "" : "s"}`}
    confirmLabel=${results ? "Done" : `${verb} ${plan.act.length}`} danger=${kind === "cancel"}
    onClose=${onClose} onConfirm=${results ? onClose : run}>
    <ul class="plan">${plan.lines.map((line) => html`<li>${line}</li>`)}</ul>
    ${results
      ? html`<ul class="results" aria-live="polite">${results.map(
          (r) => html`<li class=${r.ok ? "ok" : "failed"}><code>${r.id}</code>: ${r.text}</li>`,
        )}</ul>`
      : html`
        <${Field} label="Reason (recorded with each ${kind})">
          <input value=${reason} onInput=${(e) => setReason(e.target.value)} required=${kind === "retry"} />
        <//>
        ${kind === "retry" ? html`<label class="check"><input type="checkbox" checked=${safe}
          onChange=${(e) => setSafe(e.target.checked)} /> Running these tasks again is safe</label>` : null}`}
  <//>`;
}

export function Tasks({ ns: namespace, params, session }) {
  const [selected, setSelected] = useState(new Map());
  const [bulk, setBulk] = useState(null);
  const filters = Object.fromEntries(FILTERS.map((name) => [name, params.get(name) || ""]));
  const cursor = params.get("page") || "";
  const poll = usePoll(
    () => api(`${ns(namespace)}/tasks${query({
      state: filters.state, queue: filters.queue, handler: filters.handler,
      idempotency_key: filters.key, created_after: instant(filters.after),
      created_before: instant(filters.before), page_token: cursor, page_size: 50,
    })}`),
    [namespace, ...Object.values(filters), cursor],
    5000,
  );
  const items = poll.data?.items || [];
  const toggle = (task, on) => {
    const next = new Map(selected);
    if (on) next.set(task.id, task); else next.delete(task.id);
    setSelected(next);
  };
  // The selection keeps the newest state of each task still on screen.
  const chosen = [...selected.values()].map((t) => items.find((i) => i.id === t.id) || t);
  const base = `/ui/ns/${encodeURIComponent(namespace)}`;
  const actions = can(session, "submit") || can(session, "review")
    ? html`${can(session, "submit") ? html`<button type="button" disabled=${!chosen.length}
          onClick=${() => setBulk("cancel")}>Cancel selected (${chosen.length})</button>` : null}
        ${can(session, "review") ? html`<button type="button" disabled=${!chosen.length}
          onClick=${() => setBulk("retry")}>Retry selected (${chosen.length})</button>` : null}`
    : null;
  const allOn = items.length > 0 && items.every((t) => selected.has(t.id));
  return html`<${Page} title="Tasks" subtitle="Newest first; filters and page are in the address" actions=${actions}>
    <${Filters} params=${params} key=${params.toString()} />
    <${Freshness} poll=${poll} />
    <${Table} caption="Tasks" head=${[
      actions ? html`<input type="checkbox" aria-label="Select every task on this page" checked=${allOn}
        onChange=${(e) => { const next = new Map(selected); items.forEach((t) => e.target.checked ? next.set(t.id, t) : next.delete(t.id)); setSelected(next); }} />` : "",
      "Task", "State", "Queue", "Handler", "Attempts", "Created", "Why it waits"]}
      empty=${poll.data && !items.length ? "No task matches these filters." : null}>
      ${items.map((t) => html`<tr>
        <td>${actions ? html`<input type="checkbox" aria-label=${`Select task ${t.id}`}
          checked=${selected.has(t.id)} onChange=${(e) => toggle(t, e.target.checked)} />` : null}</td>
        <td><a href=${`${base}/tasks/${t.id}`}><code>${t.id}</code></a></td>
        <td><${State} state=${t.state} />${t.cancel_requested ? html` <span class="hint">cancel requested</span>` : null}</td>
        <td>${t.queue}</td>
        <td>${t.handler}</td>
        <td class="num">${t.attempts_used}/${t.max_attempts}</td>
        <td><${Time} at=${t.created_at} /></td>
        <td>${t.state === "WAITING" ? waitingWords(t) : ""}</td>
      </tr>`)}
    <//>
    <nav class="pager" aria-label="Pages of tasks">
      ${cursor ? html`<a href=${`${base}/tasks${query(filters)}`}>Newest</a>` : null}
      ${poll.data?.next_page_token
        ? html`<a href=${`${base}/tasks${query({ ...filters, page: poll.data.next_page_token })}`}>Older →</a>`
        : null}
    </nav>
    ${bulk ? html`<${BulkDialog} kind=${bulk} tasks=${chosen} namespace=${namespace}
      onClose=${() => { setBulk(null); setSelected(new Map()); }} onDone=${poll.refresh} />` : null}
  <//>`;
}

export function waitingWords(task) {
  if (task.runnable_by_live_worker === false)
    return `no live worker serves queue ${task.queue} with handler ${task.handler}`;
  switch (task.waiting_reason) {
    case "ready": return "ready: the next free worker takes it";
    case "scheduled": return "scheduled: not before its available time";
    case "gate_closed": return "its workflow is paused (gate closed)";
    case "concurrency_limit": return `concurrency key ${task.concurrency_key} has no free permit`;
    default: return task.waiting_reason || "";
  }
}
