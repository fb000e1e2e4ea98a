// The page an invitation mail's link opens (/team/accept?token=…; docs/teams.md "Invitations"):
// it shows which team and which address the link is for (POST /api/v1/team/invites/preview, which
// uses nothing up) and accepts only when its button is pressed (POST /api/v1/team/invites/accept),
// so a mail scanner that opens every link joins nobody. Signed out, it says to sign in (or sign
// up) as the invited address and brings the person back here.
import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, messageOf } from '../api';
import { formatFullTime } from '../format';
import { navigate, onLinkClick } from '../router';
import type { InvitePreview, Me, Team } from '../types';

type State =
  | { state: 'loading' }
  | { state: 'shown'; invite: InvitePreview }
  | { state: 'gone'; message: string }
  | { state: 'joined'; team: Team };

export function AcceptInvitePage(props: { me: Me | null; onJoined: () => Promise<void> }) {
  // Read once: after joining, the token leaves the address bar (and the history) but the page stays.
  const [token] = useState(() => new URLSearchParams(location.search).get('token') ?? '');
  const [state, setState] = useState<State>({ state: 'loading' });
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    if (!token) {
      setState({ state: 'gone', message: 'This link has no invitation in it. Ask the team\u2019s owner for a new one.' });
      return;
    }
    api<InvitePreview>('POST', '/api/v1/team/invites/preview', { token }).then(
      (invite) => setState({ state: 'shown', invite }),
      (e) => setState({ state: 'gone', message: messageOf(e) }),
    );
  }, [token]);

  const accept = async () => {
    setError('');
    setBusy(true);
    try {
      const team = await api<Team>('POST', '/api/v1/team/invites/accept', { token });
      // A used link is no use in the address bar, a bookmark or the history: drop the token.
      history.replaceState(null, '', '/team/accept');
      setState({ state: 'joined', team });
      await props.onJoined();
    } catch (e) {
      if (e instanceof ApiError && e.code === 'invite_gone') setState({ state: 'gone', message: e.message });
      else setError(messageOf(e));
    } finally {
      setBusy(false);
    }
  };

  const here = `/team/accept?token=${encodeURIComponent(token)}`;
  const go = (path: string) => (e: MouseEvent) => onLinkClick(e, path);

  let title = 'Team invitation';
  let body;
  if (state.state === 'loading') {
    body = (
      <p class="muted" aria-busy="true">
        Reading the invitation…
      </p>
    );
  } else if (state.state === 'gone' && props.me?.team) {
    // A used link opened again by someone in a team (most often the member it made): say where
    // they are, not "ask to be invited again".
    title = props.me.team.name;
    body = (
      <>
        <p role="status" data-testid="already-member">
          You're already a member of <strong>{props.me.team.name}</strong>.
        </p>
        <p class="muted small-text">This invitation link can no longer be used.</p>
        <div class="stack">
          <button type="button" class="primary wide" onClick={() => navigate('/team')}>
            Open the team page
          </button>
        </div>
      </>
    );
  } else if (state.state === 'gone') {
    body = (
      <>
        <p class="form-error" role="alert">
          {state.message}
        </p>
        <p>
          <a href="/" onClick={go('/')}>
            Go to gpuwerk
          </a>
        </p>
      </>
    );
  } else if (state.state === 'joined') {
    title = `Welcome to ${state.team.name}`;
    body = (
      <>
        <p role="status">
          You are now a member of <strong>{state.team.name}</strong>. Your new instances are billed
          to the team; its owner manages the payment method.
        </p>
        <div class="stack">
          <button type="button" class="primary wide" onClick={() => navigate('/team')}>
            Open the team page
          </button>
        </div>
      </>
    );
  } else {
    const invite = state.invite;
    const me = props.me;
    const sameAddress = me !== null && me.email.trim().toLowerCase() === invite.email.trim().toLowerCase();
    title = `Join ${invite.team_name}`;
    body = (
      <>
        <p>
          You are invited to join the team <strong>{invite.team_name}</strong> as{' '}
          <strong>{invite.email}</strong>. Members' instances are billed to the team.
        </p>
        <p class="muted small-text">The link works until {formatFullTime(invite.expires_at)}.</p>
        {me === null ? (
          <>
            <p>
              Sign in as {invite.email} first, then press the button here. New to gpuwerk? Create an
              account with that address, confirm it from the mail, and open this link again.
            </p>
            <div class="stack">
              <a class="button primary" href={`/sign-in?next=${encodeURIComponent(here)}`} onClick={go(`/sign-in?next=${encodeURIComponent(here)}`)}>
                Sign in to accept
              </a>
              <a class="button secondary" href="/sign-up" onClick={go('/sign-up')}>
                Create an account
              </a>
            </div>
          </>
        ) : !sameAddress ? (
          <p class="form-notice" role="status">
            You are signed in as <strong>{me.email}</strong>, but this invitation is for{' '}
            <strong>{invite.email}</strong>. Sign out and sign in as {invite.email} to accept it.
          </p>
        ) : me.team ? (
          <p class="form-notice" role="status">
            You are already in <strong>{me.team.name}</strong>: leave it on the team page first (one
            team at a time), then open this link again.
          </p>
        ) : null}
        {me !== null && sameAddress && !me.team ? (
          <div class="stack">
            <button type="button" class="primary wide" disabled={busy} onClick={() => void accept()}>
              Join {invite.team_name}
            </button>
          </div>
        ) : null}
        {error ? (
          <p class="form-error" role="alert">
            {error}
          </p>
        ) : null}
      </>
    );
  }

  return (
    <main id="main" class="auth">
      <div class="auth-brand" aria-hidden="true">
        <span class="logo-mark" />
        gpuwerk
      </div>
      <section class="card auth-card" aria-labelledby="auth-title">
        <h1 id="auth-title">{title}</h1>
        {body}
      </section>
    </main>
  );
}
