// A workflow's steps as a graph: dagre lays the nodes out (ranks from dependsOn), we draw them
// as SVG, each coloured by where the step is. The steps table beside it says the same in words.
import { graphlib, layout } from "dagre";
import { html } from "./lib.js";

const WIDTH = 210;
const HEIGHT = 64;

// One word for a step's look: finer than its state, from what the API says about it.
export function phase(step) {
  if (step.awaiting_orchestration) return "advancing";
  if (step.state === "PARKED") return "review";
  if (step.state === "ACTIVE" && step.detail.startsWith("waiting for signal")) return "signal";
  if (step.state === "ACTIVE" && step.detail.startsWith("sleeping")) return "sleeping";
  if (step.state === "ACTIVE" && step.kind === "poll") return "polling";
  if (step.state === "ACTIVE" && step.detail.startsWith("paused")) return "paused";
  return step.state.toLowerCase();
}

function clip(text, size) {
  return text.length > size ? `${text.slice(0, size - 1)}…` : text;
}

export function Dag({ steps, vertical }) {
  const graph = new graphlib.Graph();
  graph.setGraph({ rankdir: vertical ? "TB" : "LR", nodesep: 24, ranksep: 48, marginx: 8, marginy: 8 });
  graph.setDefaultEdgeLabel(() => ({}));
  for (const step of steps) graph.setNode(step.name, { width: WIDTH, height: HEIGHT });
  for (const step of steps) for (const dep of step.depends_on) graph.setEdge(dep, step.name);
  layout(graph);
  const { width, height } = graph.graph();
  const summary = steps.map((s) => `${s.name}: ${s.detail}`).join("; ");
  return html`<div class="dag-wrap">
    <svg class="dag" viewBox=${`0 0 ${width} ${height}`} width=${width} height=${height}
      role="img" aria-label=${`Workflow graph. ${summary}`}>
      <defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
        <path d="M 0 0 L 10 5 L 0 10 z" class="dag-arrow" /></marker></defs>
      ${graph.edges().map((e) => {
        const points = graph.edge(e).points.map((p) => `${p.x},${p.y}`).join(" ");
        return html`<polyline class="dag-edge" points=${points} marker-end="url(#arrow)" />`;
      })}
      ${steps.map((step) => {
        const node = graph.node(step.name);
        const x = node.x - WIDTH / 2;
        const y = node.y - HEIGHT / 2;
        const look = phase(step);
        return html`<g class=${`dag-node phase-${look}`} data-step=${step.name} data-phase=${look}>
          <title>${step.name} (${step.kind}): ${step.detail}</title>
          <rect x=${x} y=${y} width=${WIDTH} height=${HEIGHT} rx="8" />
          <text x=${x + 10} y=${y + 20} class="dag-name">${clip(step.name, 24)}</text>
          <text x=${x + 10} y=${y + 37} class="dag-kind">${step.kind} · ${look}</text>
          <text x=${x + 10} y=${y + 54} class="dag-detail">${clip(step.detail, 32)}</text>
        </g>`;
      })}
    </svg>
  </div>`;
}
