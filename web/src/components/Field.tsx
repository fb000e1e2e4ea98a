// A labelled form control with its hint and its error beside it: the error is tied to the control
// (aria-describedby, aria-invalid), so a screen reader reads it with the field.
import type { ComponentChildren } from 'preact';

export interface FieldAttributes {
  id: string;
  'aria-describedby'?: string;
  'aria-invalid'?: 'true';
}

export function Field(props: {
  id: string;
  label: ComponentChildren;
  hint?: ComponentChildren;
  error?: string;
  children: (attributes: FieldAttributes) => ComponentChildren;
}) {
  const hintId = props.hint ? `${props.id}-hint` : undefined;
  const errorId = props.error ? `${props.id}-error` : undefined;
  const describedBy = [errorId, hintId].filter(Boolean).join(' ') || undefined;
  return (
    <div class={props.error ? 'field invalid' : 'field'}>
      <label for={props.id}>{props.label}</label>
      {props.children({
        id: props.id,
        'aria-describedby': describedBy,
        ...(props.error ? { 'aria-invalid': 'true' as const } : {}),
      })}
      {props.error ? (
        <p id={errorId} class="field-error" role="alert">
          {props.error}
        </p>
      ) : null}
      {props.hint ? (
        <div id={hintId} class="hint">
          {props.hint}
        </div>
      ) : null}
    </div>
  );
}
