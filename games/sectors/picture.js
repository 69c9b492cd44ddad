// How the Almanac console draws a sectors version: the colony grid with people and buildings.
// Loaded by the console from the sectors manifest's console_picture; `html` is the console's htm binding.
// The grid takes the panel's width (no fixed cell size), so a colony of any width fits the page; building names are
// shown in words ("lumber camp"), which a narrow cell wraps between.
export default function SectorsPicture({ picture, before, html }) {
  const grid = picture.grid || [];
  const old = (r, c) => before && before.grid && before.grid[r] && JSON.stringify(before.grid[r][c]);
  const stock = Object.entries(picture.stock || {}).map(([k, v]) => `${k} ${v}`).join(", ");
  return html`<div role="grid" aria-label="colony grid" class="grid sectors"
      style=${`grid-template-columns: repeat(${picture.columns || 1}, minmax(0, 1fr))`}>
    ${grid.map((line, r) => line.map((cell, c) => html`<div role="gridcell"
        class=${`cell sector ${cell.explored ? "" : "unexplored"} ${before && old(r, c) !== JSON.stringify(cell) ? "changed" : ""}`}
        aria-label=${`sector ${r},${c}: ${cell.explored ? cell.type : "unexplored"}`}>
      ${cell.explored ? html`<strong>${cell.type}</strong><span>pop ${cell.population}${cell.population_cap == null ? "" : `/${cell.population_cap}`}</span>
        <span>${(cell.buildings || []).map((name) => name.replaceAll("_", " ")).join(", ") || "–"}</span>` : html`<span class="muted">?</span>`}
    </div>`))}</div>
    <p class="muted">${picture.season} of year ${picture.year}; stock ${stock || "none"}</p>
    <ul class="legend" aria-label="legend">
      <li><span class="swatch sector-key">pop</span>people / room for people (no room given: no cap)</li>
      <li><span class="swatch sector-key">–</span>no buildings</li>
      <li><span class="swatch unexplored">?</span>unexplored</li>
      <li><span class="swatch changed"></span>changed since the compared version</li>
    </ul>`;
}
