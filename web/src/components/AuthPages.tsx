// Sign in (password or a mailed magic link), sign up, and asking for a password link. The pages
// that the account mails' links open (/auth/magic-link, /auth/reset-password,
// /auth/prove-address) are the server's own: a GET shows a button, so a mail scanner uses nothing
// up. The team invitation's page is the app's (AcceptInvitePage), under the same rule.
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { api, ApiError, messageOf } from '../api';
import { PAGES, onLinkClick } from '../router';
import { Field } from './Field';

function AuthCard(props: { title: string; children: ComponentChildren }) {
  return (
    <main id="main" class="auth">
      <div class="auth-brand" aria-hidden="true">
        <span class="logo-mark" />
        gpuwerk
      </div>
      <section class="card auth-card" aria-labelledby="auth-title">
        <h1 id="auth-title">{props.title}</h1>
        {props.children}
      </section>
    </main>
  );
}

/** A path the app has no page for (the server sends the app there, status 404, to browsers). */
export function NotFoundPage(props: { signedIn: boolean }) {
  return (
    <AuthCard title="No such page">
      <p>
        gpuwerk has no page at <code>{location.pathname}</code>. The address may be mistyped, or
        the link old.
      </p>
      <p class="auth-foot">
        <Link to="/">{props.signedIn ? 'Go to your instances' : 'Go to sign in'}</Link>
      </p>
    </AuthCard>
  );
}

function Link(props: { to: string; children: ComponentChildren }) {
  return (
    <a href={props.to} onClick={(e) => onLinkClick(e, props.to)}>
      {props.children}
    </a>
  );
}

function Notice(props: { kind: 'error' | 'ok'; text?: string }) {
  if (!props.text) return null;
  return (
    <p class={props.kind === 'error' ? 'form-error' : 'form-ok'} role={props.kind === 'error' ? 'alert' : 'status'}>
      {props.text}
    </p>
  );
}

/**
 * The one shape of every form here: its fields, the form's error (an alert) and its good news (a
 * status) under them, then the submit button (full width) and any further buttons. Submitting
 * never reloads the page; `onSubmit` gets no event.
 */
function AuthForm(props: {
  submit: string;
  onSubmit: () => void | Promise<void>;
  busy: boolean;
  error?: string;
  ok?: string;
  more?: ComponentChildren;
  children: ComponentChildren;
}) {
  return (
    <form
      onSubmit={(event) => {
        event.preventDefault();
        void props.onSubmit();
      }}
      noValidate
    >
      {props.children}
      <Notice kind="error" text={props.error} />
      <Notice kind="ok" text={props.ok} />
      <div class="stack">
        <button type="submit" class="primary wide" disabled={props.busy}>
          {props.submit}
        </button>
        {props.more}
      </div>
    </form>
  );
}

/** An email field (the account's address), its error beside it. */
function EmailField(props: { id: string; value: string; onInput: (value: string) => void; error?: string }) {
  return (
    <Field id={props.id} label="Email" error={props.error}>
      {(a) => (
        <input
          {...a}
          type="email"
          autocomplete="email"
          required
          value={props.value}
          onInput={(e) => props.onInput(e.currentTarget.value)}
        />
      )}
    </Field>
  );
}

/** A password field; `fresh` for a password being chosen (the browser may suggest one). */
function PasswordField(props: {
  id: string;
  label: string;
  value: string;
  onInput: (value: string) => void;
  fresh?: boolean;
  hint?: string;
  error?: string;
}) {
  return (
    <Field id={props.id} label={props.label} hint={props.hint} error={props.error}>
      {(a) => (
        <input
          {...a}
          type="password"
          autocomplete={props.fresh ? 'new-password' : 'current-password'}
          required={props.fresh}
          minLength={props.fresh ? 8 : undefined}
          value={props.value}
          onInput={(e) => props.onInput(e.currentTarget.value)}
        />
      )}
    </Field>
  );
}

function retryText(e: unknown): string {
  if (e instanceof ApiError && e.code === 'rate_limited') {
    const after = Number(e.problem.retry_after_seconds);
    return after > 0 ? `${e.message} (try again in ${after} s)` : e.message;
  }
  return messageOf(e);
}

/** Where a sign-in goes on: `next` when it is one of the app's pages (its query kept), else `/`. */
export function nextPage(next: string | null): string {
  if (!next || !next.startsWith('/') || next.startsWith('//')) return '/';
  const path = next.split(/[?#]/, 1)[0];
  return PAGES.includes(path) ? next : '/';
}

export function SignInPage(props: { onSignedIn: () => void }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const [emailError, setEmailError] = useState('');
  const [passwordError, setPasswordError] = useState('');
  const [sent, setSent] = useState('');

  const signIn = async () => {
    setError('');
    setEmailError('');
    setPasswordError('');
    setSent('');
    // Empty fields are said beside them, before anything is sent.
    if (!email.trim()) {
      setEmailError(ENTER_EMAIL);
      document.getElementById('sign-in-email')?.focus();
      return;
    }
    if (!password) {
      setPasswordError('Enter your password.');
      document.getElementById('sign-in-password')?.focus();
      return;
    }
    setBusy(true);
    try {
      await api('POST', '/api/v1/auth/login', { email: email.trim(), password });
      // The frame goes on to `next` once it knows the person is signed in: navigating before that
      // would send a signed-out visitor of `next` back here.
      props.onSignedIn();
    } catch (e) {
      if (e instanceof ApiError && e.code === 'invalid_email') setEmailError(e.message);
      else if (e instanceof ApiError && e.code === 'rate_limited') {
        setError(`${e.message} Or sign in without the password: "Send magic link" mails you a link.`);
      } else setError(retryText(e));
    } finally {
      setBusy(false);
    }
  };

  const sendMagicLink = async () => {
    setError('');
    setEmailError('');
    setSent('');
    if (!email.trim()) {
      setEmailError('Enter your email address first; the link goes there.');
      document.getElementById('sign-in-email')?.focus();
      return;
    }
    setBusy(true);
    try {
      await api('POST', '/api/v1/auth/magic-link', { email: email.trim() });
      setSent(`If ${email.trim()} has an account, a sign-in link is on its way. It works for 15 minutes.`);
    } catch (e) {
      if (e instanceof ApiError && e.code === 'invalid_email') setEmailError(e.message);
      else if (e instanceof ApiError && e.code === 'rate_limited') {
        setError(`${e.message} Or sign in without the password: "Send magic link" mails you a link.`);
      } else setError(retryText(e));
    } finally {
      setBusy(false);
    }
  };

  return (
    <AuthCard title="Sign in">
      <AuthForm
        submit="Sign in"
        onSubmit={signIn}
        busy={busy}
        error={error}
        ok={sent}
        more={
          <button type="button" class="secondary wide" disabled={busy} onClick={() => void sendMagicLink()}>
            Send magic link
          </button>
        }
      >
        <EmailField id="sign-in-email" value={email} onInput={setEmail} error={emailError} />
        <PasswordField
          id="sign-in-password"
          label="Password"
          value={password}
          onInput={setPassword}
          error={passwordError}
        />
      </AuthForm>
      <p class="auth-foot">
        New here? <Link to="/sign-up">Create an account</Link>
        <br />
        <Link to="/forgot-password">Forgot your password?</Link>
      </p>
    </AuthCard>
  );
}

const ENTER_EMAIL = 'Enter your email address.';
const PASSWORDS_DIFFER = 'The two passwords differ: type the same password in both fields.';

export function SignUpPage() {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [confirm, setConfirm] = useState('');
  const [busy, setBusy] = useState(false);
  const [errors, setErrors] = useState<{ email?: string; password?: string; confirm?: string; form?: string }>({});
  const [done, setDone] = useState('');

  const signUp = async () => {
    if (!email.trim()) {
      setErrors({ email: ENTER_EMAIL });
      document.getElementById('sign-up-email')?.focus();
      return;
    }
    if (!password) {
      setErrors({ password: 'Choose a password.' });
      document.getElementById('sign-up-password')?.focus();
      return;
    }
    // A mistyped password would lock the person out: the two must match before anything is sent.
    if (password !== confirm) {
      setErrors({ confirm: PASSWORDS_DIFFER });
      document.getElementById('sign-up-confirm')?.focus();
      return;
    }
    setErrors({});
    setBusy(true);
    try {
      const r = await api<{ message?: string }>('POST', '/api/v1/auth/signup', {
        email: email.trim(),
        password,
      });
      setDone(r?.message || `Check ${email.trim()}: the mail has a link that confirms the address.`);
    } catch (e) {
      if (e instanceof ApiError && (e.code === 'invalid_email' || e.code.startsWith('signup_'))) {
        setErrors({ email: e.message });
      } else if (e instanceof ApiError && (e.code === 'weak_password' || e.code === 'invalid_password')) {
        setErrors({ password: e.message });
      } else {
        setErrors({ form: retryText(e) });
      }
    } finally {
      setBusy(false);
    }
  };

  if (done) {
    return (
      <AuthCard title="Check your mail">
        <p role="status">{done}</p>
        <p class="muted">
          The link in the mail confirms your address: its page asks for your password once more
          and signs you in. Nothing arrived? Look in the spam folder, or sign up again with the
          same address for a fresh link.
        </p>
        <p class="auth-foot">
          <Link to="/sign-in">Back to sign in</Link>
        </p>
      </AuthCard>
    );
  }
  return (
    <AuthCard title="Create an account">
      <AuthForm submit="Create account" onSubmit={signUp} busy={busy} error={errors.form}>
        <EmailField
          id="sign-up-email"
          value={email}
          onInput={(v) => {
            setEmail(v);
            setErrors((old) => ({ ...old, email: undefined }));
          }}
          error={errors.email}
        />
        <PasswordField
          id="sign-up-password"
          label="Password"
          hint="At least 8 characters."
          fresh
          value={password}
          onInput={(v) => {
            setPassword(v);
            setErrors((old) => ({ ...old, password: undefined, confirm: undefined }));
          }}
          error={errors.password}
        />
        <PasswordField
          id="sign-up-confirm"
          label="Confirm password"
          hint="The same password again: the fields hide what you type, so this catches a typo."
          fresh
          value={confirm}
          onInput={(v) => {
            setConfirm(v);
            setErrors((old) => ({ ...old, confirm: undefined }));
          }}
          error={errors.confirm}
        />
      </AuthForm>
      <p class="auth-foot">
        Have an account? <Link to="/sign-in">Sign in</Link>
      </p>
    </AuthCard>
  );
}

export function ForgotPasswordPage() {
  const [email, setEmail] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const [sent, setSent] = useState('');

  const send = async () => {
    setError('');
    setSent('');
    if (!email.trim()) {
      setError(ENTER_EMAIL);
      document.getElementById('forgot-email')?.focus();
      return;
    }
    setBusy(true);
    try {
      await api('POST', '/api/v1/auth/password-reset', { email: email.trim() });
      setSent(`If ${email.trim()} has an account, a link to set a new password is on its way. It works for an hour.`);
    } catch (e) {
      setError(retryText(e));
    } finally {
      setBusy(false);
    }
  };

  return (
    <AuthCard title="Set a new password">
      <p class="muted">We mail you a link; the page it opens sets the new password.</p>
      <AuthForm submit="Send the link" onSubmit={send} busy={busy} ok={sent}>
        <EmailField id="forgot-email" value={email} onInput={setEmail} error={error} />
      </AuthForm>
      <p class="auth-foot">
        <Link to="/sign-in">Back to sign in</Link>
      </p>
    </AuthCard>
  );
}
