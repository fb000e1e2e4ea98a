// The status of an instance or queue entry as a coloured badge with its word (never colour alone).
const LABELS: Record<string, string> = {
  provisioning: 'provisioning',
  running: 'running',
  restarting: 'restarting',
  exited: 'exited',
  unknown: 'unknown',
  deleting: 'deleting',
  failed: 'failed',
  deleted: 'deleted',
  queued: 'queued',
};

export function StatusBadge(props: { status: string }) {
  const label = LABELS[props.status] ?? props.status;
  return (
    <span class={`badge badge-${props.status}`} data-status={props.status}>
      <span class="dot" aria-hidden="true" />
      {label}
    </span>
  );
}
