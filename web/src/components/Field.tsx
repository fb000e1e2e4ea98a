// A labelled form control with its hint and its error beside it: the error is tied to the control
// (aria-describedby, aria-invalid), so a screen reader reads it with the field. A field with a
// length limit (`count`) shows how much of it is used, and says so when the input stopped there.
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
  /** The value's length and the most the API takes (the control's `maxLength`). */
  count?: { length: number; max: number };
  children: (attributes: FieldAttributes) => ComponentChildren;
}) {
  const count = props.count;
  const hintId = props.hint || count ? `${props.id}-hint` : undefined;
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
      {props.hint || count ? (
        <div id={hintId} class={count ? 'hint with-count' : 'hint'}>
          {props.hint ? <span>{props.hint}</span> : null}
          {count ? (
            <span class={count.length >= count.max ? 'count full' : 'count'} data-testid={`${props.id}-count`}>
              {count.length >= count.max
                ? `${count.max} of ${count.max} characters: the most it can have`
                : `${count.length} of ${count.max} characters`}
            </span>
          ) : null}
        </div>
      ) : null}
    </div>
  );
}
