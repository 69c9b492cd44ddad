// How the Almanac console draws a board version: the 11x11 map with its terrains and mountains.
// Loaded by the console from the board manifest's console_picture; `html` is the console's htm binding.
const TERRAIN_MARK = { forest: "F", village: "V", farm: "f", water: "W", mountain: "▲", monster: "M" };

export default function BoardPicture({ picture, before, html }) {
  const board = picture.board || [];
  return html`<div role="grid" aria-label="board map" class="grid" style=${`grid-template-columns: repeat(${board.length}, 30px)`}
      data-testid="board">
    ${board.map((line, r) => line.map((cell, c) => {
      const changed = before && before.board && before.board[r] && before.board[r][c] !== cell;
      return html`<div role="gridcell" class=${`cell t-${cell || "empty"} ${changed ? "changed" : ""}`}
        aria-label=${`row ${r} column ${c}: ${cell || "empty"}`} data-changed=${changed ? "1" : null}>${TERRAIN_MARK[cell] || ""}</div>`;
    }))}</div>
    <p class="muted">time ${picture.time ?? "–"}${picture.season ? `, ${picture.season}` : ""}
    ${picture.current_element ? `; current element #${picture.current_element.number} (${picture.current_element.terrain})` : ""}</p>`;
}
