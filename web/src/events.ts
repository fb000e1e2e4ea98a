// The live view of a person's instances and queue entries: GET /api/v1/events (server-sent
// events, docs/api.md "Events"). Every stream starts with a `snapshot` that replaces what the page
// held, so a dropped stream or a reload resynchronises without missing a transition: EventSource
// reconnects by itself after the server's `retry:`; when the browser gives up (the server refused
// the stream: 429, 503) the page opens a new one after a back-off (3 s doubling to 15 s, or at once when the browser comes back online), and on 401 it goes to sign-in.
import type { Instance, QueueEntry } from './types';

export type StreamState = 'connecting' | 'live' | 'reconnecting';

export interface EventHandlers {
  snapshot(data: { instances: Instance[]; queue_entries: QueueEntry[] }): void;
  instance(data: Instance): void;
  queueEntry(data: QueueEntry): void;
  state(state: StreamState): void;
  signedOut(): void;
}

export function openEventStream(handlers: EventHandlers): () => void {
  let source: EventSource | null = null;
  let timer: number | undefined;
  let backoff = 3000;
  let closed = false;

  const parse = <T>(event: Event): T | null => {
    try {
      return JSON.parse((event as MessageEvent<string>).data) as T;
    } catch {
      return null;
    }
  };

  const connect = () => {
    if (closed) return;
    handlers.state(source ? 'reconnecting' : 'connecting');
    const es = new EventSource('/api/v1/events');
    source = es;
    es.addEventListener('open', () => {
      backoff = 3000;
      handlers.state('live');
    });
    es.addEventListener('snapshot', (e) => {
      const data = parse<{ instances: Instance[]; queue_entries: QueueEntry[] }>(e);
      if (data) handlers.snapshot(data);
    });
    es.addEventListener('instance', (e) => {
      const data = parse<Instance>(e);
      if (data) handlers.instance(data);
    });
    es.addEventListener('queue_entry', (e) => {
      const data = parse<QueueEntry>(e);
      if (data) handlers.queueEntry(data);
    });
    es.addEventListener('error', () => {
      if (closed) return;
      if (es.readyState !== EventSource.CLOSED) {
        handlers.state('reconnecting');  // the browser retries by itself
        return;
      }
      // The browser gave up: find out whether we are still signed in, then try again later.
      handlers.state('reconnecting');
      void fetch('/api/v1/me', { credentials: 'same-origin' })
        .then((r) => {
          if (r.status === 401) {
            closed = true;
            handlers.signedOut();
          }
        })
        .catch(() => {})
        .finally(() => {
          if (closed) return;
          timer = window.setTimeout(connect, backoff);
          backoff = Math.min(backoff * 2, 15000);
        });
    });
  };

  // Back online (a laptop waking up, a network change): try at once rather than after the back-off.
  const online = () => {
    if (closed || !source || source.readyState !== EventSource.CLOSED) return;
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    backoff = 3000;
    connect();
  };
  addEventListener('online', online);

  connect();
  return () => {
    closed = true;
    removeEventListener('online', online);
    if (timer !== undefined) clearTimeout(timer);
    source?.close();
  };
}
