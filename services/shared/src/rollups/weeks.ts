// The weeks of the per-user rollup (migration 0015, usage_rollup_user_by_week): each month
// cut at its 8th, 15th and 22nd days, so a week holds days 1–7, 8–14, 15–21 or 22 to
// the month's end (7 to 10 days, UTC). A week never spans two months: the retention
// drops a week with the month of its days, and a range of 30 days holds three or four
// whole weeks. Pure.

const FIRST_DAYS = [22, 15, 8, 1] as const;

/** The first instant (epoch seconds) of the week holding the instant `atS`. */
export function weekStartS(atS: number): number {
  const at = new Date(atS * 1000);
  const first = FIRST_DAYS.find((day) => at.getUTCDate() >= day)!;
  return Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), first) / 1000;
}

/** The first instant after the week starting at `weekS` (the start of the next one). */
export function weekEndS(weekS: number): number {
  const at = new Date(weekS * 1000);
  const day = at.getUTCDate();
  return day === 22
    ? Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1) / 1000
    : Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), day + 7) / 1000;
}

/** The starts of the weeks lying wholly in [fromS, toS), in order. */
export function weeksWithin(fromS: number, toS: number): number[] {
  const weeks: number[] = [];
  let week = weekStartS(fromS);
  if (week < fromS) week = weekEndS(week);
  for (; weekEndS(week) <= toS; week = weekEndS(week)) weeks.push(week);
  return weeks;
}
