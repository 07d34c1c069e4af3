// Overview of a namespace: its queues with live tasks by state, the oldest due wait, paused or
// draining; outcomes per minute; and what needs a person, from Orbit's own rows.
import { api, ns } from "../api.js";
import { html } from "../lib.js";
import { usePoll } from "../poll.js";
import { duration, Freshness, Page, Table } from "../ui.js";

const STATES = ["WAITING", "LEASED", "RUNNING", "NEEDS_REVIEW"];

function Sparkline({ values }) {
  const width = 180;
  const height = 36;
  const top = Math.max(1, ...values);
  const step = width / Math.max(1, values.length - 1);
  const points = values.map((v, i) => `${(i * step).toFixed(1)},${(height - (v / top) * (height - 4) - 2).toFixed(1)}`);
  const total = values.reduce((a, b) => a + b, 0);
  return html`<figure class="sparkline">
    <svg width=${width} height=${height} viewBox=${`0 0 ${width} ${height}`} role="img"
      aria-label=${`Outcomes per minute over the last ${values.length} minutes: ${values.join(", ")}`}>
      <polyline points=${points.join(" ")} fill="none" stroke="currentColor" stroke-width="2" />
    </svg>
    <figcaption>${total} outcomes in ${values.length} min · last minute ${values.at(-1) ?? 0}</figcaption>
  </figure>`;
}

function Alert({ count, label, href, hint }) {
  const level = count > 0 ? "alert firing" : "alert";
  const body = html`<strong>${count}</strong> <span>${label}</span>
    <span class="hint">${count > 0 ? hint : "none"}</span>`;
  return html`<li class=${level}>${href && count > 0 ? html`<a href=${href}>${body}</a>` : body}</li>`;
}

export function Overview({ ns: namespace }) {
  const poll = usePoll(() => api(`${ns(namespace)}/overview`), [namespace], 10000);
  const view = poll.data;
  const base = `/ui/ns/${encodeURIComponent(namespace)}`;
  return html`<${Page} title="Overview" subtitle=${`Namespace ${namespace}`}>
    <${Freshness} poll=${poll} />
    ${view
      ? html`
        <h2>Needs attention</h2>
        <ul class="alerts">
          <${Alert} count=${view.needs_review} label="tasks waiting for review"
            href=${`${base}/review`} hint="an unknown outcome: decide it, then retry if needed" />
          <${Alert} count=${view.lapsed_leases_last_hour} label="leases lapsed in the last hour"
            href=${`${base}/workers`} hint="workers were lost mid-task" />
          <${Alert} count=${view.parked_deliveries} label="parked result deliveries"
            hint="a subscriber stopped answering: redrive with orbit subscription redrive" />
        </ul>
        <h2>Throughput</h2>
        <${Sparkline} values=${view.outcomes_per_minute} />
        <h2>Queues</h2>
        <${Table} caption="Queues" head=${["Queue", ...STATES, "Oldest due wait", "Status"]}
          empty=${view.queues.length ? null : "No queues and no live tasks yet."}>
          ${view.queues.map(
            (q) => html`<tr>
              <th scope="row">${q.name}</th>
              ${STATES.map(
                (s) => html`<td class="num">
                  <a href=${`${base}/tasks?queue=${encodeURIComponent(q.name)}&state=${s}`}
                    aria-label=${`${q.tasks[s]} ${s} tasks in ${q.name}`}>${q.tasks[s]}</a>
                </td>`,
              )}
              <td>${duration(q.oldest_waiting_seconds)}</td>
              <td>${q.paused ? html`<span class="state state-paused">paused</span>` : null}
                ${q.draining ? html`<span class="state state-draining">draining</span>` : null}
                ${!q.paused && !q.draining ? "serving" : null}</td>
            </tr>`,
          )}
        <//>`
      : null}
  <//>`;
}
