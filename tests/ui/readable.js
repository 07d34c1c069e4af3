// Run in the page: what a person could not read or name. Every form control has a label (its
// accessible name), and every piece of text contrasts with what is behind it by at least 4.5:1
// (WCAG AA; 3:1 for large text). Returns the offenders, as short descriptions.
() => {
  const offenders = [];
  for (const control of document.querySelectorAll("input, select, textarea")) {
    if (control.type === "hidden" || !control.checkVisibility()) continue;
    const named = control.labels?.length || control.getAttribute("aria-label");
    if (!named) offenders.push(`unlabelled ${control.outerHTML.slice(0, 80)}`);
  }
  const rgba = (text) => (text.match(/[\d.]+/g) || []).map(Number);
  const luminance = ([r, g, b]) => {
    const c = [r, g, b].map((v) => {
      const s = v / 255;
      return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
  };
  const behind = (element) => {
    for (let e = element; e; e = e.parentElement) {
      const [r, g, b, a = 1] = rgba(getComputedStyle(e).backgroundColor);
      if (a > 0.5) return [r, g, b];
    }
    return rgba(getComputedStyle(document.body).backgroundColor);
  };
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const element = node.parentElement;
    if (!node.textContent.trim() || !element.checkVisibility()) continue;
    if (element.closest("svg, option, .visually-hidden, button:disabled")) continue;
    const style = getComputedStyle(element);
    const [fg, bg] = [luminance(rgba(style.color)), luminance(behind(element))];
    const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
    const large = parseFloat(style.fontSize) >= 24 || (parseFloat(style.fontSize) >= 18.66 && style.fontWeight >= 700);
    if (ratio < (large ? 3 : 4.5)) offenders.push(`${ratio.toFixed(2)}:1 "${node.textContent.trim().slice(0, 30)}"`);
  }
  return [...new Set(offenders)];
}
