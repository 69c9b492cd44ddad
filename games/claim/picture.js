// How the Almanac console draws a claim version: the 8x8 map with zones, stands and buildings.
// Loaded by the console from the claim manifest's console_picture; `html` is the console's htm binding.
export default function ClaimPicture({ picture, before, html }) {
  const parcels = picture.parcels || [];
  return html`<div role="grid" aria-label="claim map" class="grid" style="grid-template-columns: repeat(8, 56px)">
    ${parcels.map((p, i) => {
      const changed = before && before.parcels && JSON.stringify(before.parcels[i]) !== JSON.stringify(p);
      return html`<div role="gridcell" class=${`cell parcel z-${p.road ? "road" : p.zone} ${changed ? "changed" : ""}`}
        aria-label=${`parcel ${p.name}: ${p.zone}${p.species ? ", " + p.species : ""}${p.building ? ", " + p.building : ""}`}>
        <strong>${p.name}</strong><span>${p.building || p.species || (p.meadow ? "meadow" : "cut")}</span>
        ${p.board_feet ? html`<span>${p.board_feet} bf</span>` : ""}</div>`;
    })}</div>
    <p class="muted">cash ${((picture.cash_cents || 0) / 100).toFixed(2)}; score ${picture.score ?? "–"}</p>
    <${Legend} parcels=${parcels} html=${html} />`;
}

// The species codes as the parcels show them (games/claim/data.py names them).
const SPECIES = {
  rc: "western redcedar", cw: "black cottonwood", wh: "western hemlock", gf: "grand fir", wp: "western white pine",
  df: "Douglas-fir", l: "western larch", lp: "lodgepole pine", pp: "ponderosa pine",
};
const ZONES = [["ridge", "ridge"], ["bench", "bench"], ["bottom", "bottom"], ["road", "road"]];

function Legend({ parcels, html }) {
  const standing = [...new Set(parcels.map((p) => p.species).filter(Boolean))].sort();
  return html`<ul class="legend" aria-label="legend">
    ${ZONES.map(([zone, name]) => html`<li><span class=${`swatch z-${zone}`}></span>${name}</li>`)}
    ${standing.map((code) => html`<li><span class="swatch">${code}</span>${SPECIES[code] || code}</li>`)}
    <li><span class="swatch">bf</span>board feet standing</li>
    <li><span class="swatch">meadow</span>open meadow</li>
    <li><span class="swatch">cut</span>cut, not replanted</li>
    <li><span class="swatch changed"></span>changed since the compared version</li>
  </ul>`;
}
