// How the Almanac console draws a sectors version: the colony grid with people and buildings.
// Loaded by the console from the sectors manifest's console_picture; `html` is the console's htm binding.
export default function SectorsPicture({ picture, before, html }) {
  const grid = picture.grid || [];
  const old = (r, c) => before && before.grid && before.grid[r] && JSON.stringify(before.grid[r][c]);
  return html`<div role="grid" aria-label="colony grid" class="grid" style=${`grid-template-columns: repeat(${picture.columns || 1}, 92px)`}>
    ${grid.map((line, r) => line.map((cell, c) => html`<div role="gridcell"
        class=${`cell sector ${cell.explored ? "" : "unexplored"} ${before && old(r, c) !== JSON.stringify(cell) ? "changed" : ""}`}
        aria-label=${`sector ${r},${c}`}>
      ${cell.explored ? html`<strong>${cell.type}</strong><span>👥 ${cell.population}/${cell.population_cap}</span>
        <span>${(cell.buildings || []).join(", ") || "no buildings"}</span>` : html`<span class="muted">unexplored</span>`}
    </div>`))}</div>
    <p class="muted">${picture.season} of year ${picture.year}; stock ${JSON.stringify(picture.stock)}</p>`;
}
