// The review queue: tasks held in NEEDS_REVIEW (an unknown outcome that must not be run again
// by itself), oldest first, each with its evidence: why it was held, what its last attempt
// did, any late report of a lost worker. Open one to review it.
import { api, can, ns, query } from "../api.js";
import { html, useEffect, useState } from "../lib.js";
import { usePoll } from "../poll.js";
import { Freshness, Page, State, Table, Time } from "../ui.js";

// Each held task's detail, read once per task (a held task changes only when someone acts).
function useEvidence(namespace, ids) {
  const [found, setFound] = useState(new Map());
  const key = ids.join(",");
  useEffect(() => {
    let stopped = false;
    (async () => {
      for (const id of ids) {
        if (stopped || found.has(id)) continue;
        try {
          const detail = await api(`${ns(namespace)}/tasks/${id}`);
          if (!stopped) setFound((known) => new Map(known).set(id, detail));
        } catch {
          // shown without evidence; the next change of the list tries again
        }
      }
    })();
    return () => {
      stopped = true;
    };
  }, [namespace, key]);
  return found;
}

function Evidence({ task, detail }) {
  if (!detail) return html`<span class="muted">reading…</span>`;
  const held = [...detail.events].reverse().find((e) => e.to_state === "NEEDS_REVIEW");
  const attempt = detail.attempts.at(-1);
  const late = detail.attempts.filter((a) => a.late_outcome);
  const said = task.error ? (task.error.message || JSON.stringify(task.error).slice(0, 160)) : null;
  return html`<span>${held?.reason || "held for review"}</span>
    ${attempt ? html`<br /><span class="hint">attempt ${attempt.generation}: <${State} state=${attempt.outcome} /> ${attempt.outcome_reason || ""}</span>` : null}
    ${said ? html`<br /><span class="hint">worker said: ${said}</span>` : null}
    ${late.length ? html`<br /><strong>${late.length} late report(s): open the task</strong>` : null}`;
}

export function Review({ ns: namespace, params, session }) {
  const cursor = params.get("page") || "";
  const poll = usePoll(
    () => api(`${ns(namespace)}/tasks${query({ state: "NEEDS_REVIEW", page_size: 50, page_token: cursor })}`),
    [namespace, cursor],
    5000,
  );
  const items = [...(poll.data?.items || [])].reverse();
  const evidence = useEvidence(namespace, items.map((t) => t.id));
  const base = `/ui/ns/${encodeURIComponent(namespace)}`;
  const hint = can(session, "review")
    ? "Open a task to see all its evidence, settle it (succeeded or failed) and retry it if it should run again."
    : "Reviewing needs the review role; this token can look only.";
  return html`<${Page} title="Review queue" subtitle=${hint}>
    <${Freshness} poll=${poll} />
    <${Table} caption="Tasks waiting for review" head=${["Task", "Handler", "Queue", "Held since", "Evidence", ""]}
      empty=${poll.data && !items.length ? "Nothing waits for review." : null}>
      ${items.map((t) => html`<tr>
        <td><a href=${`${base}/tasks/${t.id}`}><code>${t.id}</code></a></td>
        <td><code>${t.handler}</code></td>
        <td>${t.queue}</td>
        <td><${Time} at=${t.updated_at} /></td>
        <td><${Evidence} task=${t} detail=${evidence.get(t.id)} /></td>
        <td><a class="button" href=${`${base}/tasks/${t.id}`} aria-label=${`Open task ${t.id} to review it`}>${can(session, "review") ? "Review" : "Open"}</a></td>
      </tr>`)}
    <//>
    ${poll.data?.next_page_token ? html`<nav class="pager" aria-label="More tasks">
      <a href=${`${base}/review${query({ page: poll.data.next_page_token })}`}>Older →</a></nav>` : null}
  <//>`;
}
