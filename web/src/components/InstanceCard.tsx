// One instance: name, GPU type, live status with its reason, where it runs, what it has cost so
// far, the SSH command once sshd is ready, and restart and delete.
import { formatDuration, formatFullTime, formatMoney, formatTime } from '../format';
import type { Instance, UsageSession } from '../types';
import { CopyCommand } from './CopyCommand';
import { StatusBadge } from './StatusBadge';

export function InstanceCard(props: {
  instance: Instance;
  usage: UsageSession | undefined;
  now: number;
  busy: boolean;
  error: string;
  onRestart: () => void;
  onDelete: () => void;
}) {
  const inst = props.instance;
  const titleId = `instance-${inst.id}-name`;
  const sshReady = inst.status === 'running' && inst.ssh_command;
  const started = Date.parse(inst.billing_session.started_at);
  const hostLabel = inst.hosts.length > 1 ? 'Nodes' : 'Host';
  return (
    <article class={`card instance status-${inst.status}`} aria-labelledby={titleId} data-instance={inst.name}>
      <div class="card-head">
        <h2 id={titleId} class="card-title">
          {inst.name}
        </h2>
        <StatusBadge status={inst.status} />
      </div>
      {inst.status_reason ? <p class="reason">{inst.status_reason}</p> : null}
      {inst.status === 'provisioning' || inst.status === 'restarting' ? <Progress instance={inst} /> : null}
      <dl class="facts">
        <div>
          <dt>GPU type</dt>
          <dd>
            {inst.gpu_type}
            {inst.gpu ? <span class="note"> · {inst.gpu}</span> : null}
          </dd>
        </div>
        <div>
          <dt>{hostLabel}</dt>
          <dd>{inst.hosts.length ? inst.hosts.join(' + ') : '—'}</dd>
        </div>
        <div>
          <dt>Running for</dt>
          <dd title={`Billing since ${formatFullTime(inst.billing_session.started_at)}`}>
            {Number.isNaN(started) ? '—' : formatDuration((props.now - started) / 1000)}
            <span class="note"> since {formatTime(inst.billing_session.started_at, props.now)}</span>
          </dd>
        </div>
        <div>
          <dt>Cost so far</dt>
          <dd>
            {props.usage
              ? `${formatMoney(props.usage)} · ${props.usage.minutes} min billed`
              : '—'}
          </dd>
        </div>
        <div>
          <dt>SSH key</dt>
          <dd>{inst.ssh_key.name}</dd>
        </div>
      </dl>
      {sshReady ? (
        <CopyCommand command={inst.ssh_command!} label={`the SSH command of ${inst.name}`} />
      ) : (
        <p class="ssh-wait muted">{sshNote(inst)}</p>
      )}
      {props.error ? (
        <p class="form-error" role="alert">
          {props.error}
        </p>
      ) : null}
      <div class="card-actions">
        <button
          type="button"
          class="secondary"
          disabled={props.busy || inst.status === 'deleting' || inst.status === 'failed'}
          onClick={props.onRestart}
        >
          Restart<span class="visually-hidden"> {inst.name}</span>
        </button>
        <button
          type="button"
          class="danger-outline"
          disabled={props.busy || inst.status === 'deleting'}
          onClick={props.onDelete}
        >
          Delete<span class="visually-hidden"> {inst.name}</span>
        </button>
      </div>
    </article>
  );
}

function sshNote(inst: Instance): string {
  switch (inst.status) {
    case 'provisioning':
      return 'The SSH command appears once sshd accepts your key.';
    case 'restarting':
      return 'Restarting: the SSH command comes back once sshd is ready again.';
    case 'deleting':
      return 'Deleting: the container and its files are being removed.';
    case 'failed':
      return 'This instance could not be created. Delete it and launch again.';
    case 'exited':
      return 'The container has stopped. Restart it to get in again.';
    case 'unknown':
      return 'Its host has not reported lately; the SSH command returns when it does.';
    default:
      return 'No SSH command yet.';
  }
}

/** Launch and restart progress: placed → container created → sshd ready. */
function Progress(props: { instance: Instance }) {
  const inst = props.instance;
  const restarting = inst.status === 'restarting';
  const steps = [
    { label: 'placed on a host', done: inst.hosts.length > 0 },
    { label: restarting ? 'container restarted' : 'container created', done: !restarting && inst.ssh !== null },
    { label: 'sshd ready', done: false },
  ];
  const current = steps.findIndex((s) => !s.done);
  return (
    <ol class="progress" aria-label={restarting ? 'Restart progress' : 'Launch progress'}>
      {steps.map((s, i) => (
        <li class={s.done ? 'done' : i === current ? 'current' : ''} aria-current={i === current ? 'step' : undefined}>
          <span class="step-mark" aria-hidden="true" />
          {s.label}
          <span class="visually-hidden">{s.done ? ' (done)' : i === current ? ' (in progress)' : ''}</span>
        </li>
      ))}
    </ol>
  );
}
