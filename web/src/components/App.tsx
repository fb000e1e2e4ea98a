// The app's frame: who is signed in (GET /api/v1/me), which page the path names, and the header
// for signed-in pages. Signed-out visitors of a signed-in page go to /sign-in; signed-in visitors
// of the sign-in pages go to the page their `next` names, else to the instances.
import { useCallback, useEffect, useState } from 'preact/hooks';
import { api, ApiError, setSignedOutHandler } from '../api';
import { PAGES, navigate, usePath } from '../router';
import type { Me } from '../types';
import { ForgotPasswordPage, nextPage, NotFoundPage, SignInPage, SignUpPage } from './AuthPages';
import { Header } from './Header';
import { AcceptInvitePage } from './AcceptInvitePage';
import { Banners } from './Banners';
import { BillingPage } from './BillingPage';
import { InstancesPage } from './InstancesPage';
import { TeamPage } from './TeamPage';
import { OperatorFrame } from './OperatorFrame';
import { UsagePage } from './UsagePage';

const SIGNED_OUT_PAGES = new Set(['/sign-in', '/sign-up', '/forgot-password']);
/** Pages for the signed-in and the signed-out alike: the invitation link's landing page. */
const EITHER_PAGES = new Set(['/team/accept']);

type Session = { state: 'loading' } | { state: 'out' } | { state: 'in'; me: Me };

export function App() {
  const path = usePath();
  const [session, setSession] = useState<Session>({ state: 'loading' });
  const [loadError, setLoadError] = useState('');

  const refreshMe = useCallback(async () => {
    try {
      const me = await api<Me>('GET', '/api/v1/me');
      setSession({ state: 'in', me });
      setLoadError('');
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) setSession({ state: 'out' });
      else setLoadError(e instanceof Error ? e.message : String(e));
    }
  }, []);

  useEffect(() => {
    setSignedOutHandler(() => setSession({ state: 'out' }));
    void refreshMe();
  }, [refreshMe]);

  // Where the path and the session disagree, go where the person can act.
  useEffect(() => {
    if (EITHER_PAGES.has(path) || !PAGES.includes(path)) return;
    if (session.state === 'out' && !SIGNED_OUT_PAGES.has(path)) {
      const next = path === '/' ? '' : `?next=${encodeURIComponent(path + location.search)}`;
      navigate(`/sign-in${next}`, true);
    } else if (session.state === 'in' && SIGNED_OUT_PAGES.has(path)) {
      // A sign-in that began at a deep link (/sign-in?next=%2Fusage) ends there.
      navigate(nextPage(new URLSearchParams(location.search).get('next')), true);
    }
  }, [session, path]);

  useEffect(() => {
    document.title = PAGES.includes(path) ? titleFor(path) : 'No such page · gpuwerk';
  }, [path]);

  if (session.state === 'loading') {
    return (
      <main class="centered" aria-busy="true">
        {loadError ? (
          <p role="alert" class="error">
            {loadError}{' '}
            <button type="button" class="link" onClick={() => void refreshMe()}>
              Try again
            </button>
          </p>
        ) : (
          <p class="muted">Loading…</p>
        )}
      </main>
    );
  }

  if (!PAGES.includes(path)) return <NotFoundPage signedIn={session.state === 'in'} />;

  if (path === '/team/accept') {
    return <AcceptInvitePage me={session.state === 'in' ? session.me : null} onJoined={refreshMe} />;
  }

  if (session.state === 'out') {
    const signedIn = () => void refreshMe();
    if (path === '/sign-up') return <SignUpPage />;
    if (path === '/forgot-password') return <ForgotPasswordPage />;
    return <SignInPage onSignedIn={signedIn} />;
  }

  if (SIGNED_OUT_PAGES.has(path)) return null;  // being redirected
  return (
    <SignedInFrame
      path={path}
      me={session.me}
      refreshMe={refreshMe}
      onSignedOut={() => setSession({ state: 'out' })}
    />
  );
}

/**
 * The frame of every signed-in page: the header (with "New instance", which opens the create
 * panel on the instances page) and the notices above the page, then the page the path names.
 */
function SignedInFrame(props: {
  path: string;
  me: Me;
  refreshMe: () => Promise<void>;
  onSignedOut: () => void;
}) {
  const [creating, setCreating] = useState(false);
  const [stream, setStream] = useState<'connecting' | 'live' | 'reconnecting'>('connecting');
  const onInstances = props.path === '/';
  return (
    <>
      <a class="skip-link" href="#main">
        Skip to content
      </a>
      <Header
        me={props.me}
        stream={onInstances ? stream : undefined}
        onNewInstance={() => {
          if (!onInstances) navigate('/');
          setCreating(true);
        }}
        onSignedOut={props.onSignedOut}
      />
      {props.path === '/billing' ? null : <Banners me={props.me} refreshMe={props.refreshMe} />}
      {props.path === '/billing' ? (
        <BillingPage me={props.me} refreshMe={props.refreshMe} />
      ) : props.path === '/team' ? (
        <TeamPage me={props.me} refreshMe={props.refreshMe} />
      ) : props.path === '/usage' ? (
        <UsagePage />
      ) : props.path.startsWith('/admin/') ? (
        <OperatorFrame path={props.path} me={props.me} />
      ) : (
        <InstancesPage
          me={props.me}
          refreshMe={props.refreshMe}
          creating={creating}
          setCreating={setCreating}
          onStreamState={setStream}
          onSignedOut={props.onSignedOut}
        />
      )}
    </>
  );
}

function titleFor(path: string): string {
  switch (path) {
    case '/sign-in':
      return 'Sign in · gpuwerk';
    case '/sign-up':
      return 'Sign up · gpuwerk';
    case '/forgot-password':
      return 'Set a new password · gpuwerk';
    case '/billing':
      return 'Billing · gpuwerk';
    case '/team':
      return 'Team · gpuwerk';
    case '/usage':
      return 'Usage · gpuwerk';
    case '/team/accept':
      return 'Team invitation · gpuwerk';
    case '/admin/hosts':
      return 'Hosts · Operator · gpuwerk';
    case '/admin/gpu-types':
      return 'GPU types · Operator · gpuwerk';
    case '/admin/instances':
      return 'All instances · Operator · gpuwerk';
    case '/admin/queues':
      return 'Queues · Operator · gpuwerk';
    case '/admin/audit':
      return 'Audit log · Operator · gpuwerk';
    case '/admin/relay-sessions':
      return 'Relay sessions · Operator · gpuwerk';
    case '/admin/people':
      return 'People · Operator · gpuwerk';
    default:
      return 'Instances · gpuwerk';
  }
}
