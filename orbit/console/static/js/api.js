// The console's only way to the server: the public HTTP API with the user's bearer token.
// The token lives in sessionStorage (this tab, until it closes) or, when the user asks to be
// remembered, in localStorage; it is never sent anywhere but this server's /v1 routes.

const KEY = "orbit.console.session";

export function loadSession() {
  const raw = sessionStorage.getItem(KEY) ?? localStorage.getItem(KEY);
  if (!raw) return null;
  try {
    return JSON.parse(raw);
  } catch {
    return null;
  }
}

export function saveSession(session, remember) {
  clearSession();
  (remember ? localStorage : sessionStorage).setItem(KEY, JSON.stringify(session));
}

export function clearSession() {
  sessionStorage.removeItem(KEY);
  localStorage.removeItem(KEY);
}

export class ApiError extends Error {
  constructor(status, problem) {
    super(describe(status, problem));
    this.status = status;
    this.problem = problem;
  }
}

// A problem document in words: its detail, and for a 422 each field with what is wrong.
function describe(status, problem) {
  if (!problem || typeof problem !== "object") return `The server answered ${status}.`;
  const fields = (problem.errors || [])
    .map((e) => `${(e.loc || []).filter((p) => p !== "body").join(".") || "request"}: ${e.msg}`)
    .join("; ");
  const text = problem.detail || problem.title || `The server answered ${status}.`;
  return fields ? `${text} (${fields})` : text;
}

export async function api(path, { method = "GET", body, token } = {}) {
  const bearer = token ?? loadSession()?.token;
  const headers = { Accept: "application/json" };
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let answer;
  try {
    answer = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, { title: "The Orbit server cannot be reached; retrying." });
  }
  const text = await answer.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { title: text.slice(0, 200) };
  }
  if (answer.status === 401 && !token) window.dispatchEvent(new Event("orbit:signed-out"));
  if (!answer.ok) throw new ApiError(answer.status, data);
  return data;
}

// "?a=1&b=2" of the non-empty values, or "".
export function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") search.set(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

export const ns = (namespace) => `/v1/namespaces/${encodeURIComponent(namespace)}`;

export function can(session, role) {
  const roles = session?.roles || [];
  return roles.includes("admin") || roles.includes(role);
}
