// Page addresses: every page is a path under /ui (with its filters in the query string), so a
// link pasted into an incident channel opens the same view. Links are plain <a href>; main.js
// turns clicks on /ui links into history changes instead of page loads.
import { useEffect, useState } from "./lib.js";

const listeners = new Set();

export function navigate(url, { replace = false } = {}) {
  history[replace ? "replaceState" : "pushState"](null, "", url);
  listeners.forEach((listener) => listener());
}

window.addEventListener("popstate", () => listeners.forEach((listener) => listener()));

export function useLocation() {
  const [, setVersion] = useState(0);
  useEffect(() => {
    const listener = () => setVersion((n) => n + 1);
    listeners.add(listener);
    return () => listeners.delete(listener);
  }, []);
  return { path: location.pathname, params: new URLSearchParams(location.search) };
}

// The parameters of `pattern` ("/ui/ns/:ns/tasks/:id") in `path`, or null.
export function match(pattern, path) {
  const want = pattern.split("/");
  const have = path.replace(/\/+$/, "").split("/");
  if (want.length !== have.length) return null;
  const params = {};
  for (let i = 0; i < want.length; i++) {
    if (want[i].startsWith(":")) params[want[i].slice(1)] = decodeURIComponent(have[i]);
    else if (want[i] !== have[i]) return null;
  }
  return params;
}

// Replace the current URL's query with `params` (empty values dropped), keeping the path.
export function setQuery(params, { replace = false } = {}) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") search.set(key, String(value));
  }
  const text = search.toString();
  navigate(location.pathname + (text ? `?${text}` : ""), { replace });
}
