// The operator's pages (docs/dashboard.md "Operator pages"), loaded with import() only when an
// operator opens one, so a first visit never carries them: hosts (drain, undrain), GPU types, every
// instance, the queues, the audit log, relay sessions, and people (the operator flag, the sign-up
// policy). Each reads only the /api/v1/admin routes; every change asks first. Tables scroll
// sideways inside their card on a phone instead of widening the page.
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { api, messageOf } from '../api';
import { onLinkClick } from '../router';
import { formatDuration, formatFullTime, formatMoney, formatTime, zoneLabel } from '../format';
import type {
  AdminGpuType,
  AdminHost,
  AdminInstance,
  AdminPerson,
  AdminQueueEntry,
  AuditEvent,
  Me,
  Page,
  RelaySession,
  SignUpPolicy,
} from '../types';
import { ConfirmDialog } from './Dialog';
import { CopyCommand } from './CopyCommand';
import { Pager } from './Pager';
import { StatusBadge } from './StatusBadge';
import { TableHead } from './TableHead';

/** The operator pages in their menu order: path, title. */
export const OPERATOR_PAGES: ReadonlyArray<readonly [string, string]> = [
  ['/admin/hosts', 'Hosts'],
  ['/admin/gpu-types', 'GPU types'],
  ['/admin/instances', 'All instances'],
  ['/admin/queues', 'Queues'],
  ['/admin/audit', 'Audit log'],
  ['/admin/relay-sessions', 'Relay sessions'],
  ['/admin/people', 'People'],
];

export default function OperatorPages(props: { path: string; me: Me }) {
  const title = OPERATOR_PAGES.find(([p]) => p === props.path)?.[1] ?? 'Hosts';
  return (
    <main id="main" class="page operator">
      <div class="page-head">
        <h1>{title}</h1>
        <span class="muted">Operator, {zoneLabel()}</span>
      </div>
      <nav class="tabs" aria-label="Operator pages">
        {OPERATOR_PAGES.map(([path, label]) => (
          <a key={path} href={path} class="tab" aria-current={props.path === path ? 'page' : undefined} onClick={(e) => onLinkClick(e, path)}>
            {label}
          </a>
        ))}
      </nav>
      {props.path === '/admin/gpu-types' ? (
        <GpuTypesPage />
      ) : props.path === '/admin/instances' ? (
        <InstancesPage />
      ) : props.path === '/admin/queues' ? (
        <QueuesPage />
      ) : props.path === '/admin/audit' ? (
        <AuditPage />
      ) : props.path === '/admin/relay-sessions' ? (
        <RelaySessionsPage />
      ) : props.path === '/admin/people' ? (
        <PeoplePage me={props.me} />
      ) : (
        <HostsPage />
      )}
    </main>
  );
}

// ---- shared parts --------------------------------------------------------------------------

/** Loads `path` now and on every `reload()`; the last answer, the error and whether it is busy. */
/**
 * Reads `path` (and again on `reload`). `shown` is the path the data on screen came from: a
 * filter or page asked for while an earlier answer is on its way replaces it, and a late answer
 * for a path no longer asked for is dropped, so the table never shows an older filter's rows.
 */
function useAdmin<T>(path: string) {
  const [data, setData] = useState<T | null>(null);
  const [shown, setShown] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const wanted = useRef(path);
  wanted.current = path;
  const reload = useCallback(async () => {
    setBusy(true);
    try {
      const answer = await api<T>('GET', path);
      if (wanted.current !== path) return;
      setData(answer);
      setShown(path);
      setError('');
    } catch (e) {
      if (wanted.current === path) setError(messageOf(e));
    } finally {
      if (wanted.current === path) setBusy(false);
    }
  }, [path]);
  useEffect(() => {
    void reload();
  }, [reload]);
  return { data, shown, error, busy, reload };
}

function Problem(props: { text: string }) {
  return props.text ? (
    <p class="form-error" role="alert">
      {props.text}
    </p>
  ) : null;
}

function Section(props: { id: string; title: string; busy: boolean; onRefresh: () => void; children: ComponentChildren }) {
  return (
    <section class="card section" aria-labelledby={props.id}>
      <div class="section-head">
        <h2 id={props.id}>{props.title}</h2>
        {/* The name is the visible word and a hidden object, so it always contains what is seen
            (WCAG 2.5.3 "Label in Name": an aria-label "Refresh …" did not while "Refreshing…"). */}
        <button type="button" class="secondary small" disabled={props.busy} onClick={props.onRefresh}>
          {props.busy ? 'Refreshing…' : 'Refresh'}
          <span class="visually-hidden"> {props.title.toLowerCase()}</span>
        </button>
      </div>
      {props.children}
    </section>
  );
}

/**
 * A table that scrolls sideways inside its card on wide screens and on phones (≤ 640 px) shows
 * each row as a block of labelled cells (`table.data.stacked`: each cell's `data-label` is its
 * column's heading, set here so that no row forgets one); `caption` names it for screen readers.
 */
function Table(props: { caption: string; head: string[]; testId: string; source?: string; children: ComponentChildren }) {
  const ref = useRef<HTMLTableElement>(null);
  useLayoutEffect(() => {
    ref.current?.querySelectorAll('tbody > tr').forEach((tr) => {
      Array.from(tr.children).forEach((cell, i) => {
        const label = props.head[i];
        if (label && cell.getAttribute('data-label') !== label) cell.setAttribute('data-label', label);
      });
    });
  });
  return (
    <div class="table-scroll" tabIndex={0} role="region" aria-label={props.caption}>
      <table ref={ref} class="data wide stacked" data-testid={props.testId} data-source={props.source}>
        <caption class="visually-hidden">{props.caption}</caption>
        <TableHead columns={props.head} />
        <tbody>{props.children}</tbody>
      </table>
    </div>
  );
}

function When(props: { iso: string | null | undefined; none?: string }) {
  if (!props.iso) return <span class="muted">{props.none ?? '—'}</span>;
  return (
    <time dateTime={props.iso} title={formatFullTime(props.iso)}>
      {formatTime(props.iso)}
    </time>
  );
}

function pageText(p: Page<unknown>, one: string, many = `${one}s`): string {
  const total = p.total ?? p.items.length;
  return `Page ${p.page ?? 1} of ${p.pages ?? 1}, ${total} ${total === 1 ? one : many}`;
}

// ---- hosts --------------------------------------------------------------------------------

function hostState(h: AdminHost): string {
  if (h.drained) return 'drained';
  if (h.degraded_reason) return 'degraded';
  if (h.engine_error) return 'engine error';
  if (!h.last_seen_at) return 'never seen';
  return 'in service';
}

function gpuText(h: AdminHost): string {
  const gpus = Array.isArray(h.inventory?.gpus) ? h.inventory.gpus : [];
  if (gpus.length === 0) return h.gpu_required ? 'no GPU reported' : 'no GPU (registered without one)';
  return gpus
    .map((g) => `${g.name ?? 'GPU'}${typeof g.memory_bytes === 'number' ? `, ${Math.round(g.memory_bytes / 2 ** 30)} GiB` : ''}`)
    .join('; ');
}

// The host's Docker inside mode as its agent last said it (docs/docker-inside.md); privileged
// means a person in an instance there is root on the host.
function dockerInsideText(h: AdminHost): string {
  const mode = h.inventory?.limits?.docker_inside;
  if (typeof mode !== 'string' || mode === '') return '—';
  return mode === 'privileged' ? 'privileged: a tenant is root on this host' : mode;
}

function HostsPage() {
  const [page, setPage] = useState(1);
  const { data, error, busy, reload } = useAdmin<Page<AdminHost>>(`/api/v1/admin/hosts?page=${page}`);
  const [asking, setAsking] = useState<{ host: AdminHost; drain: boolean } | null>(null);
  const [acting, setActing] = useState(false);
  const [actError, setActError] = useState('');
  const act = async () => {
    if (!asking) return;
    setActing(true);
    try {
      await api('POST', `/api/v1/admin/hosts/${encodeURIComponent(asking.host.name)}/${asking.drain ? 'drain' : 'undrain'}`);
      setAsking(null);
      setActError('');
      await reload();
    } catch (e) {
      setActError(messageOf(e));
    } finally {
      setActing(false);
    }
  };
  return (
    <Section id="hosts-title" title="Hosts" busy={busy} onRefresh={() => void reload()}>
      <Problem text={error} />
      {data && data.items.length === 0 ? <p class="muted">No hosts yet: add one with gpuwerk admin hosts add.</p> : null}
      {data && data.items.length > 0 ? (
        <>
          <Table
            caption="Hosts by name"
            head={['Name', 'Id', 'State', 'GPU type', 'GPU inventory', 'Docker inside', 'Pair', 'SSHD', 'Last seen', 'Degraded reason', 'Instance', 'Action']}
            testId="hosts"
          >
            {data.items.map((h) => (
              <tr key={h.id} data-host={h.name}>
                <td>
                  <strong>{h.name}</strong>
                </td>
                <td>
                  <CopyCommand command={h.id} label={`the id of host ${h.name}`} testId="host-id" />
                </td>
                <td>
                  <span class={`badge badge-host-${hostState(h).replace(/ /g, '-')}`} data-testid="host-state">
                    {hostState(h)}
                  </span>
                </td>
                <td>{h.gpu_type}</td>
                <td>{gpuText(h)}</td>
                <td data-testid="host-docker-inside">{dockerInsideText(h)}</td>
                <td data-testid="host-pair">
                  {h.pair ? (
                    <>
                      node {h.pair.node_index} with {h.pair.partner} (rail <code>{h.pair.rail_address}</code>)
                    </>
                  ) : (
                    <span class="muted">—</span>
                  )}
                </td>
                <td data-testid="host-sshd">
                  {h.ssh_address && h.ssh_ports ? (
                    <>
                      <code>{h.ssh_address}</code> ports {h.ssh_ports.low}–{h.ssh_ports.high}
                    </>
                  ) : (
                    <span class="muted">none registered</span>
                  )}
                </td>
                <td>
                  <When iso={h.last_seen_at} none="never" />
                </td>
                <td>{h.degraded_reason || h.engine_error || <span class="muted">—</span>}</td>
                <td data-testid="host-instance">
                  {h.instance_id ? (
                    <>
                      {h.instance_name ? <strong>{h.instance_name}</strong> : null} <code>{h.instance_id}</code>
                    </>
                  ) : (
                    <span class="muted">free</span>
                  )}
                </td>
                <td>
                  <button type="button" class="secondary small" onClick={() => setAsking({ host: h, drain: !h.drained })}>
                    {h.drained ? `Undrain ${h.name}` : `Drain ${h.name}`}
                  </button>
                </td>
              </tr>
            ))}
          </Table>
          <Pager label="Host pages" text={pageText(data, 'host')} prev={page > 1 ? () => setPage(page - 1) : null} next={page < (data.pages ?? 1) ? () => setPage(page + 1) : null} busy={busy} prevText="← Previous" nextText="Next →" />
        </>
      ) : null}
      {asking ? (
        <ConfirmDialog
          title={asking.drain ? `Drain ${asking.host.name}?` : `Undrain ${asking.host.name}?`}
          body={
            <p>
              {asking.drain
                ? 'It gets no new instances; those on it keep running. The queue waits for other hosts.'
                : 'It takes new instances again (a degraded reason is cleared), and its GPU type\'s queue is drained onto it.'}
            </p>
          }
          confirm={asking.drain ? 'Drain host' : 'Undrain host'}
          danger={asking.drain}
          busy={acting}
          error={actError}
          onConfirm={() => void act()}
          onCancel={() => {
            setAsking(null);
            setActError('');
          }}
        />
      ) : null}
    </Section>
  );
}

// ---- GPU types ----------------------------------------------------------------------------

function GpuTypesPage() {
  const { data, error, busy, reload } = useAdmin<Page<AdminGpuType>>('/api/v1/admin/gpu-types');
  return (
    <Section id="types-title" title="GPU types" busy={busy} onRefresh={() => void reload()}>
      <p class="muted small-text">Prices and shapes are configuration: change them with gpuwerk admin gpu-types set.</p>
      <Problem text={error} />
      {data ? (
        <Table caption="GPU types with price and capacity" head={['Name', 'Price', 'Hosts per instance', 'Online', 'Free capacity', 'Hosts', 'Pairs', 'Queued']} testId="gpu-types">
          {data.items.map((t) => (
            <tr key={t.name} data-gpu-type={t.name}>
              <td>
                <strong>{t.name}</strong>
                {t.description ? (
                  <>
                    <br />
                    <span class="muted small-text">{t.description}</span>
                  </>
                ) : null}
              </td>
              <td class="num">{formatMoney(t.price)} / hour</td>
              <td class="num">{t.hosts_per_instance}</td>
              <td>{t.online ? 'yes' : 'no'}</td>
              <td class="num">{t.free_capacity}</td>
              <td class="num">{t.hosts}</td>
              <td class="num">{t.pairs}</td>
              <td class="num">{t.queued}</td>
            </tr>
          ))}
        </Table>
      ) : null}
    </Section>
  );
}

// ---- all instances ------------------------------------------------------------------------

type Cursor = { before: string } | { after: string } | null;

function cursorQuery(c: Cursor): string {
  if (!c) return '';
  return 'before' in c ? `before=${encodeURIComponent(c.before)}` : `after=${encodeURIComponent(c.after)}`;
}

const STATUSES = ['provisioning', 'running', 'restarting', 'exited', 'unknown', 'deleting', 'failed'];

function InstancesPage() {
  const [status, setStatus] = useState('');
  const [host, setHost] = useState('');
  const [applied, setApplied] = useState({ status: '', host: '' });
  const [cursor, setCursor] = useState<Cursor>(null);
  const query = [applied.status ? `status=${encodeURIComponent(applied.status)}` : '', applied.host ? `host=${encodeURIComponent(applied.host)}` : '', cursorQuery(cursor)]
    .filter(Boolean)
    .join('&');
  const { data, error, busy, reload } = useAdmin<Page<AdminInstance>>(`/api/v1/admin/instances${query ? `?${query}` : ''}`);
  return (
    <Section id="instances-title" title="All instances" busy={busy} onRefresh={() => void reload()}>
      <form
        class="inline-form filters"
        onSubmit={(e) => {
          e.preventDefault();
          setCursor(null);
          setApplied({ status, host: host.trim() });
        }}
      >
        <div class="field">
          <label for="filter-status">Status</label>
          <select id="filter-status" value={status} onChange={(e) => setStatus((e.target as HTMLSelectElement).value)}>
            <option value="">any</option>
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="filter-host">Host</label>
          <input type="text" id="filter-host" value={host} onInput={(e) => setHost((e.target as HTMLInputElement).value)} placeholder="any host" />
        </div>
        <button type="submit" class="secondary">
          Filter
        </button>
      </form>
      <Problem text={error} />
      {data && data.items.length === 0 ? <p class="muted">No instances match.</p> : null}
      {data && data.items.length > 0 ? (
        <>
          <Table caption="Everyone's instances, newest first" head={['Name', 'Owner', 'GPU type', 'Hosts', 'Desired', 'Status', 'Created']} testId="all-instances">
            {data.items.map((i) => (
              <tr key={i.id} data-instance={i.name} data-owner={i.owner.email}>
                <td>
                  <strong>{i.name}</strong>
                  <br />
                  <code>{i.id}</code>
                </td>
                <td>
                  {i.owner.email}
                  {i.team ? (
                    <>
                      <br />
                      <span class="muted small-text">team {i.team.name}</span>
                    </>
                  ) : null}
                </td>
                <td>{i.gpu_type}</td>
                <td>{i.hosts.length ? i.hosts.join(', ') : <span class="muted">none</span>}</td>
                <td>{i.desired}</td>
                <td>
                  <StatusBadge status={i.status} />
                  {i.status_reason ? (
                    <>
                      <br />
                      <span class="muted small-text">{i.status_reason}</span>
                    </>
                  ) : null}
                </td>
                <td>
                  <When iso={i.created_at} />
                </td>
              </tr>
            ))}
          </Table>
          <Pager
            label="Instance pages"
            text={pageText(data, 'instance')}
            prev={data.prev ? () => setCursor({ after: data.prev as string }) : null}
            next={data.next ? () => setCursor({ before: data.next as string }) : null}
            busy={busy}
          />
        </>
      ) : null}
    </Section>
  );
}

// ---- queues -------------------------------------------------------------------------------

function QueuesPage() {
  const [page, setPage] = useState(1);
  const { data, error, busy, reload } = useAdmin<Page<AdminQueueEntry>>(`/api/v1/admin/queue?page=${page}`);
  const now = Date.now();
  return (
    <Section id="queues-title" title="Queues" busy={busy} onRefresh={() => void reload()}>
      <p class="muted small-text">One queue per GPU type, first come first served; an entry whose owner has no payment method is passed over but keeps its place.</p>
      <Problem text={error} />
      {data && data.items.length === 0 ? <p class="muted">Nobody is waiting.</p> : null}
      {data && data.items.length > 0 ? (
        <>
          <Table caption="Open queue entries by GPU type, in order" head={['GPU type', 'Position', 'Name', 'Owner', 'Waiting since', 'Last failure']} testId="queues">
            {data.items.map((e) => (
              <tr key={e.id} data-queue-entry={e.name} data-owner={e.owner.email}>
                <td>{e.gpu_type}</td>
                <td class="num" data-testid="position">
                  {e.position}
                </td>
                <td>
                  <strong>{e.name}</strong>
                  <br />
                  <code>{e.id}</code>
                </td>
                <td>{e.owner.email}</td>
                <td>
                  <When iso={e.entered_at} />
                  <br />
                  <span class="muted small-text">{formatDuration((now - Date.parse(e.entered_at)) / 1000)}</span>
                </td>
                <td>{e.last_failure || <span class="muted">—</span>}</td>
              </tr>
            ))}
          </Table>
          <Pager label="Queue pages" text={pageText(data, 'entry', 'entries')} prev={page > 1 ? () => setPage(page - 1) : null} next={page < (data.pages ?? 1) ? () => setPage(page + 1) : null} busy={busy} prevText="← Previous" nextText="Next →" />
        </>
      ) : null}
    </Section>
  );
}

// ---- audit log ----------------------------------------------------------------------------

function AuditPage() {
  const [actor, setActor] = useState('');
  const [target, setTarget] = useState('');
  const [applied, setApplied] = useState({ actor: '', target: '' });
  const [page, setPage] = useState(1);
  const query = [`page=${page}`, applied.actor ? `actor=${encodeURIComponent(applied.actor)}` : '', applied.target ? `target=${encodeURIComponent(applied.target)}` : '']
    .filter(Boolean)
    .join('&');
  const { data, shown, error, busy, reload } = useAdmin<Page<AuditEvent>>(`/api/v1/admin/audit?${query}`);
  return (
    <Section id="audit-title" title="Audit log" busy={busy} onRefresh={() => void reload()}>
      <form
        class="inline-form filters"
        onSubmit={(e) => {
          e.preventDefault();
          setPage(1);
          setApplied({ actor: actor.trim(), target: target.trim() });
        }}
      >
        <div class="field">
          <label for="audit-actor">Actor (email or person id)</label>
          <input type="text" id="audit-actor" value={actor} onInput={(e) => setActor((e.target as HTMLInputElement).value)} />
        </div>
        <div class="field">
          <label for="audit-target">Target (an id)</label>
          <p class="hint" id="audit-target-hint">
            A host's id is on the Hosts tab, an instance's on All instances, a team's in its events.
          </p>
          <input type="text" id="audit-target" aria-describedby="audit-target-hint" value={target} onInput={(e) => setTarget((e.target as HTMLInputElement).value)} />
        </div>
        <button type="submit" class="secondary">
          Filter
        </button>
      </form>
      <Problem text={error} />
      {!error && data && data.items.length === 0 ? <p class="muted">No audit events match.</p> : null}
      {data && data.items.length > 0 ? (
        <>
          <Table caption="Audit events, newest first" head={['When', 'Actor', 'Action', 'Target', 'From', 'Detail']} testId="audit" source={shown}>
            {data.items.map((e) => (
              <tr key={e.id} data-action={e.action}>
                <td>
                  <When iso={e.at} />
                </td>
                <td>{e.actor_email || e.actor_id || <span class="muted">system</span>}</td>
                <td>
                  <code>{e.action}</code>
                </td>
                <td>
                  <code>{e.target}</code>
                </td>
                <td>{e.source_address}</td>
                <td class="detail">{Object.keys(e.detail ?? {}).length ? <code>{JSON.stringify(e.detail)}</code> : null}</td>
              </tr>
            ))}
          </Table>
          <Pager label="Audit pages" text={pageText(data, 'event')} prev={page > 1 ? () => setPage(page - 1) : null} next={page < (data.pages ?? 1) ? () => setPage(page + 1) : null} busy={busy} />
        </>
      ) : null}
    </Section>
  );
}

// ---- relay sessions -----------------------------------------------------------------------

function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 ** 2).toFixed(1)} MiB`;
}

function RelaySessionsPage() {
  const [page, setPage] = useState(1);
  const { data, error, busy, reload } = useAdmin<Page<RelaySession>>(`/api/v1/admin/relay-sessions?page=${page}`);
  return (
    <Section id="relay-title" title="Relay sessions" busy={busy} onRefresh={() => void reload()}>
      <p class="muted small-text">Every SSH connection through a relay: who, with which key, to which instance, from where, and how much.</p>
      <Problem text={error} />
      {data && data.items.length === 0 ? <p class="muted">No relay sessions yet.</p> : null}
      {data && data.items.length > 0 ? (
        <>
          <Table caption="Relay sessions, newest first" head={['Started', 'Person', 'Instance', 'From', 'Duration', 'Bytes in / out', 'Ended']} testId="relay-sessions">
            {data.items.map((r) => (
              <tr key={r.id}>
                <td>
                  <When iso={r.started_at} />
                </td>
                <td>
                  {r.email}
                  <br />
                  <code class="small-text">{r.key_fingerprint}</code>
                </td>
                <td>
                  {r.hostname}
                  <br />
                  <code>{r.instance_id}</code>
                </td>
                <td>{r.source_address}</td>
                <td class="num">{formatDuration(r.duration_seconds)}</td>
                <td class="num">
                  {bytes(r.bytes_from_client)} / {bytes(r.bytes_to_client)}
                </td>
                <td>{r.open ? <span class="active-mark">● open</span> : r.end_reason}</td>
              </tr>
            ))}
          </Table>
          <Pager label="Relay session pages" text={pageText(data, 'relay session')} prev={page > 1 ? () => setPage(page - 1) : null} next={page < (data.pages ?? 1) ? () => setPage(page + 1) : null} busy={busy} />
        </>
      ) : null}
    </Section>
  );
}

// ---- people -------------------------------------------------------------------------------

const POLICY_TEXT: Record<string, string> = {
  open: 'Open: anyone may sign up.',
  domains: 'Allowed domains: addresses at these domains may sign up.',
  invite: 'Invitation only: operators invite people (gpuwerk admin invite EMAIL).',
};

function PeoplePage(props: { me: Me }) {
  const policy = useAdmin<SignUpPolicy>('/api/v1/admin/sign-up-policy');
  const [cursor, setCursor] = useState<Cursor>(null);
  const q = cursorQuery(cursor);
  const { data, error, busy, reload } = useAdmin<Page<AdminPerson>>(`/api/v1/admin/people${q ? `?${q}` : ''}`);
  const [asking, setAsking] = useState<AdminPerson | null>(null);
  const [acting, setActing] = useState(false);
  const [actError, setActError] = useState('');
  const toggle = async () => {
    if (!asking) return;
    setActing(true);
    try {
      await api(asking.is_operator ? 'DELETE' : 'PUT', `/api/v1/admin/people/${encodeURIComponent(asking.email)}/operator`);
      setAsking(null);
      setActError('');
      await reload();
    } catch (e) {
      setActError(messageOf(e));
    } finally {
      setActing(false);
    }
  };
  return (
    <>
      <section class="card section" aria-labelledby="policy-title">
        <h2 id="policy-title">Who may sign up</h2>
        <Problem text={policy.error} />
        {policy.data ? (
          <>
            <p data-testid="sign-up-policy">
              {POLICY_TEXT[policy.data.policy] ?? policy.data.policy}
              {policy.data.policy === 'domains' ? ` ${policy.data.domains.join(', ')}` : ''}
            </p>
            <p class="muted small-text">Set in the server's configuration (sign_up_policy, sign_up_domains); read only here.</p>
          </>
        ) : null}
      </section>
      <Section id="people-title" title="People" busy={busy} onRefresh={() => void reload()}>
        <Problem text={error} />
        {data ? (
          <>
            <Table caption="People, newest first" head={['Email', 'Operator', 'Address proven', 'Team', 'Created', 'Action']} testId="people">
              {data.items.map((p) => (
                <tr key={p.id} data-person={p.email}>
                  <td>
                    <strong>{p.email}</strong>
                    {p.id === props.me.id ? <span class="muted small-text"> (you)</span> : null}
                  </td>
                  <td data-testid="operator">{p.is_operator ? 'operator' : '—'}</td>
                  <td>{p.email_proven ? 'yes' : 'not yet'}</td>
                  <td>{p.team ? `${p.team.name} (${p.team.role ?? 'member'})` : <span class="muted">—</span>}</td>
                  <td>
                    <When iso={p.created_at} />
                  </td>
                  <td>
                    <button type="button" class="secondary small" onClick={() => setAsking(p)}>
                      {p.is_operator ? `Remove operator ${p.email}` : `Make operator ${p.email}`}
                    </button>
                  </td>
                </tr>
              ))}
            </Table>
            <Pager
              label="People pages"
              text={pageText(data, 'person', 'people')}
              prev={data.prev ? () => setCursor({ after: data.prev as string }) : null}
              next={data.next ? () => setCursor({ before: data.next as string }) : null}
              busy={busy}
            />
          </>
        ) : null}
      </Section>
      {asking ? (
        <ConfirmDialog
          title={asking.is_operator ? `Remove ${asking.email} as operator?` : `Make ${asking.email} an operator?`}
          body={
            <p>
              {asking.is_operator
                ? 'They lose the operator pages and commands at their next request. The last operator cannot be removed.'
                : 'They can then see everyone\u2019s instances, drain hosts, change prices and make other operators. It is recorded in the audit log.'}
            </p>
          }
          confirm={asking.is_operator ? 'Remove operator' : 'Make operator'}
          danger={asking.is_operator}
          busy={acting}
          error={actError}
          onConfirm={() => void toggle()}
          onCancel={() => {
            setAsking(null);
            setActError('');
          }}
        />
      ) : null}
    </>
  );
}
