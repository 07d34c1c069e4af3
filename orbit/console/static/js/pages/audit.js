// The audit log: who did what to which resource, why, with what evidence — filtered by actor,
// action, resource and time (all in the address, so a filtered view can be shared).
import { api, can, query } from "../api.js";
import { html } from "../lib.js";
import { usePoll } from "../poll.js";
import { setQuery } from "../router.js";
import { Field, Freshness, Json, Page, Table, Time } from "../ui.js";

const FILTERS = ["actor", "action", "resource_kind", "resource_id", "since", "until"];

function instant(value) {
  if (!value) return "";
  return /[zZ]|[+-]\d\d:?\d\d$/.test(value) ? value : `${value}Z`;
}

function link(base, entry) {
  if (entry.resource_kind === "task") return `${base}/tasks/${entry.resource_id}`;
  if (entry.resource_kind === "workflow") return `${base}/workflows/${entry.resource_id}`;
  if (entry.resource_kind === "schedule") return `${base}/schedules/${entry.resource_id}`;
  return null;
}

export function Audit({ ns: namespace, params, session }) {
  const filters = Object.fromEntries(FILTERS.map((name) => [name, params.get(name) || ""]));
  const cursor = params.get("page") || "";
  const poll = usePoll(
    () => api(`/v1/audit${query({ ...filters, since: instant(filters.since), until: instant(filters.until), namespace, page_token: cursor, page_size: 100 })}`),
    [namespace, ...Object.values(filters), cursor],
    15000,
  );
  const base = `/ui/ns/${encodeURIComponent(namespace)}`;
  const submit = (event) => {
    event.preventDefault();
    const form = new FormData(event.target);
    setQuery(Object.fromEntries(FILTERS.map((name) => [name, form.get(name)?.trim()])));
  };
  const items = poll.data?.items || [];
  return html`<${Page} title="Audit log" subtitle=${can(session, "admin") ? "Newest first" : "Reading the audit log needs the admin role."}>
    <form class="filters" onSubmit=${submit} aria-label="Filter the audit log" key=${params.toString()}>
      <${Field} label="Actor"><input name="actor" value=${filters.actor} /><//>
      <${Field} label="Action" hint="exact, or a family: task.*"><input name="action" value=${filters.action} /><//>
      <${Field} label="Resource kind"><input name="resource_kind" value=${filters.resource_kind} /><//>
      <${Field} label="Resource id"><input name="resource_id" value=${filters.resource_id} /><//>
      <${Field} label="Since (UTC)"><input name="since" type="datetime-local" step="1" value=${filters.since} /><//>
      <${Field} label="Until (UTC)"><input name="until" type="datetime-local" step="1" value=${filters.until} /><//>
      <div class="filter-buttons">
        <button type="submit" class="primary">Apply filters</button>
        <button type="button" onClick=${() => setQuery({})}>Clear</button>
      </div>
    </form>
    <${Freshness} poll=${poll} />
    <${Table} caption="Audit entries" head=${["When", "Actor", "Action", "Resource", "Reason", "Evidence", "Change"]}
      empty=${poll.data && !items.length ? "No audit entry matches." : null}>
      ${items.map((e) => html`<tr>
        <td><${Time} at=${e.at} exact /></td>
        <td>${e.actor}</td>
        <td><code>${e.action}</code></td>
        <td>${e.resource_kind} ${link(base, e) ? html`<a href=${link(base, e)}><code class="short">${e.resource_id}</code></a>` : html`<code>${e.resource_id}</code>`}</td>
        <td>${e.reason}</td>
        <td>${e.evidence_ref || "—"}</td>
        <td><details><summary>before → after</summary><${Json} value=${{ before: e.before, after: e.after }} label="change" /></details></td>
      </tr>`)}
    <//>
    <nav class="pager" aria-label="Pages of the audit log">
      ${cursor ? html`<a href=${`${base}/audit${query(filters)}`}>Newest</a>` : null}
      ${poll.data?.next_page_token ? html`<a href=${`${base}/audit${query({ ...filters, page: poll.data.next_page_token })}`}>Older →</a>` : null}
    </nav>
  <//>`;
}
