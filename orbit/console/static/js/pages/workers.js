// Worker sessions: who is connected, from which pod, serving which queues and handlers, when it
// last renewed; then the sessions that ended lately, with why.
import { api, ns } from "../api.js";
import { html } from "../lib.js";
import { usePoll } from "../poll.js";
import { Freshness, Page, State, Table, Time } from "../ui.js";

export function Workers({ ns: namespace }) {
  const poll = usePoll(() => api(`${ns(namespace)}/worker-sessions`), [namespace], 10000);
  const items = poll.data?.items || [];
  return html`<${Page} title="Workers" subtitle="Live sessions first, then the ones that ended lately">
    <${Freshness} poll=${poll} />
    <${Table} caption="Worker sessions" head=${["Worker", "State", "Pod", "Queues", "Handlers", "Holding", "Last heartbeat", "Expires", "Ended"]}
      empty=${poll.data && !items.length ? "No worker has connected to this namespace." : null}>
      ${items.map((s) => html`<tr>
        <th scope="row">${s.worker_name}<br /><code class="short" title=${s.id}>${s.id}</code></th>
        <td><${State} state=${s.state} /></td>
        <td>${s.pod_name || s.pod_uid || "—"}${s.node ? html`<br /><span class="hint">${s.node}</span>` : null}</td>
        <td>${s.queues.join(", ")}</td>
        <td>${s.handlers ? s.handlers.join(", ") : html`<span class="muted">any</span>`}</td>
        <td class="num">${s.live_attempts}</td>
        <td><${Time} at=${s.renewed_at} /></td>
        <td><${Time} at=${s.expires_at} /></td>
        <td>${s.ended_at ? html`<${Time} at=${s.ended_at} /><br /><span class="hint">${s.end_reason}</span>` : "—"}</td>
      </tr>`)}
    <//>
  <//>`;
}
