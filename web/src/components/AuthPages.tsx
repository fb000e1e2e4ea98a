// Sign in (password or a mailed magic link), sign up, and asking for a password link. The pages
// that the account mails' links open (/auth/magic-link, /auth/reset-password,
// /auth/prove-address) are the server's own: a GET shows a button, so a mail scanner uses nothing
// up. The team invitation's page is the app's (AcceptInvitePage), under the same rule.
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { api, ApiError, messageOf } from '../api';
import { PAGES, navigate, onLinkClick } from '../router';
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

function Link(props: { to: string; children: ComponentChildren }) {
  return (
    <a href={props.to} onClick={(e) => onLinkClick(e, props.to)}>
      {props.children}
    </a>
  );
}

function Notice(props: { kind: 'error' | 'ok'; text: string }) {
  if (!props.text) return null;
  return (
    <p class={props.kind === 'error' ? 'form-error' : 'form-ok'} role={props.kind === 'error' ? 'alert' : 'status'}>
      {props.text}
    </p>
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
function nextPage(next: string | null): string {
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
  const [sent, setSent] = useState('');

  const signIn = async (event: Event) => {
    event.preventDefault();
    setError('');
    setEmailError('');
    setSent('');
    setBusy(true);
    try {
      await api('POST', '/api/v1/auth/login', { email: email.trim(), password });
      navigate(nextPage(new URLSearchParams(location.search).get('next')), true);
      props.onSignedIn();
    } catch (e) {
      if (e instanceof ApiError && e.code === 'invalid_email') setEmailError(e.message);
      else setError(retryText(e));
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
      else setError(retryText(e));
    } finally {
      setBusy(false);
    }
  };

  return (
    <AuthCard title="Sign in">
      <form onSubmit={signIn} noValidate>
        <Field id="sign-in-email" label="Email" error={emailError}>
          {(a) => (
            <input
              {...a}
              type="email"
              autocomplete="email"
              required
              value={email}
              onInput={(e) => setEmail(e.currentTarget.value)}
            />
          )}
        </Field>
        <Field id="sign-in-password" label="Password">
          {(a) => (
            <input
              {...a}
              type="password"
              autocomplete="current-password"
              value={password}
              onInput={(e) => setPassword(e.currentTarget.value)}
            />
          )}
        </Field>
        <Notice kind="error" text={error} />
        <Notice kind="ok" text={sent} />
        <div class="stack">
          <button type="submit" class="primary wide" disabled={busy}>
            Sign in
          </button>
          <button type="button" class="secondary wide" disabled={busy} onClick={() => void sendMagicLink()}>
            Send magic link
          </button>
        </div>
      </form>
      <p class="auth-foot">
        New here? <Link to="/sign-up">Create an account</Link>
        <br />
        <Link to="/forgot-password">Forgot your password?</Link>
      </p>
    </AuthCard>
  );
}

export function SignUpPage() {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [errors, setErrors] = useState<{ email?: string; password?: string; form?: string }>({});
  const [done, setDone] = useState('');

  const signUp = async (event: Event) => {
    event.preventDefault();
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
          Open the link in the mail to confirm your address and sign in. Nothing arrived? Look in
          the spam folder, or sign up again with the same address for a fresh link.
        </p>
        <p class="auth-foot">
          <Link to="/sign-in">Back to sign in</Link>
        </p>
      </AuthCard>
    );
  }
  return (
    <AuthCard title="Create an account">
      <form onSubmit={signUp} noValidate>
        <Field id="sign-up-email" label="Email" error={errors.email}>
          {(a) => (
            <input
              {...a}
              type="email"
              autocomplete="email"
              required
              value={email}
              onInput={(e) => setEmail(e.currentTarget.value)}
            />
          )}
        </Field>
        <Field id="sign-up-password" label="Password" hint="At least 8 characters." error={errors.password}>
          {(a) => (
            <input
              {...a}
              type="password"
              autocomplete="new-password"
              required
              minLength={8}
              value={password}
              onInput={(e) => setPassword(e.currentTarget.value)}
            />
          )}
        </Field>
        <Notice kind="error" text={errors.form ?? ''} />
        <button type="submit" class="primary wide" disabled={busy}>
          Create account
        </button>
      </form>
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

  const send = async (event: Event) => {
    event.preventDefault();
    setError('');
    setSent('');
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
      <form onSubmit={send} noValidate>
        <Field id="forgot-email" label="Email" error={error}>
          {(a) => (
            <input
              {...a}
              type="email"
              autocomplete="email"
              required
              value={email}
              onInput={(e) => setEmail(e.currentTarget.value)}
            />
          )}
        </Field>
        <Notice kind="ok" text={sent} />
        <button type="submit" class="primary wide" disabled={busy}>
          Send the link
        </button>
      </form>
      <p class="auth-foot">
        <Link to="/sign-in">Back to sign in</Link>
      </p>
    </AuthCard>
  );
}
