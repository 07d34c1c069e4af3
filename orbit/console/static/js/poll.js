// Live state by polling: `load` runs now and then every `everyMs` while the page is visible
// (a hidden tab asks nothing; it catches up when shown again). An error keeps the last data
// and is shown beside it; the next round tries again.
import { useEffect, useRef, useState } from "./lib.js";

export function usePoll(load, deps, everyMs) {
  const [state, setState] = useState({ data: null, error: null, loading: true, at: null });
  const [round, setRound] = useState(0);
  const key = JSON.stringify(deps);
  const shown = useRef(key);
  useEffect(() => {
    let stopped = false;
    let timer = null;
    let inFlight = false;
    const run = async () => {
      clearTimeout(timer);
      if (document.hidden || inFlight) return;
      inFlight = true;
      try {
        const data = await load();
        if (!stopped) setState({ data, error: null, loading: false, at: new Date() });
      } catch (error) {
        if (!stopped) setState((s) => ({ ...s, error, loading: false }));
      } finally {
        inFlight = false;
      }
      if (!stopped && everyMs) timer = setTimeout(run, everyMs);
    };
    const onVisibility = () => {
      if (!document.hidden) run();
    };
    if (shown.current !== key) {
      shown.current = key; // another view: the last one's data is not this one's
      setState({ data: null, error: null, loading: true, at: null });
    }
    run();
    document.addEventListener("visibilitychange", onVisibility);
    return () => {
      stopped = true;
      clearTimeout(timer);
      document.removeEventListener("visibilitychange", onVisibility);
    };
  }, [key, round]);
  return { ...state, refresh: () => setRound((n) => n + 1) };
}
