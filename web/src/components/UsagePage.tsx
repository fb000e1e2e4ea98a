// The usage page (R-16; docs/billing.md "Usage history"): minutes and cost per day over the last
// 30 days (GET /api/v1/usage/daily, drawn by UsageChart, loaded only here), the billing sessions
// (GET /api/v1/usage/sessions, 15 a page by the API's keyset cursors) and the queue history
// (GET /api/v1/usage/queue), each with newer/older and a refresh. Times are the browser's zone,
// labelled; every figure is the server's.
import type { ComponentType } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { api, messageOf } from '../api';
import { formatDuration, formatFullTime, formatMoney, zoneLabel } from '../format';
import type { DailyUsage, Page, QueueHistoryEntry, UsageSession } from '../types';
import { Pager } from './Pager';
import { TableHead } from './TableHead';

const PAGE = 15;

export function UsagePage() {
  return (
    <main id="main" class="page narrow">
      <div class="page-head">
        <h1>Usage</h1>
        <span class="muted">Your own instances, {zoneLabel()}</span>
      </div>
      <DailySection />
      <SessionsSection />
      <QueueSection />
    </main>
  );
}

function RefreshButton(props: { busy: boolean; onClick: () => void; what: string }) {
  return (
    // The name is the visible word and a hidden object, so it always contains what is seen (WCAG
    // 2.5.3 "Label in Name"; an aria-label "Refresh …" did not while the button said "Refreshing…").
    <button type="button" class="secondary small" disabled={props.busy} onClick={props.onClick}>
      {props.busy ? 'Refreshing…' : 'Refresh'}
      <span class="visually-hidden"> {props.what}</span>
    </button>
  );
}

function Problem(props: { text: string }) {
  return props.text ? (
    <p class="form-error" role="alert">
      {props.text}
    </p>
  ) : null;
}

/** "+02:00" → "UTC+02:00" */
function offsetLabel(offset: string): string {
  return offset === '+00:00' ? 'UTC' : `UTC${offset}`;
}

function DailySection() {
  const [data, setData] = useState<DailyUsage | null>(null);
  const [Chart, setChart] = useState<ComponentType<{ data: DailyUsage }> | null>(null);
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);

  const load = useCallback(async () => {
    setBusy(true);
    try {
      // Days begin at midnight of the browser's offset now (the server takes a fixed offset).
      const offset = -new Date().getTimezoneOffset();
      setData(await api<DailyUsage>('GET', `/api/v1/usage/daily?days=30&utc_offset_minutes=${offset}`));
      setError('');
    } catch (e) {
      setError(messageOf(e));
    } finally {
      setBusy(false);
    }
  }, []);

  useEffect(() => {
    void load();
    import('./UsageChart').then(
      (m) => setChart(() => m.default),
      (e) => setError(`The chart could not be loaded: ${messageOf(e)}`),
    );
  }, [load]);

  const totalMinutes = data ? data.days.reduce((n, d) => n + d.minutes, 0) : 0;
  const active = data ? data.days.filter((d) => d.minutes > 0) : [];
  return (
    <section class="card section" aria-labelledby="daily-title">
      <div class="section-head">
        <h2 id="daily-title">Last 30 days</h2>
        <RefreshButton busy={busy} onClick={() => void load()} what="the last 30 days" />
      </div>
      <Problem text={error} />
      {data ? (
        <>
          <p class="muted small-text" data-testid="daily-summary">
            {totalMinutes} billed {totalMinutes === 1 ? 'minute' : 'minutes'} on {active.length}{' '}
            {active.length === 1 ? 'day' : 'days'}. Days begin at midnight {offsetLabel(data.utc_offset)}; each day's cost
            is rounded once, so days can differ from an invoice by a cent or so.
          </p>
          {Chart ? <Chart data={data} /> : <div class="usage-chart placeholder" aria-hidden="true" />}
          <details class="chart-table">
            <summary>The days as a table</summary>
            {active.length === 0 ? (
              <p class="muted">Nothing billed in these 30 days.</p>
            ) : (
              <div class="table-scroll">
                <table class="data">
                  <caption class="visually-hidden">Minutes and cost per day with usage</caption>
                  <TableHead columns={['Day', { label: 'Minutes', num: true }, { label: 'Cost', num: true }]} />
                  <tbody>
                    {active.map((d) => (
                      <tr key={d.date}>
                        <td>{d.date}</td>
                        <td class="num">{d.minutes}</td>
                        <td class="num">{d.totals.map((t) => formatMoney(t)).join(' + ')}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
          </details>
        </>
      ) : busy ? (
        <p class="muted" aria-busy="true">
          Loading…
        </p>
      ) : null}
    </section>
  );
}

type Cursor = { before: string } | { after: string } | null;

function SessionsSection() {
  const [cursor, setCursor] = useState<Cursor>(null);
  const [page, setPage] = useState<Page<UsageSession> | null>(null);
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const [now, setNow] = useState(Date.now());

  const load = useCallback(async (at: Cursor) => {
    setBusy(true);
    try {
      const query = at === null ? '' : 'before' in at ? `?before=${encodeURIComponent(at.before)}` : `?after=${encodeURIComponent(at.after)}`;
      setPage(await api<Page<UsageSession>>('GET', `/api/v1/usage/sessions${query}`));
      setCursor(at);
      setNow(Date.now());
      setError('');
    } catch (e) {
      setError(messageOf(e));
    } finally {
      setBusy(false);
    }
  }, []);
  useEffect(() => {
    void load(null);
  }, [load]);

  return (
    <section class="card section" aria-labelledby="sessions-title">
      <div class="section-head">
        <h2 id="sessions-title">Sessions</h2>
        <RefreshButton busy={busy} onClick={() => void load(cursor)} what="the sessions" />
      </div>
      <p class="muted small-text">
        One row per instance from launch to delete. Cost is billed by the minute; a live one shows
        its cost so far (as of {formatFullTime(new Date(now).toISOString())}).
      </p>
      <Problem text={error} />
      {page && page.items.length === 0 ? (
        <p class="muted">No sessions yet: launch an instance and it shows here.</p>
      ) : page ? (
        <>
          <div class="table-scroll">
            <table class="data stacked" data-testid="sessions">
              <caption class="visually-hidden">Sessions, newest first</caption>
              <TableHead columns={['Name', 'Instance id', 'Started', 'Ended', { label: 'Duration', num: true }, { label: 'Cost', num: true }]} />
              <tbody>
                {page.items.map((s) => (
                  <tr key={s.billing_session_id} data-session={s.name}>
                    <td data-label="Name">
                      {s.name}
                      <br />
                      <span class="muted small-text">{s.gpu_type}</span>
                    </td>
                    <td data-label="Instance id">
                      <code>{s.instance_id}</code>
                    </td>
                    <td data-label="Started">{formatFullTime(s.started_at)}</td>
                    <td data-label="Ended">
                      {s.active || !s.ended_at ? <span class="active-mark">● active</span> : formatFullTime(s.ended_at)}
                    </td>
                    <td data-label="Duration" class="num" data-testid="duration">
                      {formatDuration(s.duration_seconds)}
                    </td>
                    <td data-label="Cost" class="num" data-testid="cost">
                      {formatMoney(s)}
                      <br />
                      <span class="muted small-text">
                        {s.minutes} {s.minutes === 1 ? 'minute' : 'minutes'}
                      </span>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <Pager
            label="Sessions pages"
            text={page.pages ? `Page ${page.page} of ${page.pages} · ${page.total} in all` : ''}
            prev={page.prev ? () => void load({ after: page.prev! }) : null}
            next={page.next ? () => void load({ before: page.next! }) : null}
            busy={busy}
          />
        </>
      ) : null}
    </section>
  );
}

const OUTCOMES: Record<QueueHistoryEntry['outcome'], string> = {
  launched: 'launched',
  cancelled: 'cancelled',
  waiting: '● waiting',
};

/**
 * The queue history, newest first. The API pages it oldest first (`?page=N`, 15 a page, rows only
 * ever added at the end), so view k (0 = newest) is read from the one or two API pages that hold
 * its rows.
 */
function QueueSection() {
  const [view, setView] = useState(0);
  const [rows, setRows] = useState<QueueHistoryEntry[] | null>(null);
  const [total, setTotal] = useState(0);
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);

  const load = useCallback(async (k: number) => {
    setBusy(true);
    try {
      const first = await api<Page<QueueHistoryEntry>>('GET', '/api/v1/usage/queue?page=1');
      const n = first.total ?? first.items.length;
      const views = Math.max(1, Math.ceil(n / PAGE));
      const at = Math.min(Math.max(0, k), views - 1);
      const hi = n - at * PAGE; // oldest-first indices [lo, hi)
      const lo = Math.max(0, hi - PAGE);
      const pages = new Map<number, QueueHistoryEntry[]>([[1, first.items]]);
      for (let p = Math.floor(lo / PAGE) + 1; p <= Math.max(1, Math.ceil(hi / PAGE)); p++) {
        if (!pages.has(p)) pages.set(p, (await api<Page<QueueHistoryEntry>>('GET', `/api/v1/usage/queue?page=${p}`)).items);
      }
      const picked: QueueHistoryEntry[] = [];
      for (let i = lo; i < hi; i++) {
        const item = pages.get(Math.floor(i / PAGE) + 1)?.[i % PAGE];
        if (item) picked.push(item);
      }
      setRows(picked.reverse());
      setTotal(n);
      setView(at);
      setError('');
    } catch (e) {
      setError(messageOf(e));
    } finally {
      setBusy(false);
    }
  }, []);
  useEffect(() => {
    void load(0);
  }, [load]);

  const views = Math.max(1, Math.ceil(total / PAGE));
  return (
    <section class="card section" aria-labelledby="queue-title">
      <div class="section-head">
        <h2 id="queue-title">Queue history</h2>
        <RefreshButton busy={busy} onClick={() => void load(view)} what="the queue history" />
      </div>
      <Problem text={error} />
      {rows && rows.length === 0 ? (
        <p class="muted">You have not queued for a GPU type yet.</p>
      ) : rows ? (
        <>
          <div class="table-scroll">
            <table class="data stacked" data-testid="queue-history">
              <caption class="visually-hidden">Queue entries, newest first</caption>
              <TableHead columns={['Name', 'GPU type', 'Entered', { label: 'Wait', num: true }, 'Outcome']} />
              <tbody>
                {rows.map((e) => (
                  <tr key={e.id} data-queue-entry={e.name}>
                    <td data-label="Name">{e.name}</td>
                    <td data-label="GPU type">{e.gpu_type}</td>
                    <td data-label="Entered">{formatFullTime(e.entered_at)}</td>
                    <td data-label="Wait" class="num">
                      {formatDuration(e.wait_seconds)}
                    </td>
                    <td data-label="Outcome" data-testid="outcome">
                      <span class={e.outcome === 'waiting' ? 'active-mark' : undefined}>{OUTCOMES[e.outcome]}</span>
                      {e.instance ? (
                        <>
                          <br />
                          <code class="muted small-text">{e.instance.id}</code>
                        </>
                      ) : null}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <Pager
            label="Queue history pages"
            text={`Page ${view + 1} of ${views} · ${total} in all`}
            prev={view > 0 ? () => void load(view - 1) : null}
            next={view + 1 < views ? () => void load(view + 1) : null}
            busy={busy}
          />
        </>
      ) : null}
    </section>
  );
}
