// The console's frame: who is signed in, the navigation, and which page the address names.
import { clearSession, loadSession } from "./api.js";
import { html, render, useEffect } from "./lib.js";
import { match, navigate, useLocation } from "./router.js";
import { Audit } from "./pages/audit.js";
import { Login } from "./pages/login.js";
import { Overview } from "./pages/overview.js";
import { Review } from "./pages/review.js";
import { ScheduleDetail, Schedules } from "./pages/schedules.js";
import { TaskDetail } from "./pages/task.js";
import { Tasks } from "./pages/tasks.js";
import { Workers } from "./pages/workers.js";
import { WorkflowDetail } from "./pages/workflow.js";
import { Workflows } from "./pages/workflows.js";

const PAGES = [
  ["/ui/ns/:ns", Overview],
  ["/ui/ns/:ns/tasks", Tasks],
  ["/ui/ns/:ns/tasks/:id", TaskDetail],
  ["/ui/ns/:ns/review", Review],
  ["/ui/ns/:ns/schedules", Schedules],
  ["/ui/ns/:ns/schedules/:name", ScheduleDetail],
  ["/ui/ns/:ns/workflows", Workflows],
  ["/ui/ns/:ns/workflows/:id", WorkflowDetail],
  ["/ui/ns/:ns/workers", Workers],
  ["/ui/ns/:ns/audit", Audit],
];

const NAV = [
  ["", "Overview"],
  ["/tasks", "Tasks"],
  ["/review", "Review queue"],
  ["/schedules", "Schedules"],
  ["/workflows", "Workflows"],
  ["/workers", "Workers"],
  ["/audit", "Audit log"],
];

function signOut() {
  clearSession();
  navigate("/ui/login");
}

function Nav({ namespace, path }) {
  const base = `/ui/ns/${encodeURIComponent(namespace)}`;
  const current = (suffix) =>
    suffix ? path === base + suffix || path.startsWith(`${base + suffix}/`) : path === base;
  return html`<nav aria-label="Pages"><ul>
    ${NAV.map(
      ([suffix, label]) => html`<li>
        <a href=${base + suffix} aria-current=${current(suffix) ? "page" : undefined}>${label}</a>
      </li>`,
    )}
  </ul></nav>`;
}

function NotFound() {
  return html`<section class="page"><h1>No such page</h1>
    <p>The console has no page at this address. <a href="/ui/">Go to the overview</a>.</p>
  </section>`;
}

function App() {
  const { path, params } = useLocation();
  const session = loadSession();
  useEffect(() => {
    const expired = () => {
      clearSession();
      navigate(`/ui/login?next=${encodeURIComponent(location.pathname + location.search)}`);
    };
    window.addEventListener("orbit:signed-out", expired);
    return () => window.removeEventListener("orbit:signed-out", expired);
  }, []);
  useEffect(() => {
    if (path === "/ui/login") return;
    if (!session) {
      const next = path === "/ui/" ? "" : `?next=${encodeURIComponent(path + location.search)}`;
      navigate(`/ui/login${next}`, { replace: true });
    } else if (path === "/ui/" || path === "/ui") {
      navigate(`/ui/ns/${encodeURIComponent(session.namespace)}`, { replace: true });
    }
  }, [path, session?.token]);

  if (path === "/ui/login") return html`<main id="main"><${Login} params=${params} /></main>`;
  if (!session) return null;
  let page = null;
  let shownNamespace = session.namespace;
  for (const [pattern, Page] of PAGES) {
    const found = match(pattern, path);
    if (found) {
      shownNamespace = found.ns;
      page = html`<${Page} ...${found} params=${params} session=${session} />`;
      break;
    }
  }
  return html`
    <a class="skip" href="#main">Skip to the page</a>
    <header class="top">
      <a class="brand" href="/ui/">Orbit</a>
      <span class="namespace" title="The namespace these pages show">
        namespace <strong>${shownNamespace}</strong>
      </span>
      <span class="who">
        <span>${session.name}</span>
        <span class="roles" aria-label="roles">${session.roles.join(", ")}</span>
        <button type="button" class="link" onClick=${signOut}>Sign out</button>
      </span>
    </header>
    <${Nav} namespace=${shownNamespace} path=${path} />
    <main id="main" tabindex="-1">${page || html`<${NotFound} />`}</main>
  `;
}

// Clicks on links to other console pages change the address without loading the page again.
document.addEventListener("click", (event) => {
  const link = event.target.closest?.("a[href]");
  if (!link || event.defaultPrevented || event.button !== 0) return;
  if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey || link.target) return;
  const url = new URL(link.href, location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith("/ui/")) return;
  if (url.pathname === location.pathname && url.search === location.search && url.hash) return;
  event.preventDefault();
  navigate(url.pathname + url.search);
  document.getElementById("main")?.focus({ preventScroll: true });
  window.scrollTo(0, 0);
});

const root = document.getElementById("app");
root.replaceChildren(); // the "needs JavaScript" note
render(html`<${App} />`, root);
