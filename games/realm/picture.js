// How the Almanac console draws a realm version (every version of realm): the cities and their holdings,
// and the dice of a trade step. Loaded from the realm manifests' console_picture; `html` is the
// console's htm binding.
export default function RealmPicture({ picture, before, html }) {
  const cities = Object.values(picture.cities || {});
  return html`<div class="row" aria-label="realm cities">
    ${cities.map((city) => {
      const changed = before && JSON.stringify((before.cities || {})[city.name]) !== JSON.stringify(city);
      return html`<div class=${`city ${changed ? "changed" : ""}`}>
        <strong>${city.name}</strong> <span class="muted">${city.owner || "village"}</span>
        <div>people ${city.population}, walls ${city.hit_points}${city.destroyed ? " (destroyed)" : ""}</div>
        <div>army ${city.army ? `${city.army.soldiers} (${city.army.equipment})` : "none"}</div>
        ${city.stock ? html`<div class="muted">${Object.entries(city.stock).filter(([, v]) => v).map(([k, v]) => `${k} ${v}`).join(", ")}</div>`
                     : html`<div class="muted">storage hidden</div>`}
      </div>`;
    })}</div>
    ${(picture.merchants || []).length ? html`<p>merchants: ${(Array.isArray(picture.merchants) ? picture.merchants : Object.values(picture.merchants))
      .map((m) => `${m.trade_id} ${m.home}→${m.host}`).join("; ")}</p>` : ""}
    <ul class="legend" aria-label="legend">
      <li><span class="swatch">walls</span>hit points of the walls</li>
      <li><span class="swatch">army</span>soldiers (equipment)</li>
      <li><span class="swatch">A→B</span>a merchant from A visiting B</li>
      ${Object.entries(FACE).map(([face, mark]) => html`<li><span class="die">${mark}</span>${face} (a die's face)</li>`)}
      <li><span class="swatch muted">storage hidden</span>another player's holdings, not yours to see</li>
      <li><span class="swatch changed"></span>changed since the compared version</li>
    </ul>`;
}

// The auditor's full state holds every city: draw all of them (a player's view is drawn as it is).
export function pictureOf(at) {
  return at.state ? { cities: at.state.cities, merchants: Object.values(at.state.merchants || {}) } : null;
}

const FACE = { star: "★", moon: "☾", skull: "☠", blank: " " };

function Dice({ faces, html }) {
  return html`<span class="dice">${(faces || []).map((f) => html`<span class="die" title=${f} aria-label=${f}>${FACE[f] ?? f}</span>`)}</span>`;
}

// One step of a trade's story: both sides' dice and what they counted.
export function AuditStep({ step, html }) {
  if (!step.buyer) return "";
  return html`<div class="row">
    ${[step.buyer, step.seller].map((side) => html`<div class="city"><strong>${side.city}</strong> takes ${side.resource}
      <div><${Dice} faces=${side.dice} html=${html} /></div>
      <div class="muted">stars ${side.stars}, skulls ${side.skulls}, moons ${side.moons} → counted ${side.counted}, demands ${side.demanded}</div></div>`)}
    </div>`;
}
