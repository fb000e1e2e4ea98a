// A queue entry: a dashed card in the same grid, with its place in the GPU type's queue and
// "Exit queue" (free, at once).
import { formatFullTime, formatTime } from '../format';
import type { QueueEntry } from '../types';
import { StatusBadge } from './StatusBadge';

export function QueuedCard(props: {
  entry: QueueEntry;
  now: number;
  busy: boolean;
  error: string;
  onExit: () => void;
}) {
  const e = props.entry;
  const titleId = `queue-${e.id}-name`;
  return (
    <article class="card queued" aria-labelledby={titleId} data-queue-entry={e.name}>
      <div class="card-head">
        <h2 id={titleId} class="card-title">
          {e.name}
        </h2>
        <StatusBadge status="queued" />
      </div>
      <p class="position">
        {e.position !== null ? (
          <>
            Position <strong data-testid="queue-position">{e.position}</strong> in the {e.gpu_type} queue
          </>
        ) : (
          <>Leaving the {e.gpu_type} queue</>
        )}
      </p>
      {e.last_failure ? <p class="reason">{e.last_failure}</p> : null}
      <dl class="facts">
        <div>
          <dt>GPU type</dt>
          <dd>{e.gpu_type}</dd>
        </div>
        <div>
          <dt>Waiting since</dt>
          <dd title={formatFullTime(e.entered_at)}>{formatTime(e.entered_at, props.now)}</dd>
        </div>
        <div>
          <dt>SSH key</dt>
          <dd>{e.ssh_key.name}</dd>
        </div>
      </dl>
      <p class="muted small-text">
        It launches by itself with this name and key when a host frees up. Waiting is free.
      </p>
      {props.error ? (
        <p class="form-error" role="alert">
          {props.error}
        </p>
      ) : null}
      <div class="card-actions">
        <button type="button" class="secondary" disabled={props.busy} onClick={props.onExit}>
          Exit queue<span class="visually-hidden"> for {e.name}</span>
        </button>
      </div>
    </article>
  );
}
