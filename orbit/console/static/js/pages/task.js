// One task: where it is and why, its attempts (generation, lease, heartbeat), late reports kept
// as evidence, its events, its JSON; and the actions its state and the token's roles allow —
// cancel, review, manual retry — with the declarations the API demands.
import { api, can, ns } from "../api.js";
import { html, useState } from "../lib.js";
import { usePoll } from "../poll.js";
import { navigate } from "../router.js";
import { Confirm, Field, Freshness, Json, Page, State, Table, TERMINAL, Time, utc } from "../ui.js";

// Where the task is, in a sentence: for a waiting task, why it waits.
function whereItIs(task) {
  const attempt = task.attempts.at(-1);
  switch (task.state) {
    case "WAITING":
      return task.waiting_causes.length
        ? html`Waiting: <ul class="causes">${task.waiting_causes.map((c) => html`<li data-cause=${c.kind}>${c.detail}</li>`)}</ul>`
        : "Ready: the next free worker takes it.";
    case "LEASED":
      return `Leased by attempt ${attempt?.generation}; waiting for its worker to start it (lease ends ${utc(attempt?.lease_expires_at)}).`;
    case "RUNNING":
      return `Running: attempt ${attempt?.generation}, last heartbeat ${attempt?.heartbeat_at ? utc(attempt.heartbeat_at) : "none yet"}, lease ends ${utc(attempt?.lease_expires_at)}.${task.cancel_requested ? " Cancel requested: it ends when the worker confirms." : ""}`;
    case "NEEDS_REVIEW":
      return "Held for review: its outcome is unknown and it is not safe to run again by itself. Check the evidence, settle it, then retry it if it should run again.";
    default:
      return `Finished ${utc(task.finished_at)}.`;
  }
}

function Summary({ task, base }) {
  const rows = [
    ["Queue", task.queue],
    ["Handler", html`<code>${task.handler}</code>`],
    ["Safety", task.safety],
    ["Attempts", `${task.attempts_used} of ${task.max_attempts}`],
    ["Priority", task.priority],
    ["State version", task.state_version],
    ["Created", html`<${Time} at=${task.created_at} exact />`],
    ["Available", html`<${Time} at=${task.available_at} exact />`],
    ["Deadline", html`<${Time} at=${task.deadline_at} exact />`],
    ["Finished", html`<${Time} at=${task.finished_at} exact />`],
    ["Concurrency key", task.concurrency_key || "—"],
    ["Retry of", task.retry_of ? html`<a href=${`${base}/tasks/${task.retry_of}`}><code>${task.retry_of}</code></a>` : "—"],
  ];
  return html`<dl class="summary">${rows.map(([k, v]) => html`<div><dt>${k}</dt><dd>${v}</dd></div>`)}</dl>`;
}

function Attempts({ attempts }) {
  return html`<${Table} caption="Attempts" head=${["Gen.", "State", "Outcome", "Why", "Leased", "Started", "Last heartbeat", "Lease ends", "Finished", "Session"]}
    empty=${attempts.length ? null : "No attempt yet."}>
    ${attempts.map((a) => html`<tr>
      <td class="num">${a.epoch ? `${a.epoch}.` : ""}${a.generation}</td>
      <td>${a.state}</td>
      <td><${State} state=${a.outcome} /></td>
      <td>${a.outcome_reason || ""}</td>
      <td><${Time} at=${a.leased_at} exact /></td>
      <td><${Time} at=${a.started_at} exact /></td>
      <td><${Time} at=${a.heartbeat_at} exact /></td>
      <td><${Time} at=${a.lease_expires_at} exact /></td>
      <td><${Time} at=${a.finished_at} exact /></td>
      <td><code class="short" title=${a.worker_session_id}>${a.worker_session_id || "—"}</code></td>
    </tr>`)}
  <//>`;
}

function Evidence({ task }) {
  const late = task.attempts.filter((a) => a.late_outcome);
  const reported = task.attempts.filter((a) => a.result != null || a.error != null);
  const silent = task.attempts.filter((a) => a.outcome === "LAPSED" || a.outcome === "UNKNOWN");
  if (!late.length && !reported.length && !silent.length)
    return html`<p class="muted">No attempt reported anything.</p>`;
  return html`<ul class="evidence">
    ${silent.map((a) => html`<li><strong>Attempt ${a.generation} ${a.outcome === "LAPSED" ? "was lost" : "could not tell"}</strong>:
      ${a.outcome === "LAPSED"
        ? `its worker stopped renewing the lease (last heartbeat ${a.heartbeat_at ? utc(a.heartbeat_at) : "none"}, lease ended ${utc(a.lease_expires_at)}) after it started ${utc(a.started_at)}; whether its effect happened is unknown.`
        : `its worker reported an unknown outcome (${a.outcome_reason || "no reason given"}).`}</li>`)}
    ${late.map((a) => html`<li><strong>Late report of attempt ${a.generation}</strong> (${a.late_outcome},
      ${utc(a.late_reported_at)}): kept as evidence, never applied.
      <${Json} value=${a.late_result ?? a.late_error} label=${`late report of attempt ${a.generation}`} /></li>`)}
    ${reported.map((a) => html`<li><strong>Attempt ${a.generation}</strong> reported ${a.outcome || "so far"}:
      <${Json} value=${a.error ?? a.result} label=${`report of attempt ${a.generation}`} /></li>`)}
  </ul>`;
}

function Events({ events }) {
  return html`<ol class="timeline">${events.map((e) => html`<li>
    <${Time} at=${e.at} exact /> · v${e.state_version} · ${e.from_state ? html`<${State} state=${e.from_state} /> → ` : null}<${State} state=${e.to_state} />
    <span>${e.reason}</span>${e.actor ? html` <span class="hint">by ${e.actor}</span>` : null}
  </li>`)}</ol>`;
}

function ReviewForm({ task, namespace, onDone }) {
  const [open, setOpen] = useState(false);
  const [decision, setDecision] = useState("failed");
  const [reason, setReason] = useState("");
  const [evidence, setEvidence] = useState("");
  const [ended, setEnded] = useState(false);
  const run = async () => {
    if (!ended) throw new Error("Confirm that no handler of this task is still producing effects.");
    await api(`${ns(namespace)}/tasks/${task.id}/review`, {
      method: "POST",
      body: { decision, reason, evidence_ref: evidence, expected_state_version: task.state_version, execution_ended: true },
    });
    setOpen(false);
    onDone();
  };
  return html`<button type="button" class="primary" onClick=${() => setOpen(true)}>Review…</button>
    <${Confirm} open=${open} title="Settle this task" confirmLabel="Record the review"
      onClose=${() => setOpen(false)} onConfirm=${run}>
      <p>The task ends in the state you choose (version ${task.state_version}); the review is audited with your token's name. To run it again afterwards, settle it as failed, then retry.</p>
      <fieldset><legend>What happened</legend>
        <label class="check"><input type="radio" name="decision" value="succeeded" checked=${decision === "succeeded"}
          onChange=${() => setDecision("succeeded")} /> It succeeded (the effect happened)</label>
        <label class="check"><input type="radio" name="decision" value="failed" checked=${decision === "failed"}
          onChange=${() => setDecision("failed")} /> It failed (no effect happened)</label>
      </fieldset>
      <${Field} label="Evidence" hint="Where you checked: a payment id, a log line, a ticket">
        <input name="evidence" required value=${evidence} onInput=${(e) => setEvidence(e.target.value)} />
      <//>
      <${Field} label="Reason"><input name="reason" required value=${reason} onInput=${(e) => setReason(e.target.value)} /><//>
      <label class="check"><input type="checkbox" name="execution_ended" checked=${ended} onChange=${(e) => setEnded(e.target.checked)} />
        No handler of this task is still running or producing effects</label>
    <//>`;
}

function RetryForm({ task, namespace }) {
  const [open, setOpen] = useState(false);
  const [reason, setReason] = useState("");
  const [safe, setSafe] = useState(false);
  const run = async () => {
    if (!safe) throw new Error("Confirm that running this task again is safe.");
    const created = await api(`${ns(namespace)}/tasks/${task.id}/retry`, {
      method: "POST",
      body: { reason, expected_state_version: task.state_version, safe_to_retry: true },
    });
    setOpen(false);
    navigate(`/ui/ns/${encodeURIComponent(namespace)}/tasks/${created.id}`);
  };
  return html`<button type="button" onClick=${() => setOpen(true)}>Retry…</button>
    <${Confirm} open=${open} title="Retry as a new task" confirmLabel="Create the retry"
      onClose=${() => setOpen(false)} onConfirm=${run}>
      <p>A new task runs handler <code>${task.handler}</code> with the same params, linked to this one by retry_of (at most one retry per task). This task stays ${task.state}. Audited.</p>
      <${Field} label="Reason"><input name="reason" required value=${reason} onInput=${(e) => setReason(e.target.value)} /><//>
      <label class="check"><input type="checkbox" name="safe_to_retry" checked=${safe} onChange=${(e) => setSafe(e.target.checked)} />
        Running it again is safe</label>
    <//>`;
}

function CancelButton({ task, namespace, onDone }) {
  const [open, setOpen] = useState(false);
  const [reason, setReason] = useState("");
  const running = task.state === "RUNNING";
  const run = async () => {
    await api(`${ns(namespace)}/tasks/${task.id}/cancel`, { method: "POST", body: { reason } });
    setOpen(false);
    onDone();
  };
  return html`<button type="button" class="danger" onClick=${() => setOpen(true)}>Cancel…</button>
    <${Confirm} open=${open} title="Cancel this task" confirmLabel="Cancel the task" danger=${true}
      onClose=${() => setOpen(false)} onConfirm=${run}>
      <p>${running ? "It is running: its worker is asked to stop, and it ends CANCELLED when the worker confirms (or finishes as it would have)." : "It has not started: it is cancelled at once and will not run."}</p>
      <${Field} label="Reason (optional)"><input name="reason" value=${reason} onInput=${(e) => setReason(e.target.value)} /><//>
    <//>`;
}

export function TaskDetail({ ns: namespace, id, session }) {
  const poll = usePoll(() => api(`${ns(namespace)}/tasks/${encodeURIComponent(id)}`), [namespace, id], 3000);
  const task = poll.data;
  const base = `/ui/ns/${encodeURIComponent(namespace)}`;
  const actions = task ? html`
    ${can(session, "submit") && !TERMINAL.includes(task.state) && task.state !== "NEEDS_REVIEW" && !task.cancel_requested
      ? html`<${CancelButton} task=${task} namespace=${namespace} onDone=${poll.refresh} />` : null}
    ${can(session, "review") && task.state === "NEEDS_REVIEW"
      ? html`<${ReviewForm} task=${task} namespace=${namespace} onDone=${poll.refresh} />` : null}
    ${can(session, "review") && (task.state === "FAILED" || task.state === "CANCELLED")
      ? html`<${RetryForm} task=${task} namespace=${namespace} />` : null}` : null;
  return html`<${Page} title=${`Task ${id}`} subtitle=${task ? html`<${State} state=${task.state} /> ${task.handler}` : null} actions=${actions}>
    <${Freshness} poll=${poll} />
    ${task ? html`
      <p class="where" aria-live="polite"><strong>Where it is: </strong>${whereItIs(task)}</p>
      <${Summary} task=${task} base=${base} />
      <p>${can(session, "admin")
        ? html`<a href=${`${base}/audit?resource_id=${task.id}`}>Audit entries of this task</a>${task.retry_of ? html` · <a href=${`${base}/audit?resource_id=${task.retry_of}`}>of the task it retries</a>` : null}`
        : html`<span class="muted">The audit trail of this task needs the admin role.</span>`}</p>
      <h2>Attempts</h2><${Attempts} attempts=${task.attempts} />
      <h2>Evidence</h2><${Evidence} task=${task} />
      <h2>Events</h2><${Events} events=${task.events} />
      <h2>Params</h2><${Json} value=${task.params} label="params" />
      <h2>Result</h2><${Json} value=${task.result} label="result" />
      <h2>Error</h2><${Json} value=${task.error} label="error" />` : null}
  <//>`;
}
