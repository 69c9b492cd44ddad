"""`almanac bench scaling`: the same offered load through 1 and 2 engine processes and 1 and 2 gateways."""

from __future__ import annotations

from rich.table import Table

from almanac.bench import e2e
from almanac.bench.common import output_console

# (engine processes, gateway processes): the baseline first, then one more of each, then both.
LAYOUTS = ((1, 1), (2, 1), (1, 2), (2, 2))


def main(rate: int = 1_500, seconds: int = 6) -> list[dict]:
    """Run ``bench e2e`` once per layout at the same offered rate and print the figures side by side.

    Offer more than one layout can serve to see capacity (achieved, shed); offer less to compare CPU per
    command. On a machine with fewer cores than processes, more processes cannot add capacity: the
    figure then shows what each process costs, which the capacity model in docs/capacity.md uses.
    """
    console = output_console(minimum=150)  # twelve columns: never cut to a narrow terminal
    rows = []
    for engines, gateways in LAYOUTS:
        figures = e2e.main(rate=rate, seconds=seconds, engines=engines, gateways=gateways)
        rows.append({"engines": engines, "gateways": gateways, **figures})
    table = Table(title=f"scaling: {rate} commands/s offered for {seconds} s per layout "
                        f"(baseline: 1 engine, 1 gateway, run first)")
    for column in ("engines", "gateways", "achieved /s", "vs baseline", "shed", "p50 ms", "p99 accepted ms",
                   "CPU ms/command", "engine", "gateway", "projector", "redis"):
        table.add_column(column, justify="right")
    base = rows[0]["achieved_per_s"] or 1.0
    for row in rows:
        per = row["cpu_ms_per_command_by_service"]
        table.add_row(str(row["engines"]), str(row["gateways"]), f"{row['achieved_per_s']:.0f}",
                      f"{row['achieved_per_s'] / base:.2f}x", str(row["shed"]), f"{row['p50_ms']:.2f}",
                      f"{row['accepted_p99_ms']:.1f}", f"{row['cpu_ms_per_command']:.2f}",
                      *(f"{per.get(name, float('nan')):.2f}" for name in ("engine", "gateway", "projector", "redis")))
    console.print(table)
    return rows
