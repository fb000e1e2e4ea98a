// The header of signed-in pages: the brand, whether the live stream is connected (on the
// instances page, which holds it), "New instance" and the user menu under the person's email
// (instances, billing, team, usage; for operators the operator pages; sign out).
import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api';
import { navigate, onLinkClick } from '../router';
import type { Me } from '../types';

export function Header(props: {
  me: Me;
  stream?: 'connecting' | 'live' | 'reconnecting';
  onNewInstance: () => void;
  onSignedOut: () => void;
}) {
  const streamText =
    props.stream === 'live' ? 'Live' : props.stream === 'connecting' ? 'Connecting…' : 'Reconnecting…';
  return (
    <header class="top">
      <a class="brand" href="/" onClick={(e) => onLinkClick(e, '/')}>
        <span class="logo-mark" aria-hidden="true" />
        gpuwerk
      </a>
      {props.stream ? (
        <span class={`stream stream-${props.stream}`} role="status" title="Updates arrive as they happen">
          <span class="dot" aria-hidden="true" />
          <span class="stream-text">{streamText}</span>
        </span>
      ) : null}
      <div class="top-actions">
        <button type="button" class="primary" onClick={props.onNewInstance}>
          New instance
        </button>
        <UserMenu me={props.me} onSignedOut={props.onSignedOut} />
      </div>
    </header>
  );
}

/** The pages the user menu leads to, in its order. */
const MENU_PAGES: ReadonlyArray<readonly [string, string]> = [
  ['/', 'Instances'],
  ['/billing', 'Billing'],
  ['/team', 'Team'],
  ['/usage', 'Usage'],
];

/** Operators only: the operator pages (their own sub-navigation leads to each). */
const OPERATOR_MENU: ReadonlyArray<readonly [string, string]> = [['/admin/hosts', 'Operator']];

function UserMenu(props: { me: Me; onSignedOut: () => void }) {
  const [open, setOpen] = useState(false);
  const [error, setError] = useState('');
  const root = useRef<HTMLDivElement>(null);
  const button = useRef<HTMLButtonElement>(null);

  useEffect(() => {
    if (!open) return;
    const onPointer = (e: PointerEvent) => {
      if (root.current && !root.current.contains(e.target as Node)) setOpen(false);
    };
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape') {
        setOpen(false);
        button.current?.focus();
      }
    };
    document.addEventListener('pointerdown', onPointer);
    document.addEventListener('keydown', onKey);
    return () => {
      document.removeEventListener('pointerdown', onPointer);
      document.removeEventListener('keydown', onKey);
    };
  }, [open]);

  const signOut = async () => {
    setError('');
    try {
      await api('POST', '/api/v1/auth/logout');
      navigate('/sign-in', true);
      props.onSignedOut();
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    }
  };

  return (
    <div class="user-menu" ref={root}>
      <button
        type="button"
        ref={button}
        class="user-button"
        aria-expanded={open}
        aria-controls="user-menu-panel"
        onClick={() => setOpen(!open)}
      >
        <span class="email">{props.me.email}</span>
        <span class="caret" aria-hidden="true" />
      </button>
      {open ? (
        <div id="user-menu-panel" class="menu-panel">
          <p class="menu-who">
            Signed in as <strong>{props.me.email}</strong>
            {props.me.team ? (
              <>
                <br />
                {props.me.role === 'owner' ? 'Owner' : 'Member'} of {props.me.team.name}
              </>
            ) : null}
            {props.me.is_operator ? (
              <>
                <br />
                Operator
              </>
            ) : null}
          </p>
          <nav aria-label="Pages">
            {(props.me.is_operator ? [...MENU_PAGES, ...OPERATOR_MENU] : MENU_PAGES).map(([path, label]) => (
              <a
                key={path}
                class="menu-item"
                href={path}
                aria-current={location.pathname === path || (path.startsWith('/admin/') && location.pathname.startsWith('/admin/')) ? 'page' : undefined}
                onClick={(e) => {
                  setOpen(false);
                  onLinkClick(e, path);
                }}
              >
                {label}
              </a>
            ))}
          </nav>
          <button type="button" class="menu-item" onClick={() => void signOut()}>
            Sign out
          </button>
          {error ? (
            <p class="field-error" role="alert">
              {error}
            </p>
          ) : null}
        </div>
      ) : null}
    </div>
  );
}
