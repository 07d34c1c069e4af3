// The one place the page's libraries come in: Preact renders, htm lets us write markup in
// tagged template literals (no JSX, so no build step), the hooks hold state.
import { h, render } from "preact";
import htm from "htm";

export const html = htm.bind(h);
export { render };
export { useCallback, useEffect, useMemo, useRef, useState } from "preact/hooks";
