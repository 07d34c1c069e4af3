// Workflow instances, newest first, filtered by state and definition (in the address).
import { api, ns, query } from "../api.js";
import { html } from "../lib.js";
import { usePoll } from "../poll.js";
import { setQuery } from "../router.js";
import { Field, Freshness, Page, State, Table, Time } from "../ui.js";

export function Workflows({ ns: namespace, params }) {
  const state = params.get("state") || "";
  const definition = params.get("definition") || "";
  const cursor = params.get("page") || "";
  const poll = usePoll(
    () => api(`${ns(namespace)}/workflows${query({ state, definition, page_token: cursor, page_size: 50 })}`),
    [namespace, state, definition, cursor],
    5000,
  );
  const items = poll.data?.items || [];
  const base = `/ui/ns/${encodeURIComponent(namespace)}`;
  const submit = (event) => {
    event.preventDefault();
    const form = new FormData(event.target);
    setQuery({ state: form.get("state"), definition: form.get("definition")?.trim() });
  };
  return html`<${Page} title="Workflows">
    <form class="filters" onSubmit=${submit} aria-label="Filter workflows" key=${params.toString()}>
      <${Field} label="State"><select name="state" value=${state}>
        <option value="">any</option>
        ${["RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"].map((s) => html`<option value=${s}>${s}</option>`)}
      </select><//>
      <${Field} label="Definition"><input name="definition" value=${definition} /><//>
      <div class="filter-buttons"><button type="submit" class="primary">Apply filters</button></div>
    </form>
    <${Freshness} poll=${poll} />
    <${Table} caption="Workflows" head=${["Workflow", "Definition", "State", "Start key", "Started", "Finished"]}
      empty=${poll.data && !items.length ? "No workflow matches." : null}>
      ${items.map((w) => html`<tr>
        <td><a href=${`${base}/workflows/${w.id}`}><code>${w.id}</code></a></td>
        <td>${w.definition} v${w.version}</td>
        <td><${State} state=${w.state} />${w.paused ? html` <span class="state state-paused">paused</span>` : null}</td>
        <td><code>${w.start_key}</code></td>
        <td><${Time} at=${w.created_at} /></td>
        <td><${Time} at=${w.finished_at} /></td>
      </tr>`)}
    <//>
    ${poll.data?.next_page_token ? html`<nav class="pager" aria-label="More workflows">
      <a href=${`${base}/workflows${query({ state, definition, page: poll.data.next_page_token })}`}>Older →</a></nav>` : null}
  <//>`;
}
