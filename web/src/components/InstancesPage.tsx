// The instances grid: live instances and dashed queued cards, kept current by the event stream
// (events.ts); the create panel; the delete confirmation.
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError, messageOf } from '../api';
import { openEventStream, type StreamState } from '../events';
import type { Instance, Me, Page, QueueEntry, UsageSession } from '../types';
import { CreatePanel } from './CreatePanel';
import { ConfirmDialog } from './Dialog';
import { InstanceCard } from './InstanceCard';
import { QueuedCard } from './QueuedCard';

type ById<T> = Map<string, T>;

export function InstancesPage(props: {
  me: Me;
  refreshMe: () => Promise<void>;
  creating: boolean;
  setCreating: (open: boolean) => void;
  onStreamState: (state: StreamState) => void;
  onSignedOut: () => void;
}) {
  const [instances, setInstances] = useState<ById<Instance>>(new Map());
  const [entries, setEntries] = useState<ById<QueueEntry>>(new Map());
  const [loaded, setLoaded] = useState(false);
  const [usage, setUsage] = useState<ById<UsageSession>>(new Map());
  const [busy, setBusy] = useState<Set<string>>(new Set());
  const [errors, setErrors] = useState<Map<string, string>>(new Map());
  const [confirm, setConfirm] = useState<Instance | null>(null);
  const [confirmError, setConfirmError] = useState('');
  const [note, setNote] = useState('');
  const [now, setNow] = useState(Date.now());
  const sessionsWanted = useRef<Set<string>>(new Set());

  // The event stream: a snapshot replaces everything, then one event per changed item.
  useEffect(() => {
    return openEventStream({
      snapshot: (data) => {
        setInstances(new Map(data.instances.map((i) => [i.id, i])));
        setEntries(new Map(data.queue_entries.map((e) => [e.id, e])));
        setLoaded(true);
      },
      instance: (inst) =>
        setInstances((old) => {
          const next = new Map(old);
          if (inst.status === 'deleted') next.delete(inst.id);
          else next.set(inst.id, inst);
          return next;
        }),
      queueEntry: (entry) =>
        setEntries((old) => {
          const next = new Map(old);
          if (entry.status === 'open') next.set(entry.id, entry);
          else next.delete(entry.id);
          return next;
        }),
      state: props.onStreamState,
      signedOut: props.onSignedOut,
    });
  }, []);

  // A clock for "running for", once a second while anything is live.
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, []);

  // What each live instance has cost so far (GET /api/v1/usage/sessions, newest first): read
  // when a billing session appears and then once a minute.
  const loadUsage = useCallback(async () => {
    const wanted = sessionsWanted.current;
    if (wanted.size === 0) return;
    const found = new Map<string, UsageSession>();
    let path = '/api/v1/usage/sessions';
    for (let pages = 0; pages < 4; pages++) {
      let page: Page<UsageSession>;
      try {
        page = await api<Page<UsageSession>>('GET', path);
      } catch {
        return;
      }
      for (const s of page.items) if (wanted.has(s.billing_session_id)) found.set(s.billing_session_id, s);
      if (found.size >= wanted.size || !page.next) break;
      path = `/api/v1/usage/sessions?before=${encodeURIComponent(page.next)}`;
    }
    setUsage(found);
  }, []);
  const sessionKey = [...instances.values()].map((i) => i.billing_session.id).sort().join(',');
  useEffect(() => {
    sessionsWanted.current = new Set(sessionKey ? sessionKey.split(',') : []);
    void loadUsage();
    if (!sessionKey) return;
    const t = setInterval(() => void loadUsage(), 60000);
    return () => clearInterval(t);
  }, [sessionKey, loadUsage]);

  const setItemBusy = (id: string, on: boolean) =>
    setBusy((old) => {
      const next = new Set(old);
      if (on) next.add(id);
      else next.delete(id);
      return next;
    });
  const setItemError = (id: string, text: string) =>
    setErrors((old) => {
      const next = new Map(old);
      if (text) next.set(id, text);
      else next.delete(id);
      return next;
    });

  const gone = (inst: { id: string; name: string }, what: string) => {
    setInstances((old) => {
      const next = new Map(old);
      next.delete(inst.id);
      return next;
    });
    setNote(`${inst.name} is gone: it was deleted (perhaps from another tab), so it cannot be ${what}.`);
  };

  const restart = async (inst: Instance) => {
    setItemError(inst.id, '');
    setItemBusy(inst.id, true);
    try {
      const updated = await api<Instance>('POST', `/api/v1/instances/${encodeURIComponent(inst.id)}/restart`);
      setInstances((old) => new Map(old).set(updated.id, updated));
    } catch (e) {
      if (e instanceof ApiError && e.code === 'not_found') gone(inst, 'restarted');
      else {
        setItemError(inst.id, messageOf(e));
        if (e instanceof ApiError && e.status === 402) void props.refreshMe();
      }
    } finally {
      setItemBusy(inst.id, false);
    }
  };

  const remove = async (inst: Instance) => {
    setConfirmError('');
    setItemBusy(inst.id, true);
    try {
      await api('DELETE', `/api/v1/instances/${encodeURIComponent(inst.id)}`);
      setConfirm(null);
      setInstances((old) => {
        const current = old.get(inst.id);
        return current ? new Map(old).set(inst.id, { ...current, status: 'deleting', status_reason: '' }) : old;
      });
    } catch (e) {
      if (e instanceof ApiError && e.code === 'not_found') {
        setConfirm(null);
        gone(inst, 'deleted again');
      } else setConfirmError(messageOf(e));
    } finally {
      setItemBusy(inst.id, false);
    }
  };

  const exitQueue = async (entry: QueueEntry) => {
    setItemError(entry.id, '');
    setItemBusy(entry.id, true);
    try {
      await api('DELETE', `/api/v1/queue-entries/${encodeURIComponent(entry.id)}`);
      setEntries((old) => {
        const next = new Map(old);
        next.delete(entry.id);
        return next;
      });
      setNote(`${entry.name} left the ${entry.gpu_type} queue.`);
    } catch (e) {
      if (e instanceof ApiError && e.code === 'not_found') {
        setEntries((old) => {
          const next = new Map(old);
          next.delete(entry.id);
          return next;
        });
        setNote(`${entry.name} is no longer in the queue.`);
      } else setItemError(entry.id, messageOf(e));
    } finally {
      setItemBusy(entry.id, false);
    }
  };

  const sortedInstances = [...instances.values()].sort((a, b) => a.created_at.localeCompare(b.created_at));
  const sortedEntries = [...entries.values()].sort((a, b) => a.entered_at.localeCompare(b.entered_at));
  const count = sortedInstances.length + sortedEntries.length;

  return (
    <>
      <main id="main" class="page">
        <div class="page-head">
          <h1>Instances</h1>
          {loaded ? (
            <span class="muted">
              {sortedInstances.length} running or starting
              {sortedEntries.length ? `, ${sortedEntries.length} queued` : ''}
            </span>
          ) : null}
        </div>
        <p class="page-note" role="status">
          {note}
          {note ? (
            <button type="button" class="link" onClick={() => setNote('')}>
              Dismiss
            </button>
          ) : null}
        </p>
        {!loaded ? (
          <p class="muted" aria-busy="true">
            Loading your instances…
          </p>
        ) : count === 0 ? (
          <section class="empty card">
            <h2>No instances yet</h2>
            <p>
              An instance is a container on a GPU host that you reach over SSH, billed by the minute
              from launch to delete.
            </p>
            <button type="button" class="primary" onClick={() => props.setCreating(true)}>
              New instance
            </button>
          </section>
        ) : (
          <div class="grid">
            {sortedInstances.map((inst) => (
              <InstanceCard
                key={inst.id}
                instance={inst}
                usage={usage.get(inst.billing_session.id)}
                now={now}
                busy={busy.has(inst.id)}
                error={errors.get(inst.id) ?? ''}
                onRestart={() => void restart(inst)}
                onDelete={() => {
                  setConfirmError('');
                  setConfirm(inst);
                }}
              />
            ))}
            {sortedEntries.map((entry) => (
              <QueuedCard
                key={entry.id}
                entry={entry}
                now={now}
                busy={busy.has(entry.id)}
                error={errors.get(entry.id) ?? ''}
                onExit={() => void exitQueue(entry)}
              />
            ))}
          </div>
        )}
      </main>
      {props.creating ? (
        <CreatePanel
          me={props.me}
          onClose={() => props.setCreating(false)}
          onPaymentRequired={() => void props.refreshMe()}
          onCreated={(created) => {
            if ('queued' in created || 'position' in created) {
              const entry = created as QueueEntry;
              if (entry.status === 'open') {
                setEntries((old) => new Map(old).set(entry.id, entry));
                setNote(`${entry.name} joined the ${entry.gpu_type} queue.`);
              } else {
                setNote(`A ${entry.gpu_type} host was free: ${entry.name} launched at once.`);
              }
            } else {
              const inst = created as Instance;
              setInstances((old) => (old.has(inst.id) ? old : new Map(old).set(inst.id, inst)));
              setNote('');
            }
            props.setCreating(false);
          }}
        />
      ) : null}
      {confirm ? (
        <ConfirmDialog
          title={`Delete ${confirm.name}?`}
          body={
            <p>
              This removes the container of <strong>{confirm.name}</strong> and every file in it,
              and ends its billing session now. The name can be used again afterwards.
            </p>
          }
          confirm={`Delete ${confirm.name}`}
          danger
          busy={busy.has(confirm.id)}
          error={confirmError}
          onConfirm={() => void remove(confirm)}
          onCancel={() => setConfirm(null)}
        />
      ) : null}
    </>
  );
}
