// The create panel: name, GPU type (price, free capacity, queue length), the SSH key picker with
// "+ add new key" and "delete selected", then launch, or enter the queue where the type is full or
// offline. The API's errors appear beside the field they concern.
import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, messageOf } from '../api';
import { formatPricePerHour } from '../format';
import { INSTANCE_NAME_MAX, KEY_NAME_MAX } from '../limits';
import type { GpuType, Instance, Me, Page, QueueEntry, SshKey } from '../types';
import { Dialog } from './Dialog';
import { Field } from './Field';

type FieldName = 'name' | 'gpu_type' | 'ssh_key_id' | 'key_name' | 'public_key' | 'form';
type Errors = Partial<Record<FieldName, string>>;

/** Which field an API error concerns: by the problem's `field`, else by its code. */
function fieldOf(e: ApiError, forKey: boolean): FieldName {
  if (forKey) {
    if (e.field === 'name' || e.code === 'invalid_name' || e.code === 'name_taken') return 'key_name';
    if (e.field === 'public_key' || e.code.includes('key') || e.code === 'private_key_pasted') return 'public_key';
    return 'form';
  }
  if (e.field === 'name' || e.code === 'invalid_name' || e.code === 'name_taken') return 'name';
  if (e.field === 'gpu_type' || e.code === 'unknown_gpu_type' || e.code === 'no_capacity' || e.code === 'already_queued') return 'gpu_type';
  if (e.field === 'ssh_key_id' || e.code === 'not_found') return 'ssh_key_id';
  return 'form';
}

/** Brings the first error of `formId` into view (the panel's footer must not hide it). */
function useErrorsInView(formId: string, errors: Errors): void {
  useEffect(() => {
    if (!Object.values(errors).some(Boolean)) return;
    const first = document.querySelector(`#${formId} .field-error, #${formId} .form-error`);
    first?.scrollIntoView({ block: 'center' });
  }, [errors]);
}

/** A private key pasted where the public one belongs: refused here, before it leaves the browser. */
export function looksLikePrivateKey(text: string): boolean {
  return /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----|PuTTY-User-Key-File-|^\s*-----BEGIN SSH2 ENCRYPTED PRIVATE KEY/m.test(text);
}

export function CreatePanel(props: {
  me: Me;
  onClose: () => void;
  onCreated: (created: Instance | QueueEntry) => void;
  onPaymentRequired: () => void;
}) {
  const [types, setTypes] = useState<GpuType[] | null>(null);
  const [keys, setKeys] = useState<SshKey[] | null>(null);
  const [loadError, setLoadError] = useState('');
  const [name, setName] = useState('');
  const [gpuType, setGpuType] = useState('');
  const [keyId, setKeyId] = useState('');
  const [errors, setErrors] = useState<Errors>({});
  const [busy, setBusy] = useState(false);
  const [queueOffer, setQueueOffer] = useState(false);
  const [adding, setAdding] = useState(false);
  const [confirmKeyDelete, setConfirmKeyDelete] = useState(false);

  const loadKeys = async (select?: string) => {
    const list = await api<Page<SshKey>>('GET', '/api/v1/ssh-keys');
    setKeys(list.items);
    if (select) setKeyId(select);
    else setKeyId((current) => (list.items.some((k) => k.id === current) ? current : list.items[0]?.id ?? ''));
    if (list.items.length === 0) setAdding(true);
  };

  useEffect(() => {
    Promise.all([
      api<Page<GpuType>>('GET', '/api/v1/gpu-types').then((t) => {
        setTypes(t.items);
        const first = t.items.find((x) => x.online && x.free_capacity > 0) ?? t.items[0];
        setGpuType((current) => current || first?.name || '');
      }),
      loadKeys(),
    ]).catch((e) => setLoadError(messageOf(e)));
  }, []);

  const type = types?.find((t) => t.name === gpuType);
  const full = type ? !type.online || type.free_capacity <= 0 : false;
  const entersQueue = full || queueOffer;

  const submit = async (event: Event) => {
    event.preventDefault();
    const next: Errors = {};
    if (!name.trim()) next.name = 'Give the instance a name: lowercase letters, digits and dashes.';
    if (!keyId) next.ssh_key_id = 'Choose a key, or add one: it is how you log in.';
    setErrors(next);
    if (Object.keys(next).length) {
      document.getElementById(next.name ? 'create-name' : 'create-key')?.focus();
      return;
    }
    setBusy(true);
    try {
      const body = { name: name.trim(), ssh_key_id: keyId, gpu_type: gpuType };
      const created = entersQueue
        ? await api<QueueEntry>('POST', '/api/v1/queue-entries', body)
        : await api<Instance | QueueEntry>('POST', '/api/v1/instances', body);
      props.onCreated(created);
    } catch (e) {
      if (e instanceof ApiError) {
        if (e.code === 'no_capacity') {
          setQueueOffer(true);
          setErrors({ gpu_type: `${gpuType} has no free host right now. Enter its queue: the instance launches by itself when one frees up, and waiting costs nothing.` });
        } else if (e.status === 402) {
          props.onPaymentRequired();
          setErrors({ form: e.message });
        } else {
          setErrors({ [fieldOf(e, false)]: e.message });
        }
      } else setErrors({ form: messageOf(e) });
    } finally {
      setBusy(false);
    }
  };

  const deleteKey = async () => {
    const key = keys?.find((k) => k.id === keyId);
    if (!key) return;
    setBusy(true);
    setErrors({});
    try {
      await api('DELETE', `/api/v1/ssh-keys/${encodeURIComponent(key.id)}`);
      setConfirmKeyDelete(false);
      await loadKeys();
    } catch (e) {
      setConfirmKeyDelete(false);
      if (e instanceof ApiError && e.code === 'key_in_use') {
        const names = Array.isArray(e.problem.instances) ? (e.problem.instances as string[]) : [];
        setErrors({
          ssh_key_id: names.length
            ? `${key.name} is in use by ${names.join(', ')}. Delete ${names.length > 1 ? 'those instances' : 'that instance'} first.`
            : e.message,
        });
      } else setErrors({ ssh_key_id: messageOf(e) });
    } finally {
      setBusy(false);
    }
  };

  const selectedKey = keys?.find((k) => k.id === keyId);
  useErrorsInView('create-form', errors);

  return (
    <Dialog labelledBy="create-title" variant="sheet" onClose={props.onClose}>
      <div class="sheet-head">
        <h2 id="create-title">New instance</h2>
        <button type="button" class="icon" onClick={props.onClose} aria-label="Close the new instance panel">
          ×
        </button>
      </div>
      {loadError ? (
        <p class="form-error" role="alert">
          {loadError}
        </p>
      ) : null}
      <form id="create-form" class="sheet-body" onSubmit={submit} noValidate>
        <Field
          id="create-name"
          label="Name"
          hint={
            <>
              Lowercase letters, digits and dashes, e.g. <span class="word">train-llama</span>. It
              becomes the instance's hostname.
            </>
          }
          error={errors.name}
          count={{ length: name.length, max: INSTANCE_NAME_MAX }}
        >
          {(a) => (
            <input
              {...a}
              type="text"
              autocomplete="off"
              spellcheck={false}
              autocapitalize="off"
              maxLength={INSTANCE_NAME_MAX}
              value={name}
              onInput={(e) => {
                setName(e.currentTarget.value);
                // An error about the name (the API's refusal, or "give it a name") is stale now.
                setErrors((old) => (old.name ? { ...old, name: undefined } : old));
              }}
            />
          )}
        </Field>

        <fieldset class={errors.gpu_type ? 'field invalid' : 'field'} aria-describedby={errors.gpu_type ? 'create-gpu-error' : undefined}>
          <legend>GPU type</legend>
          {types === null ? <p class="muted">Loading GPU types…</p> : null}
          {types?.length === 0 ? <p class="muted">This server offers no GPU types yet.</p> : null}
          <div class="type-list">
            {types?.map((t) => (
              <label class={t.name === gpuType ? 'type-option selected' : 'type-option'}>
                <input
                  type="radio"
                  name="gpu_type"
                  value={t.name}
                  checked={t.name === gpuType}
                  onChange={() => {
                    setGpuType(t.name);
                    setQueueOffer(false);
                    setErrors((old) => ({ ...old, gpu_type: undefined }));
                  }}
                />
                <span class="type-main">
                  <span class="type-name">{t.name}</span>
                  <span class="type-price">{formatPricePerHour(t.price)}</span>
                </span>
                {t.description ? <span class="type-desc">{t.description}</span> : null}
                <span class="type-cap">{capacityText(t)}</span>
              </label>
            ))}
          </div>
          {errors.gpu_type ? (
            <p id="create-gpu-error" class="field-error" role="alert">
              {errors.gpu_type}
            </p>
          ) : null}
        </fieldset>

        <Field id="create-key" label="SSH key" error={errors.ssh_key_id}>
          {(a) => (
            <select
              {...a}
              value={keyId}
              disabled={!keys || keys.length === 0}
              onChange={(e) => {
                setKeyId(e.currentTarget.value);
                setConfirmKeyDelete(false);
              }}
            >
              {keys && keys.length === 0 ? <option value="">No keys yet: add one below</option> : null}
              {keys?.map((k) => (
                <option value={k.id}>
                  {k.name} ({k.type}, {k.fingerprint.slice(0, 20)}…)
                </option>
              ))}
            </select>
          )}
        </Field>
        <div class="key-links">
          <button type="button" class="link" aria-expanded={adding} aria-controls="add-key" onClick={() => setAdding(!adding)}>
            + add new key
          </button>
          {selectedKey ? (
            confirmKeyDelete ? (
              <span class="inline-confirm">
                Delete {selectedKey.name}?{' '}
                <button type="button" class="link danger-text" disabled={busy} onClick={() => void deleteKey()}>
                  Yes, delete it
                </button>{' '}
                <button type="button" class="link" onClick={() => setConfirmKeyDelete(false)}>
                  Keep it
                </button>
              </span>
            ) : (
              <button type="button" class="link danger-text" onClick={() => setConfirmKeyDelete(true)}>
                delete selected
              </button>
            )
          ) : null}
        </div>
      </form>
      {adding ? (
        <AddKeyForm
          onAdded={async (key) => {
            await loadKeys(key.id);
            setErrors((old) => ({ ...old, ssh_key_id: undefined }));
            setAdding(false);
            document.getElementById('create-key')?.focus();
          }}
          onCancel={keys && keys.length > 0 ? () => setAdding(false) : undefined}
        />
      ) : null}
      <div class="sheet-foot">
        {errors.form ? (
          <p class="form-error" role="alert">
            {errors.form}
          </p>
        ) : null}
        {type ? (
          <p class="muted small-text">
            {entersQueue
              ? `Joining the queue is free. Billing starts when the instance launches, at ${formatPricePerHour(type.price)}, by the minute.`
              : `Billed by the minute at ${formatPricePerHour(type.price)} from launch until you delete it.`}
          </p>
        ) : null}
        {type && entersQueue && !props.me.billing.payment_method_on_file ? (
          <p class="form-notice" role="status" data-testid="queue-no-card">
            No payment method is on file{props.me.billing.account.kind === 'team' ? ` for ${props.me.billing.account.name}` : ''}:
            when your turn comes the entry is passed over (it keeps its place) until one is.{' '}
            {props.me.billing.account.kind === 'team' && props.me.role !== 'owner'
              ? 'Ask an owner of the team to add its card.'
              : props.me.billing.provider === 'manual'
                ? 'Ask your operator to record one.'
                : 'Add one on the billing page.'}
          </p>
        ) : null}
        <div class="actions">
          <button type="button" class="secondary" onClick={props.onClose}>
            Cancel
          </button>
          <button type="submit" form="create-form" class="primary" disabled={busy || !types || types.length === 0}>
            {entersQueue ? 'Enter queue' : 'Launch instance'}
          </button>
        </div>
      </div>
    </Dialog>
  );
}

function capacityText(t: GpuType): string {
  const queue = t.queued ? `, ${t.queued} waiting` : '';
  if (!t.online) return `Not online yet: choosing it enters the queue${queue}.`;
  if (t.free_capacity <= 0) return `Full: choosing it enters the queue${queue}.`;
  return `${t.free_capacity} free${queue}`;
}

/** "+ add new key": a name and the public key, with where to find it on each system. */
function AddKeyForm(props: { onAdded: (key: SshKey) => Promise<void>; onCancel?: () => void }) {
  const [keyName, setKeyName] = useState('');
  const [publicKey, setPublicKey] = useState('');
  const [errors, setErrors] = useState<Errors>({});
  const [busy, setBusy] = useState(false);
  useErrorsInView('add-key', errors);
  // Editing a field makes its error (and the form's) stale: it goes at once.
  const clearError = (field: FieldName) =>
    setErrors((old) => (old[field] || old.form ? { ...old, [field]: undefined, form: undefined } : old));

  const add = async (event: Event) => {
    event.preventDefault();
    const next: Errors = {};
    if (!keyName.trim()) next.key_name = 'Name the key, e.g. laptop.';
    if (looksLikePrivateKey(publicKey)) {
      // Never sent: a private key must not leave this machine.
      next.public_key =
        'This is a private key: it was not sent, and nothing was stored. Paste the public key (the .pub file) instead, and keep the private key to yourself.';
    } else if (!publicKey.trim()) next.public_key = 'Paste the public key: one line that starts with ssh-ed25519, ssh-rsa or ecdsa-sha2-….';
    setErrors(next);
    if (Object.keys(next).length) {
      document.getElementById(next.key_name ? 'key-name' : 'key-public')?.focus();
      return;
    }
    setBusy(true);
    try {
      const key = await api<SshKey>('POST', '/api/v1/ssh-keys', { name: keyName.trim(), public_key: publicKey.trim() });
      setErrors({});
      await props.onAdded(key);
    } catch (e) {
      if (e instanceof ApiError) {
        let text = e.message;
        if (e.code === 'key_exists' && typeof e.problem.existing_name === 'string') {
          text = `${e.message}`;
        }
        setErrors({ [fieldOf(e, true)]: text });
      } else setErrors({ form: messageOf(e) });
    } finally {
      setBusy(false);
    }
  };

  return (
    <form id="add-key" class="add-key" onSubmit={add} noValidate aria-labelledby="add-key-title">
      <h3 id="add-key-title">Add an SSH key</h3>
      <Field
        id="key-name"
        label="Key name"
        hint={
          <>
            Unique on your account, e.g. macbook or <span class="word">work-laptop</span>.
          </>
        }
        error={errors.key_name}
        count={{ length: keyName.length, max: KEY_NAME_MAX }}
      >
        {(a) => (
          <input
            {...a}
            type="text"
            autocomplete="off"
            maxLength={KEY_NAME_MAX}
            value={keyName}
            onInput={(e) => {
              setKeyName(e.currentTarget.value);
              clearError('key_name');
            }}
          />
        )}
      </Field>
      <Field
        id="key-public"
        label="Public key"
        error={errors.public_key}
        hint={
          <ul class="key-hints">
            <li>
              macOS and Ubuntu: <code>cat ~/.ssh/id_ed25519.pub</code>
            </li>
            <li>
              Windows (PowerShell): <code>type $env:USERPROFILE\.ssh\id_ed25519.pub</code>
            </li>
            <li>
              No key yet: <code>ssh-keygen -t ed25519</code>, then the line above.
            </li>
          </ul>
        }
      >
        {(a) => (
          <textarea
            {...a}
            rows={4}
            spellcheck={false}
            autocapitalize="off"
            placeholder="ssh-ed25519 AAAA… you@laptop"
            value={publicKey}
            onInput={(e) => {
              setPublicKey(e.currentTarget.value);
              clearError('public_key');
            }}
          />
        )}
      </Field>
      {errors.form ? (
        <p class="form-error" role="alert">
          {errors.form}
        </p>
      ) : null}
      <div class="actions">
        {props.onCancel ? (
          <button type="button" class="secondary" onClick={props.onCancel}>
            Cancel
          </button>
        ) : null}
        <button type="submit" class="primary" disabled={busy}>
          Save key
        </button>
      </div>
    </form>
  );
}
