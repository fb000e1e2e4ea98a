// Money and times as a person reads them: amounts in the currency's own minor-unit exponent,
// times in the browser's time zone with the zone named (every API time is RFC 3339 UTC).
import type { Money } from './types';

export function formatMoney(m: Money): string {
  const currency = m.currency.toUpperCase();
  try {
    const format = new Intl.NumberFormat(undefined, { style: 'currency', currency });
    const digits = format.resolvedOptions().maximumFractionDigits ?? 2;
    return format.format(m.amount_minor / 10 ** digits);
  } catch {
    return `${(m.amount_minor / 100).toFixed(2)} ${currency}`;
  }
}

export function formatPricePerHour(m: Money): string {
  return `${formatMoney(m)} / hour`;
}

const timeFormat = new Intl.DateTimeFormat(undefined, {
  hour: '2-digit',
  minute: '2-digit',
  timeZoneName: 'short',
});
const dateTimeFormat = new Intl.DateTimeFormat(undefined, {
  dateStyle: 'medium',
  timeStyle: 'long',
});

/** "14:03 CET" today, or the date too for older times. */
export function formatTime(iso: string, now = Date.now()): string {
  const t = new Date(iso);
  if (Number.isNaN(t.getTime())) return iso;
  if (now - t.getTime() < 20 * 3600 * 1000) return timeFormat.format(t);
  return dateTimeFormat.format(t);
}

export function formatFullTime(iso: string): string {
  const t = new Date(iso);
  return Number.isNaN(t.getTime()) ? iso : dateTimeFormat.format(t);
}

/** "under a minute", "3 min", "2 h 05 min", "4 d 3 h". */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  const minutes = Math.floor(s / 60);
  if (minutes < 1) return 'under a minute';
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `${hours} h ${String(minutes % 60).padStart(2, '0')} min`;
  return `${Math.floor(hours / 24)} d ${hours % 24} h`;
}

/** The browser's time zone as the pages label their times: "times in Europe/Berlin". */
export function zoneLabel(): string {
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  return zone ? `times in ${zone}` : "times in your browser's zone";
}
