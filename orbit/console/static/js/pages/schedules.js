// Schedules: each one's next fires in UTC and in its own time zone (with the offset, so a DST
// change shows), its occurrence ledger (fired, skipped, missed, and why), suspend and resume.
import { api, can, ns } from "../api.js";
import { html, useState } from "../lib.js";
import { usePoll } from "../poll.js";
import { Confirm, Field, Freshness, Page, State, Table, Time, utc } from "../ui.js";

// "2026-03-29 03:00 +02:00" from the API's wall-clock instant (an ISO string with its offset).
function local(iso) {
  const found = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d(?::\d\d)?)(?:\.\d+)?(Z|[+-]\d\d:\d\d)?$/.exec(iso || "");
  if (!found) return iso || "—";
  return `${found[1]} ${found[2]} ${found[3] === "Z" ? "+00:00" : found[3] || ""}`;
}

// The zone's name for an instant ("Central European Summer Time"): says whether DST is on.
function zoneName(at, timeZone) {
  try {
    const parts = new Intl.DateTimeFormat("en-US", { timeZone, timeZoneName: "long" }).formatToParts(new Date(at));
    return parts.find((p) => p.type === "timeZoneName")?.value || "";
  } catch {
    return "";
  }
}

function NextFires({ namespace, schedule, count = 5 }) {
  const poll = usePoll(
    () => api(`${ns(namespace)}/schedules/preview`, {
      method: "POST",
      body: { cron: schedule.cron, time_zone: schedule.time_zone, count, start_at: schedule.start_at, end_at: schedule.end_at },
    }),
    [namespace, schedule.name, schedule.version],
    60000,
  );
  const instants = poll.data?.instants || [];
  const offsets = new Set(instants.map((i) => local(i.local).slice(-6)));
  return html`<${Table} caption=${`Next fires of ${schedule.name}`} head=${["UTC", `Local (${schedule.time_zone})`]}
    empty=${poll.data && !instants.length ? "It fires no more." : null}>
    ${instants.map((i) => html`<tr><td>${utc(i.at)}</td><td>${local(i.local)} <span class="hint">${zoneName(i.at, schedule.time_zone)}</span></td></tr>`)}
  <//>
  ${offsets.size > 1 ? html`<p class="hint">The zone's UTC offset changes between these fires (daylight saving time).</p>` : null}
  ${schedule.state === "Suspended" ? html`<p class="hint">Suspended: these fire only after a resume.</p>` : null}`;
}

function SuspendButton({ namespace, schedule, onDone }) {
  const [open, setOpen] = useState(false);
  const [reason, setReason] = useState("");
  const suspending = !schedule.suspend;
  const verb = suspending ? "Suspend" : "Resume";
  const run = async () => {
    await api(`${ns(namespace)}/schedules/${schedule.name}/${suspending ? "suspend" : "resume"}`, {
      method: "POST",
      body: { reason },
    });
    setOpen(false);
    onDone();
  };
  return html`<button type="button" onClick=${() => setOpen(true)}>${verb}…</button>
    <${Confirm} open=${open} title=${`${verb} schedule ${schedule.name}`} confirmLabel=${verb}
      onClose=${() => setOpen(false)} onConfirm=${run} danger=${suspending}>
      <p>${suspending
        ? "No instant fires while it is suspended, and those instants are not caught up on resume. Tasks it already fired are left as they are."
        : "It fires again from now on; instants that passed while it was suspended are not fired."} Audited.</p>
      <${Field} label="Reason (optional)"><input name="reason" value=${reason} onInput=${(e) => setReason(e.target.value)} /><//>
    <//>`;
}

function TriggerButton({ namespace, schedule, onDone }) {
  const [open, setOpen] = useState(false);
  const [reason, setReason] = useState("");
  const run = async () => {
    const fired = await api(`${ns(namespace)}/schedules/${schedule.name}/trigger`, {
      method: "POST",
      body: { reason },
    });
    setOpen(false);
    onDone(fired);
  };
  return html`<button type="button" onClick=${() => setOpen(true)}>Trigger now…</button>
    <${Confirm} open=${open} title=${`Trigger schedule ${schedule.name} now`} confirmLabel="Trigger now"
      onClose=${() => setOpen(false)} onConfirm=${run}>
      <p>One task of <code>${schedule.task.handler}</code> is created now, besides the cron instants (which go on as before${schedule.suspend ? "; it stays suspended" : ""}). Its concurrency policy (${schedule.concurrency_policy}) applies. Recorded in the ledger as Manual, and audited.</p>
      <${Field} label="Reason (optional)"><input name="reason" value=${reason} onInput=${(e) => setReason(e.target.value)} /><//>
    <//>`;
}

export function Schedules({ ns: namespace, session }) {
  const poll = usePoll(() => api(`${ns(namespace)}/schedules?page_size=500`), [namespace], 10000);
  const items = poll.data?.items || [];
  const base = `/ui/ns/${encodeURIComponent(namespace)}`;
  return html`<${Page} title="Schedules">
    <${Freshness} poll=${poll} />
    <${Table} caption="Schedules" head=${["Schedule", "Cron", "Time zone", "State", "Next fire (UTC)", "Last fire", "Unfinished tasks", ""]}
      empty=${poll.data && !items.length ? "No schedules in this namespace." : null}>
      ${items.map((s) => html`<tr>
        <th scope="row"><a href=${`${base}/schedules/${s.name}`}>${s.name}</a></th>
        <td><code>${s.cron}</code></td>
        <td>${s.time_zone}</td>
        <td><${State} state=${s.state} /></td>
        <td>${utc(s.next_fire_at)}</td>
        <td><${Time} at=${s.last_fire_at} /></td>
        <td class="num">${s.active_tasks}</td>
        <td class="row-actions">${can(session, "submit") ? html`<${SuspendButton} namespace=${namespace} schedule=${s} onDone=${poll.refresh} />
          <${TriggerButton} namespace=${namespace} schedule=${s} onDone=${poll.refresh} />` : null}</td>
      </tr>`)}
    <//>
  <//>`;
}

export function ScheduleDetail({ ns: namespace, name, session }) {
  const poll = usePoll(
    () => api(`${ns(namespace)}/schedules/${encodeURIComponent(name)}?occurrences=50`),
    [namespace, name],
    5000,
  );
  const s = poll.data;
  const base = `/ui/ns/${encodeURIComponent(namespace)}`;
  const actions = s && can(session, "submit")
    ? html`<${SuspendButton} namespace=${namespace} schedule=${s} onDone=${poll.refresh} />
      <${TriggerButton} namespace=${namespace} schedule=${s} onDone=${poll.refresh} />` : null;
  return html`<${Page} title=${`Schedule ${name}`} subtitle=${s ? html`<${State} state=${s.state} /> version ${s.version}` : null} actions=${actions}>
    <${Freshness} poll=${poll} />
    ${s ? html`
      <dl class="summary">
        <div><dt>Cron</dt><dd><code>${s.cron}</code></dd></div>
        <div><dt>Time zone</dt><dd>${s.time_zone}</dd></div>
        <div><dt>Task</dt><dd><code>${s.task.handler}</code> on ${s.task.queue}</dd></div>
        <div><dt>Concurrency policy</dt><dd>${s.concurrency_policy}</dd></div>
        <div><dt>Misfire policy</dt><dd>${s.misfire_policy}${s.misfire_policy === "CatchUp" ? ` (up to ${s.catch_up_limit})` : ""}</dd></div>
        <div><dt>Starting deadline</dt><dd>${s.starting_deadline_seconds ? `${s.starting_deadline_seconds} s` : "none"}</dd></div>
        <div><dt>Window</dt><dd>${s.start_at ? utc(s.start_at) : "−∞"} … ${s.end_at ? utc(s.end_at) : "∞"}</dd></div>
        <div><dt>Declared by</dt><dd>${s.source}</dd></div>
      </dl>
      <h2>Next fires</h2>
      <${NextFires} namespace=${namespace} schedule=${s} />
      <h2>Occurrence ledger</h2>
      <${Table} caption="Occurrences, newest first" head=${["Instant (UTC)", "Status", "Reason", "Message", "Task", "Task state", "Version"]}
        empty=${s.occurrences.length ? null : "Nothing was decided yet."}>
        ${s.occurrences.map((o) => html`<tr>
          <td>${utc(o.scheduled_at)}${o.instants > 1 ? html`<br /><span class="hint">… ${utc(o.through_at)} (${o.instants} instants)</span>` : null}</td>
          <td><${State} state=${o.status} /></td>
          <td>${o.reason}</td>
          <td>${o.message}</td>
          <td>${o.task_id ? html`<a href=${`${base}/tasks/${o.task_id}`}><code class="short">${o.task_id}</code></a>` : "—"}</td>
          <td><${State} state=${o.task_state} /></td>
          <td class="num">${o.schedule_version}</td>
        </tr>`)}
      <//>` : null}
  <//>`;
}
