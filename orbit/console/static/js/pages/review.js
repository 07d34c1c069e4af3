// The review queue: tasks held in NEEDS_REVIEW (an unknown outcome that must not be run again
// by itself), oldest first to act on, each with what its worker said. Open one to review it.
import { api, can, ns, query } from "../api.js";
import { html } from "../lib.js";
import { usePoll } from "../poll.js";
import { Freshness, Page, Table, Time } from "../ui.js";

function said(task) {
  const error = task.error;
  if (!error) return "—";
  if (typeof error === "string") return error;
  return error.message || error.reason || JSON.stringify(error).slice(0, 160);
}

export function Review({ ns: namespace, params, session }) {
  const cursor = params.get("page") || "";
  const poll = usePoll(
    () => api(`${ns(namespace)}/tasks${query({ state: "NEEDS_REVIEW", page_size: 100, page_token: cursor })}`),
    [namespace, cursor],
    5000,
  );
  const items = [...(poll.data?.items || [])].reverse();
  const base = `/ui/ns/${encodeURIComponent(namespace)}`;
  const hint = can(session, "review")
    ? "Open a task to see its evidence, settle it (succeeded or failed) and retry it if it should run again."
    : "Reviewing needs the review role; this token can look only.";
  return html`<${Page} title="Review queue" subtitle=${hint}>
    <${Freshness} poll=${poll} />
    <${Table} caption="Tasks waiting for review" head=${["Task", "Handler", "Queue", "Held since", "What the worker said", ""]}
      empty=${poll.data && !items.length ? "Nothing waits for review." : null}>
      ${items.map((t) => html`<tr>
        <td><a href=${`${base}/tasks/${t.id}`}><code>${t.id}</code></a></td>
        <td><code>${t.handler}</code></td>
        <td>${t.queue}</td>
        <td><${Time} at=${t.updated_at} /></td>
        <td>${said(t)}</td>
        <td><a class="button" href=${`${base}/tasks/${t.id}`} aria-label=${`Open task ${t.id} to review it`}>${can(session, "review") ? "Review" : "Open"}</a></td>
      </tr>`)}
    <//>
    ${poll.data?.next_page_token ? html`<nav class="pager" aria-label="More tasks">
      <a href=${`${base}/review${query({ page: poll.data.next_page_token })}`}>Older →</a></nav>` : null}
  <//>`;
}
