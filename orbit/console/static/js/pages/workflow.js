// One workflow: its graph with live step state, the steps in words, signals waiting to be
// consumed, the inbox backlog ("task finished, orchestration not yet advanced"), its history;
// send a signal, pause, resume or cancel.
import { api, can, ns } from "../api.js";
import { Dag, phase } from "../dag.js";
import { html, useState } from "../lib.js";
import { usePoll } from "../poll.js";
import { Confirm, Field, Freshness, Json, Page, State, Table, Time, duration, newId } from "../ui.js";

function SignalForm({ namespace, workflow, onDone }) {
  const waiting = workflow.steps
    .map((s) => /^waiting for signal '([^']+)'/.exec(s.detail)?.[1])
    .filter(Boolean);
  const [open, setOpen] = useState(false);
  const [name, setName] = useState(waiting[0] || "");
  const [payload, setPayload] = useState("{}");
  const [signalId, setSignalId] = useState(newId());
  const [sent, setSent] = useState(null);
  const run = async () => {
    let body;
    try {
      body = payload.trim() ? JSON.parse(payload) : null;
    } catch (e) {
      throw new Error(`Payload is not JSON: ${e.message}`);
    }
    const answer = await api(`${ns(namespace)}/workflows/${workflow.id}/signals`, {
      method: "POST",
      body: { signal_id: signalId, name, payload: body },
    });
    setSent(answer);
    setOpen(false);
    setSignalId(newId());
    onDone();
  };
  return html`<button type="button" class="primary" onClick=${() => { setName(waiting[0] || name); setOpen(true); }}>Send signal…</button>
    ${sent ? html`<span class="hint" role="status">Signal ${sent.name}: ${sent.state}${sent.consumed_by_step ? ` by ${sent.consumed_by_step}` : ""}</span>` : null}
    <${Confirm} open=${open} title="Send a signal" confirmLabel="Send" onClose=${() => setOpen(false)} onConfirm=${run}>
      <p>${waiting.length ? `Waiting now for: ${waiting.join(", ")}.` : "No step waits for a signal now; a signal is kept until a wait of its name takes it."}
        Sending again with the same signal id is a replay, not a second signal.</p>
      <${Field} label="Signal name"><input name="signal" required value=${name} onInput=${(e) => setName(e.target.value)} /><//>
      <${Field} label="Payload (JSON)"><textarea name="payload" rows="4" value=${payload} onInput=${(e) => setPayload(e.target.value)} /><//>
      <${Field} label="Signal id"><input name="signal_id" required value=${signalId} onInput=${(e) => setSignalId(e.target.value)} /><//>
    <//>`;
}

function ControlButton({ namespace, workflow, action, onDone }) {
  const [open, setOpen] = useState(false);
  const [reason, setReason] = useState("");
  const words = {
    pause: "No new step tasks are granted; tasks already running finish and are recorded. Resume picks up what happened meanwhile.",
    resume: "Reopens the gate and applies what happened while paused.",
    cancel: "Open steps are cancelled and their tasks cancelled by the task rules (a running task is asked to stop).",
  };
  const label = action[0].toUpperCase() + action.slice(1);
  const run = async () => {
    await api(`${ns(namespace)}/workflows/${workflow.id}/${action}`, { method: "POST", body: { reason } });
    setOpen(false);
    onDone();
  };
  return html`<button type="button" class=${action === "cancel" ? "danger" : ""} onClick=${() => setOpen(true)}>${label}…</button>
    <${Confirm} open=${open} title=${`${label} this workflow`} confirmLabel=${label} danger=${action === "cancel"}
      onClose=${() => setOpen(false)} onConfirm=${run}>
      <p>${words[action]} Audited.</p>
      <${Field} label="Reason (optional)"><input name="reason" value=${reason} onInput=${(e) => setReason(e.target.value)} /><//>
    <//>`;
}

function Steps({ workflow, base }) {
  return html`<${Table} caption="Steps" head=${["Step", "Kind", "State", "Where it is", "Task", "Rounds"]}>
    ${workflow.steps.map((s) => {
      const current = s.activations.at(-1);
      return html`<tr data-step=${s.name}>
        <th scope="row">${s.name}</th>
        <td>${s.kind}</td>
        <td><${State} state=${s.state} /> <span class="hint">${phase(s)}</span></td>
        <td>${s.detail}</td>
        <td>${current?.task_id ? html`<a href=${`${base}/tasks/${current.task_id}`}><code class="short">${current.task_id}</code></a> <${State} state=${current.task_state} />` : "—"}</td>
        <td>${current?.max_rounds ? `${current.rounds_used} of ${current.max_rounds}` : ""}</td>
      </tr>`;
    })}
  <//>`;
}

export function WorkflowDetail({ ns: namespace, id, session }) {
  const poll = usePoll(() => api(`${ns(namespace)}/workflows/${encodeURIComponent(id)}`), [namespace, id], 2000);
  const history = usePoll(() => api(`${ns(namespace)}/workflows/${encodeURIComponent(id)}/history`), [namespace, id], 10000);
  const w = poll.data;
  const base = `/ui/ns/${encodeURIComponent(namespace)}`;
  const running = w?.state === "RUNNING";
  const actions = w && running && can(session, "submit") ? html`
    <${SignalForm} namespace=${namespace} workflow=${w} onDone=${poll.refresh} />
    <${ControlButton} namespace=${namespace} workflow=${w} action=${w.paused ? "resume" : "pause"} onDone=${poll.refresh} />
    <${ControlButton} namespace=${namespace} workflow=${w} action="cancel" onDone=${poll.refresh} />` : null;
  return html`<${Page} title=${`Workflow ${id}`}
    subtitle=${w ? html`${w.definition} v${w.version} · <${State} state=${w.state} />${w.paused ? html` <span class="state state-paused">paused</span>` : null}` : null}
    actions=${actions}>
    <${Freshness} poll=${poll} />
    ${w ? html`
      <${Dag} steps=${w.steps} vertical=${window.innerWidth < 700} />
      <ul class="legend" aria-label="Colours">
        ${["pending", "active", "signal", "polling", "advancing", "review", "succeeded", "failed"].map((p) => html`<li class=${`phase-${p}`}><span class="swatch"></span>${p}</li>`)}
      </ul>
      ${w.inbox_pending ? html`<p class="where">${w.inbox_pending} task outcome(s) not yet applied by the orchestration (oldest ${duration(w.inbox_oldest_age_seconds)}).</p>` : null}
      ${w.pending_continuations ? html`<p class="where">${w.pending_continuations} outcome(s) consumed while paused, applied on resume.</p>` : null}
      <h2>Steps</h2><${Steps} workflow=${w} base=${base} />
      <h2>Signals not yet consumed</h2>
      ${w.pending_signals.length ? html`<ul>${w.pending_signals.map((s) => html`<li>${s.name} (${s.signal_id}), received <${Time} at=${s.received_at} /></li>`)}</ul>` : html`<p class="muted">None.</p>`}
      <h2>Input</h2><${Json} value=${w.input} label="input" />
      ${w.output != null ? html`<h2>Output</h2><${Json} value=${w.output} label="output" />` : null}
      ${w.error != null ? html`<h2>Error</h2><${Json} value=${w.error} label="error" />` : null}
      <h2>History</h2>
      <ol class="timeline">${(history.data?.events || []).map((e) => html`<li>
        <${Time} at=${e.at} exact /> · ${e.kind}${e.step_name ? ` · ${e.step_name}` : ""}${e.actor ? html` <span class="hint">by ${e.actor}</span>` : null}
      </li>`)}</ol>` : null}
  <//>`;
}
