// Sign in with an API token. `orbit dev` prints a link carrying its token in the address's
// fragment (#token=…), which the browser never sends to a server: the page reads it, signs in
// and removes it from the address at once.
import { api, saveSession } from "../api.js";
import { html, useEffect, useState } from "../lib.js";
import { navigate } from "../router.js";
import { ErrorBox, Field } from "../ui.js";

async function signIn(token, remember, next) {
  const who = await api("/v1/whoami", { token });
  saveSession({ token, namespace: who.namespace, name: who.name, roles: who.roles }, remember);
  const home = `/ui/ns/${encodeURIComponent(who.namespace)}`;
  navigate(next && next.startsWith("/ui/") && !next.startsWith("/ui/login") ? next : home, {
    replace: true,
  });
}

export function Login({ params }) {
  const [token, setToken] = useState("");
  const [remember, setRemember] = useState(false);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const next = params.get("next");

  const attempt = async (value) => {
    setBusy(true);
    setError(null);
    try {
      await signIn(value.trim(), remember, next);
    } catch (e) {
      setError(e.status === 401 ? new Error("This token is unknown, expired or revoked.") : e);
    } finally {
      setBusy(false);
    }
  };

  useEffect(() => {
    document.title = "Sign in · Orbit";
    const fromLink = new URLSearchParams(location.hash.slice(1)).get("token");
    if (fromLink) {
      history.replaceState(null, "", location.pathname + location.search);
      attempt(fromLink);
    }
  }, []);

  return html`<section class="login" aria-labelledby="login-title">
    <h1 id="login-title">Orbit console</h1>
    <p>Sign in with an Orbit API token. The console calls the Orbit API with it and shows what
      the token's namespace and roles allow; a token with the <code>read</code> role sees
      everything and changes nothing.</p>
    <form onSubmit=${(e) => {
      e.preventDefault();
      attempt(token);
    }}>
      <${Field} label="API token" hint="orbit admin token create, a Credential's Secret, or .orbit/dev-token">
        <input type="password" name="token" autocomplete="off" required value=${token}
          onInput=${(e) => setToken(e.target.value)} />
      <//>
      <label class="check">
        <input type="checkbox" checked=${remember} onChange=${(e) => setRemember(e.target.checked)} />
        Keep me signed in on this browser (otherwise until this tab closes)
      </label>
      <${ErrorBox} error=${error} />
      <button type="submit" class="primary" disabled=${busy}>${busy ? "Signing in…" : "Sign in"}</button>
    </form>
  </section>`;
}
