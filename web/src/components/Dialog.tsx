// A modal dialog on the native <dialog> element: the browser traps focus, Escape closes it, and
// the page behind is inert. `variant` "sheet" slides in from the right (full screen on phones).
import type { ComponentChildren } from 'preact';
import { useEffect, useRef } from 'preact/hooks';

export function Dialog(props: {
  labelledBy: string;
  describedBy?: string;
  variant?: 'sheet' | 'center';
  onClose: () => void;
  children: ComponentChildren;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const onClose = useRef(props.onClose);
  onClose.current = props.onClose;
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    const opener = document.activeElement as HTMLElement | null;
    if (!dialog.open) dialog.showModal();
    const closed = () => onClose.current();
    dialog.addEventListener('close', closed);
    return () => {
      dialog.removeEventListener('close', closed);
      if (dialog.open) dialog.close();
      if (opener && document.contains(opener)) opener.focus();
    };
  }, []);
  return (
    <dialog
      ref={ref}
      class={props.variant === 'sheet' ? 'sheet' : 'modal'}
      aria-labelledby={props.labelledBy}
      aria-describedby={props.describedBy}
    >
      {props.children}
    </dialog>
  );
}

export function ConfirmDialog(props: {
  title: string;
  body: ComponentChildren;
  confirm: string;
  danger?: boolean;
  busy?: boolean;
  error?: string;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  return (
    <Dialog labelledBy="confirm-title" describedBy="confirm-body" onClose={props.onCancel}>
      <form
        method="dialog"
        class="confirm"
        onSubmit={(e) => {
          e.preventDefault();
          props.onConfirm();
        }}
      >
        <h2 id="confirm-title">{props.title}</h2>
        <div id="confirm-body">{props.body}</div>
        {props.error ? (
          <p class="form-error" role="alert">
            {props.error}
          </p>
        ) : null}
        <div class="actions">
          <button type="button" class="secondary" onClick={props.onCancel} autofocus>
            Cancel
          </button>
          <button type="submit" class={props.danger ? 'danger' : 'primary'} disabled={props.busy}>
            {props.confirm}
          </button>
        </div>
      </form>
    </Dialog>
  );
}
