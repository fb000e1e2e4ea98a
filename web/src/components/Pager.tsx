// The pager under a paged table (usage, operator pages): where the reader is, and the two
// buttons, each disabled when there is no such page or a page is loading.

export function Pager(props: {
  label: string;
  text: string;
  prev: (() => void) | null;
  next: (() => void) | null;
  busy: boolean;
  prevText?: string;
  nextText?: string;
}) {
  return (
    <nav class="pager" aria-label={props.label}>
      <span class="muted small-text">{props.text}</span>
      <button type="button" class="secondary small" disabled={!props.prev || props.busy} onClick={() => props.prev?.()}>
        {props.prevText ?? '← Newer'}
      </button>
      <button type="button" class="secondary small" disabled={!props.next || props.busy} onClick={() => props.next?.()}>
        {props.nextText ?? 'Older →'}
      </button>
    </nav>
  );
}
