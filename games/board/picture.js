// How the Almanac console draws a board version: the 11x11 map with its terrains and mountains, the current
// element's shape, and where the move being typed would land. Loaded by the console from the board manifest's
// console_picture; `html` is the console's htm binding; `draft` the command being typed in the Play form;
// `onPick` (when the viewer may play) takes the fields a click on a cell proposes: its row and column.
const TERRAINS = [
  ["forest", "F"], ["village", "V"], ["farm", "f"], ["water", "W"], ["mountain", "▲"], ["monster", "M"],
];
const MARK = Object.fromEntries(TERRAINS);

// The filled cells of a shape ("1" = filled), mirrored left-right first, then turned clockwise, as offsets
// from the top-left of the filled cells: what games/board/v1/rules.py shape_offsets computes for the rules.
export function shapeOffsets(shape, rotation = 0, mirror = false) {
  let cells = [];
  shape.forEach((line, r) => [...line].forEach((mark, c) => { if (mark === "1") cells.push([r, c]); }));
  if (mirror) cells = cells.map(([r, c]) => [r, 2 - c]);
  for (let turn = 0; turn < Math.floor(rotation / 90) % 4; turn++) cells = cells.map(([r, c]) => [c, 2 - r]);
  const top = Math.min(...cells.map(([r]) => r)), left = Math.min(...cells.map(([, c]) => c));
  return cells.map(([r, c]) => [r - top, c - left]);
}

// The cells the typed placement would cover, and whether each is free on the map (null = free; "" in the rules' own view).
function preview(board, element, draft) {
  if (!element || !draft || draft.kind !== "place_element") return new Map();
  const row = Number(draft.row), column = Number(draft.column);
  if (draft.row === undefined || draft.column === undefined || !Number.isInteger(row) || !Number.isInteger(column)) {
    return new Map();
  }
  const cells = new Map();
  for (const [r, c] of shapeOffsets(element.shape, Number(draft.rotation || 0), Boolean(draft.mirror))) {
    cells.set(`${row + r},${column + c}`, board[row + r] !== undefined && [null, ""].includes(board[row + r][column + c]));
  }
  return cells;
}

function Legend({ html }) {
  return html`<ul class="legend" aria-label="legend">
    ${TERRAINS.map(([terrain, mark]) => html`<li><span class=${`swatch t-${terrain}`}>${mark}</span>${terrain}</li>`)}
    <li><span class="swatch t-empty"></span>empty</li>
    <li><span class="swatch t-empty changed"></span>changed since the compared version</li>
    <li><span class="swatch t-empty preview"></span>the typed move</li>
    <li><span class="swatch t-empty preview blocked"></span>the typed move, on a filled cell or off the map</li>
  </ul>`;
}

function Element({ element, draft, html }) {
  const turned = draft && draft.kind === "place_element";
  const offsets = shapeOffsets(element.shape, turned ? Number(draft.rotation || 0) : 0, turned && Boolean(draft.mirror));
  const filled = new Set(offsets.map(([r, c]) => `${r},${c}`));
  const size = 1 + Math.max(...offsets.flat());
  return html`<div class="element" data-testid="current-element">
    <div role="img" aria-label=${`element #${element.number}: ${element.terrain}, ${offsets.length} cells`} class="grid"
      style=${`grid-template-columns: repeat(${size}, 30px)`}>
      ${Array.from({ length: size * size }, (_, i) => {
        const key = `${Math.floor(i / size)},${i % size}`;
        return html`<div class=${`cell ${filled.has(key) ? `t-${element.terrain} filled` : "t-empty"}`}>${filled.has(key) ? MARK[element.terrain] : ""}</div>`;
      })}</div>
    <div>current element <strong>#${element.number}</strong>: ${element.terrain}, costs <strong>${element.time}</strong> time${" "}
      <div class="muted">${turned ? `as typed: turned ${Number(draft.rotation || 0)}°${draft.mirror ? ", mirrored" : ""}` : "as dealt (not turned)"};
        row and column name its top-left filled cell</div></div>
  </div>`;
}

export default function BoardPicture({ picture, before, html, draft, onPick }) {
  const board = picture.board || [];
  const element = picture.current_element;
  const typed = preview(board, element, draft);
  return html`<div class="row">
    <div role="grid" aria-label="board map" class="grid" style=${`grid-template-columns: 22px repeat(${board.length}, 30px)`}
      data-testid="board">
      <div class="axis"></div>${board.map((_, c) => html`<div class="axis" aria-hidden="true">${c}</div>`)}
      ${board.map((line, r) => [html`<div class="axis" aria-hidden="true">${r}</div>`, ...line.map((cell, c) => {
        const changed = before && before.board && before.board[r] && before.board[r][c] !== cell;
        const free = typed.get(`${r},${c}`);
        const mark = free === undefined ? "" : free ? "preview" : "preview blocked";
        return html`<div role="gridcell" class=${`cell t-${cell || "empty"} ${changed ? "changed" : ""} ${mark} ${onPick ? "pickable" : ""}`}
          onClick=${onPick ? () => onPick({ row: r, column: c }) : null} title=${onPick ? "place the element's top-left filled cell here" : null}
          aria-label=${`row ${r} column ${c}: ${cell || "empty"}${mark ? " (typed move)" : ""}`} data-changed=${changed ? "1" : null}>${MARK[cell] || ""}</div>`;
      })])}</div>
    ${element ? html`<${Element} element=${element} draft=${draft} html=${html} />` : ""}
  </div>
  ${[...typed.values()].some((free) => !free) ? html`<p class="bad" data-testid="preview-blocked">the typed move covers a filled cell or leaves the map: it would be refused</p>` : ""}
  <p class="muted">time ${picture.time ?? "–"}${picture.time_remaining !== undefined ? ` (${picture.time_remaining} left)` : ""}${picture.season ? `, ${picture.season}` : ""}</p>
  <${Legend} html=${html} />`;
}
